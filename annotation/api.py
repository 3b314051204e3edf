"""The rating REST API for annotators (external rating front ends), as blind as the pages.

The blindness is that of the rating pages: both render `annotation.blinding.item_payload`.
Every answer is in screen terms: the two responses are `left` and `right` in the layout drawn
for the assignment, and a judgment comes back as the annotator gave it. Nothing here names a companion, a response, a comparison
or a run, and nothing reports the pair-keyed preference (beside the screen one it would reveal
the layout). Campaign texts and the responses pass through `blinding.blind_text`, which hides
the campaign's companion and run names should they appear there. An item is addressed by its
assignment's random `key`, which is also the idempotency key of its submission.

All serializers are plain Serializers with declared fields, never ModelSerializers, so a new
model field cannot reach an annotator by default.
"""

import threading
from collections.abc import Mapping

from django.db import transaction
from django.utils.decorators import method_decorator
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
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
from h2htalk.roles import IsAnnotator

from . import queue
from .access import rating_campaign_or_404, rating_campaigns
from .blinding import blind_names, campaign_texts, item_payload
from .markdown import render_markdown
from .models import RATING_DIMENSIONS, Assignment, Campaign
from .progress import progress_for
from .study import flow as study_flow

UUID_PATTERN = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
SIDES = ("left", "right")


# ---------------------------------------------------------------- answers


class RatingErrorSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text="What went wrong, for the annotator to read.")


class RatingProgressSerializer(serializers.Serializer):
    done_today = serializers.IntegerField(help_text="Your judgments in this campaign today.")
    done_total = serializers.IntegerField(help_text="Your judgments in this campaign.")
    left_for_me = serializers.IntegerField(
        help_text="Items not yet handed to you that still need votes (not the current one)."
    )
    campaign_done = serializers.IntegerField(help_text="Judgments of all annotators.")
    campaign_target = serializers.IntegerField(help_text="Judgments the campaign needs.")


def _progress(user, campaign: Campaign) -> dict:
    return vars(progress_for(user, campaign))


_WRITERS: dict[type, serializers.Serializer] = {}


def _written(serializer_class, value) -> dict:
    """`serializer_class(value).data` for the answers of the hot endpoints, from one serializer
    kept per class (they read no context): building a new one deep-copies every declared field,
    which cost more CPU than writing the answer."""
    writer = _WRITERS.get(serializer_class)
    if writer is None:
        writer = _WRITERS[serializer_class] = serializer_class()
    return writer.to_representation(value)


_READERS = threading.local()


def _read(serializer_class, data) -> serializers.Serializer:
    """`serializer_class(data=data)`, validated (ValidationError: 400), from one serializer
    kept per class and thread and emptied of the last request's body and results: building a
    new one deep-copies every declared field, about a twentieth of a submission's CPU. One per
    thread, as a serializer holds the body it reads."""
    readers = _READERS.__dict__
    reader = readers.get(serializer_class)
    if reader is None:
        reader = readers[serializer_class] = serializer_class(data=data)
    else:
        reader.initial_data = data
        for result in ("_validated_data", "_errors", "_data"):
            reader.__dict__.pop(result, None)
    reader.is_valid(raise_exception=True)
    return reader


class RatingDimensionSerializer(serializers.Serializer):
    name = serializers.CharField()
    label = serializers.CharField()


class RatingSkipReasonSerializer(serializers.Serializer):
    reason = serializers.CharField()
    label = serializers.CharField()


class RatingReasonSerializer(serializers.Serializer):
    key = serializers.CharField()
    label = serializers.CharField()


