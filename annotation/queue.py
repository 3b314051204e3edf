"""The rating queue: fair, concurrency-safe hand-out of comparisons, and idempotent submission.

next_assignment locks candidate comparisons with SELECT … FOR UPDATE SKIP LOCKED, so annotators
pressing "next" at once never wait on each other and never both take the last slot of a
comparison. A comparison is handed out only while judgments + live leases < k; submit locks
the comparison row and re-checks judgments < k, so no comparison ever gets more than k
judgments even when a lease expired and its slot went to someone else.
"""

import random
import secrets
import time
from dataclasses import dataclass

from django.db import transaction
from django.db.models import (
    Count,
    Exists,
    F,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
)
from django.db.models.functions import Coalesce
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, pgettext

from scenarios.models import Revision, Scenario
from scenarios.services import CONTENT_FIELDS

from . import care
from .blinding import ITEM_RELATED
from .candidates import SHUFFLE_KEY_BITS, WINDOW_AFTER, claim, locked_batch
from .models import RATING_DIMENSIONS, Assignment, Campaign, Comparison, Judgment
from .pairing import adaptive_top_up
from .progress import (
    count_hand_out,
    count_judgment,
    is_excluded,
    items_held_below_k,
    judged_by_others,
)
from .qualification import Phase, phase
from .qualification.watch import after_judgment
from .rating_details import DetailError, clean_details
from .rating_reads import rated_assignment
from .recording import store
from .signals import comparison_filled

SKIP_REASONS = [
    ("cannot_judge", gettext_lazy("I cannot judge this one")),
    ("language", gettext_lazy("I do not read this language well enough")),
    ("offensive", gettext_lazy("Disturbing or offensive content")),
    ("broken", gettext_lazy("Something is broken or missing")),
    ("other", gettext_lazy("Other")),
]
# What an item with a content note may also be skipped with (annotation.care): no penalty.
ALL_SKIP_REASONS = [*SKIP_REASONS, (care.RATHER_NOT, care.RATHER_NOT_LABEL)]
DIMENSIONS = [name for name, _ in RATING_DIMENSIONS]


class QueueError(Exception):
    """A problem the annotator should read (not a server error)."""


class NotYours(QueueError):
    pass


class CampaignNotOpen(QueueError):
    """The campaign is paused, closed (or back in draft): nothing is handed out or stored."""


class InvalidAnswer(QueueError):
    """The answer does not fit the campaign (its reasons, confidence, the one outcome); the
    item stays open to be answered again."""


class ItemChanged(QueueError):
    """The item's scenario was edited or withdrawn from the approved set after it was issued."""


class NotAdmitted(QueueError):
    """The campaign requires qualification and the annotator is not admitted (now): they work
    through a practice set first (`annotation.qualification`). `phase` says which case."""

    def __init__(self, phase: str):
        self.phase = phase
        super().__init__(str(NOT_ADMITTED.get(phase, NOT_ADMITTED[Phase.QUALIFYING])))


NOT_ADMITTED = {
    Phase.QUALIFYING: gettext_lazy(
        "This campaign asks for a short practice first: your votes count once you pass it."
    ),
    Phase.REFRESHER: gettext_lazy(
        "Your recent answers drifted from the expected ones, so rating is paused: a short "
        "refresher first, then you rate again."
    ),
    Phase.FAILED: gettext_lazy(
        "You did not pass this campaign's practice, so you cannot rate in it."
    ),
}


NOT_OPEN = gettext_lazy("This campaign is not open for rating right now.")


def not_open_message(campaign: Campaign, action: str = "submit") -> str:
    """What an annotator reads after submitting or skipping in a campaign that is not open."""
    states = {
        "draft": pgettext("campaign state", "back in draft"),
        "paused": pgettext("campaign state", "paused"),
        "closed": pgettext("campaign state", "closed"),
    }
    state = states.get(campaign.state, campaign.state)
    what = _("the skip") if action == "skip" else _("your answer")
    return _(
        "This campaign is not open for rating right now (it is %(state)s), so %(what)s was "
        "not saved."
    ) % {"state": state, "what": what}


