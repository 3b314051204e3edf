"""The participant's pages: joining through the study link, consent and instructions, and the
page with their completion or screen-out code. Which page comes next is `flow.next_step`'s."""

from django.conf import settings
from django.contrib.auth import logout
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils import timezone, translation
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from h2htalk.roles import ANNOTATOR, role_required

from ..markdown import render_markdown
from . import flow, joining
from .links import open_link_or_none
from .models import Participant


@require_GET
def join(request, link_token):
    """The study link: create or resume the participant, log them in, then their next step."""
    link = open_link_or_none(link_token)
    if link is None:
        raise Http404(_("This study link does not exist or is closed."))
    try:
        joining.join(request, link)
    except joining.JoinRefused as refused:
        context = {"message": str(refused), "status": refused.status}
        return render(request, "study/refused.html", context, status=refused.status)
    return redirect("study:step")


def _participant(request) -> Participant:
    participant = flow.participant_of(request)
    if participant is None:
        raise PermissionDenied(_("This page is for study participants, through their link."))
    return participant


@role_required(ANNOTATOR)
def step(request):
    """Wherever the participant is: consent, qualification, rating, or their code."""
    participant = _participant(request)
    where = flow.next_step(participant)
    if where == flow.CONSENT:
        consent, instructions, language = participant.link.texts_in(translation.get_language())
        context = {
            "consent": render_markdown(consent),
            "instructions": render_markdown(instructions),
            "texts_language": language,
            "quota": participant.link.quota,
            "minutes": participant.link.time_limit_minutes,
        }
        return render(request, "study/consent.html", context)
    if where == flow.QUALIFICATION:
        return redirect(flow.qualification_url(participant))
    if where == flow.RATING:
        return redirect("annotation:rate", campaign_id=participant.campaign_id)
    if where == flow.SCREEN_OUT:
        flow.finish(participant, Participant.Finish.SCREENED_OUT)
    return _code_page(request, participant)


def _code_page(request, participant: Participant):
    link, screened = participant.link, participant.finish_reason == Participant.Finish.SCREENED_OUT
    context = {
        "screened_out": screened,
        "code": link.screenout_code if screened else link.completion_code,
        "url": link.screenout_url if screened else link.completion_url,
        "seconds": settings.STUDY_REDIRECT_SECONDS,
        "reason": participant.get_finish_reason_display(),
    }
    return render(request, "study/finished.html", context)


@require_POST
@role_required(ANNOTATOR)
def consent(request):
    """The participant agrees (then their next step) or does not (logged out, nothing more)."""
    participant = _participant(request)
    if request.POST.get("decision") != "agree":
        logout(request)
        return render(request, "study/declined.html")
    if participant.consented_at is None:
        participant.consented_at = timezone.now()
        participant.save(update_fields=["consented_at"])
    return redirect("study:step")
