"""The rater's content settings through the API: the risk levels whose items they are never
handed (annotation.care), beside the rating API (annotation.api)."""

from django.db import transaction
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.response import Response

from h2htalk.roles import IsAnnotator

from . import care
from .api import BAD_BODY, StrictSerializer


class RatingCareSerializer(StrictSerializer):
    """The risk levels you opted out of, in every campaign (annotation.care)."""

    opted_out = serializers.ListField(
        child=serializers.ChoiceField(choices=list(care.RISK_LEVELS)),
        max_length=len(care.RISK_LEVELS),
        help_text="Risk levels (low, medium, high) whose items you are never handed.",
    )


class RatingCareAnswerSerializer(serializers.Serializer):
    opted_out = serializers.ListField(child=serializers.CharField())
    passed_on = serializers.IntegerField(
        required=False, help_text="Open items of those levels you held, passed on to others."
    )


@extend_schema(
    methods=["GET"],
    summary="Your content settings (risk levels you opted out of)",
    responses=RatingCareAnswerSerializer,
)
@extend_schema(
    methods=["PUT"],
    summary="Opt out of risk levels (or back in)",
    request=RatingCareSerializer,
    responses={200: RatingCareAnswerSerializer, 400: BAD_BODY},
)
@api_view(["GET", "PUT"])
@permission_classes([IsAnnotator])
@transaction.atomic
def rating_care(request):
    """The risk levels whose items you are never handed; PUT the whole list to change it (the
    open items of those levels you hold go to others)."""
    if request.method == "GET":
        return Response({"opted_out": list(care.opted_out(request.user))})
    body = RatingCareSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    passed_on = care.set_opted_out(request.user, body.validated_data["opted_out"])
    return Response({"opted_out": list(care.opted_out(request.user)), "passed_on": passed_on})