ALREADY = {
    Assignment.State.OPEN: gettext_lazy("This item was already open."),
    Assignment.State.SUBMITTED: gettext_lazy("This item was already submitted."),
    Assignment.State.SKIPPED: gettext_lazy("This item was already skipped."),
    Assignment.State.REJECTED: gettext_lazy(
        "This item was already rejected (comparison already full)."
    ),
}


def already_message(state: str) -> str:
    """What an annotator reads when the item they answer was closed already."""
    return str(ALREADY[state])


def _not_open(campaign: Campaign, action: str) -> CampaignNotOpen:
    return CampaignNotOpen(not_open_message(campaign, action))


@dataclass
class Submission:
    screen_preference: int | None  # None only with both_unacceptable (rating_details)
    both_unacceptable: bool = False
    ratings: dict | None = None  # {"left"|"right": {dimension: 1..5}}
    rationale: str = ""
    client_time_ms: int | None = None
    reasons: list[str] | None = None  # keys of the campaign's reason_choices
    confidence: int | None = None  # 1..3, when the campaign asks


def _content_changed_since(issued_at) -> Exists:
    """Whether the scenario (OuterRef "pk") got a content-changing revision at or after
    `issued_at` (an expression or a time)."""
    return Exists(
        Revision.objects.filter(
            scenario=OuterRef("pk"),
            created_at__gte=issued_at,
            changes__has_any_keys=list(CONTENT_FIELDS),
        )
    )


def current_assignment(user, campaign: Campaign) -> Assignment | None:
    """The annotator's unexpired open item in this campaign, if any (reloading shows it again).

    An item whose scenario was edited or left the approved set after it was handed out is not
    shown again (with other text than at first): it is closed as rejected, and the annotator
    gets another one."""
    changed = Exists(
        Scenario.objects.filter(pk=OuterRef("comparison__scenario_id")).filter(
            ~Q(state=Scenario.State.APPROVED)
            | _content_changed_since(OuterRef(OuterRef("issued_at")))
        )
    )
    found = None
    for assignment in (
        _open_items(user, campaign)
        .select_related(*(f"comparison__{path}" for path in ITEM_RELATED))
        .annotate(scenario_changed=changed)
        .order_by("issued_at")
    ):
        if not assignment.scenario_changed:
            found = found or assignment
            continue
        Assignment.objects.filter(pk=assignment.pk, state=Assignment.State.OPEN).update(
            state=Assignment.State.REJECTED, finished_at=timezone.now()
        )
    return found


def _open_items(user, campaign) -> QuerySet:
    """The user's open items with a live lease in the campaign (or an OuterRef to one)."""
    return Assignment.objects.filter(
        campaign=campaign,
        annotator=user,
        state=Assignment.State.OPEN,
        lease_expires_at__gt=timezone.now(),
    )


