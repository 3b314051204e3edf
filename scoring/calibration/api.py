"""REST API of calibrated judges (researchers): list and fit, the JSON document, scoring
response pairs, import, and routing comparisons to humans. The same functions as the pages."""

import json

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import APIException
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.access import managed_campaigns
from h2htalk.params import parse_int
from h2htalk.roles import IsResearcher
from h2htalk.serializers import ErrorSerializer
from scenarios.models import Response as CompanionResponse
from scoring import tasks
from scoring.calibration import fitting, routing
from scoring.calibration.access import judge_or_404, visible_judges
from scoring.calibration.document import (
    DEFAULT_FOLDS,
    FOLD_CHOICES,
    NAME_LENGTH,
    DocumentError,
    metrics_profile,
)
from scoring.calibration.forms import MAX_DOCUMENT_BYTES
from scoring.calibration.report import heldout_judges, worse_than_composite
from scoring.calibration.versions import import_document
from scoring.metrics import catalogue
from scoring.metrics import jobs as metric_jobs
from scoring.models import JudgeConfig

MAX_PAIRS = 1000


class BadRequest(APIException):
    """A 400 answer {"detail": ...} from anywhere in a request's handling."""

    status_code = status.HTTP_400_BAD_REQUEST


def _found(queryset, pk, what: str):
    """The row `pk` of `queryset` (what the user may use); BadRequest "no such `what`" else."""
    row = queryset.filter(pk=pk).first()
    if row is None:
        raise BadRequest(f"no such {what}")
    return row


class HeldoutSummarySerializer(serializers.Serializer):
    accuracy_without_ties = serializers.FloatField(allow_null=True)
    accuracy_with_ties = serializers.FloatField(allow_null=True)
    kappa = serializers.FloatField(allow_null=True)
    log_loss = serializers.FloatField(allow_null=True)
    brier = serializers.FloatField(allow_null=True)
    ece = serializers.FloatField(allow_null=True)
    spearman = serializers.FloatField(allow_null=True)
    kendall = serializers.FloatField(allow_null=True)


class CalibratedJudgeSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    version = serializers.IntegerField()
    campaign = serializers.IntegerField(source="campaign_id", allow_null=True)
    created_at = serializers.DateTimeField()
    features = serializers.ListField(child=serializers.CharField(), source="document.features")
    judge = serializers.JSONField(source="document.judge", allow_null=True)
    verdict = serializers.SerializerMethodField()
    worse_than_composite = serializers.SerializerMethodField()
    heldout = serializers.SerializerMethodField()

    def get_verdict(self, judge) -> str:
        """The report's sentence: is it better than the paper's composite held out?"""
        return (judge.document.get("heldout") or {}).get("verdict", "")

    def get_worse_than_composite(self, judge) -> bool:
        return worse_than_composite(judge.document)

    @extend_schema(responses=HeldoutSummarySerializer)
    def get_heldout(self, judge) -> dict:
        """Held-out numbers of raw / composite / calibrated (null when absent)."""
        keys = HeldoutSummarySerializer().fields
        return {
            name: ({k: metrics.get(k) for k in keys} if metrics else None)
            for name, metrics in heldout_judges(judge.document).items()
        }


class FitRequestSerializer(serializers.Serializer):
    campaign = serializers.IntegerField(help_text="Campaign id (one you manage).")
    judge = serializers.IntegerField(
        required=False, allow_null=True, help_text="JudgeConfig id; omit for metrics only."
    )
    features = serializers.ListField(
        child=serializers.ChoiceField(choices=catalogue.ALL_FEATURES),
        required=False,
        help_text="Default: every metric except the embedding, log_length, the judge's features.",
    )
    name = serializers.CharField(required=False, allow_blank=True, max_length=NAME_LENGTH)
    folds = serializers.IntegerField(
        required=False,
        min_value=FOLD_CHOICES[0],
        max_value=FOLD_CHOICES[1],
        default=DEFAULT_FOLDS,
    )
    seed = serializers.IntegerField(required=False, min_value=0, default=0)


class JobAnswerSerializer(serializers.Serializer):
    job = serializers.IntegerField()
    state = serializers.CharField()
    detail = serializers.CharField()


def _visible(request):
    return visible_judges(request.user).select_related("campaign")


