from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, viewsets

from h2htalk.api_summaries import summarised
from h2htalk.fields import SlugRelatedField
from h2htalk.roles import IsResearcher
from h2htalk.run_api import CancelResumeActions
from h2htalk.serializers import EndpointValidation
from scenarios.companions import generation, services
from scenarios.companions.exports import CSV_COLUMNS
from scenarios.companions.forms import COMPANION_FIELDS, GenerationRunForm
from scenarios.models import CompanionModel, GenerationRun, Response
from scenarios.tasks import queue_run


class CompanionSerializer(EndpointValidation, serializers.ModelSerializer):
    class Meta:
        model = CompanionModel
        fields = ["id", *COMPANION_FIELDS, "created_at"]
        read_only_fields = ["created_at"]


class ProgressSerializer(serializers.Serializer):
    total = serializers.IntegerField()
    ok = serializers.IntegerField()
    failed = serializers.IntegerField()
    remaining = serializers.IntegerField()
    tokens = serializers.IntegerField()
    percent = serializers.IntegerField()


class GenerationRunSerializer(serializers.ModelSerializer):
    companions = SlugRelatedField(
        slug_field="name", many=True, queryset=CompanionModel.objects.all()
    )
    progress = serializers.SerializerMethodField()
    scenario_count = serializers.SerializerMethodField()

    class Meta:
        model = GenerationRun
        fields = [
            "id",
            "name",
            "kind",
            "state",
            "message",
            "scenario_query",
            "scenario_count",
            "companions",
            "sap_enabled",
            "token_budget",
            "tokens_used",
            "progress",
            "created_at",
            "started_at",
            "finished_at",
        ]
        read_only_fields = ["kind", "state", "message", "tokens_used", "started_at", "finished_at"]

    @extend_schema(responses=ProgressSerializer)
    def get_progress(self, run) -> dict:
        progress = generation.progress_of(run)
        return {**vars(progress), "remaining": progress.remaining, "percent": progress.percent}

    def get_scenario_count(self, run) -> int:
        return run.scenarios.count()

    def validate(self, attrs):
        # The page's form holds the rules (filter valid and not empty, companions can generate).
        form = GenerationRunForm(
            data={
                "name": attrs.get("name", ""),
                "scenario_query": attrs.get("scenario_query", ""),
                "companions": [c.pk for c in attrs.get("companions", [])],
                "sap_enabled": attrs.get("sap_enabled", True),
                "token_budget": attrs.get("token_budget") or "",
            }
        )
        if not form.is_valid():
            raise serializers.ValidationError(form.errors.get_json_data())
        attrs["scenario_query"] = form.cleaned_data["scenario_query"]
        self._scenarios = form.selected_scenarios
        return attrs

    def create(self, validated_data):
        companions = validated_data.pop("companions")
        run = GenerationRun(created_by=self.context["request"].user, **validated_data)
        return services.start_run(run, companions, self._scenarios)


class ResponseSerializer(serializers.ModelSerializer):
    companion = SlugRelatedField(slug_field="name", read_only=True)
    run = SlugRelatedField(slug_field="name", read_only=True)
    subtask = serializers.CharField(source="scenario.subtask", read_only=True)
    external_id = serializers.CharField(source="scenario.external_id", read_only=True)

    class Meta:
        model = Response
        fields = ["id", "scenario", *CSV_COLUMNS, "attempts", "created_at"]


@summarised("companion", "companions")
class CompanionViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    viewsets.GenericViewSet,
):
    """Companions under test. Keys are never stored: `api_key_env` names the variable."""

    serializer_class = CompanionSerializer
    permission_classes = [IsResearcher]
    queryset = CompanionModel.objects.order_by("name")
    filterset_fields = ["provider"]


@summarised("generation run", "generation runs", create="Start a generation run")
class GenerationRunViewSet(
    CancelResumeActions,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    viewsets.GenericViewSet,
):
    """Generation runs: creating one queues it; cancel and resume as on the page."""

    serializer_class = GenerationRunSerializer
    permission_classes = [IsResearcher]
    queryset = GenerationRun.objects.prefetch_related("companions").order_by("-created_at")
    filterset_fields = ["kind", "state"]

    request_cancel = staticmethod(generation.request_cancel)
    resume_refusal = staticmethod(services.resume_refusal)
    queue = staticmethod(queue_run)


@summarised("response", "responses (with model names)")
class ResponseViewSet(viewsets.ReadOnlyModelViewSet):
    """Responses with model names (researchers only). Filter by run, companion, scenario."""

    serializer_class = ResponseSerializer
    permission_classes = [IsResearcher]
    queryset = Response.objects.select_related("scenario", "companion", "run").order_by("pk")
    filterset_fields = ["run", "companion", "scenario", "status", "scenario__subtask"]