def _any_free(
    user, campaign: Campaign, gold: bool, passed_over: list[int], now, excluded=()
) -> bool:
    """Whether any candidate `candidates.locked_batch` would look at has a free slot, counting
    live leases (no locks taken)."""
    seen = Assignment.objects.filter(campaign=campaign, annotator=user).values("comparison_id")
    candidates = (
        Comparison.objects.filter(
            campaign=campaign, is_gold=gold, scenario__state=Scenario.State.APPROVED
        )
        .exclude(pk__in=passed_over)
        .exclude(pk__in=seen)
        .exclude(scenario__risk_level__in=excluded)
    )
    if gold:
        return candidates.exists()
    live = (
        Assignment.objects.filter(
            comparison=OuterRef("pk"), state=Assignment.State.OPEN, lease_expires_at__gt=now
        )
        .values("comparison")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return (
        candidates.annotate(live=Coalesce(Subquery(live), Value(0), output_field=IntegerField()))
        .filter(judgment_count__lt=campaign.overlap - F("live"))
        .exists()
    )


def _take(user, campaign: Campaign, gold: bool, now, excluded=()) -> Assignment | None:
    """Lock a few of the best candidates (skipping rows others hold) and hand out the first
    that still has a free slot.

    Priority: most judgments first (finish what is started; gold: fewest first), except that a
    regular comparison whose raters the user already shares clearly more items with than their
    fair share drops one level, and within a level the fewest shared items come first, so that
    raters working in step do not form fixed groups (`candidates.co_rating`). Remaining ties are
    broken by the comparisons' random `shuffle_key`, read from a random point drawn for this
    request (see `candidates.locked_batch`), so the order items arrive in says nothing about
    their companions and differs between annotators. Only comparisons of approved scenarios are
    handed out, and none of the risk levels `excluded` (`care.excluded_levels`).

    Candidates come in index order, the live leases counted only on the rows read (not on every
    comparison of the campaign). Once the rows are locked, their judgment counts are current,
    and `candidates.claim` counts the live leases again in a new statement, which sees every
    assignment committed by whoever held a row before us.
    """
    start = secrets.randbits(SHUFFLE_KEY_BITS)
    passed_over: list[int] = []
    held = items_held_below_k(campaign)  # as read with the campaign; None: not read
    window = held is not None and held > WINDOW_AFTER
    # Every judgment here is the requester's (a rater alone): each started comparison is one
    # of theirs, so only the unjudged ones are read (all of them, should the counts be behind).
    new_only = judged_by_others(campaign) == 0
    for attempt in range(50):
        batch = locked_batch(
            user, campaign, gold, start, passed_over, now, excluded, window, new_only
        )
        if not batch and (window or new_only):  # nothing there: the full ranges, once
            window = new_only = False
            batch = locked_batch(user, campaign, gold, start, passed_over, now, excluded)
        if not batch:
            # Everything left may just be locked for a moment by others handing out items.
            if not _any_free(user, campaign, gold, passed_over, now, excluded):
                return None
            time.sleep(0.005 * (attempt + 1))
            continue
        assignment = claim(user, campaign, batch, now)
        if assignment is not None:
            count_hand_out(campaign, assignment.comparison)
            care.count_hand_out(user, campaign, assignment.comparison)
            return assignment
        passed_over.extend(c.pk for c in batch)
    return None


def next_assignment(user, campaign: Campaign) -> Assignment | None:
    """The annotator's current item, or a new one; None when nothing is left for them (and
    always for an annotator excluded from the campaign).

    A campaign read saying the user holds no item there (`has_open_item`,
    `rating_reads.rating_campaign`) skips looking for it.
    The rows locked here stay locked until the caller's transaction ends (the rating page and
    API run each request in one)."""
    if campaign.state != Campaign.State.OPEN:
        raise CampaignNotOpen(NOT_OPEN)
    if is_excluded(user, campaign):
        return None  # their judgments no longer count here (annotation.counting)
    if campaign.requires_qualification:  # one indexed row, only where it is asked for
        _check_admitted(user, campaign)
    existing = current_assignment(user, campaign) if _may_hold(campaign) else None
    if existing:
        return existing
    want_gold = campaign.gold_share > 0 and random.random() < campaign.gold_share
    now = timezone.now()
    excluded = care.excluded_levels(user, campaign)  # read with the campaign: no query
    with transaction.atomic(savepoint=False):
        assignment = _take(user, campaign, gold=want_gold, now=now, excluded=excluded)
        if assignment is None and want_gold:
            assignment = _take(user, campaign, gold=False, now=now, excluded=excluded)
    adaptive = campaign.pairing == Campaign.Pairing.ADAPTIVE
    if assignment is None and adaptive and adaptive_top_up(campaign, user):
        with transaction.atomic(savepoint=False):
            assignment = _take(user, campaign, gold=False, now=timezone.now(), excluded=excluded)
    return assignment


def _check_admitted(user, campaign: Campaign) -> None:
    current = phase(campaign, user)
    if current != Phase.ADMITTED:
        raise NotAdmitted(current)


def _may_hold(campaign: Campaign) -> bool:
    return getattr(campaign, "has_open_item", True)


def _keyed_ratings(ratings: dict | None, left_is_a: bool) -> dict:
    keyed = {}
    for side, values in (ratings or {}).items():
        if side not in ("left", "right") or not isinstance(values, dict):
            raise QueueError(_("Ratings must be given for the left or right response."))
        clean = {}
        for dimension, value in values.items():
            if dimension not in DIMENSIONS:
                raise QueueError(_("Unknown rating dimension %r.") % dimension)
            if value in (None, ""):
                continue
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 5:
                raise QueueError(_("Rating %s must be 1–5.") % dimension)
            clean[dimension] = value
        if clean:
            keyed["a" if (side == "left") == left_is_a else "b"] = clean
    return keyed


ITEM_CHANGED = gettext_lazy(
    "The conversation of this item was changed or withdrawn for review while you were rating "
    "it, so your answer was not saved. Here is the next one."
)


def submit(user, key, submission: Submission, item: Assignment | None = None) -> Judgment:
    """Store one judgment for this assignment; a replay returns the stored one unchanged.

    Refused, storing nothing, when the campaign is not open (CampaignNotOpen) and when the
    item's scenario was edited or left the approved set after the item was issued
    (ItemChanged; the item is closed as rejected, since what was shown is no longer what the
    scenario says). The judgment records the scenario revision and content hash it was made on.
    `item`: the assignment as `rated_item` read (and locked) it in the caller's transaction.
    """
    preference, unacceptable = submission.screen_preference, submission.both_unacceptable
    if preference not in (-2, -1, 0, 1, 2) and not (unacceptable and preference is None):
        raise QueueError(_("Choose a preference from A much better to B much better."))
    if len(submission.rationale) > 5000:
        raise QueueError(_("The rationale is limited to 5,000 characters."))
    _keyed_ratings(submission.ratings, left_is_a=True)  # refused here, before the transaction
    with transaction.atomic(savepoint=False):  # errors leave the block before they are raised
        assignment, outcome = _answerable(user, key, item, "submit")
        if assignment is not None and assignment.state == Assignment.State.SUBMITTED:
            return assignment.judgment
        if outcome is None:
            outcome = _refused_or_recorded(assignment, user, submission)
    if isinstance(outcome, QueueError):
        raise outcome
    return outcome


def _refused_or_recorded(assignment, user, submission: Submission) -> QueueError | Judgment:
    """Why the open item cannot take the judgment (closing it as rejected), or the judgment."""
    comparison = assignment.comparison  # locked with the assignment: its count is current
    if not comparison.is_gold and comparison.judgment_count >= comparison.campaign.overlap:
        _close(assignment, Assignment.State.REJECTED)
        return QueueError(_("This item already has enough votes; here is the next one."))
    if assignment.scenario_changed or comparison.scenario.state != Scenario.State.APPROVED:
        _close(assignment, Assignment.State.REJECTED)
        return ItemChanged(str(ITEM_CHANGED))
    try:
        details = clean_details(
            comparison.campaign,
            submission.screen_preference,
            submission.both_unacceptable,
            submission.reasons,
            submission.confidence,
        )
    except DetailError as error:  # the item stays open: the annotator corrects and resends
        return InvalidAnswer(str(error))
    return _record(assignment, comparison, user, submission, details)


def _answerable(user, key, item, action: str) -> tuple[Assignment | None, QueueError | None]:
    """The locked assignment (`item` when the caller read it), and why it cannot be answered
    with `action`, if so; a replay (the state the action leaves) is not refused."""
    try:
        assignment = item or _own_assignment(user, key)
    except NotYours as error:
        return None, error
    campaign = assignment.comparison.campaign
    if assignment.state == REPLAY_STATE[action]:
        return assignment, None
    if campaign.state != Campaign.State.OPEN:
        return assignment, _not_open(campaign, action)
    if assignment.state != Assignment.State.OPEN:
        return assignment, QueueError(already_message(assignment.state))
    return assignment, None


def _close(assignment: Assignment, state: str, **fields) -> None:
    assignment.state = state
    assignment.finished_at = timezone.now()
    for name, value in fields.items():
        setattr(assignment, name, value)
    assignment.save(update_fields=["state", "finished_at", *fields])


def _record(assignment, comparison, user, submission: Submission, details) -> Judgment:
    """Store the judgment (`recording.store`) and add it to the counts read with the campaign;
    `details`: (screen preference, reasons, confidence) from `rating_details.clean_details`."""
    campaign, now = comparison.campaign, timezone.now()
    screen, reasons, confidence = details
    fills = comparison.judgment_count + 1 == campaign.overlap
    judgment = store(
        assignment,
        {
            "screen_preference": screen,
            "preference": screen if assignment.left_is_a else -screen,
            "both_unacceptable": submission.both_unacceptable,
            "reasons": reasons,
            "confidence": confidence,
            "ratings": _keyed_ratings(submission.ratings, assignment.left_is_a),
            "rationale": submission.rationale.strip(),
            "time_on_task_ms": int((now - assignment.issued_at).total_seconds() * 1000),
            "client_time_ms": submission.client_time_ms,
            "scenario_revision": assignment.shown_revision,
            "scenario_hash": comparison.scenario.content_hash,
        },
        fills=fills,
    )
    count_judgment(campaign, comparison)
    if fills and not comparison.is_gold and not is_excluded(user, campaign):
        # once per comparison; a listener (webhooks) adds at most one insert
        comparison_filled.send(Campaign, campaign_id=campaign.pk, comparison_id=comparison.pk)
    if campaign.requires_qualification:  # the drift watch may send them to the refresher
        after_judgment(campaign, user, comparison)
    return judgment


def skip(user, key, reason: str, note: str = "", item: Assignment | None = None) -> Assignment:
    """Close the item as skipped with `reason` (a key of ALL_SKIP_REASONS; "I'd rather not"
    only on an item with a content note), stored as "reason: note"."""
    reasons = dict(ALL_SKIP_REASONS)
    if reason not in reasons:
        raise QueueError(_("Choose why you skip this item."))
    with transaction.atomic(savepoint=False):  # errors leave the block before they are raised
        assignment, refused = _answerable(user, key, item, "skip")
        if not refused and reason == care.RATHER_NOT:
            refused = _rather_not_refused(assignment)
        if not refused and assignment.state == Assignment.State.OPEN:
            why = f"{reason}: {note.strip()}"[:300] if note.strip() else reason
            _close(assignment, Assignment.State.SKIPPED, skip_reason=why)
    if refused:
        raise refused
    return assignment


def _rather_not_refused(assignment: Assignment) -> QueueError | None:
    """ "I'd rather not" is only for an open item with a content note (`care.content_note`)."""
    risk = assignment.comparison.scenario.risk_level
    if assignment.state == Assignment.State.OPEN and care.content_note(risk) is None:
        return InvalidAnswer(
            _("“I'd rather not” is for items with a content note: choose another reason.")
        )
    return None


# action -> the state its replay finds the item in (a replay answers with what was stored)
REPLAY_STATE = {"submit": Assignment.State.SUBMITTED, "skip": Assignment.State.SKIPPED}


def rated_item(user, key) -> tuple[Assignment, Campaign]:
    """The user's assignment by key and its campaign, as the rating page and the API look it
    up before reading a submit or skip: NotYours (shown as a 404, never a 403) unless the user
    still rates in that campaign. Read as `submit` and `skip` need it, locked until the
    caller's transaction ends; the campaign carries its blind names and the user's progress
    counts (`rating_reads.rated_assignment`)."""
    return still_rated(user, rated_assignment(user, key))


def still_rated(user, assignment: Assignment | None) -> tuple[Assignment, Campaign]:
    """`assignment` as `rating_reads.rated_assignment` read it, and its campaign, when it is the
    user's and they still rate in that campaign; NotYours otherwise (also for None)."""
    if assignment is None or assignment.annotator_id != user.pk or not assignment.rates:
        raise NotYours(_("No such item."))  # same answer as a missing one: nothing leaks
    return assignment, assignment.comparison.campaign


def check_open(assignment: Assignment, campaign: Campaign, action: str) -> None:
    """CampaignNotOpen, before the answer is read, when the campaign is not open; a replay of
    what was already stored passes (it answers with the stored result)."""
    if campaign.state != Campaign.State.OPEN and assignment.state != REPLAY_STATE[action]:
        raise _not_open(campaign, action)


def _own_assignment(user, key) -> Assignment:
    """The user's assignment with its comparison, campaign and scenario, the assignment,
    comparison and scenario rows locked (in one statement), and whether the scenario changed
    since the item was handed out (`scenario_changed`; the statement locks the scenario row,
    which stays locked until the transaction ends, so an edit cannot slip in between this check
    and storing the judgment: it waits for us, or we see it) and the number of its newest
    revision then (`shown_revision`)."""
    assignment = rated_assignment(user, key)
    if assignment is None or assignment.annotator_id != user.pk:
        raise NotYours(_("No such item."))  # same answer as a missing one: nothing leaks
    return assignment
