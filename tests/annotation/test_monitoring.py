"""Annotator monitoring statistics on hand-made judgments, expected numbers worked out by hand."""

import math
from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest

from annotation import campaigns, monitoring, queue
from annotation.models import Comparison
from tests.annotation import factories

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


def vote(annotator, minute, screen, preference, time_ms=60_000, client_ms=None, gold=None):
    """One judgment `minute` minutes after T0; gold = the comparison's known answer, if gold."""
    return {
        "annotator": annotator,
        "comparison_id": 1000 + minute,
        "screen_preference": screen,
        "preference": preference,
        "time_on_task_ms": time_ms,
        "client_time_ms": client_ms,
        "created_at": T0 + timedelta(minutes=minute),
        "is_gold": gold is not None,
        "gold_preference": gold,
    }


@pytest.fixture
def judgments():
    return monitoring.judgments_frame(
        [
            # ann: two sessions (0, 2, 5 min) and (120, 123 min).
            vote("ann", 0, -2, -2, 60_000, 50_000, gold=-1),  # gold A, voted A: right
            vote("ann", 2, -1, 1, 120_000, None, gold=-1),  # gold A, voted B: wrong
            vote("ann", 5, 0, 0, 180_000, 100_000, gold=0),  # gold tie, voted tie: right
            vote("ann", 120, 1, -1, 60_000, 40_000),
            vote("ann", 123, -1, -1, 180_000, None),
            # lefty: 12 votes one minute apart, all for the left side, half of them B.
            *[vote("lefty", 200 + i, -1, -1 if i % 2 else 1, 30_000) for i in range(12)],
        ]
    )


def test_active_hours_split_sessions_at_the_gap(judgments):
    hours = monitoring.active_hours(judgments)
    # ann: session 1 = 5 min between first and last + 1 min on its first item = 6 min;
    # session 2 = 3 min + 1 min = 4 min; the 115-minute break does not count: 10 min.
    assert hours["ann"] == pytest.approx(10 / 60)
    # lefty: 11 min from first to last + 0.5 min on the first item = 11.5 min.
    assert hours["lefty"] == pytest.approx(11.5 / 60)


def test_first_item_time_is_capped_at_one_gap():
    frame = monitoring.judgments_frame([vote("slow", 0, 1, 1, time_ms=5 * 3600 * 1000)])
    assert monitoring.active_hours(frame, gap_minutes=30)["slow"] == pytest.approx(0.5)


def test_gold_accuracy_uses_the_sign_and_a_tie_gold_expects_a_tie(judgments):
    gold = monitoring.gold_accuracy(judgments)
    assert gold.loc["ann", "gold_n"] == 3 and gold.loc["ann", "gold_correct"] == 2
    assert gold.loc["ann", "gold_accuracy"] == pytest.approx(2 / 3)
    assert "lefty" not in gold.index  # no gold votes


def test_gold_without_a_known_answer_is_not_scored():
    frame = monitoring.judgments_frame([vote("a", 0, 1, 1, gold=None) | {"is_gold": True}])
    assert monitoring.gold_accuracy(frame).empty


def test_left_preference_rate_and_binomial_flag(judgments):
    left = monitoring.left_preference(judgments)
    # ann: screen votes -2, -1, 0, 1, -1 -> 4 non-tie, 3 left; P(|X-2| >= 1 | n=4) = 10/16.
    assert (left.loc["ann", "non_tie"], left.loc["ann", "left"]) == (4, 3)
    assert left.loc["ann", "left_rate"] == 0.75
    assert left.loc["ann", "left_p"] == pytest.approx(0.625)
    assert not left.loc["ann", "left_flag"]
    # lefty: 12 of 12 left -> p = 2 / 2**12 = 0.000488 < 0.01: flagged.
    assert left.loc["lefty", "left_rate"] == 1.0
    assert left.loc["lefty", "left_p"] == pytest.approx(2 / 4096)
    assert left.loc["lefty", "left_flag"]


@pytest.mark.parametrize(("n", "flagged"), [(6, False), (10, True)])
def test_left_flag_threshold(n, flagged):
    # All n votes left: two-sided p = 2 / 2**n; 6 -> 0.031 (not < 0.01), 10 -> 0.00195.
    frame = monitoring.judgments_frame([vote("x", i, -1, -1) for i in range(n)])
    assert bool(monitoring.left_preference(frame).loc["x", "left_flag"]) is flagged


