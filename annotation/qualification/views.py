"""The annotator's practice pages: the next practice item, the feedback after each answer
(known answer and the researcher's explanation), and the result with its retry.

Blind as the rating page: items are addressed by their answer's random key, shown with
`practice.item_payload` (names hidden, sides drawn per answer); the known answer and the
explanation are rendered only by the feedback page, for an answered item of the user's own.
"""

from django.contrib import messages
from django.db import transaction
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from h2htalk.roles import ANNOTATOR, role_required

from ..access import rating_campaign_or_404
from ..blinding import blind_names, blind_text
from ..forms import PREFERENCE_LABELS
from ..study import flow as study_flow
from . import practice
from .forms import PracticeForm
from .models import Phase, QualificationEvent
from .phases import rule_of


def _texts(campaign) -> dict:
    names = blind_names(campaign)
    return {"campaign": campaign, "campaign_name": blind_text(campaign.name, names)}


@transaction.atomic
@role_required(ANNOTATOR)
def qualify(request, campaign_id):
    """The practice: the next item of the annotator's set, or the result of their attempt."""
    campaign = rating_campaign_or_404(request.user, campaign_id)
    if not campaign.requires_qualification:
        return redirect("annotation:rate", campaign_id=campaign.pk)
    screened_out = study_flow.screened_out_url(request, campaign)  # a crowd participant
    if screened_out:
        return redirect(screened_out)
    return _page(request, campaign, PracticeForm())


def _page(request, campaign, form, status: int = 200):
    turn = practice.turn(campaign, request.user)
    context = {**_texts(campaign), "turn": turn, "form": form, "phase": turn.standing.phase}
    if turn.answer is not None:
        context["item"] = practice.item_payload(turn.answer, practice.practice_names(campaign))
    attempt = turn.standing.last_attempt
    if attempt is not None and attempt.passed is False:
        context["why"] = practice.result_reason(attempt, rule_of(campaign))
    if turn.standing.phase == Phase.REFRESHER:
        context["paused"] = pause_text(campaign, request.user)
    return render(request, "annotation/qualify.html", context, status=status)


def pause_text(campaign, user) -> str:
    """Why the annotator was sent to the refresher, from their latest pause."""
    event = (
        QualificationEvent.objects.filter(
            campaign_id=campaign.pk, annotator=user, kind=QualificationEvent.Kind.PAUSED
        )
        .order_by("-created_at", "-pk")
        .first()
    )
    if event is None:
        return ""
    data = event.data
    measure = _("gold accuracy") if data.get("measure") == "gold" else _("agreement with others")
    return _("Your %(measure)s was %(value)s over your last %(n)s answers (%(needed)s needed).") % {
        "measure": measure,
        "value": f"{data.get('value', 0):.0%}",
        "n": data.get("n", 0),
        "needed": f"{data.get('threshold', 0):.0%}",
    }


def _own(request, key):
    try:
        answer = practice.owned_answer(request.user, key)
    except practice.NotYours as error:
        raise Http404(_("No such item.")) from error
    campaign = rating_campaign_or_404(request.user, answer.attempt.campaign_id)
    return answer, campaign


@require_POST
@transaction.atomic
@role_required(ANNOTATOR)
def answer(request, practice_key):
    key = practice_key
    """Store the practice answer (once; a replay shows the same feedback), then its feedback."""
    stored, campaign = _own(request, key)
    form = PracticeForm(request.POST)
    if stored.answered_at is None and not form.is_valid():
        return _page(request, campaign, form, status=400)
    if stored.answered_at is None:
        try:
            practice.answer(campaign, request.user, key, form.cleaned_data["preference"])
        except practice.PracticeError as error:
            messages.error(request, str(error))
            return redirect("annotation:qualify", campaign_id=campaign.pk)
    return redirect("annotation:practice_feedback", practice_key=key)


@role_required(ANNOTATOR)
def feedback(request, practice_key):
    key = practice_key
    """After an answer: right or not, the expected answer and the researcher's explanation."""
    stored, campaign = _own(request, key)
    if stored.answered_at is None:
        return redirect("annotation:qualify", campaign_id=campaign.pk)
    names = practice.practice_names(campaign)
    result = practice.feedback(stored, names)
    context = {
        **_texts(campaign),
        "item": practice.item_payload(stored, names),
        "result": result,
        "given_label": PREFERENCE_LABELS[result["given"]],
        "expected_label": PREFERENCE_LABELS[result["expected"]],
        "position": stored.order,
        "total": stored.attempt.total,
        "practice_set": stored.attempt.practice_set,
    }
    return render(request, "annotation/practice_feedback.html", context)


@require_POST
@transaction.atomic
@role_required(ANNOTATOR)
def retry(request, campaign_id):
    """Start another attempt after a failed one (when the campaign allows it)."""
    campaign = rating_campaign_or_404(request.user, campaign_id)
    try:
        practice.retry(campaign, request.user)
    except practice.PracticeError as error:
        messages.error(request, str(error))
    return redirect("annotation:qualify", campaign_id=campaign.pk)
