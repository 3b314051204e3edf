"""Where an annotator stands in a campaign: the stable `phase` function and a fuller
`standing` for the pages and APIs."""

from dataclasses import dataclass
from datetime import datetime

from .models import Phase, PracticeAttempt, PracticeSet, QualificationRule, QualificationStatus

# The practice set an annotator in this phase works through.
SET_OF_PHASE = {Phase.QUALIFYING: PracticeSet.QUALIFICATION, Phase.REFRESHER: PracticeSet.REFRESHER}


def phase(campaign, user) -> str:
    """The annotator's phase in the campaign, one of (the values of `Phase`):

    - "not_required": the campaign has no qualification; rate right away.
    - "qualifying": must pass the qualification set first (not started yet, under way, or
      failed with an attempt left: `standing(...).can_retry`).
    - "failed": failed the qualification (or a refresher) with no attempt left; final, the
      annotator is not admitted (a crowd participant gets the screen-out code).
    - "admitted": passed; rating. Their votes count.
    - "refresher": was rating, drifted below the campaign's threshold, and must pass the
      refresher set before rating again.

    Cost: nothing when the campaign needs no qualification (`Campaign.requires_qualification`
    is read with the campaign), else one indexed row. Stable: called from other features.
    """
    if not campaign.requires_qualification:
        return Phase.NOT_REQUIRED.value
    stored = (
        QualificationStatus.objects.filter(campaign_id=campaign.pk, annotator_id=user.pk)
        .values_list("phase", flat=True)
        .first()
    )
    return stored or Phase.QUALIFYING.value


@dataclass(frozen=True)
class Standing:
    """The phase with what the pages say about it."""

    phase: str
    since: datetime | None
    reason: str  # why the last change (English, for logs and researchers)
    practice_set: str | None  # the set to work through now, if any
    attempts_used: int  # at that set, in this phase
    attempts_allowed: int
    last_attempt: PracticeAttempt | None  # the latest at that set in this phase

    @property
    def can_retry(self) -> bool:
        """The latest attempt failed and another one is allowed."""
        failed = self.last_attempt is not None and self.last_attempt.passed is False
        return failed and self.attempts_used < self.attempts_allowed


def rule_of(campaign) -> QualificationRule:
    """The campaign's rule (its defaults, unsaved, when none was stored)."""
    return QualificationRule.objects.filter(campaign_id=campaign.pk).first() or QualificationRule(
        campaign_id=campaign.pk
    )


def standing(campaign, user, rule: QualificationRule | None = None) -> Standing:
    """The annotator's phase, since when and why, and their attempts at the current set."""
    if not campaign.requires_qualification:
        return Standing(Phase.NOT_REQUIRED.value, None, "", None, 0, 0, None)
    rule = rule or rule_of(campaign)
    status = QualificationStatus.objects.filter(campaign_id=campaign.pk, annotator=user).first()
    current = status.phase if status else Phase.QUALIFYING.value
    practice_set = SET_OF_PHASE.get(current)
    attempts = PracticeAttempt.objects.filter(campaign_id=campaign.pk, annotator=user)
    if practice_set is not None:  # the tries at this set since the phase began
        since = {"started_at__gte": status.since} if status else {}
        attempts = list(attempts.filter(practice_set=practice_set, **since).order_by("number"))
    else:  # failed for good (or admitted): the latest try, whatever its set
        attempts = list(attempts.order_by("-started_at", "-pk")[:1])
        practice_set = attempts[0].practice_set if current == Phase.FAILED and attempts else None
    return Standing(
        phase=current,
        since=status.since if status else None,
        reason=status.reason if status else "",
        practice_set=practice_set,
        attempts_used=rule.attempts if current == Phase.FAILED else len(attempts),
        attempts_allowed=rule.attempts,
        last_attempt=attempts[-1] if attempts else None,
    )