class RatingCampaignSerializer(serializers.Serializer):
    id = serializers.IntegerField(read_only=True)
    name = serializers.SerializerMethodField()
    description = serializers.SerializerMethodField()
    guidelines = serializers.SerializerMethodField(help_text="Markdown source.")
    guidelines_html = serializers.SerializerMethodField(
        help_text="The guidelines as sanitised HTML (as on the rating page)."
    )
    progress = serializers.SerializerMethodField()
    dimensions = serializers.SerializerMethodField()
    skip_reasons = serializers.SerializerMethodField()
    reasons = serializers.SerializerMethodField(
        help_text="The checklist of why the preferred response is better (submit their keys)."
    )
    asks_confidence = serializers.BooleanField(
        source="ask_confidence", help_text="Whether a submission may carry confidence 1–3."
    )
    support_text = serializers.SerializerMethodField(
        help_text="Helplines and contact (Markdown), to keep one click away while rating."
    )
    support_text_html = serializers.SerializerMethodField(help_text="The same, sanitised HTML.")
    break_after_minutes = serializers.IntegerField(
        allow_null=True,
        help_text="Suggest a break after this many minutes of continuous rating (null: never).",
    )

    def _texts(self, campaign) -> dict:
        cache = self.context.setdefault("campaign_texts", {})
        if campaign.pk not in cache:
            cache[campaign.pk] = campaign_texts(campaign, blind_names(campaign))
        return cache[campaign.pk]

    def get_name(self, campaign) -> str:
        return self._texts(campaign)["name"]

    def get_description(self, campaign) -> str:
        return self._texts(campaign)["description"]

    def get_guidelines(self, campaign) -> str:
        return self._texts(campaign)["guidelines"]

    def get_guidelines_html(self, campaign) -> str:
        return str(render_markdown(self.get_guidelines(campaign)))

    def get_support_text(self, campaign) -> str:
        return self._texts(campaign)["support"]

    def get_support_text_html(self, campaign) -> str:
        return str(render_markdown(self.get_support_text(campaign)))

    @extend_schema_field(RatingProgressSerializer)
    def get_progress(self, campaign) -> dict:
        return RatingProgressSerializer(_progress(self.context["request"].user, campaign)).data

    @extend_schema_field(RatingDimensionSerializer(many=True))
    def get_dimensions(self, campaign) -> list:
        """The optional 1–5 ratings a submission may carry per side."""
        return [{"name": name, "label": label} for name, label in RATING_DIMENSIONS]

    @extend_schema_field(RatingReasonSerializer(many=True))
    def get_reasons(self, campaign) -> list:
        return self._texts(campaign)["reasons"]

    @extend_schema_field(RatingSkipReasonSerializer(many=True))
    def get_skip_reasons(self, campaign) -> list:
        """The skip reasons; `rather_not` ("I'd rather not") only for items with a
        content note, and never counted against the rater."""
        return [{"reason": reason, "label": label} for reason, label in queue.ALL_SKIP_REASONS]


class RatingPersonaSerializer(serializers.Serializer):
    name = serializers.CharField()
    summary = serializers.CharField()


class RatingTurnSerializer(serializers.Serializer):
    role = serializers.CharField(help_text="user, assistant or system")
    content = serializers.CharField()


class RatingMemorySerializer(serializers.Serializer):
    content = serializers.CharField()
    category = serializers.CharField(required=False)
    importance = serializers.IntegerField(required=False, help_text="0, 1 or 2")


class RatingScheduleSerializer(serializers.Serializer):
    time = serializers.CharField(allow_blank=True, help_text="HH:MM or empty")
    activity = serializers.CharField()


class RatingScenarioSerializer(serializers.Serializer):
    """What the companions were given; never the reference response."""

    subtask = serializers.CharField()
    language = serializers.CharField()
    persona = RatingPersonaSerializer(allow_null=True)
    history = RatingTurnSerializer(many=True)
    memory = RatingMemorySerializer(many=True)
    schedule = RatingScheduleSerializer(many=True)
    user_message = serializers.CharField(allow_blank=True)


class RatingContentNoteSerializer(serializers.Serializer):
    level = serializers.CharField(help_text="The risk level: low, medium or high.")
    label = serializers.CharField(help_text="The risk level's name, in your language.")
    text = serializers.CharField(help_text="The note, in your language.")


class RatingItemSerializer(serializers.Serializer):
    key = serializers.UUIDField(
        help_text="The item's key: submit or skip with it (it is also the idempotency key)."
    )
    campaign = serializers.IntegerField(help_text="The campaign's id.")
    scenario = RatingScenarioSerializer()
    left = serializers.CharField(help_text="The response shown on the left.")
    right = serializers.CharField(help_text="The response shown on the right.")
    lease_expires_at = serializers.DateTimeField(
        help_text="Answer before this; afterwards the item may go to someone else."
    )
    content_note = RatingContentNoteSerializer(
        allow_null=True,
        help_text="Set on an item of a risk level: show this before the item, and let the "
        "rater continue or skip with reason `rather_not`. Null: no note.",
    )
    progress = RatingProgressSerializer()


