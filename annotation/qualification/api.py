"""REST API of the qualification for researchers: the rule, the practice and refresher items
(list, add, import, remove) and each annotator's phase and history. Researchers who manage
the campaign and admins (`managed_campaign_or_404`: any other campaign is a 404); annotators
get 403. The work is done by the modules the page uses (`items`, `monitor`, RuleForm)."""

from collections.abc import Mapping

from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, parser_classes, permission_classes
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response

from h2htalk.parsers import DEFAULT as DEFAULT_PARSERS
from h2htalk.roles import IsResearcher
from h2htalk.serializers import ErrorSerializer, form_errors

from ..access import managed_campaign_or_404
from . import items
from .models import PracticeItem, PracticeSet
from .monitor import annotator_phases
from .phases import rule_of
from .research_forms import RuleForm

RULE_FIELDS = RuleForm._meta.fields


class RuleSerializer(serializers.Serializer):
    requires_qualification = serializers.BooleanField()
    min_accuracy = serializers.FloatField(help_text="Share of exact answers to pass (0–1).")
    min_direction = serializers.FloatField(
        allow_null=True, help_text="Optional share of answers pointing the known way (0–1)."
    )
    attempts = serializers.IntegerField(help_text="Tries at each set; 1 = no retry.")
    window = serializers.IntegerField(help_text="Latest judgments the drift watch looks at.")
    min_in_window = serializers.IntegerField(help_text="Judgments needed before it pauses.")
    min_gold_accuracy = serializers.FloatField(allow_null=True)
    min_consensus = serializers.FloatField(allow_null=True)


class PracticeItemSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    practice_set = serializers.ChoiceField(choices=PracticeSet.choices)
    scenario = serializers.IntegerField(source="scenario_id")
    response_a = serializers.IntegerField(source="response_a_id")
    response_b = serializers.IntegerField(source="response_b_id")
    companion_a = serializers.CharField(source="response_a.companion.name")
    companion_b = serializers.CharField(source="response_b.companion.name")
    known_preference = serializers.IntegerField(help_text="-2 A much better … 2 B much better.")
    explanation = serializers.CharField()


class PracticeItemInputSerializer(serializers.Serializer):
    practice_set = serializers.ChoiceField(choices=PracticeSet.choices, required=False)
    comparison = serializers.IntegerField(required=False, help_text="A comparison's id …")
    response_a = serializers.IntegerField(required=False, help_text="… or two responses' ids.")
    response_b = serializers.IntegerField(required=False)
    known_preference = serializers.IntegerField(help_text="Keyed by A and B as given, -2 … 2.")
    explanation = serializers.CharField()


class EventSerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    kind = serializers.CharField(help_text="started, passed, failed or paused.")
    text = serializers.CharField()
    data = serializers.DictField(help_text="The figures: set, attempt, correct, total, …")


class AnnotatorPhaseSerializer(serializers.Serializer):
    annotator = serializers.CharField()
    in_pool = serializers.BooleanField()
    phase = serializers.CharField(
        help_text="not_required, qualifying, failed, admitted or refresher."
    )
    since = serializers.DateTimeField(allow_null=True)
    history = EventSerializer(many=True)


def _rule(campaign) -> dict:
    rule = rule_of(campaign)
    data = {name: getattr(rule, name) for name in RULE_FIELDS}
    return RuleSerializer({**data, "requires_qualification": campaign.requires_qualification}).data


@extend_schema(methods=["GET"], summary="A campaign's qualification rule", responses=RuleSerializer)
@extend_schema(
    methods=["PATCH"],
    summary="Change a campaign's qualification rule (the given fields)",
    request=RuleSerializer,
    responses={200: RuleSerializer, 400: OpenApiResponse(description="{field: [messages]}")},
)
@api_view(["GET", "PATCH"])
@permission_classes([IsResearcher])
def rule(request, campaign_id: int):
    """Whether the campaign requires qualification, its pass rule and its drift watch."""
    campaign = managed_campaign_or_404(request.user, campaign_id)
    if request.method == "PATCH":
        if not isinstance(request.data, Mapping):
            return Response({"detail": _("Send the rule as one JSON object.")}, status=400)
        data = {**_rule(campaign), **request.data}
        data = {name: "" if value is None else value for name, value in data.items()}
        form = RuleForm(data, instance=rule_of(campaign))
        if not form.is_valid():
            return Response(form_errors(form), status=status.HTTP_400_BAD_REQUEST)
        form.save_for(campaign)
    return Response(_rule(campaign))


