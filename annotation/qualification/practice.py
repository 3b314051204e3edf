"""Working through a practice set: attempts, answers, feedback and the pass rule.

An attempt holds every item of the set in an order drawn for it, each with its own random side
layout (`left_is_a`), addressed by a random key: the page shows an item as the rating page
does (blind: no companion, run or response is named, names in the texts are hidden) and never
the known answer or the explanation before the answer is stored. An answer is stored once (a
replay returns it); the last answer of an attempt applies the pass rule and moves the phase.
"""

import random
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from ..blinding import blind_names, blind_text, scenario_payload
from .models import (
    Phase,
    PracticeAnswer,
    PracticeAttempt,
    PracticeItem,
    QualificationEvent,
    QualificationStatus,
)
from .phases import SET_OF_PHASE, Standing, rule_of, standing

_random = random.SystemRandom()
# What a practice item shows, read with its answer.
ITEM_RELATED = ("item__scenario__persona", "item__response_a", "item__response_b")


class PracticeError(Exception):
    """A problem the annotator should read (not a server error)."""


class NotYours(PracticeError):
    """No such practice item for this user (shown as a 404, like a missing one)."""


@dataclass
class Turn:
    """What the qualification page shows: the standing, the next item to answer (None when
    the attempt is over or none can start), and how far the attempt is."""

    standing: Standing
    answer: PracticeAnswer | None
    position: int  # 1-based position of `answer` in its attempt
    total: int
    no_items: bool  # the set to work through has no items yet


def sign(value: int) -> int:
    return (value > 0) - (value < 0)


def _status_locked(campaign, user) -> QualificationStatus:
    """The annotator's status row, made when first needed, locked until the transaction ends
    (so two tabs cannot start two attempts)."""
    QualificationStatus.objects.get_or_create(
        campaign_id=campaign.pk,
        annotator=user,
        defaults={"phase": Phase.QUALIFYING, "since": timezone.now()},
    )
    return QualificationStatus.objects.select_for_update().get(
        campaign_id=campaign.pk, annotator=user
    )


def _record(campaign, user, kind: str, **data) -> None:
    QualificationEvent.objects.create(campaign_id=campaign.pk, annotator=user, kind=kind, data=data)


def _start(campaign, user, practice_set: str, number: int) -> PracticeAttempt | None:
    items = list(PracticeItem.objects.filter(campaign_id=campaign.pk, practice_set=practice_set))
    if not items:
        return None
    _random.shuffle(items)
    attempt = PracticeAttempt.objects.create(
        campaign_id=campaign.pk,
        annotator=user,
        practice_set=practice_set,
        number=number,
        total=len(items),
    )
    PracticeAnswer.objects.bulk_create(
        PracticeAnswer(attempt=attempt, item=item, order=n, left_is_a=_random.random() < 0.5)
        for n, item in enumerate(items, start=1)
    )
    _record(campaign, user, QualificationEvent.Kind.STARTED, set=practice_set, attempt=number)
    return attempt


def turn(campaign, user) -> Turn:
    """The annotator's next practice item, starting their first attempt at the set of their
    phase when they have none in it yet (a failed attempt is retried only on `retry`)."""
    with transaction.atomic():
        now = standing(campaign, user)
        if now.phase not in SET_OF_PHASE:
            return Turn(now, None, 0, 0, False)
        attempt = now.last_attempt
        if attempt is None:
            _status_locked(campaign, user)
            now = standing(campaign, user)
            attempt = now.last_attempt or _start(campaign, user, now.practice_set, 1)
            if attempt is None:
                return Turn(now, None, 0, 0, True)
            now = standing(campaign, user)
        answers = list(attempt.answers.select_related(*ITEM_RELATED))
        pending = [a for a in answers if a.answered_at is None]
        if not pending:
            return Turn(now, None, len(answers), len(answers), False)
        return Turn(now, pending[0], pending[0].order, len(answers), False)


def retry(campaign, user) -> PracticeAttempt:
    """Start another attempt after a failed one, when the campaign allows one more."""
    with transaction.atomic():
        _status_locked(campaign, user)
        now = standing(campaign, user)
        if now.phase not in SET_OF_PHASE or not now.can_retry:
            raise PracticeError(_("There is no other attempt to start."))
        attempt = _start(campaign, user, now.practice_set, now.attempts_used + 1)
        if attempt is None:
            raise PracticeError(_("This practice set has no items yet."))
        return attempt


def owned_answer(user, key, lock: bool = False) -> PracticeAnswer:
    """The user's practice answer by key, with its item and attempt (NotYours otherwise)."""
    rows = PracticeAnswer.objects.select_related("attempt", *ITEM_RELATED)
    if lock:
        rows = rows.select_for_update(of=("self",))
    try:
        answer = rows.filter(key=key, attempt__annotator=user).first()
    except Exception as error:  # a malformed key
        raise NotYours(_("No such item.")) from error
    if answer is None:
        raise NotYours(_("No such item."))
    return answer


