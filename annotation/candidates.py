"""The queue's candidate lock and claim as hand-written statements (see `queue._take`).

Written out rather than built with the ORM: building and compiling the two ordered, locked
halves with what the item shows took about a fifth of a rating cycle's server CPU, and one
statement replaces two. Each half (keys on either side of the request's random start, see
`locked_batch`) is a CTE read in the order of the index (campaign, is_gold, judgment_count,
shuffle_key) and locked with FOR UPDATE SKIP LOCKED; the comparison's columns come from the CTE,
so they are those of the locked row version (its judgment count is current), and what the item
shows (scenario, persona, the two responses) is joined to it. The annotator's own assignments
are excluded by the unique index (comparison, annotator), one probe per candidate (a scalar
subquery: as NOT EXISTS, PostgreSQL may turn it into an anti-join that reads every item of the
annotator's, as it did with statistics from before they started). The probe is a count below 1,
not IS NULL: PostgreSQL estimates IS NULL on a subquery to keep 0.5% of the rows, and with that
estimate it planned each range as a bitmap scan of all its rows and a sort, not an index scan
that stops at the first rows (30 ms a lock with a million judgments stored elsewhere).

`claim` then hands out the first locked candidate with a free slot in one INSERT … SELECT
(counting it in the annotator's `HandedTally` in the same statement on PostgreSQL): a
new statement, so it counts the live leases of every transaction committed before it (one that
held a row before we locked it included), and the rows being ours, their judgment counts too.

Co-raters (regular comparisons): with strict priority to the most judged, raters who work in
step always find one comparison started and form fixed groups (six raters in turns with k = 3:
two groups of three for the whole campaign), and a bad rater's consensus is other bad raters.
So the statement also reads, per locked candidate, how many items the requester already shares
with its current raters (`RaterPair`) and how many those raters judged, and `locked_batch`
ranks by `co_rating`: a candidate whose raters the requester shares clearly more items with
than their fair share drops one priority level (a comparison one judgment short stays ahead
of new ones), and within a level the fewest shared items beyond the fair share come first;
the random key still breaks the remaining ties. Cost: a few index probes per locked candidate
(its assignments, a pair row and a tally row each), none growing with any history.
"""

import random
import uuid
from datetime import timedelta
from functools import lru_cache
from itertools import pairwise

from django.db import connection

from h2htalk.rows import bound_cursor, columns, db_value, instance
from scenarios.models import Persona, Response, Scenario

from .models import Assignment, Comparison

CANDIDATES_PER_LOCK = 2
SHUFFLE_KEY_BITS = 31  # annotation.models.random_shuffle_key draws keys in [0, 2**31)
# A candidate drops a level when the requester shares more than SLACK + SLACK_SHARE × their
# fair share of items with its raters (the share widens the slack in long campaigns and in
# pools whose raters judge at very different rates, where not every fair share can be met).
SLACK, SLACK_SHARE = 1.0, 0.1

COMPARISON = ("id", "campaign_id", "scenario_id", "response_a_id", "response_b_id", "is_gold")
COMPARISON += ("judgment_count", "shuffle_key")
SCENARIO = ("id", "subtask", "language", "persona_id", "history", "memory", "schedule")
SCENARIO += ("user_message", "state", "risk_level")
PERSONA = ("id", "name", "summary")
RESPONSE = ("id", "text")

_HALF = """SELECT {columns} FROM annotation_comparison c
    JOIN scenarios_scenario s ON s.id = c.scenario_id
    WHERE c.campaign_id = %s AND c.is_gold = %s AND s.state = '{approved}' {open_only}
    AND c.shuffle_key {side} %s {window} {passed_over} {risk_filter}
    AND (SELECT COUNT(*) FROM annotation_assignment a
        WHERE a.comparison_id = c.id AND a.annotator_id = %s) < 1 {free_slot}
    ORDER BY c.judgment_count {direction}, c.shuffle_key {direction}
    LIMIT {limit} {lock}"""