class RatingSideScoresField(serializers.DictField):
    child = serializers.IntegerField(min_value=1, max_value=5)


class RatingGivenSerializer(serializers.Serializer):
    left = RatingSideScoresField(help_text="{dimension: 1–5} for the left response")
    right = RatingSideScoresField(help_text="{dimension: 1–5} for the right response")


class RatingJudgmentSerializer(serializers.Serializer):
    """A stored judgment as its annotator gave it (screen terms), with their progress."""

    key = serializers.UUIDField()
    preference = serializers.IntegerField(
        allow_null=True,
        help_text="-2..2, negative = left better, 0 = tie; null when both are unacceptable",
    )
    both_unacceptable = serializers.BooleanField()
    reasons = serializers.ListField(
        child=serializers.CharField(), help_text="Keys of the reasons, said of the preferred one."
    )
    confidence = serializers.IntegerField(allow_null=True, help_text="1–3, or null")
    ratings = RatingGivenSerializer()
    rationale = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()
    progress = RatingProgressSerializer()


class RatingSkippedSerializer(serializers.Serializer):
    key = serializers.UUIDField()
    reason = serializers.CharField()
    progress = RatingProgressSerializer()


# ---------------------------------------------------------------- requests


class StrictSerializer(serializers.Serializer):
    """Unknown fields are errors: a typo must not silently drop part of a judgment."""

    ignored = frozenset({"csrfmiddlewaretoken"})

    def to_internal_value(self, data):
        if isinstance(data, Mapping):
            unknown = sorted(set(data) - set(self.fields) - self.ignored)
            if unknown:
                raise serializers.ValidationError({key: [_("Unknown field.")] for key in unknown})
        return super().to_internal_value(data)


class RatingSideInputSerializer(StrictSerializer):
    """Optional 1–5 ratings of one response; unknown dimensions are errors."""

    def get_fields(self):
        return {
            name: serializers.IntegerField(
                min_value=1, max_value=5, required=False, allow_null=True, help_text=label
            )
            for name, label in RATING_DIMENSIONS
        }


class RatingRatingsInputSerializer(StrictSerializer):
    """Ratings per side as shown: `left` and `right`."""

    left = RatingSideInputSerializer(required=False)
    right = RatingSideInputSerializer(required=False)


class RatingSubmitSerializer(StrictSerializer):
    """A judgment in screen terms (left/right). Unknown fields are errors."""

    preference = serializers.IntegerField(
        min_value=-2,
        max_value=2,
        required=False,
        allow_null=True,
        help_text="-2 left much better, -1 left better, 0 tie, 1 right better, 2 right much "
        "better; leave out (or null) with both_unacceptable, its own outcome given instead",
    )
    both_unacceptable = serializers.BooleanField(required=False, default=False)
    reasons = serializers.ListField(
        child=serializers.CharField(max_length=40),
        required=False,
        default=list,
        max_length=20,
        help_text="Keys of the campaign's reasons why the preferred response is better "
        "(only with a preference for one response).",
    )
    confidence = serializers.IntegerField(
        min_value=1,
        max_value=3,
        required=False,
        allow_null=True,
        help_text="1 unsure, 2 fairly sure, 3 sure (when the campaign asks_confidence).",
    )
    ratings = RatingRatingsInputSerializer(
        required=False, help_text="Optional 1–5 ratings per side and dimension."
    )
    rationale = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=5000, trim_whitespace=False
    )
    client_time_ms = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=0,
        max_value=2_147_483_647,
        help_text="Visible time on the item, measured by the front end.",
    )

    def validate(self, data):
        unacceptable, preference = data.get("both_unacceptable"), data.get("preference")
        if preference is None and not unacceptable:
            raise serializers.ValidationError(
                {"preference": [_("A preference is required unless both_unacceptable is true.")]}
            )
        return data

    def submission(self) -> queue.Submission:
        data = self.validated_data
        ratings = {
            side: {dim: value for dim, value in values.items() if value is not None}
            for side, values in (data.get("ratings") or {}).items()
        }
        return queue.Submission(
            screen_preference=data.get("preference"),
            both_unacceptable=data["both_unacceptable"],
            ratings=ratings,
            rationale=data["rationale"],
            client_time_ms=data.get("client_time_ms"),
            reasons=data["reasons"],
            confidence=data.get("confidence"),
        )


