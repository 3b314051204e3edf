"""REST API of the researchers' campaign pages: create, list, show and edit campaigns, change
their state, rebuild their comparisons, manage their annotators and members, mark gold answers
and read their progress, so that a script can set up a study without the pages.

The pages' rules hold here because the same code applies them: a campaign is created and edited
through the page's CampaignForm (annotation.campaign_forms), states change through
annotation.campaigns.change_state, gold marks go through GoldForm and campaigns.mark_gold, the
people lists take the form's choices (campaigns.change_pool), and the numbers are those of the
monitoring page (campaign_overview, annotator_monitoring). Access is that of the pages:
researchers (and admins) only, and a campaign outside annotation.access.managed_campaigns
answers 404 like a missing one. Annotators get 403 on every endpoint here: these answers name
companions, annotators and their votes, which the rating API never does.
"""

from django.http import QueryDict
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
)
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from h2htalk.api_summaries import summarised
from h2htalk.models import Job
from h2htalk.roles import IsResearcher
from h2htalk.serializers import ErrorSerializer, form_errors
from scenarios.models import CompanionModel

from . import campaigns
from .access import managed_campaigns
from .api import StrictSerializer
from .campaign_forms import CampaignForm, GoldForm, initial_data, stored_data
from .models import Campaign, Comparison
from .tasks import queue_build

# ---------------------------------------------------------------- answers


class BuildJobSerializer(serializers.ModelSerializer):
    """The background job that builds the campaign's comparisons."""

    state = serializers.CharField(help_text="queued, running, then completed or failed.")

    class Meta:
        model = Job
        fields = ["id", "state", "message", "done", "total", "result", "created_at", "finished_at"]


class CampaignProgressSerializer(serializers.Serializer):
    """The campaign list's progress column."""

    comparisons = serializers.IntegerField(source="n_regular", help_text="Non-gold comparisons.")
    gold = serializers.IntegerField(source="n_gold", help_text="Gold comparisons.")
    judged = serializers.IntegerField(
        source="n_judged", help_text="Judgments on non-gold comparisons."
    )
    target = serializers.SerializerMethodField(help_text="Non-gold comparisons × k.")
    percent = serializers.SerializerMethodField(help_text="judged / target, in percent.")

    def get_target(self, campaign) -> int:
        return campaign.n_regular * campaign.overlap

    def get_percent(self, campaign) -> float:
        return campaigns.progress_percent(campaign.n_judged, self.get_target(campaign))


class CampaignSerializer(serializers.ModelSerializer):
    """A campaign as its researchers see it, companion names included."""

    owner = serializers.CharField(source="owner.username", read_only=True)
    companions = serializers.SlugRelatedField(slug_field="name", many=True, read_only=True)
    members = serializers.SlugRelatedField(slug_field="username", many=True, read_only=True)
    annotators = serializers.SlugRelatedField(slug_field="username", many=True, read_only=True)
    actions = serializers.SerializerMethodField(
        help_text="The state changes allowed now: POST one to …/transition/."
    )
    progress = serializers.SerializerMethodField()

    class Meta:
        model = Campaign
        fields = ["id", *CampaignForm.Meta.fields, "state", "owner", "actions", "progress"]
        fields += ["created_at"]
        read_only_fields = fields

    def get_actions(self, campaign) -> list[str]:
        return [name for name, _label in campaigns.available_actions(campaign)]

    @extend_schema_field(CampaignProgressSerializer)
    def get_progress(self, campaign) -> dict:
        return CampaignProgressSerializer(campaign).data


class CampaignDetailSerializer(CampaignSerializer):
    """A campaign, with the job that builds (or last built) its comparisons."""

    build = serializers.SerializerMethodField(
        help_text="The latest build of its comparisons; it runs in the background after a "
        "create, a rebuild or an edit of the pairing settings."
    )

    class Meta(CampaignSerializer.Meta):
        fields = [*CampaignSerializer.Meta.fields, "build"]
        read_only_fields = fields

    @extend_schema_field(BuildJobSerializer(allow_null=True))
    def get_build(self, campaign) -> dict | None:
        job = campaigns.latest_build_job(campaign)
        return BuildJobSerializer(job).data if job else None