# Per candidate b (regular ones): the items the requester shares with its current raters
# (those who judged it or hold it) and the judgments of those raters in the campaign; then the
# requester's and everyone's judgments there. Index probes: the candidate's assignments, a
# pair row and a tally row per rater; the campaign's tallies (one per annotator) once.
_RATERS = (
    "FROM annotation_assignment a {join} WHERE a.comparison_id = b.id AND a.state IN "
    f"('{Assignment.State.SUBMITTED.value}', '{Assignment.State.OPEN.value}')"
)
_SHARED = "JOIN annotation_raterpair rp ON rp.campaign_id = b.campaign_id"
_SHARED += " AND rp.low_id = {least}(a.annotator_id, %s)"
_SHARED += " AND rp.high_id = {greatest}(a.annotator_id, %s)"
_JUDGED = "JOIN annotation_annotatortally t"
_JUDGED += " ON t.campaign_id = b.campaign_id AND t.annotator_id = a.annotator_id"
_CO_RATING = ", ".join(
    (
        f"(SELECT COALESCE(SUM(rp.shared), 0) {_RATERS.format(join=_SHARED)})",
        f"(SELECT COALESCE(SUM(t.judged), 0) {_RATERS.format(join=_JUDGED)})",
        "(SELECT COALESCE(SUM(t.judged), 0) FROM annotation_annotatortally t"
        " WHERE t.campaign_id = %s AND t.annotator_id = %s)",
        "(SELECT COALESCE(SUM(t.judged), 0) FROM annotation_annotatortally t"
        " WHERE t.campaign_id = %s)",
    )
)


# A rater who holds many items below k (a lone rater, or one far ahead of the others) would
# walk all of them in the ranges of the counts above 0 (their own rows are passed one probe at a
# time). Past WINDOW_AFTER such items, each range reads at most WINDOW rows (from the request's
# start key: a bound found by an index scan of WINDOW entries); a started comparison beyond
# them waits for the next request's start, and an empty window falls back to the full ranges.
WINDOW, WINDOW_AFTER = 64, 64
_WINDOW = """AND c.shuffle_key > COALESCE((SELECT w.shuffle_key FROM annotation_comparison w
    WHERE w.campaign_id = %s AND w.is_gold = %s AND w.judgment_count = %s
    AND w.shuffle_key {side} %s ORDER BY w.judgment_count DESC, w.shuffle_key DESC
    LIMIT 1 OFFSET {window}), -1)"""

# Comparison c has a slot free of judgments and of leases live at the first parameter, below
# k (the second); read by the candidate lock and checked again by the claim. Only the state's
# value is formatted in.
_FREE_SLOT = (
    "c.judgment_count + (SELECT COUNT(*) FROM annotation_assignment l"  # noqa: S608
    f" WHERE l.comparison_id = c.id AND l.state = '{Assignment.State.OPEN.value}'"
    " AND l.lease_expires_at > %s) < %s"
)


def _sql(
    gold: bool, n_passed_over: int, n_excluded: int = 0, levels: int = 0, window: bool = False
) -> str:
    """The candidate lock's text: written once per shape (a rating cycle rebuilt it on every
    request)."""
    database = (connection.vendor, connection.features.has_select_for_update_skip_locked)
    return _sql_of(*database, gold, n_passed_over, n_excluded, levels, WINDOW if window else 0)


