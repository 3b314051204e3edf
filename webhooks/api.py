"""REST API of webhooks: endpoints (the secret only in the creation answer and, for the owner,
with ?include=secret), their deliveries with every attempt, and re-sending one. Researchers and
admins; objects as on the pages (`services.visible_endpoints`)."""

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response

from annotation.models import Campaign
from h2htalk.api_summaries import summarised
from h2htalk.roles import IsResearcher

from . import services
from .models import Attempt, Delivery, Endpoint


def _django(check, value):
    try:
        return check(value)
    except DjangoValidationError as error:
        raise serializers.ValidationError(error.messages) from None


class EndpointSerializer(serializers.ModelSerializer):
    campaign = serializers.PrimaryKeyRelatedField(
        queryset=Campaign.objects.all(), allow_null=True, required=False
    )
    owner = serializers.CharField(source="owner.username", read_only=True)
    events = serializers.ListField(child=serializers.CharField())

    class Meta:
        model = Endpoint
        fields = ["id", "url", "description", "campaign", "events", "active", "owner"]
        fields += ["created_at"]

    def validate_url(self, value):
        return _django(services.clean_url, value)

    def validate_events(self, value):
        return _django(services.clean_events, value)

    def validate_campaign(self, value):
        user = self.context["request"].user
        return _django(lambda c: services.clean_campaign(user, c), value)


class CreatedEndpointSerializer(EndpointSerializer):
    class Meta(EndpointSerializer.Meta):
        fields = [*EndpointSerializer.Meta.fields, "secret"]


class AttemptSerializer(serializers.ModelSerializer):
    class Meta:
        model = Attempt
        fields = ["number", "by_hand", "started_at", "status_code", "duration_ms", "error"]
        fields += ["response_excerpt"]


class DeliverySerializer(serializers.ModelSerializer):
    attempt_log = AttemptSerializer(many=True, read_only=True)

    class Meta:
        model = Delivery
        fields = ["id", "endpoint", "event", "event_id", "state", "attempts", "created_at"]
        fields += ["payload", "attempt_log"]


@summarised(
    "webhook endpoint",
    "webhook endpoints",
    create="Create a webhook endpoint (its secret shown once)",
    retrieve="Show a webhook endpoint (its secret to its owner)",
)
class EndpointViewSet(viewsets.ModelViewSet):
    serializer_class = EndpointSerializer
    permission_classes = [IsResearcher]
    queryset = Endpoint.objects.none()
    lookup_value_regex = r"\d+"

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Endpoint.objects.none()
        return services.visible_endpoints(self.request.user).order_by("-created_at", "pk")

    @extend_schema(responses={201: CreatedEndpointSerializer})
    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        endpoint = services.save(Endpoint(owner=request.user, **serializer.validated_data))
        return Response(CreatedEndpointSerializer(endpoint).data, status=status.HTTP_201_CREATED)

    def perform_update(self, serializer):
        for name, value in serializer.validated_data.items():
            setattr(serializer.instance, name, value)
        services.save(serializer.instance)

    def perform_destroy(self, instance):
        services.delete(instance)

    @extend_schema(
        parameters=[OpenApiParameter("include", str, enum=["secret"], required=False)],
        responses={200: CreatedEndpointSerializer},
    )
    def retrieve(self, request, *args, **kwargs):
        """One endpoint; `?include=secret` adds its signing secret, for its owner only."""
        endpoint = self.get_object()
        if request.query_params.get("include") != "secret":
            return Response(EndpointSerializer(endpoint, context={"request": request}).data)
        if not services.may_read_secret(request.user, endpoint):
            raise PermissionDenied("Only the endpoint's owner may read its secret.")
        return Response(CreatedEndpointSerializer(endpoint).data)

    @extend_schema(
        summary="List a webhook endpoint's latest deliveries",
        responses={200: DeliverySerializer(many=True)},
    )
    @action(detail=True, methods=["get"])
    def deliveries(self, request, pk=None, **kwargs):
        """The endpoint's latest 100 deliveries, each with its attempts."""
        rows = services.deliveries_of(self.get_object())[:100]
        return Response(DeliverySerializer(rows, many=True).data)


@summarised("webhook delivery", "webhook deliveries")
class DeliveryViewSet(mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    serializer_class = DeliverySerializer
    permission_classes = [IsResearcher]
    queryset = Delivery.objects.none()
    lookup_value_regex = r"\d+"

    def get_object(self):
        return services.delivery_or_404(self.request.user, self.kwargs["pk"])

    @extend_schema(
        summary="Send a webhook delivery again",
        request=None,
        responses={202: DeliverySerializer},
    )
    @action(detail=True, methods=["post"])
    def resend(self, request, pk=None, **kwargs):
        """One more attempt, now (a task; the attempt appears in the log)."""
        delivery = self.get_object()
        services.resend(delivery)
        return Response(DeliverySerializer(delivery).data, status=status.HTTP_202_ACCEPTED)
