"""REST API of the study-size planner (researchers who manage the campaign): plan, read the
latest plan, and read the running campaign's separated pairs; the same code as the campaign
page's panel (scoring.planning.services, validated by its PlanForm)."""

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.response import Response

from annotation.access import managed_campaign_or_404
from annotation.api import StrictSerializer
from h2htalk.roles import IsResearcher
from h2htalk.serializers import ErrorSerializer, form_errors
from scoring.planning import services
from scoring.planning.forms import PlanForm
from scoring.tasks import run_plan


class PlanInputSerializer(StrictSerializer):
    """The planner's inputs; one left out takes the campaign's value (companions, k, pairing),
    the earlier campaign's (α, ties, seconds per item, and the σ and τ behind its α and ties)
    when `earlier` is given, or the latest plan's, or the default."""

    earlier = serializers.IntegerField(
        required=False, help_text="An earlier campaign's id to take α, ties and time from."
    )
    n_companions = serializers.IntegerField(required=False, help_text="2–40.")
    overlap = serializers.IntegerField(required=False, help_text="k: votes per comparison.")
    pairs_per_scenario = serializers.IntegerField(
        required=False, allow_null=True, help_text="Null: every pair on every scenario."
    )
    min_elo = serializers.FloatField(required=False, help_text="δ, the smallest difference.")
    alpha = serializers.FloatField(
        required=False, help_text="Expected Krippendorff's α, nominal on A/tie/B (mirrored)."
    )
    tie_rate = serializers.FloatField(required=False, help_text="Share of votes that are ties.")
    seconds_per_item = serializers.FloatField(required=False)
    power = serializers.FloatField(required=False, help_text="Default 0.8.")
    sigma = serializers.FloatField(
        required=False,
        allow_null=True,
        help_text="Response-effect sd (logits); set: replaces alpha. `earlier` fills it in.",
    )
    tau = serializers.FloatField(
        required=False, allow_null=True, help_text="Tie threshold (with sigma; replaces tie_rate)."
    )
    effect = serializers.ChoiceField(
        choices=["adjacent", "flag_gap"],
        required=False,
        help_text="adjacent (default): separate adjacent companions min_elo apart; flag_gap: "
        "mark a companion whose flag gap exceeds the field's by min_gap (h2htalk.stats.gap_planner).",
    )
    flag_share = serializers.FloatField(
        required=False, allow_null=True, help_text="flag_gap: share of flagged scenarios (0.5)."
    )
    min_gap = serializers.FloatField(
        required=False, allow_null=True, help_text="flag_gap: smallest gap beyond the field (Elo)."
    )
    weakened = serializers.IntegerField(
        required=False, allow_null=True, help_text="flag_gap: companions with that gap (1)."
    )


class PlanSerializer(serializers.Serializer):
    """A plan: what was asked and the planner's answer (h2htalk.stats.planner.Plan)."""

    id = serializers.IntegerField(help_text="The plan's job id.")
    state = serializers.CharField(
        help_text="completed; queued or running for a large design (poll GET …/plan/), failed "
        "with the reason in `summary`."
    )
    created_at = serializers.DateTimeField()
    inputs = serializers.DictField(source="params.inputs")
    earlier = serializers.IntegerField(source="params.earlier", default=None, allow_null=True)
    result = serializers.DictField(
        help_text="Empty until completed. "
        "n_scenarios, n_comparisons, n_votes, annotator_hours, planned_power (mean "
        "over adjacent pairs), pair_power, all_separated, simulated_power, model, search; for a "
        "flag gap n_flagged, planned_power (P(a weakened companion is marked)), field_marked."
    )
    summary = serializers.CharField(source="message")


class PlanOverviewSerializer(serializers.Serializer):
    latest = PlanSerializer(allow_null=True, help_text="The latest completed plan, or null.")
    running = PlanSerializer(
        allow_null=True, help_text="The newest plan when it is queued, running or failed."
    )
    defaults = serializers.DictField(
        help_text="The inputs a POST without a body would use (the campaign's design, the "
        "latest plan's figures, else the defaults)."
    )