@lru_cache(maxsize=1024)
def _sql_of(
    vendor: str, locks: bool, gold: bool, n_passed_over: int, n_excluded, levels, window
) -> str:
    half = {
        # care for raters (annotation.care): risk levels the requester must not be handed now
        "risk_filter": f"AND s.risk_level NOT IN ({', '.join(['%s'] * n_excluded)})"
        if n_excluded
        else "",
        "columns": columns("c", COMPARISON),
        "approved": Scenario.State.APPROVED.value,  # written in: the generic plan knows it
        "open_only": "" if gold else "AND c.judgment_count = %s",
        "passed_over": f"AND c.id NOT IN ({', '.join(['%s'] * n_passed_over)})"
        if n_passed_over
        else "",
        "direction": "" if gold else "DESC",
        # regular ones: a slot not taken by judgments and live leases (gold: no limit), so that
        # comparisons others hold the last slots of are passed in the scan, not handed back
        "free_slot": "" if gold else f"AND {_FREE_SLOT}",
        "limit": CANDIDATES_PER_LOCK,
        "window": window,  # its size, 0 for none: written per side (_half)
        "lock": "FOR UPDATE OF c SKIP LOCKED" if locks else "",
    }
    sides = (">=", "<") if gold else ("<=", ">")
    before_wrap, after_wrap = (_half(side, half, gold, levels) for side in sides)
    shown = [
        columns("b", COMPARISON),
        columns("s", SCENARIO),
        columns("p", PERSONA),
        columns("ra", RESPONSE),
        columns("rb", RESPONSE),
    ]
    if not gold:
        functions = ("LEAST", "GREATEST") if vendor == "postgresql" else ("MIN", "MAX")
        shown.append(_CO_RATING.format(least=functions[0], greatest=functions[1]))
    shown = ", ".join(shown)
    # Only column names and placeholders are formatted in; every value is a parameter.
    return f"""WITH before_wrap AS ({before_wrap}), after_wrap AS ({after_wrap}),
        batch AS (SELECT * FROM before_wrap UNION ALL SELECT * FROM after_wrap)
        SELECT {shown} FROM batch b
        JOIN scenarios_scenario s ON s.id = b.scenario_id
        LEFT JOIN scenarios_persona p ON p.id = s.persona_id
        JOIN scenarios_response ra ON ra.id = b.response_a_id
        JOIN scenarios_response rb ON rb.id = b.response_b_id"""  # noqa: S608


def _half(side: str, half: dict, gold: bool, levels: int) -> str:
    """One half of the queue order. Regular comparisons: one index range per judgment count
    below k, most judged first, each read from the request's start key on (the index cannot
    start each count's keys there in one range read, and walked on average half of every open
    comparison of the campaign), the first CANDIDATES_PER_LOCK rows of them in this order:
    a count is read only when the ones above it had too few, and rows are locked as read."""
    window = _WINDOW.format(side=side, window=half["window"]) if half["window"] else ""
    one = _HALF.format(side=side, **{**half, "window": window})
    if gold:
        return one
    ranges = " UNION ALL ".join(f"SELECT * FROM ({one}) level{n}" for n in range(levels))  # noqa: S608
    return f"SELECT * FROM ({ranges}) counts LIMIT {CANDIDATES_PER_LOCK}"  # noqa: S608


def _comparison(row) -> Comparison:
    """A comparison with its scenario (and persona) and both responses in the fields cache
    (the row's first columns)."""
    ends = [0]
    for names in (COMPARISON, SCENARIO, PERSONA, RESPONSE, RESPONSE):
        ends.append(ends[-1] + len(names))
    parts = [row[start:end] for start, end in pairwise(ends)]
    comparison = instance(Comparison, COMPARISON, parts[0])
    scenario = instance(Scenario, SCENARIO, parts[1])
    scenario.persona = instance(Persona, PERSONA, parts[2]) if parts[2][0] is not None else None
    comparison.scenario = scenario
    comparison.response_a = instance(Response, RESPONSE, parts[3])
    comparison.response_b = instance(Response, RESPONSE, parts[4])
    return comparison


_PK, _IS_GOLD, _JUDGMENT_COUNT, _SHUFFLE_KEY = (
    COMPARISON.index(name) for name in ("id", "is_gold", "judgment_count", "shuffle_key")
)


class Candidate:
    """A locked candidate as its row came: what ranking and claiming read, and the comparison
    (with what the item shows) built only for the one handed out — building all of a batch's
    model instances took a tenth of a rating cycle's server CPU."""

    __slots__ = ("_row", "is_gold", "judgment_count", "pk", "shuffle_key")

    def __init__(self, row):
        self._row = row
        self.pk, self.is_gold = row[_PK], bool(row[_IS_GOLD])
        self.judgment_count, self.shuffle_key = row[_JUDGMENT_COUNT], row[_SHUFFLE_KEY]

    def comparison(self) -> Comparison:
        return _comparison(self._row)