class RatingSkipSerializer(StrictSerializer):
    """Why you skip the item (one of the campaign's `skip_reasons`), with an optional note."""

    reason = serializers.ChoiceField(
        choices=queue.ALL_SKIP_REASONS,
        help_text="`rather_not`: “I'd rather not”, only on an item with a content note.",
    )
    note = serializers.CharField(required=False, allow_blank=True, default="", max_length=300)


# ---------------------------------------------------------------- helpers


def _error(message: str, code: int) -> Response:
    return Response({"detail": message}, status=code)


def _queue_error(error: queue.QueueError) -> Response:
    if isinstance(error, queue.NotYours):
        return _error(_("No such item."), status.HTTP_404_NOT_FOUND)
    if isinstance(error, queue.NotAdmitted):  # practice first: annotation.qualification
        return Response({"detail": str(error), "phase": error.phase}, status=403)
    if isinstance(error, queue.InvalidAnswer):
        return _error(str(error), status.HTTP_400_BAD_REQUEST)
    return _error(str(error), status.HTTP_409_CONFLICT)


def _item(user, campaign: Campaign, assignment: Assignment) -> dict:
    payload = item_payload(assignment, blind_names(campaign))
    return _written(RatingItemSerializer, {**payload, "progress": _progress(user, campaign)})


def _judgment(user, assignment: Assignment, judgment) -> dict:
    side_of = {"a": "left", "b": "right"} if assignment.left_is_a else {"a": "right", "b": "left"}
    ratings = {side: {} for side in SIDES}
    for pair_key, values in (judgment.ratings or {}).items():
        if pair_key in side_of:
            ratings[side_of[pair_key]] = dict(values)
    return _written(
        RatingJudgmentSerializer,
        {
            "key": assignment.key,
            "preference": None if judgment.both_unacceptable else judgment.screen_preference,
            "both_unacceptable": judgment.both_unacceptable,
            "reasons": list(judgment.reasons or []),
            "confidence": judgment.confidence,
            "ratings": ratings,
            "rationale": judgment.rationale,
            "created_at": judgment.created_at,
            "progress": _progress(user, assignment.comparison.campaign),
        },
    )


def _skipped(user, assignment: Assignment) -> dict:
    return RatingSkippedSerializer(
        {
            "key": assignment.key,
            "reason": assignment.skip_reason.split(":", 1)[0],
            "progress": _progress(user, assignment.comparison.campaign),
        }
    ).data


CAMPAIGN_ID = OpenApiParameter(
    "id", OpenApiTypes.INT, OpenApiParameter.PATH, description="The campaign's id."
)
ITEM_KEY = OpenApiParameter(
    "key", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The item's key (from next)."
)
ERRORS_404 = OpenApiResponse(RatingErrorSerializer, description="No such item for you.")
BAD_BODY = OpenApiResponse(
    OpenApiTypes.OBJECT, description="Invalid body: {field: [messages]} (nested for ratings)."
)


# ---------------------------------------------------------------- views