class ComparisonSerializer(serializers.ModelSerializer):
    """A comparison as on the gold page: the scenario, both companions and texts, the gold mark."""

    subtask = serializers.CharField(source="scenario.subtask")
    external_id = serializers.CharField(source="scenario.external_id")
    companion_a = serializers.CharField(source="response_a.companion.name")
    companion_b = serializers.CharField(source="response_b.companion.name")
    text_a = serializers.CharField(source="response_a.text")
    text_b = serializers.CharField(source="response_b.text")
    gold_preference = serializers.IntegerField(
        allow_null=True, help_text="The known answer: -1 A better, 0 tie, 1 B better."
    )

    class Meta:
        model = Comparison
        fields = ["id", "scenario", "subtask", "external_id", "companion_a", "companion_b"]
        fields += ["text_a", "text_b", "judgment_count", "is_gold", "gold_preference", "gold_note"]
        read_only_fields = fields


class GoldAnswerSerializer(serializers.Serializer):
    comparison = ComparisonSerializer()
    notes = serializers.ListField(
        child=serializers.CharField(), help_text="What the gold page would say."
    )


class SeenSerializer(serializers.Serializer):
    today = serializers.IntegerField(help_text="Handed out since local midnight.")
    total = serializers.IntegerField()


class ExposureLevelsSerializer(serializers.Serializer):
    low = SeenSerializer()
    medium = SeenSerializer()
    high = SeenSerializer()


class ExposureSerializer(serializers.Serializer):
    """A rater's exposure to risk content in the campaign (annotation.care)."""

    levels = ExposureLevelsSerializer(help_text="Risk items handed to them, by risk level.")
    rather_not = serializers.IntegerField(help_text="Items passed on with “I'd rather not”.")


class ShortOfRatersSerializer(serializers.Serializer):
    level = serializers.CharField(help_text="low, medium or high")
    comparisons = serializers.IntegerField(help_text="Comparisons that can no longer reach k.")
    eligible = serializers.IntegerField(help_text="Raters of the pool not opted out of it.")
    opted_out = serializers.IntegerField(help_text="Raters of the pool opted out of it.")


class AnnotatorProgressSerializer(serializers.Serializer):
    """One row of the monitoring table (the same numbers as the campaign page; quality and
    flags are those of the agreement report)."""

    annotator = serializers.CharField()
    in_pool = serializers.BooleanField(required=False)
    judgments = serializers.IntegerField()
    hours_on_items = serializers.FloatField(
        allow_null=True, help_text="Sum of the visible time per item, in hours."
    )
    per_hour = serializers.FloatField(
        allow_null=True, help_text="Judgments per hour spent on items (hours_on_items)."
    )
    median_time_ms = serializers.FloatField(
        allow_null=True,
        help_text="Median visible time per item (browser; server lease time where none).",
    )
    time_source = serializers.CharField(help_text="client, server, mixed or none.")
    median_server_ms = serializers.FloatField(
        allow_null=True, help_text="Median server lease time, issued → submitted."
    )
    n_consensus = serializers.IntegerField(help_text="Votes with a consensus of the others.")
    consensus_agreement = serializers.FloatField(
        allow_null=True, help_text="Share of them equal to the others' consensus."
    )
    gold_n = serializers.IntegerField()
    gold_correct = serializers.IntegerField()
    gold_accuracy = serializers.FloatField(allow_null=True)
    non_tie = serializers.IntegerField()
    left = serializers.IntegerField(help_text="Non-tie judgments preferring the left side.")
    left_rate = serializers.FloatField(allow_null=True)
    left_p = serializers.FloatField(allow_null=True, help_text="Binomial test p, left vs ½.")
    flagged = serializers.BooleanField(help_text="The agreement report flags the annotator.")
    flag = serializers.CharField(help_text="Why (consensus, gold, position, fast); or empty.")
    note = serializers.CharField(help_text="Observations that are not reasons on their own.")
    skips = serializers.IntegerField(help_text="Skips (not counting “I'd rather not”).")
    skip_reasons = serializers.DictField(child=serializers.IntegerField())
    exposure = ExposureSerializer(
        required=False, help_text="Risk items handed to the rater, and their “I'd rather not”."
    )


