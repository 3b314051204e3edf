"""REST API of a campaign's study link, for the researchers who manage the campaign: read and
set it (through the page's form, so both check the same), rotate its token, close or open it,
and list its participants with what to pay them (`export.participant_rows`)."""

from collections.abc import Mapping

from django.db import transaction
from django.forms.models import model_to_dict
from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.response import Response

from h2htalk.roles import IsResearcher
from h2htalk.serializers import ErrorSerializer, form_errors

from ..access import managed_campaign_or_404
from . import export, links
from .forms import StudyLinkForm
from .models import StudyLink


class StudyLinkSerializer(serializers.Serializer):
    url = serializers.CharField(read_only=True, help_text="The address to publish.")
    token = serializers.CharField(read_only=True)
    is_open = serializers.BooleanField(help_text="false: joining answers 404.")
    platform = serializers.ChoiceField(choices=StudyLink.Platform.choices)
    participant_param = serializers.CharField()
    study_param = serializers.CharField(allow_blank=True)
    session_param = serializers.CharField(allow_blank=True)
    completion_code = serializers.CharField()
    completion_url = serializers.CharField(allow_blank=True)
    screenout_code = serializers.CharField(allow_blank=True)
    screenout_url = serializers.CharField(allow_blank=True)
    quota = serializers.IntegerField()
    time_limit_minutes = serializers.IntegerField()
    consent = serializers.CharField()
    consent_zh_hans = serializers.CharField(allow_blank=True)
    instructions = serializers.CharField(allow_blank=True)
    instructions_zh_hans = serializers.CharField(allow_blank=True)
    rotated_at = serializers.DateTimeField(read_only=True, allow_null=True)


class ParticipantSerializer(serializers.Serializer):
    participant_id = serializers.CharField(help_text="As the platform gave it.")
    study_id = serializers.CharField()
    session_id = serializers.CharField()
    account = serializers.CharField(help_text="The participant's username here (random).")
    joined_at = serializers.DateTimeField()
    consented_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    finish_reason = serializers.CharField(help_text="quota, no_items, time_limit, screened_out")
    items = serializers.IntegerField(help_text="Judgments made.")
    skipped = serializers.IntegerField()
    gold_items = serializers.IntegerField()
    gold_correct = serializers.IntegerField()
    time_on_task_seconds = serializers.FloatField(help_text="Summed time on the items.")
    elapsed_seconds = serializers.FloatField(allow_null=True, help_text="Joining to the end.")
    qualification = serializers.CharField()


def _link_data(request, link: StudyLink) -> dict:
    base = request.build_absolute_uri("/")[:-1]
    data = {**model_to_dict(link), "token": link.token, "rotated_at": link.rotated_at}
    return StudyLinkSerializer({**data, "url": links.published_url(link, base)}).data


def _link_or_404(campaign):
    return StudyLink.objects.filter(campaign=campaign).first()


NO_LINK = OpenApiResponse(ErrorSerializer, description="The campaign has no study link yet.")


@extend_schema(
    methods=["GET"],
    summary="A campaign's study link",
    responses={200: StudyLinkSerializer, 404: NO_LINK},
)
@extend_schema(
    methods=["PUT", "PATCH"],
    summary="Set up or change a campaign's study link",
    request=StudyLinkSerializer,
    responses={200: StudyLinkSerializer, 400: OpenApiResponse(description="{field: [messages]}")},
)
@api_view(["GET", "PUT", "PATCH"])
@permission_classes([IsResearcher])
def study_link(request, campaign_id: int):
    """The campaign's study link; PUT sets every setting, PATCH only those given.
    `is_open: false` closes the link (joining answers 404), `true` opens it again."""
    campaign = managed_campaign_or_404(request.user, campaign_id)
    link = _link_or_404(campaign)
    if request.method == "GET":
        if link is None:
            return Response({"detail": NO_LINK.description}, status=status.HTTP_404_NOT_FOUND)
        return Response(_link_data(request, link))
    if not isinstance(request.data, Mapping):
        return Response({"detail": _("Send the settings as one JSON object.")}, status=400)
    data = dict(model_to_dict(link)) if link and request.method == "PATCH" else {}
    data.update(request.data.items())
    is_open = data.pop("is_open", None)
    if is_open is not None and not isinstance(is_open, bool):
        return Response({"is_open": [_("Must be true or false.")]}, status=400)
    form = StudyLinkForm(data, instance=link)
    if not form.is_valid():
        return Response(form_errors(form), status=status.HTTP_400_BAD_REQUEST)
    form.instance.campaign = campaign
    with transaction.atomic():
        link = form.save()
        if is_open is not None:
            links.set_open(link, is_open)
    return Response(_link_data(request, link))


def _change(request, campaign_id: int, change):
    campaign = managed_campaign_or_404(request.user, campaign_id)
    link = _link_or_404(campaign)
    if link is None:
        return Response({"detail": NO_LINK.description}, status=status.HTTP_404_NOT_FOUND)
    return Response(_link_data(request, change(link)))


CHANGED = {200: StudyLinkSerializer, 404: NO_LINK}


@extend_schema(
    summary="Rotate a study link's token (the old link answers 404)",
    request=None,
    responses=CHANGED,
)
@api_view(["POST"])
@permission_classes([IsResearcher])
def study_rotate(request, campaign_id: int):
    return _change(request, campaign_id, links.rotate)


@extend_schema(
    summary="A study's participants, with what to pay them",
    responses={200: ParticipantSerializer(many=True), 404: NO_LINK},
)
@api_view(["GET"])
@permission_classes([IsResearcher])
def study_participants(request, campaign_id: int):
    """Every participant of the campaign's study link, in the order they joined."""
    campaign = managed_campaign_or_404(request.user, campaign_id)
    link = _link_or_404(campaign)
    if link is None:
        return Response({"detail": NO_LINK.description}, status=status.HTTP_404_NOT_FOUND)
    return Response(ParticipantSerializer(export.participant_rows(link), many=True).data)
