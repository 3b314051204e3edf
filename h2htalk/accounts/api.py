"""REST API for admins: list users, create users in bulk (with their one-time links), show
and deactivate one. The work is done by `onboarding` and `users`, as for the page and
`manage.py create_users`. Researchers and annotators get 403."""

from django.contrib.auth import get_user_model
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from h2htalk.api_summaries import summarised
from h2htalk.roles import ROLES, IsAdmin
from h2htalk.serializers import ErrorSerializer

from . import links, onboarding, users

MAX_USERS = onboarding.MAX_USERS  # per request


class NewUserSerializer(serializers.Serializer):
    """One user to create; every field is checked by the onboarding (errors name the item)."""

    username = serializers.CharField(max_length=1000, allow_blank=True)
    email = serializers.CharField(max_length=1000, allow_blank=True)
    role = serializers.CharField(max_length=100, help_text="One of: " + ", ".join(ROLES))
    campaigns = serializers.ListField(
        child=serializers.CharField(max_length=1000),
        required=False,
        default=list,
        max_length=1000,
        help_text="Campaign names or ids: annotators rate in them, researchers help manage them.",
    )


class CreatedUserSerializer(serializers.Serializer):
    username = serializers.CharField()
    email = serializers.CharField()
    role = serializers.CharField()
    status = serializers.ChoiceField(choices=[onboarding.CREATED, onboarding.EXISTS])
    changes = serializers.ListField(
        child=serializers.CharField(), help_text="What was added to an existing user."
    )
    link = serializers.CharField(
        help_text="One-time link to set a password (empty when the user has one or is "
        "deactivated); shown only in this answer."
    )


class CreatedSerializer(serializers.Serializer):
    users = CreatedUserSerializer(many=True)
    link_expires = serializers.DateTimeField()


class RowErrorSerializer(serializers.Serializer):
    where = serializers.CharField(help_text="`item N`: the N-th user of the list, from 0.")
    field = serializers.CharField()
    message = serializers.CharField()


class OnboardingErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()
    errors = RowErrorSerializer(many=True)


class RevokedSerializer(serializers.Serializer):
    revoked = serializers.BooleanField(
        help_text="False when the user has set a password (no link of theirs is open)."
    )


class UserSerializer(serializers.ModelSerializer):
    roles = serializers.SerializerMethodField()
    has_password = serializers.SerializerMethodField()
    campaigns = serializers.SerializerMethodField(help_text="Campaigns the user rates in.")

    class Meta:
        model = get_user_model()
        fields = ["id", "username", "email", "roles", "is_active", "has_password", "campaigns"]
        fields += ["last_login", "date_joined"]

    def get_roles(self, user) -> list[str]:
        return users.role_names(user)

    def get_has_password(self, user) -> bool:
        return user.has_usable_password()

    def get_campaigns(self, user) -> list[str]:
        return [campaign.name for campaign in user.rating_campaigns.all()]


def _messages(detail) -> list[str]:
    if isinstance(detail, dict):
        return [message for value in detail.values() for message in _messages(value)]
    if isinstance(detail, list):
        return [message for value in detail for message in _messages(value)]
    return [str(detail)]


_ITEM = {"non_field_errors": "(item)"}  # DRF's name for an item that is not an object


def _shape_errors(errors) -> list[dict]:
    """DRF's errors of a list body ({index: {field: [...]}}, or the body's own) as rows."""
    if isinstance(errors, dict) and "non_field_errors" in errors:
        return [
            {"where": "body", "field": "(list)", "message": message}
            for message in _messages(errors["non_field_errors"])
        ]
    items = errors.items() if isinstance(errors, dict) else enumerate(errors)
    return [
        {"where": f"item {index}", "field": _ITEM.get(name, name), "message": message}
        for index, fields in items
        # an item that is not an object ([null], [3]) has its errors as a list, not by field
        for name, detail in (fields.items() if isinstance(fields, dict) else [("(item)", fields)])
        for message in _messages(detail)
        if detail
    ]


def _refused(errors: list[dict], code: int = status.HTTP_400_BAD_REQUEST) -> Response:
    detail = f"{len(errors)} error(s); nothing was created."
    if code == status.HTTP_409_CONFLICT:
        detail += " Another request created users with clashing names at the same moment."
    return Response({"detail": detail, "errors": errors}, status=code)


@summarised("user", "users")
class UserViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Users and their roles (admins only)."""

    permission_classes = [IsAdmin]
    serializer_class = UserSerializer

    def get_queryset(self):
        return users.listing()

    @extend_schema(
        summary="Create users (all or none) and get their one-time links",
        request=NewUserSerializer(many=True),
        responses={
            201: CreatedSerializer,
            400: OpenApiResponse(OnboardingErrorSerializer, description="Nothing created."),
            409: OpenApiResponse(
                OnboardingErrorSerializer,
                description="Nothing created: another request created users whose names clash "
                "with these at the same moment (the rows named).",
            ),
        },
    )
    def create(self, request, format=None):
        given = NewUserSerializer(data=request.data, many=True, max_length=MAX_USERS)
        if not given.is_valid():
            return _refused(_shape_errors(given.errors))
        rows = [
            onboarding.make_row(f"item {i}", **item) for i, item in enumerate(given.validated_data)
        ]
        try:
            outcomes = onboarding.create_users(rows, request.build_absolute_uri("/"))
        except onboarding.OnboardingError as error:
            return _refused([vars(e) for e in error.errors], error.status)
        body = {"users": [vars(o) for o in outcomes], "link_expires": links.expiry()}
        return Response(CreatedSerializer(body).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Deactivate a user (their judgments stay; they can no longer log in)",
        request=None,
        responses={200: UserSerializer, 400: ErrorSerializer},
    )
    @action(detail=True, methods=["post"])
    def deactivate(self, request, pk=None, format=None):
        user = self.get_object()
        try:
            users.set_active(user, False, by=request.user)
        except users.AccountError as error:
            return Response({"detail": str(error)}, status=status.HTTP_400_BAD_REQUEST)
        return Response(UserSerializer(user).data)

    @extend_schema(
        summary="Revoke the user's set-password links (every one issued so far stops working)",
        request=None,
        responses={200: RevokedSerializer},
    )
    @action(detail=True, methods=["post"], url_path="revoke-links")
    def revoke_links(self, request, pk=None, format=None):
        user = self.get_object()
        return Response({"revoked": links.revoke(user)})
