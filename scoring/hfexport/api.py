"""The dataset zip through the API (researchers who manage the campaign; annotators 403,
other researchers 404)."""

from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.decorators import api_view, permission_classes
from rest_framework.response import Response

from annotation.access import managed_campaign_or_404
from h2htalk.roles import IsResearcher
from scoring.hfexport import views
from scoring.releases.access import release_or_404

COMPANIONS = OpenApiParameter(
    "companions",
    OpenApiTypes.BOOL,
    description="Name the companions (companion_a/b, chosen/rejected_companion); default off.",
)


@extend_schema(
    parameters=[COMPANIONS],
    responses={(200, "application/zip"): OpenApiTypes.BINARY},
    summary="A campaign's judgments as a Hugging Face dataset (zip)",
)
@api_view(["GET"])
@permission_classes([IsResearcher])
def campaign_dataset(request, campaign_id: int):
    """judgments.jsonl, preference_pairs.jsonl and README.md (the dataset card) in a zip that
    `datasets.load_dataset` reads once unpacked."""
    campaign = managed_campaign_or_404(request.user, campaign_id)
    return views.campaign_zip(campaign, views.wants_companions(request.query_params))


@extend_schema(
    parameters=[COMPANIONS],
    responses={(200, "application/zip"): OpenApiTypes.BINARY, 409: OpenApiTypes.OBJECT},
    summary="A release's frozen judgments as a Hugging Face dataset (zip)",
)
@api_view(["GET"])
@permission_classes([IsResearcher])
def release_dataset(request, pk: int):
    """The judgments the release froze, as for a campaign."""
    release = release_or_404(request.user, pk)
    if not release.inputs:
        return Response(
            {"detail": _("The release is not frozen yet: there is nothing to export.")},
            status=409,
        )
    return views.release_zip(release, views.wants_companions(request.query_params))