class CalibratedJudgeList(APIView):
    """Calibrated judges you can see; POST fits a new one (inline, or as a job when large)."""

    permission_classes = [IsResearcher]

    @extend_schema(summary="List calibrated judges", responses=CalibratedJudgeSerializer(many=True))
    def get(self, request):
        judges = _visible(request).order_by("name", "-version")
        return Response(CalibratedJudgeSerializer(judges, many=True).data)

    @extend_schema(
        summary="Fit a calibrated judge on a campaign's judgments",
        request=FitRequestSerializer,
        responses={
            201: CalibratedJudgeSerializer,
            202: JobAnswerSerializer,
            400: ErrorSerializer,
        },
    )
    def post(self, request):
        given = FitRequestSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        campaign = _found(managed_campaigns(request.user), data["campaign"], "campaign")
        judge = _found(JudgeConfig.objects, data["judge"], "judge") if data.get("judge") else None
        try:
            chosen = catalogue.check_features(
                data.get("features") or catalogue.default_features(judge), judge
            )
        except catalogue.FeatureError as error:
            raise BadRequest(str(error)) from error
        arguments = {
            "judge": judge,
            "features": chosen,
            "name": data.get("name") or None,
            "folds": data["folds"],
            "seed": data["seed"],
        }
        if fitting.needs_job(campaign):
            job = tasks.queue_fit_job(request.user, campaign, **arguments)
            return Response(
                {"job": job.pk, "state": job.state, "detail": "fitting in the background"},
                status=status.HTTP_202_ACCEPTED,
            )
        try:
            calibrated = fitting.fit(campaign, user=request.user, **arguments)
        except catalogue.FeatureError as error:
            raise BadRequest(str(error)) from error
        return Response(CalibratedJudgeSerializer(calibrated).data, status=status.HTTP_201_CREATED)


class CalibratedJudgeDocument(APIView):
    """The calibrated judge's versioned JSON document (schema h2htalk.calibrated-judge/1)."""

    permission_classes = [IsResearcher]

    @extend_schema(summary="A calibrated judge's JSON document", responses=OpenApiTypes.OBJECT)
    def get(self, request, pk: int):
        return Response(judge_or_404(request.user, pk).document)


class ScoredPairSerializer(serializers.Serializer):
    a = serializers.IntegerField(help_text="Response id of side A.")
    b = serializers.IntegerField(help_text="Response id of side B.")
    p = serializers.FloatField(
        allow_null=True, help_text="P(humans prefer A over B); null when a feature is missing."
    )


class ScoreAnswerSerializer(serializers.Serializer):
    judge = serializers.CharField()
    pairs = ScoredPairSerializer(many=True)


class CalibratedJudgeScore(APIView):
    """Score response pairs with the calibrated judge. Reference metrics of the responses are
    computed and stored first when missing (a cache fill; the answer does not depend on it)."""

    permission_classes = [IsResearcher]

    @extend_schema(
        summary="Score response pairs with a calibrated judge",
        parameters=[
            OpenApiParameter(
                "pair",
                str,
                many=True,
                description="'<response a id>,<response b id>', repeated (at most 1000).",
            )
        ],
        responses={200: ScoreAnswerSerializer, 400: ErrorSerializer},
    )
    def get(self, request, pk: int):
        from scoring.calibration.prediction import score_pairs  # numpy, scipy: not at start-up

        judge = judge_or_404(request.user, pk)
        pairs = _pairs(request.query_params.getlist("pair"))
        scored = []
        if pairs:
            ids = {r for pair in pairs for r in pair}
            metric_jobs.compute(
                CompanionResponse.objects.filter(pk__in=ids),
                profile=metrics_profile(judge.document),
                keep_other_profiles=True,
            )
            try:
                p, _ = score_pairs(judge.document, pairs)
            except DocumentError as error:
                raise BadRequest(str(error)) from error
            scored = [
                {"a": a, "b": b, "p": None if value != value else float(value)}
                for (a, b), value in zip(pairs, p, strict=True)
            ]
        return Response({"judge": f"{judge.name} v{judge.version}", "pairs": scored})


def _pairs(values: list[str]) -> list[tuple[int, int]]:
    """The response id pairs of the ``pair`` parameters (BadRequest on a malformed one or
    more than MAX_PAIRS)."""
    pairs = []
    for value in values:
        ids = [parse_int(part.strip()) for part in value.split(",")]
        if len(ids) != 2 or None in ids:
            raise BadRequest(f"pair must be '<id>,<id>', not {value!r}")
        pairs.append((ids[0], ids[1]))
    if len(pairs) > MAX_PAIRS:
        raise BadRequest(f"at most {MAX_PAIRS} pairs")
    return pairs


