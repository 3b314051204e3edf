from django.db import transaction
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from h2htalk.api_summaries import summarised
from h2htalk.fields import SlugRelatedField
from h2htalk.roles import IsResearcher
from scenarios import services, validation
from scenarios.filters import ScenarioFilter
from scenarios.models import Persona, Scenario


def _validated(cleaner, value):
    try:
        return cleaner(value)
    except validation.FieldError as error:
        raise serializers.ValidationError(f"{error.field}: {error.message}") from error


class TagNamesField(serializers.ListField):
    """Tag names in, sorted tag names out (the attribute is the scenario's tag manager)."""

    def to_representation(self, data):
        return sorted(tag.name for tag in data.all())


class ScenarioSerializer(serializers.ModelSerializer):
    persona = SlugRelatedField(
        slug_field="name", queryset=Persona.objects.all(), allow_null=True, required=False
    )
    tags = TagNamesField(child=serializers.CharField(max_length=60), required=False, default=list)
    history = serializers.JSONField(required=False, default=list)
    memory = serializers.JSONField(required=False, default=list)
    schedule = serializers.JSONField(required=False, default=list)
    reviewer = SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = Scenario
        fields = [
            "id",
            "dimension",
            *services.AUTHORED_FIELDS,
            "tags",
            "state",
            "reviewer",
            "content_hash",
            "created_at",
            "updated_at",
        ]
        read_only_fields = ["dimension", "state", "content_hash", "created_at", "updated_at"]
        validators = []  # the external-id rule is checked in validate() with a clear message

    def validate_history(self, value):
        return _validated(validation.clean_history, value)

    def validate_memory(self, value):
        return _validated(validation.clean_memory, value)

    def validate_schedule(self, value):
        return _validated(validation.clean_schedule, value)

    def validate_user_message(self, value):
        return _validated(lambda v: validation.clean_text(v, "user_message"), value)

    def validate_reference_response(self, value):
        return _validated(lambda v: validation.clean_text(v, "reference_response"), value)

    def validate_tags(self, value):
        return _validated(validation.clean_tags, value)

    def validate(self, attrs):
        subtask = attrs.get("subtask", getattr(self.instance, "subtask", None))
        external_id = attrs.get("external_id", getattr(self.instance, "external_id", ""))
        if external_id:
            clash = Scenario.objects.filter(subtask=subtask, external_id=external_id)
            if self.instance is not None:
                clash = clash.exclude(pk=self.instance.pk)
            if clash.exists():
                raise serializers.ValidationError(
                    {"external_id": f"{subtask}/{external_id} already exists"}
                )
        return attrs

    def create(self, validated_data):
        tags = validated_data.pop("tags", [])
        user = self.context["request"].user
        return services.create_scenario(Scenario(**validated_data), user, tags)

    def update(self, instance, validated_data):
        tags = validated_data.pop("tags", None)
        before = services.snapshot(instance)
        for name, value in validated_data.items():
            setattr(instance, name, value)
        services.update_scenario(instance, self.context["request"].user, before, tags)
        return instance


class PersonaSerializer(serializers.ModelSerializer):
    class Meta:
        model = Persona
        fields = [
            "id",
            "name",
            "summary",
            "character",
            "language",
            "sap_enabled",
            "sap_block",
            "created_at",
            "updated_at",
        ]
        read_only_fields = ["created_at", "updated_at"]


class TransitionSerializer(serializers.Serializer):
    action = serializers.ChoiceField(choices=list(services.TRANSITIONS))
    comment = serializers.CharField(required=False, allow_blank=True, default="")


@summarised("scenario", "scenarios")
class ScenarioViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    viewsets.GenericViewSet,
):
    """Scenarios of the bank. Filters as on the list page; `q` searches the text."""

    serializer_class = ScenarioSerializer
    permission_classes = [IsResearcher]
    filterset_class = ScenarioFilter
    queryset = (
        Scenario.objects.select_related("persona", "reviewer")
        .prefetch_related("tags")
        .order_by("pk")
    )

    @extend_schema(
        summary="Move a scenario to another review state",
        request=TransitionSerializer,
        responses={
            200: ScenarioSerializer,
            409: inline_serializer("TransitionError", {"detail": serializers.CharField()}),
        },
    )
    @action(detail=True, methods=["post"])
    def transition(self, request, pk=None, **kwargs):
        """Move a scenario through its review states (submit, approve, request_changes, …)."""
        form = TransitionSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            with transaction.atomic():
                scenario = services.transition(
                    self.get_object(), request.user, **form.validated_data
                )
        except services.TransitionError as error:
            return Response({"detail": str(error)}, status=status.HTTP_409_CONFLICT)
        return Response(self.get_serializer(scenario).data)


@summarised("persona", "personas")
class PersonaViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    viewsets.GenericViewSet,
):
    serializer_class = PersonaSerializer
    permission_classes = [IsResearcher]
    queryset = Persona.objects.order_by("name")
    filterset_fields = ["language", "sap_enabled"]