@summarised("campaign", "campaigns", list="List the open campaigns you rate in")
@method_decorator(transaction.atomic, name="dispatch")  # one transaction per request
class RatingCampaignViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    """The open campaigns you rate in, and their items one at a time."""

    serializer_class = RatingCampaignSerializer
    permission_classes = [IsAnnotator]
    queryset = Campaign.objects.none()
    filter_backends = []
    lookup_value_regex = r"\d+"

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Campaign.objects.none()
        return rating_campaigns(self.request.user).order_by("-created_at", "pk")

    @extend_schema(
        summary="Your current item in a campaign, else the next one",
        parameters=[CAMPAIGN_ID],
        request=None,
        responses={
            200: RatingItemSerializer,
            204: OpenApiResponse(description="Nothing is left for you in this campaign (no body)."),
            403: OpenApiResponse(
                description='Not admitted (yet): {"detail", "phase"}; work through the '
                "practice first (/api/rate/campaigns/{id}/qualification/next/)."
            ),
            404: OpenApiResponse(
                RatingErrorSerializer, description="You do not rate in this campaign."
            ),
            409: OpenApiResponse(
                RatingErrorSerializer, description="The campaign is not open for rating."
            ),
        },
    )
    @action(detail=True, methods=["post"], url_path="next", url_name="next")
    def next_item(self, request, pk=None, **kwargs):
        """Your current item in this campaign (until its lease runs out), else the next one;
        asked again before answering, the same item. 204 when nothing is left for you (a study
        participant: also once their part of the study is over)."""
        campaign = rating_campaign_or_404(request.user, pk)
        if study_flow.stop_url(request, campaign):
            return Response(status=status.HTTP_204_NO_CONTENT)
        try:
            assignment = queue.next_assignment(request.user, campaign)
        except queue.QueueError as error:
            return _queue_error(error)
        if assignment is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response(_item(request.user, campaign, assignment))


@method_decorator(transaction.atomic, name="dispatch")  # one transaction per request
class RatingAssignmentViewSet(viewsets.GenericViewSet):
    """Answering an item: submit a judgment or skip it, addressed by the item's key."""

    permission_classes = [IsAnnotator]
    queryset = Assignment.objects.none()
    filter_backends = []
    lookup_field = "key"
    lookup_value_regex = UUID_PATTERN

    def get_serializer_class(self):
        """The body each action reads (also what an OPTIONS request describes)."""
        return RatingSkipSerializer if self.action == "skip" else RatingSubmitSerializer

    @extend_schema(
        summary="Submit your judgment of an item",
        parameters=[ITEM_KEY],
        request=RatingSubmitSerializer,
        responses={
            200: OpenApiResponse(
                RatingJudgmentSerializer,
                description="The stored judgment; a replay returns the first one unchanged.",
            ),
            400: BAD_BODY,
            404: ERRORS_404,
            409: OpenApiResponse(
                RatingErrorSerializer,
                description="Nothing was stored: the campaign is not open (paused or closed), "
                "the item was skipped or is already full, or its conversation was changed or "
                "withdrawn for review after it was handed out.",
            ),
        },
    )
    @action(detail=True, methods=["post"])
    def submit(self, request, key=None, **kwargs):
        """Store your judgment of this item. Idempotent: the key identifies the submission."""
        user = request.user
        return self._answer(
            request,
            key,
            lambda item, body: _judgment(
                user, item, queue.submit(user, key, body.submission(), item=item)
            ),
        )

    @extend_schema(
        summary="Skip an item, with a reason",
        parameters=[ITEM_KEY],
        request=RatingSkipSerializer,
        responses={
            200: RatingSkippedSerializer,
            400: BAD_BODY,
            404: ERRORS_404,
            409: OpenApiResponse(
                RatingErrorSerializer,
                description="Nothing was stored: the item was already answered, or the campaign "
                "is not open (paused or closed).",
            ),
        },
    )
    @action(detail=True, methods=["post"])
    def skip(self, request, key=None, **kwargs):
        """Skip this item with a reason; it does not count and is not shown to you again."""

        def store(item, body):
            reason, note = body.validated_data["reason"], body.validated_data["note"]
            return _skipped(request.user, queue.skip(request.user, key, reason, note, item=item))

        return self._answer(request, key, store)

    def _answer(self, request, key, store) -> Response:
        """As on the pages: only your own item, answerable in its campaign (404 / 409 before
        the body is read), then `store(item, valid body)` gives the answer's data."""
        try:
            assignment, campaign = queue.rated_item(request.user, key)
            queue.check_open(assignment, campaign, self.action)
            body = _read(self.get_serializer_class(), request.data)
            return Response(store(assignment, body))
        except queue.QueueError as error:
            return _queue_error(error)