def locked_batch(
    user,
    campaign,
    gold: bool,
    start: int,
    passed_over: list[int],
    now,
    excluded_levels=(),
    window: bool = False,
    new_only: bool = False,
) -> list[Candidate]:
    """The first few candidates in queue order, locked; rows others hold are skipped.

    Queue order: by judgment count (most first; gold: fewest first), then by shuffle key going
    round the key circle from `start`: ORDER BY -judgment_count, (start - shuffle_key) mod 2**31
    (gold: judgment_count, (shuffle_key - start) mod 2**31). The wrap is two LIMIT halves, keys
    on either side of `start`, each in index order (read backwards for the regular queue),
    merged here. Candidates: comparisons of approved scenarios the user was never handed
    (regular ones: with a slot free of judgments and of leases live at `now`), except
    `passed_over`. The live leases are counted as the rows are read (an index probe each), so
    the comparisons whose last slots others hold are passed over in the same statement: handed
    back, they made a request go round once per batch of them (a dozen statements at 100
    raters at a human pace, where most started comparisons are held by someone).

    The regular ones locked are then ranked by `co_rating` before the shuffle key: by judgment
    count less the level it drops, then the items shared beyond the fair share. The batch (the
    first two of each half) always holds the most judged candidates and, unless four or more
    are started, a new one the requester may take instead.

    `excluded_levels`: scenario risk levels left out (`care.excluded_levels`); none for a rater
    without opt-outs below the daily cap, whose statement is then the same as without care.
    `window` (regular comparisons): each count's range reads at most WINDOW rows (see WINDOW).
    `new_only` (regular comparisons): only the range of comparisons without judgments, for a
    requester who made every judgment of the campaign, so that each started comparison is
    theirs (a rater alone read WINDOW rows of their own in each half of each other count's
    range on every request: PostgreSQL's 5.3 CPU-ms per cycle at 4,000 judged, 3.5 without).
    """
    window = window and not gold
    levels = [0] if new_only else reversed(range(campaign.overlap))
    counts = [()] if gold else [(count,) for count in levels]
    free_slot = [] if gold else [db_value(Assignment, "lease_expires_at", now), campaign.overlap]
    params = []
    for _ in range(2):
        for count in counts:
            params += [campaign.pk, gold, *count, start]
            if window:
                params += [campaign.pk, gold, *count, start]
            params += [*passed_over, *excluded_levels, user.pk, *free_slot]
    if not gold:
        params += [user.pk, user.pk, campaign.pk, user.pk, campaign.pk]  # _CO_RATING's
    sql = _sql(gold, len(passed_over), len(excluded_levels), levels=len(counts), window=window)
    with bound_cursor() as cursor:
        cursor.execute(sql, params)
        return _in_queue_order(cursor.fetchall(), gold, start, campaign.overlap)


def _in_queue_order(rows, gold: bool, start: int, overlap: int) -> list[Candidate]:
    """The locked rows as candidates, in queue order (`locked_batch`)."""
    span = 2**SHUFFLE_KEY_BITS
    shown = sum(map(len, (COMPARISON, SCENARIO, PERSONA, RESPONSE, RESPONSE)))
    ranked = []
    for row in rows:
        c = Candidate(row[:shown])
        if gold:
            ranked.append(((c.judgment_count, (c.shuffle_key - start) % span, c.pk), c))
            continue
        drop, excess = co_rating(*row[shown:], overlap=overlap)
        ring = (start - c.shuffle_key) % span
        ranked.append(((drop - c.judgment_count, excess, ring, c.pk), c))
    return [c for _, c in sorted(ranked, key=lambda ranked_one: ranked_one[0])]