def test_skip_summary_counts_reason_codes():
    skips = monitoring.skips_frame(
        [("ann", "language: zh only"), ("ann", "other"), ("ann", "language"), ("b", "")]
    )
    summary = monitoring.skip_summary(skips)
    assert summary.loc["ann", "skips"] == 3
    assert summary.loc["ann", "skip_reasons"] == {"language": 2, "other": 1}
    assert summary.loc["b", "skip_reasons"] == {"unknown": 1}


def test_annotator_table_combines_everything(judgments):
    skips = monitoring.skips_frame([("ann", "language: zh"), ("idle", "broken")])
    rows = {
        row["annotator"]: row
        for row in monitoring.records(
            monitoring.annotator_table(judgments, skips, pool=["ann", "idle", "lefty"])
        )
    }
    assert list(rows) == ["ann", "idle", "lefty"]
    ann = rows["ann"]
    assert ann["judgments"] == 5
    assert ann["per_hour"] == pytest.approx(30.0)  # 5 judgments in 10 active minutes
    # time on task 60, 120, 180, 60, 180 s -> sorted 60, 60, 120, 180, 180: median 120 s.
    assert ann["median_time_ms"] == 120_000
    # browser times 50, 100, 40 s (two missing) -> median 50 s.
    assert ann["median_client_ms"] == 50_000
    assert ann["gold_accuracy"] == pytest.approx(2 / 3)
    assert ann["left_rate"] == 0.75 and ann["left_flag"] is False
    assert ann["skips"] == 1 and ann["skip_reasons"] == {"language": 1}
    lefty = rows["lefty"]
    assert lefty["per_hour"] == pytest.approx(12 / (11.5 / 60))
    assert lefty["median_client_ms"] is None and lefty["gold_accuracy"] is None
    assert lefty["left_flag"] is True
    idle = rows["idle"]  # in the pool, never voted, skipped once
    assert idle["judgments"] == 0 and idle["per_hour"] is None and idle["left_rate"] is None
    assert idle["skips"] == 1


def test_overall_row_pools_the_votes(judgments):
    overall = monitoring.overall_row(judgments)
    assert overall["judgments"] == 17
    assert overall["non_tie"] == 16 and overall["left"] == 15  # 3 of ann + 12 of lefty
    assert overall["gold_n"] == 3 and overall["gold_correct"] == 2
    # Active hours are summed per annotator: 10 + 11.5 minutes.
    assert overall["per_hour"] == pytest.approx(17 / (21.5 / 60))


def test_empty_campaign_gives_a_row_per_pool_member():
    frame = monitoring.judgments_frame([])
    table = monitoring.annotator_table(frame, None, pool=["a", "b"])
    rows = monitoring.records(table)
    assert [r["annotator"] for r in rows] == ["a", "b"]
    assert all(r["judgments"] == 0 and r["per_hour"] is None for r in rows)
    assert isinstance(table, pd.DataFrame)


def test_binomial_p_without_trials_is_nan():
    assert math.isnan(monitoring.binomial_p(0, 0))


def test_overview_counts_coverage_from_the_database(researcher, django_user_model):
    raters = factories.annotators(django_user_model, 3)
    campaign = factories.campaign(researcher, raters, n_scenarios=2, overlap=2)  # 6 comparisons
    gold = campaign.comparisons.order_by("pk").last()
    Comparison.objects.filter(pk=gold.pk).update(is_gold=True, gold_preference=1)
    for rater in raters[:2]:  # both take the same (started first) comparison: it completes
        item = queue.next_assignment(rater, campaign)
        queue.submit(rater, item.key, queue.Submission(-1))
    item = queue.next_assignment(raters[2], campaign)
    queue.submit(raters[2], item.key, queue.Submission(1))
    overview = campaigns.campaign_overview(campaign)
    assert overview["regular"] == 5 and overview["gold"] == 1 and overview["gold_answered"] == 1
    # The queue finishes what is started: one comparison gets k = 2 votes, a second one 1.
    assert (overview["complete"], overview["partial"], overview["untouched"]) == (1, 1, 3)
    assert overview["judged"] == 3 and overview["gold_judgments"] == 0
    assert overview["target"] == 10 and overview["percent"] == pytest.approx(30.0)
    frame = monitoring.load_judgments(campaign)
    assert len(frame) == 3 and set(frame["annotator"]) == {r.username for r in raters}
