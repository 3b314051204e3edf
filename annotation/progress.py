"""An annotator's progress in a campaign, in one query that reads no row per comparison or vote.

The counts come from counters and from index ranges that stay small whatever the campaign's or
the database's size: the annotator's tally (their judgments, kept by the queue), the sum of the
campaign's tallies (one row per annotator), the campaign's gold comparisons, the annotator's own
assignments, and the campaign's counts of comparisons (`Campaign.open_base`,
`Campaign.comparison_total`), taken again after comparisons were added or removed or k changed.

Which comparisons are gold and which scenarios are approved is read live, so marking gold or
sending a scenario back to review needs no recount:

- left for me = comparisons with fewer than k judgments (open_base - Σ filled)
  - open gold ones - open regular ones of a scenario not approved - open ones I was handed;
  0 when I am excluded from the campaign (I am handed nothing more there);
- campaign done = Σ judged of the annotators not excluded - judgments on gold comparisons
  (their judgment counts).

Judgment counts count only the judgments that count (`counting`): excluding an annotator takes
theirs off and recounts the base in the same transaction (`recount_locked`).
"""

from dataclasses import dataclass

from django.db import connection, transaction
from django.db.models import (
    Count,
    IntegerField,
    OuterRef,
    Subquery,
    Sum,
    TextField,
    Value,
)
from django.db.models.expressions import RawSQL
from django.db.models.functions import Coalesce
from django.utils import timezone

from scenarios.models import Scenario

from .counting import lock_campaign
from .models import AnnotatorTally, Campaign, Comparison

APPROVED = Scenario.State.APPROVED.value
NOT_APPROVED = [state for state in Scenario.State.values if state != APPROVED]
assert len(NOT_APPROVED) == 3, "_COUNTS_SQL lists the states that are not approved"


@dataclass
class AnnotatorProgress:
    done_today: int
    done_total: int
    left_for_me: int
    campaign_done: int
    campaign_target: int


def recount_later(campaign: Campaign) -> None:
    """Comparisons were added or removed: the next progress read counts them again."""
    Campaign.objects.filter(pk=campaign.pk).update(counted_overlap=None)
    campaign.counted_overlap = None


def _count_base(campaign: Campaign) -> bool:
    """Count the progress base again (comparisons were added or removed, or k changed), the
    campaign row taken first, in a statement of its own: an exclusion recounting at the same
    time holds it, so this count starts after that one committed and sees its judgment counts.
    Returns whether the stored base is current.

    Run by rating requests, which may hold items and tally rows by now: they never wait for
    the row (raters arriving at once on a new campaign all find its base to be counted, and a
    transaction holding the row may wait for their rows). The first counts; while it holds
    the row the others count nothing (False), and one that finds it counted counts nothing.
    The handed tallies need no recount here: new comparisons were handed to no one, and on
    comparisons without judgments none is on a full one, whatever k (removing comparisons
    recounts them, `recount_locked`)."""
    with transaction.atomic():
        locked = Campaign.objects.filter(pk=campaign.pk)
        locked = locked.select_for_update(no_key=True, skip_locked=True)
        counted = list(locked.values_list("counted_overlap", flat=True))
        if counted and counted[0] != campaign.overlap:
            _store_base(campaign)
    return bool(counted)


def recount(campaign: Campaign) -> None:
    """Count the base and the handed tallies again now, after k changed or comparisons were
    removed, in a researcher's or a task's transaction (one that holds no rating rows: the
    recount waits for theirs)."""
    with transaction.atomic():
        lock_campaign(campaign)
        recount_locked(campaign)


def recount_locked(campaign: Campaign) -> None:
    """One statement, so the comparisons and the tallies are read in the same snapshot: a
    judgment filling a comparison is in both or in neither. The caller holds the campaign
    row. The handed tallies follow from the rows in statements of their own (a hand-out or a
    fill made meanwhile waits for the rows, or counts itself on the new ones)."""
    _store_base(campaign)
    k = campaign.overlap
    with connection.cursor() as cursor:
        lock = "FOR UPDATE" if connection.features.has_select_for_update else ""
        cursor.execute(_DELETE_HANDED.format(lock=lock), [campaign.pk])
        cursor.execute(_RECOUNT_HANDED, [k, campaign.pk])


def _store_base(campaign: Campaign) -> None:
    """The campaign's progress base counted from the rows and stored, at its k."""
    k = campaign.overlap
    Campaign.objects.filter(pk=campaign.pk).update(**_base_totals(k), counted_overlap=k)
    campaign.counted_overlap = k


def _base_totals(k: int) -> dict:
    """The stored progress base of a campaign (the query's row) at overlap k, as expressions."""
    here = OuterRef("pk")
    comparisons = Comparison.objects.filter(campaign=here).values("campaign")
    tallies = AnnotatorTally.objects.filter(campaign=here).values("campaign")
    return {
        "comparison_total": _total(comparisons, Count("pk")),
        "open_base": _total(comparisons.filter(judgment_count__lt=k), Count("pk"))
        + _total(tallies, Sum("filled")),
    }


