"""Storing one judgment: its six writes, sent as one statement on PostgreSQL.

A submission inserts the judgment, counts it on the comparison (unless its annotator is
excluded from the campaign: `annotation.counting`), closes the assignment, counts
it in the annotator's tally (made by the first judgment: INSERT … ON CONFLICT, so a
concurrent first judgment of theirs cannot fail on it) and, on a regular comparison, counts
one more shared item for the annotator and each who judged the comparison before
(`RaterPair`, read by the queue; rows taken in id order, so two submissions never wait on
each other's pair rows crosswise) and, when it brings the comparison to k, moves the
comparison to the full side of the handed tally of everyone it was handed to (`HandedTally`,
read by the progress counts). On PostgreSQL the six are one data-modifying WITH statement, one
round trip, prepared once per connection; SQLite has no data-modifying WITH and runs the same
six statements in turn. The caller holds the locks
(`queue._own_assignment`: assignment, comparison and scenario rows) and has checked that the
item may take the judgment, so a replay never reaches here and nothing here decides.
"""

from django.utils import timezone

from h2htalk.rows import bound_cursor, db_value, default_connection

from .models import AnnotatorTally, Assignment, Judgment

JUDGMENT = ("assignment_id", "comparison_id", "annotator_id", "screen_preference", "preference")
JUDGMENT += ("both_unacceptable", "ratings", "rationale", "time_on_task_ms", "client_time_ms")
JUDGMENT += ("scenario_revision", "scenario_hash", "reasons", "confidence", "created_at")

_INSERT_JUDGMENT = f"""INSERT INTO annotation_judgment ({", ".join(JUDGMENT)})
    VALUES ({", ".join(["%s"] * len(JUDGMENT))}) RETURNING id"""  # noqa: S608 - names only
# An excluded annotator's judgment is stored but not counted (annotation.counting): the
# statement's snapshot is taken after the exclusion committed, if one was being made while the
# item was answered (the submission waited for it on the annotator's user row).
_EXCLUDED = """EXISTS(SELECT 1 FROM annotation_annotatorexclusion x
    WHERE x.campaign_id = %s AND x.annotator_id = %s)"""
_COUNT_ON_COMPARISON = f"""UPDATE annotation_comparison SET judgment_count = judgment_count + 1
    WHERE id = %s AND NOT {_EXCLUDED}"""  # noqa: S608 - no values formatted in
_CLOSE_ASSIGNMENT = "UPDATE annotation_assignment SET state = %s, finished_at = %s WHERE id = %s"
_COUNT_IN_TALLY = f"""INSERT INTO annotation_annotatortally AS t
        (campaign_id, annotator_id, judged, filled, day, today)
        VALUES (%s, %s, 1, CASE WHEN {_EXCLUDED} THEN 0 ELSE %s END, %s, 1)
    ON CONFLICT (campaign_id, annotator_id) DO UPDATE SET judged = t.judged + 1,
        filled = t.filled + excluded.filled,
        today = CASE WHEN t.day = excluded.day THEN t.today + 1 ELSE 1 END, day = excluded.day"""  # noqa: S608
# The others who judged the comparison before (the statement's snapshot: not this judgment;
# on SQLite, run after it, it is left out by its annotator); `regular`: a parameter, false on
# gold comparisons, whose raters are not counted.
_COUNT_PAIRS = """INSERT INTO annotation_raterpair AS p (campaign_id, low_id, high_id, shared)
    SELECT %s, {least}(j.annotator_id, %s), {greatest}(j.annotator_id, %s), 1
    FROM annotation_judgment j WHERE j.comparison_id = %s AND j.annotator_id <> %s AND %s
    ORDER BY 2, 3
    ON CONFLICT (campaign_id, low_id, high_id) DO UPDATE SET shared = p.shared + 1"""
_PAIRS = {
    "postgresql": _COUNT_PAIRS.format(least="LEAST", greatest="GREATEST"),
    "sqlite": _COUNT_PAIRS.format(least="MIN", greatest="MAX"),
}
# A judgment that brings the comparison to k (`fills`, a parameter; an excluded annotator's
# does not count) puts it on the full side of the handed tally (`HandedTally`) of everyone
# it was handed to, this annotator included: rows taken in annotator order, last.
_COUNT_FULL = f"""INSERT INTO annotation_handedtally AS h (campaign_id, annotator_id, handed,
        on_full)
    SELECT %s, a.annotator_id, 0, 1 FROM annotation_assignment a
    WHERE a.comparison_id = %s AND %s AND NOT {_EXCLUDED} ORDER BY a.annotator_id
    ON CONFLICT (campaign_id, annotator_id) DO UPDATE SET on_full = h.on_full + 1"""  # noqa: S608
_AT_ONCE = f"""WITH judgment AS ({_INSERT_JUDGMENT}),
    comparison AS ({_COUNT_ON_COMPARISON}),
    assignment AS ({_CLOSE_ASSIGNMENT}),
    tally AS ({_COUNT_IN_TALLY}),
    pairs AS ({_PAIRS["postgresql"]}),
    full_side AS ({_COUNT_FULL})
    SELECT id FROM judgment"""  # noqa: S608 - only the statements above


def store(assignment: Assignment, fields: dict, fills: bool) -> Judgment:
    """Store the judgment with these `fields` (JUDGMENT's, but the assignment's and the time)
    and count it; `fills`: it brings the comparison to k judgments."""
    now, db = timezone.now(), default_connection()
    comparison = assignment.comparison
    annotator, regular = assignment.annotator_id, not comparison.is_gold
    values = {
        **fields,
        "assignment_id": assignment.pk,
        "comparison_id": comparison.pk,
        "annotator_id": assignment.annotator_id,
        "created_at": now,
    }
    statements = [
        (_INSERT_JUDGMENT, [db_value(Judgment, name, values[name], db) for name in JUDGMENT]),
        (_COUNT_ON_COMPARISON, [comparison.pk, comparison.campaign_id, annotator]),
        (
            _CLOSE_ASSIGNMENT,
            [Assignment.State.SUBMITTED, db_value(Assignment, "finished_at", now), assignment.pk],
        ),
        (
            _COUNT_IN_TALLY,
            [
                comparison.campaign_id,
                annotator,
                comparison.campaign_id,
                annotator,
                int(fills),
                db_value(AnnotatorTally, "day", timezone.localdate()),
            ],
        ),
        (
            _PAIRS.get(db.vendor, _PAIRS["sqlite"]),
            [comparison.campaign_id, *(annotator, annotator), comparison.pk, annotator, regular],
        ),
        (
            _COUNT_FULL,
            [comparison.campaign_id, comparison.pk, fills, comparison.campaign_id, annotator],
        ),
    ]
    with bound_cursor() as cursor:
        if db.vendor == "postgresql":
            cursor.execute(_AT_ONCE, [value for _, params in statements for value in params])
            (pk,) = cursor.fetchone()
        else:
            for sql, params in statements:
                cursor.execute(sql, params)
                if sql is _INSERT_JUDGMENT:
                    (pk,) = cursor.fetchone()
    judgment = Judgment(id=pk, **values)
    judgment._state.adding, judgment._state.db = False, db.alias
    assignment.state, assignment.finished_at = Assignment.State.SUBMITTED, now
    return judgment
