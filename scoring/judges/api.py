"""REST API of the LLM judge: configurations (CRUD), runs (list/create/detail/cancel/resume),
verdicts (list, filter by run) and the bias report per configuration. Researchers only."""

from django.db.models import ProtectedError
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response as ApiResponse

from h2htalk.api_summaries import summarised
from h2htalk.fields import SlugRelatedField
from h2htalk.roles import IsResearcher
from h2htalk.run_api import CancelResumeActions
from h2htalk.serializers import EndpointValidation, form_errors
from scenarios.models import CompanionModel, GenerationRun
from scoring.judges import judging, prompts, services
from scoring.judges.forms import (
    LOCKED_FIELDS,
    MAX_SAMPLES,
    PLATFORM_PARAMS,
    JudgeConfigForm,
    JudgeRunForm,
    is_locked,
    key_status,
)
from scoring.judges.imports import VERDICT_VALUE_FIELDS
from scoring.models import JudgeConfig, JudgeRun, JudgeVerdict
from scoring.tasks import queue_judge_run


class JudgeConfigSerializer(EndpointValidation, serializers.ModelSerializer):
    platform_params = PLATFORM_PARAMS

    rubric = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text="The judge's instructions; empty: the default rubric for the mode.",
    )
    samples = serializers.IntegerField(min_value=1, max_value=MAX_SAMPLES, required=False)
    temperature = serializers.FloatField(min_value=0.0, max_value=2.0, required=False)
    key_status = serializers.SerializerMethodField()
    locked = serializers.SerializerMethodField()

    class Meta:
        model = JudgeConfig
        fields = ["id", *JudgeConfigForm.Meta.fields, "key_status", "locked", "created_at"]
        read_only_fields = ["created_at"]

    def get_key_status(self, config) -> str:
        return key_status(config)

    def get_locked(self, config) -> bool:
        """True once the judge has runs: mode, model, rubric, temperature, samples and params
        can no longer change."""
        return is_locked(config)

    def validate(self, attrs):
        instance = self.instance
        if instance is not None and is_locked(instance):
            changed = [
                name
                for name in LOCKED_FIELDS
                if name in attrs and attrs[name] != getattr(instance, name)
            ]
            if changed:
                raise serializers.ValidationError(
                    {
                        name: "fixed: this judge has runs (create a copy to change it)"
                        for name in changed
                    }
                )
        mode = attrs.get("mode", getattr(instance, "mode", JudgeConfig.Mode.SINGLE))
        rubric_given = "rubric" in attrs or instance is None
        defaults = {prompts.DEFAULT_SINGLE_RUBRIC.strip(), prompts.DEFAULT_PAIRWISE_RUBRIC.strip()}
        if rubric_given and (attrs.get("rubric") or "").strip() in defaults | {""}:
            attrs["rubric"] = prompts.default_rubric(mode)
        base_url = attrs.get("base_url", getattr(instance, "base_url", ""))
        model_id = attrs.get("model_id", getattr(instance, "model_id", ""))
        if bool(base_url) != bool(model_id):
            raise serializers.ValidationError(
                "Give both a base URL and a model id (or neither, for an imported judge)."
            )
        samples = attrs.get("samples", getattr(instance, "samples", 1))
        temperature = attrs.get("temperature", getattr(instance, "temperature", 0.0))
        if samples > 1 and temperature == 0:
            raise serializers.ValidationError(
                {"temperature": "Several samples at temperature 0 are the same verdict repeated."}
            )
        return attrs


class ProgressSerializer(serializers.Serializer):
    total = serializers.IntegerField()
    done = serializers.IntegerField(help_text="Parsed verdicts (strict + fallback).")
    strict = serializers.IntegerField()
    fallback = serializers.IntegerField()
    unparseable = serializers.IntegerField()
    failed = serializers.IntegerField(help_text="Requests that failed; retried on resume.")
    remaining = serializers.IntegerField()
    tokens = serializers.IntegerField()
    percent = serializers.IntegerField()


@extend_schema_field(
    {
        "type": "string",
        "enum": JudgeRun.State.values,
        "description": "draft, queued, running, paused (budget reached), cancelled, completed, "
        "failed (the executor hit an unexpected error; resume)",
    }
)
class RunStateField(serializers.CharField):
    """The run state, described inline (a shared enum would collide with generation runs')."""


def _names_in(queryset, help_text: str) -> SlugRelatedField:
    """An optional, write-only list of names of `queryset`'s objects (runs, companions)."""
    return SlugRelatedField(
        slug_field="name",
        many=True,
        queryset=queryset,
        write_only=True,
        required=False,
        help_text=help_text,
    )