class MonitoringSerializer(serializers.Serializer):
    """The campaign page's progress and monitoring table."""

    regular = serializers.IntegerField(help_text="Non-gold comparisons.")
    complete = serializers.IntegerField(help_text="Non-gold comparisons with k judgments.")
    partial = serializers.IntegerField(help_text="Non-gold comparisons with 1 … k−1.")
    untouched = serializers.IntegerField(help_text="Non-gold comparisons without judgments.")
    judged = serializers.IntegerField(help_text="Judgments on non-gold comparisons (done).")
    target = serializers.IntegerField(help_text="Non-gold comparisons × k (total).")
    percent = serializers.FloatField()
    gold = serializers.IntegerField(help_text="Gold comparisons.")
    gold_answered = serializers.IntegerField(help_text="Gold comparisons with a known answer.")
    gold_judgments = serializers.IntegerField()
    pool = serializers.IntegerField(help_text="Annotators in the campaign's pool.")
    annotators = AnnotatorProgressSerializer(many=True, source="rows")
    overall = AnnotatorProgressSerializer(allow_null=True, help_text="Everyone at once.")
    short_of_raters = ShortOfRatersSerializer(
        many=True,
        help_text="Risk levels whose comparisons opt-outs leave with fewer than k possible "
        "raters (the campaign page warns).",
    )


class PeopleSerializer(serializers.Serializer):
    usernames = serializers.ListField(child=serializers.CharField())


# ---------------------------------------------------------------- requests


def _names(help_text: str):
    return serializers.ListField(child=serializers.CharField(), required=False, help_text=help_text)


class CampaignInputSerializer(StrictSerializer):
    """The fields of the campaign page's form; companions, members and annotators by name.
    On create, a field left out takes the form's default; on edit, its stored value."""

    name = serializers.CharField(required=False, allow_blank=True)
    description = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    guidelines = serializers.CharField(
        required=False, allow_blank=True, trim_whitespace=False, help_text="Markdown."
    )
    guidelines_zh_hans = serializers.CharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        help_text="Markdown: the guidelines for annotators reading Simplified Chinese "
        "(empty: they see `guidelines`).",
    )
    scenario_query = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text="A scenario-list filter (query string or URL); empty: all approved scenarios. "
        "A set that gives 0 comparisons with the chosen companions and runs is refused (400, "
        "under this field, with the reason).",
    )
    companions = _names("Companion names, at least two.")
    runs = serializers.ListField(
        child=serializers.IntegerField(), required=False, help_text="Generation run ids."
    )
    pairing = serializers.ChoiceField(choices=Campaign.Pairing.choices, required=False)
    pairs_per_scenario = serializers.IntegerField(required=False, help_text="1–50.")
    overlap = serializers.IntegerField(required=False, help_text="k: judgments per comparison.")
    gold_share = serializers.FloatField(required=False, help_text="0–0.5.")
    lease_minutes = serializers.IntegerField(required=False)
    seed = serializers.IntegerField(required=False)
    reason_choices = serializers.JSONField(
        required=False,
        help_text="Reasons why the preferred response is better: a list of labels or of "
        '{"key", "label"} (keys default to the label as a slug); [] for none.',
    )
    ask_confidence = serializers.BooleanField(
        required=False, help_text="Whether annotators may give confidence 1–3."
    )
    high_risk_daily_cap = serializers.IntegerField(
        required=False,
        allow_null=True,
        help_text="High-risk items a rater is handed per day (0–1000); null: no cap.",
    )
    break_after_minutes = serializers.IntegerField(
        required=False,
        allow_null=True,
        help_text="Suggest a break after this many minutes of continuous rating; null: never.",
    )
    support_text = serializers.CharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        help_text="Markdown: helplines and contact, one click away on every rating page.",
    )
    support_text_zh_hans = serializers.CharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        help_text="Markdown: the support text for raters reading Simplified Chinese "
        "(empty: they see `support_text`).",
    )
    members = _names("Usernames of other researchers who manage the campaign.")
    annotators = _names("Usernames of annotators who rate in it.")

    def validate(self, attrs):
        """Names to the form's ids; a name that is not one of the form's choices is an error
        of its field."""
        errors = {}
        if "companions" in attrs:
            attrs["companions"], missing = _ids(CompanionModel.objects, "name", attrs["companions"])
            if missing:
                errors["companions"] = [f"No such companion: {', '.join(missing)}."]
        for pool, (choices, _who) in campaigns.POOLS.items():
            if pool in attrs:
                attrs[pool], missing = _ids(choices(self.context["owner"]), "username", attrs[pool])
                if missing:
                    errors[pool] = [campaigns.pool_refusal(pool, missing)]
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


def _ids(choices, key: str, names) -> tuple[list[int], list[str]]:
    """The ids of the `choices` named (by `key`), and the names not among them."""
    found = dict(choices.filter(**{f"{key}__in": names}).values_list(key, "pk"))
    return list(found.values()), sorted(set(names) - set(found))


class CampaignTransitionSerializer(StrictSerializer):
    action = serializers.ChoiceField(
        choices=list(campaigns.TRANSITIONS), help_text="One of the campaign's `actions`."
    )