# Rows taken in annotator order, as a hand-out (one row) and a judgment filling a comparison
# (its raters' rows, `recording._COUNT_FULL`) take them: taken in the table's order, the
# recount and such a judgment each held a row the other waited for.
_DELETE_HANDED = """DELETE FROM annotation_handedtally WHERE id IN (SELECT id
    FROM annotation_handedtally WHERE campaign_id = %s ORDER BY annotator_id {lock})"""
# Each annotator's items in the campaign and those on comparisons at k (`HandedTally`).
_RECOUNT_HANDED = """INSERT INTO annotation_handedtally (campaign_id, annotator_id, handed, on_full)
    SELECT a.campaign_id, a.annotator_id, COUNT(*),
        SUM(CASE WHEN c.judgment_count >= %s THEN 1 ELSE 0 END)
    FROM annotation_assignment a JOIN annotation_comparison c ON c.id = a.comparison_id
    WHERE a.campaign_id = %s GROUP BY a.campaign_id, a.annotator_id ORDER BY a.annotator_id"""


def _total(rows, aggregate) -> Coalesce:
    """`aggregate` over `rows` (grouped by one value: the campaign or the user) as a subquery,
    0 when there are none."""
    value = Subquery(rows.annotate(n=aggregate).values("n")[:1])
    return Coalesce(value, Value(0), output_field=IntegerField())


COUNTS = (
    *("today", "mine", "judged", "filled"),
    *("gold_n", "gold_votes", "gold_open", "withdrawn"),
    *("handed_open", "gold_mine", "withdrawn_mine", "excluded"),
)
# Whether comparison c was handed to the annotator: one probe of the unique index (comparison,
# annotator) per comparison counted. A scalar subquery, which PostgreSQL cannot turn into a
# join starting from the annotator's items.
_MINE = """(SELECT a.id FROM annotation_assignment a
    WHERE a.comparison_id = c.id AND a.annotator_id = %s) IS NOT NULL"""
# The counts as one text value "today,mine,…" (in COUNTS order), for any query in which the
# table annotation_campaign is the campaign: written out, since the ORM takes milliseconds to
# build and compile nine subqueries on every request. Each reads one annotator's row, the
# campaign's tallies (one per annotator), its gold comparisons, comparisons of scenarios not
# approved, or the annotator's own assignments — by index, never a row per comparison or vote.
# The scenario states are written in (constants of the code, never input), so the generic plan
# of the prepared statement (`rating_reads`) knows them as a custom plan would: as parameters,
# PostgreSQL judged the generic plan worse and planned the statement again on every run.
_COUNTS_SQL = " || ',' || ".join(
    f"COALESCE(({sql}), 0)"
    for sql in (
        "SELECT CASE WHEN t.day = %s THEN t.today ELSE 0 END FROM annotation_annotatortally t"
        " WHERE t.campaign_id = annotation_campaign.id AND t.annotator_id = %s",
        "SELECT t.judged FROM annotation_annotatortally t"
        " WHERE t.campaign_id = annotation_campaign.id AND t.annotator_id = %s",
        "SELECT SUM(t.judged) FROM annotation_annotatortally t"
        " WHERE t.campaign_id = annotation_campaign.id AND NOT EXISTS (SELECT 1"
        " FROM annotation_annotatorexclusion x WHERE x.campaign_id = t.campaign_id"
        " AND x.annotator_id = t.annotator_id)",
        "SELECT SUM(t.filled) FROM annotation_annotatortally t"
        " WHERE t.campaign_id = annotation_campaign.id",
        "SELECT COUNT(*) FROM annotation_comparison c"
        " WHERE c.campaign_id = annotation_campaign.id AND c.is_gold",
        "SELECT SUM(c.judgment_count) FROM annotation_comparison c"
        " WHERE c.campaign_id = annotation_campaign.id AND c.is_gold",
        "SELECT COUNT(*) FROM annotation_comparison c"
        " WHERE c.campaign_id = annotation_campaign.id AND c.is_gold"
        " AND c.judgment_count < annotation_campaign.overlap",
        "SELECT COUNT(*) FROM annotation_comparison c"  # noqa: S608 - states: constants
        " JOIN scenarios_scenario s ON s.id = c.scenario_id"
        " WHERE c.campaign_id = annotation_campaign.id AND NOT c.is_gold"
        " AND c.judgment_count < annotation_campaign.overlap AND s.state IN ("
        + ", ".join(f"'{state}'" for state in NOT_APPROVED)
        + ")",
        # the annotator's items on comparisons below k, from their handed tally (one row,
        # whatever they did here or elsewhere), less those on open gold comparisons and on open
        # regular ones of scenarios not approved (few: probes of (comparison, annotator))
        "SELECT h.handed - h.on_full FROM annotation_handedtally h"
        " WHERE h.campaign_id = annotation_campaign.id AND h.annotator_id = %s",
        "SELECT COUNT(*) FROM annotation_comparison c"  # noqa: S608 - a constant
        " WHERE c.campaign_id = annotation_campaign.id AND c.is_gold"
        f" AND c.judgment_count < annotation_campaign.overlap AND {_MINE}",
        "SELECT COUNT(*) FROM annotation_comparison c"  # noqa: S608 - states: constants
        " JOIN scenarios_scenario s ON s.id = c.scenario_id"
        " WHERE c.campaign_id = annotation_campaign.id AND NOT c.is_gold"
        " AND c.judgment_count < annotation_campaign.overlap AND s.state IN ("
        + ", ".join(f"'{state}'" for state in NOT_APPROVED)
        + f") AND {_MINE}",
        "SELECT COUNT(*) FROM annotation_annotatorexclusion x"
        " WHERE x.campaign_id = annotation_campaign.id AND x.annotator_id = %s",
    )
)