def co_rating(
    shared: int, partners_judged: int, mine: int, everyone: int, overlap: int
) -> tuple[int, float]:
    """How far a candidate drops in the queue for the requester (0 or 1 level), and the items
    they share with its current raters beyond their fair share (its rank within a level).

    `shared`: items the requester shares with the candidate's current raters (summed over
    them); `partners_judged`: those raters' judgments in the campaign; `mine`, `everyone`: the
    requester's and all judgments there. Fair share: each of the requester's items has k - 1
    other places, which fall to the others in proportion to what they judged, so with a rater
    who judged J_v the requester shares about mine × (k - 1) × J_v / (everyone - mine) items.
    A candidate without raters has nothing beyond its fair share (0) and never drops.
    """
    others = everyone - mine
    fair = mine * (overlap - 1) * partners_judged / others if others > 0 else 0.0
    excess = shared - fair
    return int(excess > SLACK + SLACK_SHARE * fair), excess


ASSIGNMENT = ("id", "key", "comparison_id", "campaign_id", "annotator_id", "left_is_a", "state")
ASSIGNMENT += ("issued_at", "lease_expires_at")

_CLAIM = """INSERT INTO annotation_assignment (key, comparison_id, campaign_id, annotator_id,
        left_is_a, state, issued_at, lease_expires_at, skip_reason)
    SELECT %s, c.id, c.campaign_id, %s, %s, %s, %s, %s, '' FROM annotation_comparison c
    WHERE c.id IN ({ids}) AND (c.is_gold OR {free_slot})
    ORDER BY CASE c.id {rank} END LIMIT 1
    RETURNING {returned}"""
# The item counted in the annotator's handed tally (`HandedTally`); on PostgreSQL in the
# statement that claims it (a data-modifying WITH), on SQLite after it.
_COUNT_HANDED = """INSERT INTO annotation_handedtally AS h (campaign_id, annotator_id, handed,
        on_full)
    SELECT c.campaign_id, %s, 1, CASE WHEN c.judgment_count >= %s THEN 1 ELSE 0 END
    FROM annotation_comparison c WHERE c.id = {claimed}
    ON CONFLICT (campaign_id, annotator_id) DO UPDATE SET handed = h.handed + 1,
        on_full = h.on_full + excluded.on_full"""
_CLAIM_COUNTED = """WITH claimed AS ({claim}), counted AS ({count})
    SELECT {returned} FROM claimed"""


def claim(user, campaign, batch: list[Candidate], now) -> Assignment | None:
    """A new assignment of the first comparison of `batch` (locked, in queue order) that still
    has a free slot (gold: the first), with the comparison in its fields cache; None when all
    are full with judgments and live leases.

    The ids are padded to a full batch with the last one, so the statement has one text and
    PostgreSQL prepares it whatever the batch size."""
    ids = [c.pk for c in batch]
    ids += ids[-1:] * (2 * CANDIDATES_PER_LOCK - len(ids))
    returned = ", ".join(ASSIGNMENT)
    sql = _CLAIM.format(
        free_slot=_FREE_SLOT,
        ids=", ".join(["%s"] * len(ids)),
        rank=" ".join(["WHEN %s THEN %s"] * len(ids)),
        returned=returned,
    )
    postgres = connection.vendor == "postgresql"
    issued = db_value(Assignment, "issued_at", now)
    params = [db_value(Assignment, "key", uuid.uuid4()), user.pk, random.random() < 0.5]
    params += [Assignment.State.OPEN, issued]
    params.append(
        db_value(Assignment, "lease_expires_at", now + timedelta(minutes=campaign.lease_minutes))
    )
    params += [*ids, issued, campaign.overlap]
    params += [value for rank, pk in enumerate(ids) for value in (pk, rank)]
    counted = [user.pk, campaign.overlap]
    if postgres:
        count = _COUNT_HANDED.format(claimed="(SELECT comparison_id FROM claimed)")
        sql = _CLAIM_COUNTED.format(claim=sql, count=count, returned=returned)
        params += counted
    with bound_cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
        if row is not None and not postgres:
            cursor.execute(_COUNT_HANDED.format(claimed="%s"), [*counted, row[2]])
    if row is None:
        return None
    assignment = instance(Assignment, ASSIGNMENT, row)
    claimed = next(c for c in batch if c.pk == assignment.comparison_id)
    assignment.comparison = claimed.comparison()
    return assignment