def _items(campaign):
    return PracticeItem.objects.filter(campaign=campaign).select_related(
        "response_a__companion", "response_b__companion"
    )


@extend_schema(
    methods=["GET"],
    summary="A campaign's practice items",
    responses=PracticeItemSerializer(many=True),
)
@extend_schema(
    methods=["POST"],
    summary="Add a practice item",
    request=PracticeItemInputSerializer,
    responses={201: PracticeItemSerializer, 400: OpenApiResponse(description="{field: msg}")},
)
@api_view(["GET", "POST"])
@permission_classes([IsResearcher])
def practice_items(request, campaign_id: int):
    """The practice items of both sets; POST adds one (from a comparison of the campaign, or
    two responses of one scenario) with its known answer and explanation."""
    campaign = managed_campaign_or_404(request.user, campaign_id)
    if request.method == "POST":
        if not isinstance(request.data, dict):
            return Response({"detail": "Send one JSON object."}, status=400)
        try:
            item = items.add_item(campaign, dict(request.data))
        except items.ItemInvalid as invalid:
            errors = {field: [message] for field, message in invalid.errors.items()}
            return Response(errors, status=status.HTTP_400_BAD_REQUEST)
        return Response(
            PracticeItemSerializer(_items(campaign).get(pk=item.pk)).data,
            status=status.HTTP_201_CREATED,
        )
    return Response(PracticeItemSerializer(_items(campaign).order_by("pk"), many=True).data)


@extend_schema(
    methods=["GET"],
    summary="A practice item",
    responses={200: PracticeItemSerializer, 404: ErrorSerializer},
)
@extend_schema(
    methods=["DELETE"],
    summary="Remove a practice item",
    request=None,
    responses={204: None, 404: ErrorSerializer},
)
@api_view(["GET", "DELETE"])
@permission_classes([IsResearcher])
def practice_item(request, campaign_id: int, item_id: int):
    campaign = managed_campaign_or_404(request.user, campaign_id)
    if request.method == "GET":
        item = _items(campaign).filter(pk=item_id).first()
        if item is None:
            return Response({"detail": "No such practice item."}, status=404)
        return Response(PracticeItemSerializer(item).data)
    if not items.delete_item(campaign, item_id):
        return Response({"detail": "No such practice item."}, status=404)
    return Response(status=status.HTTP_204_NO_CONTENT)


class ImportSerializer(serializers.Serializer):
    file = serializers.FileField(help_text="JSON lines: one practice item per line.")


@extend_schema(
    summary="Import practice items from JSON lines (all or none)",
    request={"multipart/form-data": ImportSerializer},
    responses={
        201: OpenApiResponse(description='{"imported": n}'),
        400: OpenApiResponse(description='{"problems": ["line N, field: message", …]}'),
    },
)
@api_view(["POST"])
@parser_classes([MultiPartParser, FormParser, *DEFAULT_PARSERS])
@permission_classes([IsResearcher])
def import_practice_items(request, campaign_id: int):
    campaign = managed_campaign_or_404(request.user, campaign_id)
    upload = request.FILES.get("file")
    if upload is None:
        return Response({"problems": ["file: is required"]}, status=400)
    try:
        n = items.import_items(campaign, upload)
    except items.ImportRefused as refused:
        return Response({"problems": refused.problems}, status=400)
    return Response({"imported": n}, status=status.HTTP_201_CREATED)


@extend_schema(
    summary="Each annotator's qualification phase and history",
    responses=AnnotatorPhaseSerializer(many=True),
)
@api_view(["GET"])
@permission_classes([IsResearcher])
def annotator_phases_view(request, campaign_id: int):
    """Per annotator: the phase (as `annotation.qualification.phase` tells it), since when,
    and every event (attempt started, passed, failed, paused) with its time and figures."""
    campaign = managed_campaign_or_404(request.user, campaign_id)
    return Response(AnnotatorPhaseSerializer(annotator_phases(campaign), many=True).data)