class AdjacentPairSerializer(serializers.Serializer):
    better = serializers.CharField()
    worse = serializers.CharField()
    difference = serializers.FloatField(help_text="Elo difference, better − worse.")
    low = serializers.FloatField()
    high = serializers.FloatField()
    separated = serializers.BooleanField()
    more_votes = serializers.IntegerField()


class PlanStatusSerializer(serializers.Serializer):
    ready = serializers.BooleanField(help_text="False: no votes yet, or one companion only.")
    reason = serializers.CharField(required=False)
    votes = serializers.IntegerField()
    n_adjacent = serializers.IntegerField(required=False)
    n_separated = serializers.IntegerField(required=False)
    more_votes = serializers.IntegerField(required=False)
    more_comparisons = serializers.IntegerField(required=False)
    adjacent = AdjacentPairSerializer(many=True, required=False)
    min_elo = serializers.FloatField()
    power = serializers.FloatField()
    level = serializers.FloatField(required=False)
    n_boot = serializers.IntegerField(required=False)
    plan = serializers.IntegerField(allow_null=True, help_text="The plan whose δ and power.")


@extend_schema(
    methods=["POST"],
    summary="Plan a campaign's number of comparisons and annotator-hours",
    request=PlanInputSerializer,
    responses={
        201: PlanSerializer,
        202: OpenApiResponse(PlanSerializer, description="A large design: planned by a job."),
        400: OpenApiResponse(ErrorSerializer),
    },
)
@extend_schema(
    methods=["GET"],
    summary="A campaign's latest plan and the planner's defaults for it",
    responses=PlanOverviewSerializer,
)
@api_view(["GET", "POST"])
@permission_classes([IsResearcher])
def campaign_plan(request, campaign_id: int):
    """POST: simulate the design and answer the comparisons, votes and annotator-hours for the
    power wanted (seconds); GET: the latest such answer and the defaults."""
    campaign = managed_campaign_or_404(request.user, campaign_id)
    if request.method == "GET":
        overview = {"latest": services.latest_plan(campaign)}
        overview["running"] = services.running_plan(campaign)
        overview["defaults"] = services.design_defaults(campaign)
        return Response(PlanOverviewSerializer(overview).data)
    form = _plan_form(request, campaign)
    if isinstance(form, Response):
        return form
    data = form.cleaned_data
    try:
        job = services.make_plan(campaign, data, request.user, data["earlier"], task=run_plan)
    except services.PlanRefused as refused:
        return Response({"detail": str(refused)}, status=status.HTTP_400_BAD_REQUEST)
    done = job.state == job.State.COMPLETED
    return Response(PlanSerializer(job).data, status=201 if done else 202)


def _plan_form(request, campaign) -> PlanForm | Response:
    """The page's form, valid, from the campaign's (and the earlier campaign's) values and the
    request's; else the 400 answer."""
    given = PlanInputSerializer(data=request.data)
    given.is_valid(raise_exception=True)
    query = {"earlier": given.validated_data.get("earlier", "")}
    initial, _found = services.form_initial(campaign, query, request.user)
    if "earlier" in given.validated_data and initial.get("earlier") is None:
        return Response({"earlier": ["No such campaign of yours."]}, status=400)
    data = {**initial, **given.validated_data}
    form = PlanForm(
        {k: ("" if v is None else v) for k, v in data.items()},
        campaign=campaign,
        user=request.user,
    )
    if not form.is_valid():
        return Response(form_errors(form), status=status.HTTP_400_BAD_REQUEST)
    return form


@extend_schema(
    summary="A running campaign's separated adjacent pairs", responses=PlanStatusSerializer
)
@api_view(["GET"])
@permission_classes([IsResearcher])
def campaign_plan_status(request, campaign_id: int):
    """From the campaign's current votes: adjacent companions (in the current Elo order) whose
    95% scenario-bootstrap interval of the difference excludes 0, and about how many more
    votes the rest need (δ and power of the latest plan, else 50 Elo and 0.8)."""
    campaign = managed_campaign_or_404(request.user, campaign_id)
    return Response(PlanStatusSerializer(services.status(campaign)).data)