class JudgeRunSerializer(serializers.ModelSerializer):
    state = RunStateField(read_only=True)
    judge = SlugRelatedField(slug_field="name", queryset=JudgeConfig.objects.all())
    mode = serializers.CharField(source="judge.mode", read_only=True)
    response_runs = _names_in(
        GenerationRun.objects.all(),
        "Single mode: grade the successful responses of these response runs.",
    )
    companions = _names_in(
        CompanionModel.objects.all(), "Single mode: only these companions' responses."
    )
    progress = serializers.SerializerMethodField()
    response_count = serializers.SerializerMethodField()

    class Meta:
        model = JudgeRun
        fields = [
            "id",
            "name",
            "judge",
            "mode",
            "campaign",
            "response_runs",
            "companions",
            "response_count",
            "imported",
            "state",
            "message",
            "token_budget",
            "tokens_used",
            "progress",
            "created_at",
            "started_at",
            "finished_at",
        ]
        read_only_fields = [
            "imported",
            "state",
            "message",
            "tokens_used",
            "started_at",
            "finished_at",
        ]

    @extend_schema(responses=ProgressSerializer)
    def get_progress(self, run) -> dict:
        return judging.progress_of(run).as_dict()

    def get_response_count(self, run) -> int:
        return run.responses.count()

    def validate(self, attrs):
        # The page's form holds the rules (mode vs campaign/runs, campaign access, not empty).
        form = JudgeRunForm(
            data={
                "name": attrs.get("name", ""),
                "judge": attrs["judge"].pk if attrs.get("judge") else "",
                "campaign": attrs["campaign"].pk if attrs.get("campaign") else "",
                "response_runs": [r.pk for r in attrs.get("response_runs", [])],
                "companions": [c.pk for c in attrs.get("companions", [])],
                "token_budget": attrs.get("token_budget") or "",
            },
            user=self.context["request"].user,
        )
        if not form.is_valid():
            raise serializers.ValidationError(form_errors(form))
        self._responses = form.selected_responses
        return attrs

    def create(self, validated_data):
        validated_data.pop("response_runs", None)
        validated_data.pop("companions", None)
        run = JudgeRun(created_by=self.context["request"].user, **validated_data)
        return services.start_run(run, self._responses)


class JudgeVerdictSerializer(serializers.ModelSerializer):
    mode = serializers.SerializerMethodField()

    class Meta:
        model = JudgeVerdict
        fields = [
            "id",
            "run",
            "mode",
            "response",
            "first",
            "second",
            "sample",
            *VERDICT_VALUE_FIELDS,
            "created_at",
        ]

    def get_mode(self, verdict) -> str:
        return "single" if verdict.response_id else "pairwise"


@summarised(
    "judge configuration",
    "judge configurations",
    destroy="Delete a judge configuration (409 when it has runs)",
)
class JudgeConfigViewSet(viewsets.ModelViewSet):
    """LLM judge configurations. Keys are never stored: `api_key_env` names the variable.
    A judge with runs keeps its mode, model, rubric, temperature, samples and params."""

    serializer_class = JudgeConfigSerializer
    permission_classes = [IsResearcher]
    queryset = JudgeConfig.objects.order_by("name")
    filterset_fields = ["mode"]

    def destroy(self, request, *args, **kwargs):
        try:
            return super().destroy(request, *args, **kwargs)
        except ProtectedError:
            return ApiResponse({"detail": "the judge has runs; it cannot be deleted"}, status=409)

    @extend_schema(responses=OpenApiTypes.OBJECT, summary="The judge's bias report")
    @action(detail=True, methods=["get"])
    def bias(self, request, pk=None, **kwargs):
        """Position-flip rate, first-position preference, longer-response preference (pairwise)
        and Spearman's ρ of the overall score with length (single), each with n and a 95%
        interval (Wilson; Fisher z), over every run of the judge; verdict counts by parse."""
        return ApiResponse(judging.bias_report(self.get_object()))


@summarised("judge run", "judge runs", create="Start a judge run")
class JudgeRunViewSet(
    CancelResumeActions,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    viewsets.GenericViewSet,
):
    """Judge runs: creating one queues it (pairwise: `campaign`; single: `response_runs`
    [+ `companions`] or `campaign`); cancel and resume as on the page."""

    serializer_class = JudgeRunSerializer
    permission_classes = [IsResearcher]
    queryset = JudgeRun.objects.select_related("judge").order_by("-created_at")
    filterset_fields = ["judge", "state", "imported", "campaign"]

    def cancel_refusal(self, run) -> str | None:
        return "imported runs cannot be cancelled" if run.imported else None

    def request_cancel(self, run) -> None:
        judging.request_cancel(run)

    def resume_refusal(self, run) -> str | None:
        if run.imported:
            return "imported runs cannot be resumed"
        return "the run is already going" if judging.is_going(run) else None

    def queue(self, run) -> None:
        queue_judge_run(run)


@summarised("judge verdict", "judge verdicts (with raw outputs)")
class JudgeVerdictViewSet(viewsets.ReadOnlyModelViewSet):
    """Judge verdicts with raw outputs. Filter by run, parse status, response, first, second."""

    serializer_class = JudgeVerdictSerializer
    permission_classes = [IsResearcher]
    queryset = JudgeVerdict.objects.order_by("pk")
    filterset_fields = ["run", "parse", "response", "first", "second", "sample"]