class ImportRequestSerializer(serializers.Serializer):
    document = serializers.JSONField(
        help_text="The document (an object, or a string holding its JSON)."
    )
    name = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=NAME_LENGTH,
        help_text="Empty: keep name and version; else the next version of this name.",
    )


class CalibratedJudgeImport(APIView):
    """Store a calibrated-judge document (201; 200 when the same one is already stored)."""

    permission_classes = [IsResearcher]

    @extend_schema(
        summary="Import a calibrated-judge document",
        request=ImportRequestSerializer,
        responses={
            201: CalibratedJudgeSerializer,
            200: CalibratedJudgeSerializer,
            400: ErrorSerializer,
            413: ErrorSerializer,
        },
    )
    def post(self, request):
        # The upload form's limit, checked on the body before it is read and parsed.
        limit = min(MAX_DOCUMENT_BYTES, settings.MAX_UPLOAD_BYTES)
        try:
            size = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            size = 0
        if size > limit:
            detail = f"The request is {size:,} bytes; the limit is {limit:,}."
            return Response({"detail": detail}, status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
        given = ImportRequestSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        try:
            judge, created = import_document(
                _parsed(given.validated_data["document"]),
                name=given.validated_data.get("name") or None,
                user=request.user,
            )
        except DocumentError as error:
            raise BadRequest(str(error)) from error
        return Response(
            CalibratedJudgeSerializer(judge).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )


def _parsed(document):
    """The document as given: an object, or a string holding its JSON (BadRequest when that
    is not JSON this platform can read)."""
    if not isinstance(document, str):
        return document
    try:
        return json.loads(document)
    except json.JSONDecodeError as error:
        raise BadRequest(f"not JSON: {error}") from error
    except (ValueError, RecursionError) as error:  # a huge integer, or nested too deeply
        raise BadRequest(
            "not JSON this platform can read: nested too deeply or a huge number"
        ) from error


class RouteRequestSerializer(serializers.Serializer):
    source_campaign = serializers.IntegerField(help_text="Campaign id (one you manage).")
    mode = serializers.ChoiceField(choices=routing.MODES)
    judge = serializers.IntegerField(
        required=False, allow_null=True, help_text="Calibrated judge id (mode uncertain)."
    )
    count = serializers.IntegerField(
        required=False, min_value=1, max_value=routing.MAX_COUNT, default=routing.DEFAULT_COUNT
    )
    threshold = serializers.FloatField(
        required=False, allow_null=True, min_value=0, max_value=1, help_text="Mode composite."
    )
    exclude_judged = serializers.BooleanField(required=False, default=True)
    name = serializers.CharField(max_length=150, help_text="Name of the new campaign.")


class RouteAnswerSerializer(serializers.Serializer):
    campaign = serializers.IntegerField()
    name = serializers.CharField()
    comparisons = serializers.IntegerField()
    candidates = serializers.IntegerField()
    skipped = serializers.IntegerField()
    reason = serializers.CharField()


class RouteComparisons(APIView):
    """Create a draft campaign from the comparisons where the calibrated judge is least
    confident, or where the paper's composite is below a threshold."""

    permission_classes = [IsResearcher]

    @extend_schema(
        summary="Draft a campaign from the comparisons that most need human judgments",
        request=RouteRequestSerializer,
        responses={201: RouteAnswerSerializer, 400: ErrorSerializer},
    )
    def post(self, request):
        given = RouteRequestSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        source = _found(managed_campaigns(request.user), data["source_campaign"], "campaign")
        judge = None
        if data.get("judge"):
            judge = _found(visible_judges(request.user), data["judge"], "calibrated judge")
        try:
            campaign, routed = routing.route(
                source,
                data["mode"],
                data["name"].strip(),
                request.user,
                judge=judge,
                count=data["count"],
                threshold=data.get("threshold"),
                exclude_judged=data["exclude_judged"],
            )
        except routing.RoutingError as error:
            raise BadRequest(str(error)) from error
        return Response(
            {
                "campaign": campaign.pk,
                "name": campaign.name,
                "comparisons": len(routed.comparisons),
                "candidates": routed.candidates,
                "skipped": routed.skipped,
                "reason": routed.reason,
            },
            status=status.HTTP_201_CREATED,
        )
