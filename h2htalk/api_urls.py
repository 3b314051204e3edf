from django.urls import include, path
from rest_framework import routers

from annotation.api import RatingAssignmentViewSet, RatingCampaignViewSet
from annotation.campaign_api import CampaignViewSet
from annotation.care_api import rating_care
from annotation.qualification import api as qualification
from annotation.qualification import rating_api as practice
from h2htalk.accounts.api import UserViewSet
from h2htalk.auth import ObtainToken
from h2htalk.parsers import DEFAULT as DEFAULT_PARSERS
from h2htalk.roles import IsResearcher
from scenarios.api import PersonaViewSet, ScenarioViewSet
from scenarios.companions.api import CompanionViewSet, GenerationRunViewSet, ResponseViewSet
from scoring.agreement.api import campaign_agreement
from scoring.agreement.exclusion_api import campaign_exclusions
from scoring.hfexport import api as hf_dataset
from scoring.planning.api import campaign_plan, campaign_plan_status
from webhooks.api import DeliveryViewSet, EndpointViewSet


class APIRootView(routers.APIRootView):
    """The list of API endpoints (needs the role, like every endpoint it lists)."""

    permission_classes = [IsResearcher]


class Router(routers.DefaultRouter):
    APIRootView = APIRootView


router = Router()
router.register("scenarios", ScenarioViewSet, basename="scenario")
router.register("personas", PersonaViewSet, basename="persona")
router.register("companions", CompanionViewSet, basename="companion")
router.register("runs", GenerationRunViewSet, basename="run")
router.register("responses", ResponseViewSet, basename="response")
# Campaigns, for the researchers who manage them (companion and annotator names).
router.register("campaigns", CampaignViewSet, basename="campaign")
# Rating, for annotators (blind: no model, response, comparison or run names or ids).
router.register("rate/campaigns", RatingCampaignViewSet, basename="rate-campaign")
router.register("rate/assignments", RatingAssignmentViewSet, basename="rate-assignment")
# Users, for admins: list, create in bulk (one-time links to set a password), deactivate.
router.register("users", UserViewSet, basename="user")
# Webhooks, for the researchers of the campaigns they cover (README "Webhooks").
router.register("webhooks/endpoints", EndpointViewSet, basename="webhook-endpoint")
router.register("webhooks/deliveries", DeliveryViewSet, basename="webhook-delivery")

urlpatterns = [
    # DRF's token view lists its own parsers (with the plain JSON parser): ours instead.
    path("token/", ObtainToken.as_view(parser_classes=DEFAULT_PARSERS), name="api_token"),
    path("rate/care/", rating_care, name="rate-care"),
    path(
        "campaigns/<int:campaign_id>/agreement/",
        campaign_agreement,
        name="campaign-agreement",
    ),
    path(
        "campaigns/<int:campaign_id>/agreement/exclusions/",
        campaign_exclusions,
        name="campaign-agreement-exclusions",
    ),
    path("campaigns/<int:campaign_id>/plan/", campaign_plan, name="campaign-plan"),
    path(
        "campaigns/<int:campaign_id>/plan/status/",
        campaign_plan_status,
        name="campaign-plan-status",
    ),
    path("campaigns/<int:campaign_id>/study/", include("annotation.study.api_urls")),
    # Qualification: researchers define it and watch phases; annotators practise.
    path("campaigns/<int:campaign_id>/qualification/", qualification.rule, name="qualification"),
    path(
        "campaigns/<int:campaign_id>/qualification/items/",
        qualification.practice_items,
        name="qualification-items",
    ),
    path(
        "campaigns/<int:campaign_id>/qualification/items/import/",
        qualification.import_practice_items,
        name="qualification-import",
    ),
    path(
        "campaigns/<int:campaign_id>/qualification/items/<int:item_id>/",
        qualification.practice_item,
        name="qualification-item",
    ),
    path(
        "campaigns/<int:campaign_id>/qualification/annotators/",
        qualification.annotator_phases_view,
        name="qualification-annotators",
    ),
    path(
        "rate/campaigns/<int:campaign_id>/qualification/next/",
        practice.practice_next,
        name="practice-next",
    ),
    path(
        "rate/campaigns/<int:campaign_id>/qualification/retry/",
        practice.practice_retry,
        name="practice-retry",
    ),
    path(
        "rate/practice/<uuid:practice_key>/answer/",
        practice.practice_answer,
        name="practice-answer",
    ),
    path(
        "campaigns/<int:campaign_id>/hf-dataset/",
        hf_dataset.campaign_dataset,
        name="campaign-hf-dataset",
    ),
    path(
        "releases/<int:pk>/hf-dataset/",
        hf_dataset.release_dataset,
        name="release-hf-dataset",
    ),
    path("judges/", include("scoring.judges.api_urls")),
    path("calibration/", include("scoring.calibration.api_urls")),
    path("releases/", include("scoring.releases.api_urls")),
    path("", include(router.urls)),
]
# The rating endpoints first: the API next and submit are most of the requests, and Django tries
# the patterns in turn (the order changes no answer: no two patterns match one path).
urlpatterns = [
    *[p for p in router.urls if str(p.pattern).startswith("^rate/")],
    *urlpatterns,
]