def progress_counts(user) -> dict:
    """An annotation, `progress`, for a query of campaigns, or of rows joined to their
    campaign (select_related): the counts `progress_for` reads, in the query that reads the
    campaign anyway."""
    sql = RawSQL(_COUNTS_SQL, progress_params(user), output_field=TextField())  # noqa: S611 - values are params
    return {"progress": sql}


def progress_params(user) -> list:
    """The values of `_COUNTS_SQL`'s placeholders, in order."""
    return [timezone.localdate(), user.pk, user.pk, user.pk, user.pk, user.pk, user.pk]


def progress_for(user, campaign: Campaign) -> AnnotatorProgress:
    """The counts as the campaign was read with `progress_counts` (plus what this request
    changed since: `count_hand_out`, `count_judgment`), or as read now."""
    if campaign.counted_overlap != campaign.overlap:
        counted = _count_base(campaign)
        read = Campaign.objects.annotate(**progress_counts(user))
        if not counted:  # being counted by another request: the base from the rows
            base = _base_totals(campaign.overlap)
            read = read.annotate(**{f"now_{name}": total for name, total in base.items()})
        campaign = read.get(pk=campaign.pk)
        if not counted:
            campaign.comparison_total, campaign.open_base = (
                getattr(campaign, f"now_{name}") for name in base
            )
    elif not hasattr(campaign, "progress"):
        campaign = Campaign.objects.annotate(**progress_counts(user)).get(pk=campaign.pk)
    n = _counts(campaign)
    handed = n["handed_open"] - n["gold_mine"] - n["withdrawn_mine"]  # open regular, approved
    left = campaign.open_base - n["filled"] - n["gold_open"] - n["withdrawn"] - handed
    if n["excluded"]:
        left = 0
    return AnnotatorProgress(
        done_today=n["today"],
        done_total=n["mine"],
        left_for_me=left,
        campaign_done=n["judged"] - n["gold_votes"],
        campaign_target=(campaign.comparison_total - n["gold_n"]) * campaign.overlap,
    )


def is_excluded(user, campaign: Campaign) -> bool:
    """Whether the user is excluded from the campaign (read with the progress counts when the
    campaign carries them)."""
    if hasattr(campaign, "progress"):
        return bool(_counts(campaign)["excluded"])
    return campaign.exclusions.filter(annotator=user).exists()


def items_held_below_k(campaign: Campaign) -> int | None:
    """The annotator's items (any state) on comparisons below k, from the counts the campaign
    was read with (`progress_counts`); None when it was read without them."""
    if not hasattr(campaign, "progress"):
        return None
    return _counts(campaign)["handed_open"]


def judged_by_others(campaign: Campaign) -> int | None:
    """Judgments that count in the campaign by annotators other than the requester, from the
    counts the campaign was read with (`progress_counts`); None when it was read without them."""
    if not hasattr(campaign, "progress"):
        return None
    counts = _counts(campaign)
    return counts["judged"] - counts["mine"]


def _counts(campaign: Campaign) -> dict:
    """The campaign's `progress_counts`, read from their text once."""
    if isinstance(campaign.progress, str):
        campaign.progress = dict(zip(COUNTS, map(int, campaign.progress.split(",")), strict=True))
    return campaign.progress


def _add(campaign: Campaign, **changes) -> None:
    """What this request changed, added to the counts the campaign was read with."""
    if hasattr(campaign, "progress"):
        counts = _counts(campaign)
        for name, change in changes.items():
            counts[name] += change


def count_hand_out(campaign: Campaign, comparison: Comparison) -> None:
    """The queue handed `comparison` to the user: one fewer left for them (a regular one)."""
    _add(campaign, handed_open=0 if comparison.is_gold else 1)


def count_judgment(campaign: Campaign, comparison: Comparison) -> None:
    """The queue stored a judgment of the user on `comparison` (locked, its count read before
    this judgment; `recording.store` counted it in their tally): the counts read with the
    campaign follow."""
    fills = comparison.judgment_count + 1 == campaign.overlap
    _add(
        campaign,
        today=1,
        mine=1,
        judged=1,
        filled=int(fills),
        gold_votes=int(comparison.is_gold),
        gold_open=-int(comparison.is_gold and fills),
        handed_open=-int(not comparison.is_gold and fills),  # no longer open: not "left" either
    )
