"""The bulk INSERT … SELECT statements of `bench.rating_cycle`: closed campaigns and the
raters' history in them, a rater alone with their judgments, and a million judgments more."""

COPY_COMPARISONS_SQL = """
INSERT INTO annotation_comparison (campaign_id, scenario_id, response_a_id, response_b_id,
    is_gold, gold_note, judgment_count, shuffle_key, created_at)
SELECT %s, scenario_id, response_a_id, response_b_id, false, '', 0,
    (random() * 2147483647)::int, now()
FROM annotation_comparison WHERE campaign_id = %s ORDER BY id LIMIT %s
"""

HISTORY_SQL = """
INSERT INTO annotation_assignment (key, comparison_id, campaign_id, annotator_id, left_is_a,
    state, issued_at, lease_expires_at, finished_at, skip_reason)
SELECT gen_random_uuid(), c.id, c.campaign_id, u, random() < 0.5, 'submitted', now(), now(),
    now(), ''
FROM (SELECT id, campaign_id FROM annotation_comparison WHERE campaign_id = %s ORDER BY id
    LIMIT %s) c
CROSS JOIN unnest(%s::bigint[]) AS u
"""

# A judgment (preference 1) for every assignment of a campaign (%s)
JUDGE_SQL = """
INSERT INTO annotation_judgment (assignment_id, comparison_id, annotator_id, screen_preference,
    preference, both_unacceptable, ratings, rationale, time_on_task_ms, scenario_hash,
    reasons, created_at)
SELECT a.id, a.comparison_id, a.annotator_id, 1, 1, false, '{}', '', 20000, '', '[]', now()
FROM annotation_assignment a JOIN annotation_comparison c ON c.id = a.comparison_id
WHERE c.campaign_id = %s
"""
# … of those annotators (%s) only
HISTORY_JUDGMENTS_SQL = JUDGE_SQL.rstrip() + " AND a.annotator_id = ANY(%s)\n"

HISTORY_TALLIES_SQL = """
INSERT INTO annotation_annotatortally (campaign_id, annotator_id, judged, filled, today)
SELECT %s, u, %s, 0, 0 FROM unnest(%s::bigint[]) AS u
"""

LONE_SQL = """
WITH judged AS (SELECT id FROM annotation_comparison WHERE campaign_id = %(campaign)s
    ORDER BY shuffle_key LIMIT %(n)s),
counted AS (UPDATE annotation_comparison SET judgment_count = 1
    WHERE id IN (SELECT id FROM judged)),
assigned AS (INSERT INTO annotation_assignment (key, comparison_id, campaign_id, annotator_id,
    left_is_a, state, issued_at, lease_expires_at, finished_at, skip_reason)
    SELECT gen_random_uuid(), id, %(campaign)s, %(user)s, random() < 0.5, 'submitted', now(),
        now(), now(), '' FROM judged RETURNING id, comparison_id)
INSERT INTO annotation_judgment (assignment_id, comparison_id, annotator_id, screen_preference,
    preference, both_unacceptable, ratings, rationale, time_on_task_ms, scenario_hash, reasons,
    created_at)
SELECT id, comparison_id, %(user)s, 1, 1, false, '{}', '', 20000, '', '[]', now() FROM assigned
"""

LONE_TALLIES_SQL = """
INSERT INTO annotation_annotatortally (campaign_id, annotator_id, judged, filled, today)
VALUES (%(campaign)s, %(user)s, %(n)s, 0, 0)
"""

LONE_HANDED_SQL = """
INSERT INTO annotation_handedtally (campaign_id, annotator_id, handed, on_full)
VALUES (%(campaign)s, %(user)s, %(n)s, 0)
"""

FILL_SQL = """
WITH comparisons AS (
    INSERT INTO annotation_comparison (campaign_id, scenario_id, response_a_id, response_b_id,
        is_gold, gold_note, judgment_count, shuffle_key, created_at)
    SELECT %s, scenario_id, response_a_id, response_b_id, false, '', %s,
        (random() * 2147483647)::int, now()
    FROM annotation_comparison WHERE campaign_id = %s
    RETURNING id, campaign_id
)
INSERT INTO annotation_assignment (key, comparison_id, campaign_id, annotator_id, left_is_a,
    state, issued_at, lease_expires_at, finished_at, skip_reason)
SELECT gen_random_uuid(), c.id, c.campaign_id, u, random() < 0.5, 'submitted', now(), now(),
    now(), ''
FROM comparisons c CROSS JOIN unnest(%s::bigint[]) AS u
LIMIT %s
"""
