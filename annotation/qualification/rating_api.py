"""The practice for annotators through the API, as blind as the practice page: the next
practice item (its key, the scenario, `left` and `right`), the answer with its feedback
(the known answer in screen terms and the explanation, only after answering), and retries."""

from django.db import transaction
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.response import Response

from h2htalk.roles import IsAnnotator

from ..access import rating_campaign_or_404
from ..api import RatingErrorSerializer, RatingScenarioSerializer, StrictSerializer
from . import practice
from .phases import rule_of, standing


class BlindPracticeItemSerializer(serializers.Serializer):
    key = serializers.UUIDField(help_text="Answer with it.")
    scenario = RatingScenarioSerializer()
    left = serializers.CharField()
    right = serializers.CharField()


class PracticeStateSerializer(serializers.Serializer):
    phase = serializers.CharField(help_text="qualifying, failed, admitted, refresher …")
    practice_set = serializers.CharField(allow_null=True)
    position = serializers.IntegerField(help_text="The item's place in the attempt (1-based).")
    total = serializers.IntegerField()
    item = BlindPracticeItemSerializer(allow_null=True, help_text="Null when there is none to do.")
    attempts_used = serializers.IntegerField()
    attempts_allowed = serializers.IntegerField()
    can_retry = serializers.BooleanField()
    why = serializers.CharField(allow_blank=True, help_text="Why the last attempt failed.")
    no_items = serializers.BooleanField(help_text="The set has no items yet.")


class PracticeAnswerSerializer(StrictSerializer):
    preference = serializers.IntegerField(
        min_value=-2, max_value=2, help_text="-2 left much better … 2 right much better."
    )


class PracticeFeedbackSerializer(serializers.Serializer):
    key = serializers.UUIDField()
    given = serializers.IntegerField(help_text="Your answer (screen terms).")
    expected = serializers.IntegerField(help_text="The known answer (screen terms).")
    correct = serializers.BooleanField()
    same_direction = serializers.BooleanField()
    explanation = serializers.CharField()
    phase = serializers.CharField(help_text="Your phase after this answer.")


def _state(campaign, user) -> dict:
    turn = practice.turn(campaign, user)
    now = turn.standing
    item = None
    if turn.answer is not None:
        item = practice.item_payload(turn.answer, practice.practice_names(campaign))
    attempt = now.last_attempt
    why = ""
    if attempt is not None and attempt.passed is False:
        why = practice.result_reason(attempt, rule_of(campaign))
    return PracticeStateSerializer(
        {
            "phase": now.phase,
            "practice_set": now.practice_set,
            "position": turn.position,
            "total": turn.total,
            "item": item,
            "attempts_used": now.attempts_used,
            "attempts_allowed": now.attempts_allowed,
            "can_retry": now.can_retry,
            "why": why,
            "no_items": turn.no_items,
        }
    ).data


@extend_schema(
    summary="Your practice in a campaign: phase and the next practice item",
    request=None,
    responses={200: PracticeStateSerializer, 404: RatingErrorSerializer},
)
@api_view(["POST"])
@permission_classes([IsAnnotator])
@transaction.atomic
def practice_next(request, campaign_id: int):
    """Your phase and your next practice item (starting your attempt at the set of your
    phase when none is under way); `item` is null when there is nothing to answer."""
    campaign = rating_campaign_or_404(request.user, campaign_id)
    return Response(_state(campaign, request.user))


@extend_schema(
    summary="Start another practice attempt after a failed one",
    request=None,
    responses={200: PracticeStateSerializer, 409: RatingErrorSerializer},
)
@api_view(["POST"])
@permission_classes([IsAnnotator])
@transaction.atomic
def practice_retry(request, campaign_id: int):
    campaign = rating_campaign_or_404(request.user, campaign_id)
    try:
        practice.retry(campaign, request.user)
    except practice.PracticeError as error:
        return Response({"detail": str(error)}, status=status.HTTP_409_CONFLICT)
    return Response(_state(campaign, request.user))


@extend_schema(
    summary="Answer a practice item",
    request=PracticeAnswerSerializer,
    responses={
        200: PracticeFeedbackSerializer,
        400: OpenApiResponse(description="{field: [messages]}"),
        404: RatingErrorSerializer,
    },
)
@api_view(["POST"])
@permission_classes([IsAnnotator])
@transaction.atomic
def practice_answer(request, practice_key):
    """Store your answer (once: a replay returns the same feedback) and read the feedback."""
    key = practice_key
    try:
        stored = practice.owned_answer(request.user, key)
    except practice.NotYours:
        return Response({"detail": "No such item."}, status=status.HTTP_404_NOT_FOUND)
    campaign = rating_campaign_or_404(request.user, stored.attempt.campaign_id)
    body = PracticeAnswerSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    try:
        stored = practice.answer(campaign, request.user, key, body.validated_data["preference"])
    except practice.PracticeError as error:
        return Response({"detail": str(error)}, status=status.HTTP_409_CONFLICT)
    shown = practice.feedback(stored, practice.practice_names(campaign))
    phase = standing(campaign, request.user).phase
    return Response(PracticeFeedbackSerializer({"key": stored.key, **shown, "phase": phase}).data)