class PeopleChangeSerializer(StrictSerializer):
    add = _names("Usernames to add.")
    remove = _names("Usernames to remove.")


class GoldInputSerializer(StrictSerializer):
    """Mark a comparison gold with its known answer (again: change it), or unmark it."""

    comparison = serializers.IntegerField(help_text="The comparison's id.")
    action = serializers.ChoiceField(choices=["mark", "unmark"], default="mark")
    gold_preference = serializers.IntegerField(
        required=False, allow_null=True, help_text="-1 A better, 0 tie, 1 B better (to mark)."
    )
    gold_note = serializers.CharField(required=False, allow_blank=True, default="")


# ---------------------------------------------------------------- helpers


def _form_valid(form):
    if not form.is_valid():
        raise serializers.ValidationError(form_errors(form))
    return form


def _body(serializer_class, request, **context):
    body = serializer_class(data=request.data, context={"request": request, **context})
    body.is_valid(raise_exception=True)
    return body.validated_data


def _campaign_form(request, campaign: Campaign | None) -> CampaignForm:
    """The page's form, valid, from the stored (or initial) values and the request's."""
    owner = campaign.owner if campaign else request.user
    given = _body(CampaignInputSerializer, request, owner=owner)
    data = {**(stored_data(campaign) if campaign else initial_data()), **given}
    return _form_valid(CampaignForm(data, instance=campaign, owner=owner))


REFUSED = OpenApiResponse(ErrorSerializer, description="Not allowed in the campaign's state.")
INVALID = OpenApiResponse(description="Invalid: {field: [messages]} (`__all__`: across fields).")
PEOPLE = {"annotators": "annotator pool", "members": "members (researchers who manage it)"}


def _people_schema(pool: str):
    """GET and POST documentation of a people list (annotators, members)."""
    label = PEOPLE[pool]

    def decorate(view):
        view = extend_schema(
            methods=["GET"], summary=f"List a campaign's {label}", responses=PeopleSerializer
        )(view)
        return extend_schema(
            methods=["POST"],
            summary=f"Add people to or remove them from a campaign's {pool}",
            request=PeopleChangeSerializer,
            responses={200: PeopleSerializer, 400: INVALID},
        )(view)

    return decorate


# ---------------------------------------------------------------- views