def answer(campaign, user, key, screen_preference: int) -> PracticeAnswer:
    """Store the answer (screen terms: negative = left better); a replay returns the stored
    one unchanged. The attempt's last answer applies the pass rule (`_finish`)."""
    if screen_preference not in (-2, -1, 0, 1, 2):
        raise PracticeError(_("Choose a preference from A much better to B much better."))
    with transaction.atomic():
        _status_locked(campaign, user)  # one answer of an attempt at a time
        stored = owned_answer(user, key, lock=True)
        if stored.attempt.campaign_id != campaign.pk:
            raise NotYours(_("No such item."))
        if stored.answered_at is not None:
            return stored
        if stored.attempt.finished_at is not None:
            raise PracticeError(_("This practice attempt is over."))
        stored.screen_preference = screen_preference
        stored.preference = screen_preference if stored.left_is_a else -screen_preference
        stored.answered_at = timezone.now()
        stored.save(update_fields=["screen_preference", "preference", "answered_at"])
        if not stored.attempt.answers.filter(answered_at__isnull=True).exists():
            _finish(campaign, user, stored.attempt)
        return stored


def passes(rule, total: int, correct: int, same_direction: int) -> bool:
    """The pass rule: accuracy (exact answers) and, when set, direction agreement."""
    if total == 0:
        return False
    if correct / total < rule.min_accuracy - 1e-9:
        return False
    return rule.min_direction is None or same_direction / total >= rule.min_direction - 1e-9


def _finish(campaign, user, attempt: PracticeAttempt) -> None:
    rule = rule_of(campaign)
    rows = list(attempt.answers.select_related("item").only("preference", "item__known_preference"))
    attempt.total = len(rows)
    attempt.correct = sum(row.preference == row.item.known_preference for row in rows)
    attempt.same_direction = sum(
        sign(row.preference) == sign(row.item.known_preference) for row in rows
    )
    attempt.passed = passes(rule, attempt.total, attempt.correct, attempt.same_direction)
    attempt.finished_at = timezone.now()
    attempt.save()
    figures = {
        "set": attempt.practice_set,
        "attempt": attempt.number,
        "total": attempt.total,
        "correct": attempt.correct,
        "same_direction": attempt.same_direction,
        "min_accuracy": rule.min_accuracy,
        "min_direction": rule.min_direction,
    }
    status = QualificationStatus.objects.get(campaign_id=campaign.pk, annotator=user)
    if attempt.passed:
        status.phase, status.reason = Phase.ADMITTED, ""
        status.since = attempt.finished_at
        _record(campaign, user, QualificationEvent.Kind.PASSED, **figures)
    else:
        final = attempt.number >= rule.attempts
        if final:
            status.phase, status.since = Phase.FAILED, attempt.finished_at
        with translation.override("en"):  # the stored reason is a log line, in English
            status.reason = result_reason(attempt, rule)
        _record(campaign, user, QualificationEvent.Kind.FAILED, retry=not final, **figures)
    status.save()


def result_reason(attempt: PracticeAttempt, rule) -> str:
    """Why an attempt did not pass, in the page's language."""
    parts = [
        _("%(correct)s of %(total)s answers were the expected one (%(needed)s needed).")
        % {
            "correct": attempt.correct,
            "total": attempt.total,
            "needed": _percent(rule.min_accuracy),
        }
    ]
    if rule.min_direction is not None:
        parts.append(
            _("%(same)s of %(total)s pointed the same way as the expected one (%(needed)s needed).")
            % {
                "same": attempt.same_direction,
                "total": attempt.total,
                "needed": _percent(rule.min_direction),
            }
        )
    return " ".join(parts)


def _percent(share: float) -> str:
    return f"{share:.0%}"


def practice_names(campaign) -> list[str]:
    """Names that would unblind a practice item: the campaign's (`blind_names`) and the
    companions and runs of its practice items' responses."""
    names = set(blind_names(campaign))
    rows = PracticeItem.objects.filter(campaign_id=campaign.pk)
    for side in ("response_a", "response_b"):
        for values in rows.values_list(
            f"{side}__companion__name", f"{side}__companion__model_id", f"{side}__run__name"
        ):
            names.update(v.strip() for v in values if v and len(v.strip()) >= 2)
    return sorted(names, key=len, reverse=True)


def item_payload(answer: PracticeAnswer, names: list[str]) -> dict:
    """The practice item as the annotator sees it before answering: as a rating item (key,
    scenario, left and right texts, names hidden), never the known answer or explanation."""
    from h2htalk.display import subtask_label

    item = answer.item
    a, b = item.response_a.text, item.response_b.text
    left, right = (a, b) if answer.left_is_a else (b, a)
    return {
        "key": answer.key,
        "subtask_label": subtask_label(item.scenario.subtask),
        "scenario": scenario_payload(item.scenario),
        "left": blind_text(left, names),
        "right": blind_text(right, names),
    }


def feedback(answer: PracticeAnswer, names: list[str]) -> dict:
    """After the answer: what was given and expected (screen terms), whether it was right, and
    the researcher's explanation (names hidden)."""
    known = answer.item.known_preference
    expected = known if answer.left_is_a else -known
    return {
        "given": answer.screen_preference,
        "expected": expected,
        "correct": answer.screen_preference == expected,
        "same_direction": sign(answer.screen_preference) == sign(expected),
        "explanation": blind_text(answer.item.explanation, names),
    }
