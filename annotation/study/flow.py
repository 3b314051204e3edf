"""Where a participant goes next: the one place that decides it (the pages, the rating page's
gate and the API read it).

    consent ──► qualification (when the campaign requires it) ──► rating ──► done
                     └── failed ──► screened out

A participant is done, with the completion code, when they reached their quota, their time
limit ran out, or nothing is left for them to rate; screened out, with the screen-out code,
when they failed the qualification. Finishing gives back the items they hold at once, so
others need not wait for the leases to run out.

The qualification (issue 22 point 2, `annotation.qualification`) is read through
`qualification_phase` only; its practice page sends a participant who failed it here
(`screened_out_url`).
"""

from django.urls import reverse
from django.utils import timezone

from annotation.models import Assignment
from annotation.progress import progress_for
from annotation.qualification import Phase, phase

from .joining import SESSION_KEY
from .models import Participant

CONSENT, QUALIFICATION, RATING, SCREEN_OUT, DONE = (
    "consent",
    "qualification",
    "rating",
    "screen_out",
    "done",
)


def qualification_phase(participant: Participant) -> str:
    """The participant's phase in their campaign's qualification: qualifying, failed,
    admitted, refresher or not_required (`annotation.qualification.phase`)."""
    return phase(participant.campaign, participant.user)


def qualification_url(participant: Participant) -> str:
    """Where a participant takes the qualification (the annotators' practice page)."""
    return reverse("annotation:qualify", args=[participant.campaign_id])


def next_step(participant: Participant) -> str:
    """After joining: consent, qualification, rating, screen_out or done."""
    if participant.finish_reason:
        return SCREEN_OUT if participant.finish_reason == Participant.Finish.SCREENED_OUT else DONE
    if participant.consented_at is None:
        return CONSENT
    now = qualification_phase(participant)
    if now == Phase.FAILED:
        return SCREEN_OUT
    if now == Phase.QUALIFYING:
        return QUALIFICATION
    return RATING  # admitted, not required, or in a refresher (the rating page sends them)


def time_is_up(participant: Participant, now=None) -> bool:
    limit = participant.link.time_limit_minutes
    if not limit:
        return False
    return ((now or timezone.now()) - participant.joined_at).total_seconds() >= limit * 60


def over_reason(participant: Participant, judged: int) -> str | None:
    """Why the participant's rating is over before the next item (quota, time), if it is."""
    if judged >= participant.link.quota:
        return Participant.Finish.QUOTA
    if time_is_up(participant):
        return Participant.Finish.TIME_LIMIT
    return None


def finish(participant: Participant, reason: str) -> Participant:
    """Record why the participant finished (the first reason stays) and give back their items."""
    if not participant.finish_reason:
        participant.finished_at = timezone.now()
        participant.finish_reason = reason
        participant.save(update_fields=["finished_at", "finish_reason"])
    Assignment.objects.filter(
        annotator=participant.user_id,
        state=Assignment.State.OPEN,
        lease_expires_at__gt=participant.finished_at,
    ).update(lease_expires_at=participant.finished_at)
    return participant


def participant_of(request) -> Participant | None:
    """The study participant logged in in this browser (None for everyone else, read from the
    session without a query)."""
    if not request.session.get(SESSION_KEY):
        return None
    if not hasattr(request, "_study_participant"):
        request._study_participant = (
            Participant.objects.select_related("link", "campaign", "user")
            .filter(user=request.user.pk, pk=request.session[SESSION_KEY].get("participant"))
            .first()
        )
    return request._study_participant


def stop_url(request, campaign, item: dict | None = None) -> str | None:
    """The rating page's gate: for a participant of `campaign`, the study page when they may
    not rate (no consent yet, qualification, screened out) or their rating is over (quota,
    time; `item`, the next item's context, without a key: nothing left); None otherwise, and
    for everyone else (without a query)."""
    participant = participant_of(request)
    if participant is None or participant.campaign_id != campaign.pk:
        return None
    if next_step(participant) != RATING:
        return reverse("study:step")
    reason = over_reason(participant, progress_for(request.user, campaign).done_total)
    if reason is None and item is not None and not item.get("key") and not item.get("closed"):
        reason = Participant.Finish.NO_ITEMS
    if reason is None:
        return None
    finish(participant, reason)
    return reverse("study:step")


def screened_out_url(request, campaign) -> str | None:
    """For the practice page: the study page when a participant of `campaign` failed the
    qualification (their screen-out code), else None."""
    participant = participant_of(request)
    if participant is None or participant.campaign_id != campaign.pk:
        return None
    return reverse("study:step") if next_step(participant) == SCREEN_OUT else None