@summarised(
    "campaign",
    "campaigns",
    create="Create a campaign; its comparisons are built in the background",
    partial_update="Edit a campaign (pairing settings only before the first judgment)",
)
class CampaignViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Rating campaigns you own or are a member of (admins: all), as on the campaign pages."""

    serializer_class = CampaignSerializer
    permission_classes = [IsResearcher]
    queryset = Campaign.objects.none()
    filterset_fields = ["state"]
    lookup_value_regex = r"\d+"

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Campaign.objects.none()
        managed = campaigns.with_progress(managed_campaigns(self.request.user))
        return (
            managed.select_related("owner")
            .prefetch_related("companions", "runs", "members", "annotators")
            .order_by("-created_at", "pk")
        )

    def get_serializer_class(self):
        return CampaignSerializer if self.action == "list" else CampaignDetailSerializer

    def _show(self, campaign: Campaign, code: int = status.HTTP_200_OK) -> Response:
        current = self.get_queryset().get(pk=campaign.pk)
        return Response(CampaignDetailSerializer(current).data, status=code)

    @extend_schema(
        request=CampaignInputSerializer,
        responses={201: CampaignDetailSerializer, 400: INVALID},
    )
    def create(self, request, *args, **kwargs):
        """Create a campaign with the fields of the page's form (it starts as a draft)."""
        form = _campaign_form(request, None)
        campaign, _job = campaigns.create_campaign(form, request.user)
        return self._show(campaign, status.HTTP_201_CREATED)

    @extend_schema(
        request=CampaignInputSerializer,
        responses={200: CampaignDetailSerializer, 400: INVALID},
    )
    def partial_update(self, request, *args, **kwargs):
        """Change the given fields; a change of the pairing settings rebuilds the comparisons."""
        campaign = self.get_object()
        campaigns.save_campaign(_campaign_form(request, campaign), request.user)
        return self._show(campaign)

    @extend_schema(
        summary="Open, pause or close a campaign",
        request=CampaignTransitionSerializer,
        responses={200: CampaignDetailSerializer, 400: INVALID, 409: REFUSED},
    )
    @action(detail=True, methods=["post"])
    def transition(self, request, pk=None, **kwargs):
        """Apply one of the campaign's `actions`: open (also resume, reopen), pause, close."""
        campaign = self.get_object()
        try:
            campaigns.change_state(campaign, _body(CampaignTransitionSerializer, request)["action"])
        except campaigns.TransitionRefused as refused:
            return Response({"detail": str(refused)}, status=status.HTTP_409_CONFLICT)
        return self._show(campaign)

    @extend_schema(
        summary="Rebuild a campaign's comparisons (missing ones added)",
        request=None,
        responses={202: BuildJobSerializer},
    )
    @action(detail=True, methods=["post"])
    def rebuild(self, request, pk=None, **kwargs):
        """Queue a build: missing comparisons are added, existing ones kept."""
        job = queue_build(self.get_object(), request.user)
        return Response(BuildJobSerializer(job).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(summary="A campaign's progress and annotators", responses=MonitoringSerializer)
    @action(detail=True, methods=["get"])
    def progress(self, request, pk=None, **kwargs):
        """The campaign page's numbers: judgments done of the target, coverage, gold, and the
        monitoring table per annotator (speed, gold accuracy, side bias, skips)."""
        campaign = self.get_object()
        numbers = campaigns.campaign_overview(campaign)
        numbers.update(campaigns.annotator_monitoring(campaign))
        return Response(MonitoringSerializer(numbers).data)

    @_people_schema("annotators")
    @action(detail=True, methods=["get", "post"])
    def annotators(self, request, pk=None, **kwargs):
        """The annotator pool; POST adds and removes users with the annotator role."""
        return self._people(request, "annotators")

    @_people_schema("members")
    @action(detail=True, methods=["get", "post"])
    def members(self, request, pk=None, **kwargs):
        """The members; POST adds and removes other researchers (the owner stays)."""
        return self._people(request, "members")

    def _people(self, request, pool: str) -> Response:
        campaign = self.get_object()
        if request.method == "POST":
            change = _body(PeopleChangeSerializer, request)
            try:
                campaigns.change_pool(
                    campaign, pool, change.get("add", ()), change.get("remove", ())
                )
            except campaigns.PoolRefused as refused:
                return Response(refused.errors, status=status.HTTP_400_BAD_REQUEST)
        names = getattr(campaign, pool).order_by("username").values_list("username", flat=True)
        return Response(PeopleSerializer({"usernames": list(names)}).data)

    @extend_schema(
        summary="List a campaign's comparisons (filters: subtask, gold)",
        parameters=[
            OpenApiParameter("subtask", str, description="Only this subtask's comparisons."),
            OpenApiParameter("gold", int, enum=[0, 1], description="1: gold only; 0: no gold."),
        ],
        responses=ComparisonSerializer(many=True),
    )
    @action(detail=True, methods=["get"], filter_backends=[])
    def comparisons(self, request, pk=None, **kwargs):
        """Both companions and texts of each comparison, with its gold mark, in the gold
        page's order; `?subtask=…` and `?gold=1` / `?gold=0` filter as on that page."""
        query = campaigns.gold_query(request.query_params)
        return self._comparisons(campaigns.gold_comparisons(self.get_object(), query))

    @extend_schema(
        methods=["GET"],
        summary="List a campaign's gold answers",
        responses=ComparisonSerializer(many=True),
    )
    @extend_schema(
        methods=["POST"],
        summary="Mark a comparison gold with its known answer, or unmark it",
        request=GoldInputSerializer,
        responses={200: GoldAnswerSerializer, 400: INVALID, 404: ErrorSerializer},
    )
    @action(detail=True, methods=["get", "post"], filter_backends=[])
    def gold(self, request, pk=None, **kwargs):
        """The gold comparisons with their known answers; POST marks or unmarks one, with the
        gold page's rules."""
        campaign = self.get_object()
        if request.method == "GET":
            return self._comparisons(campaigns.gold_comparisons(campaign, QueryDict("gold=1")))
        data = _form_valid(GoldForm(_body(GoldInputSerializer, request))).cleaned_data
        comparison = campaign.comparisons.filter(pk=data["comparison"]).first()
        if comparison is None:
            return Response({"detail": "No such comparison in this campaign."}, status=404)
        notes = [text for _level, text in campaigns.mark_gold(comparison, data)]
        shown = campaigns.gold_comparisons(campaign, QueryDict()).get(pk=comparison.pk)
        return Response(GoldAnswerSerializer({"comparison": shown, "notes": notes}).data)

    def _comparisons(self, queryset) -> Response:
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(ComparisonSerializer(page, many=True).data)
