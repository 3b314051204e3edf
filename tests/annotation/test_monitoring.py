"""Annotator monitoring: hand-worked numbers, a simulated 0.4 s-per-item rater flagged exactly
as the agreement report flags it (same function, same judgments), and the database side."""

import numpy as np
import pandas as pd
import pytest
from django.urls import reverse
from django.utils import timezone

from annotation import campaigns, monitoring, queue
from annotation.models import Comparison
from h2htalk.stats.agreement.annotators import annotator_report
from scoring.agreement import services as agreement
from tests.annotation import factories
from tests.simulators import save_votes, submitted_vote


def vote(annotator, unit, screen, preference, time_ms=60_000, client_ms=None, gold=None):
    """One judgment of comparison `unit`; gold = the comparison's known answer, if gold."""
    return {
        "annotator": annotator,
        "comparison_id": unit,
        "screen_preference": screen,
        "preference": preference,
        "time_on_task_ms": time_ms,
        "client_time_ms": client_ms,
        "is_gold": gold is not None,
        "gold_preference": gold,
    }


@pytest.fixture
def judgments():
    return monitoring.judgments_frame(
        [
            vote("ann", 1, -2, -2, 60_000, 50_000, gold=-1),  # gold A, voted A: right
            vote("ann", 2, -1, 1, 120_000, None, gold=-1),  # gold A, voted B: wrong
            vote("ann", 3, 0, 0, 180_000, 100_000, gold=0),  # gold tie, voted tie: right
            vote("ann", 4, 1, -1, 60_000, 40_000),
            vote("ann", 5, -1, -1, 180_000, None),
            # lefty: 12 votes, all for the left side, half of them B, 30 s each.
            *[vote("lefty", 100 + i, -1, -1 if i % 2 else 1, 30_000) for i in range(12)],
        ]
    )


def simulated_pool(seed: int, fast_ms: int = 400, n_units: int = 60) -> pd.DataFrame:
    """Five careful raters (20–60 s per item, 85% for the better companion B) and 'speedy',
    who answers every item in `fast_ms` and otherwise votes like them; all rate every unit."""
    rng = np.random.default_rng(seed)
    rows = []
    for unit in range(n_units):
        for rater in ["r0", "r1", "r2", "r3", "speedy"]:
            pick = 1 if rng.random() < 0.85 else -1
            left_is_a = bool(rng.random() < 0.5)
            ms = fast_ms if rater == "speedy" else int(rng.integers(20_000, 60_000))
            screen = pick if left_is_a else -pick
            rows.append(vote(rater, unit, screen, pick, ms + 300, ms))
    return monitoring.judgments_frame(rows)


def test_a_rater_at_0_4_s_per_item_is_flagged_as_the_agreement_report_flags_it():
    frame = simulated_pool(seed=7)
    rows = {row["annotator"]: row for row in monitoring.records(monitoring.annotator_table(frame))}
    report = annotator_report(frame)
    assert rows["speedy"]["flagged"] and rows["speedy"]["flag"].startswith(
        "fast: median time 0.4 s"
    )
    assert rows["speedy"]["median_time_ms"] == 400 and rows["speedy"]["time_source"] == "client"
    for name, expected in report.iterrows():
        row = rows[name]
        assert (row["flagged"], row["flag"], row["note"]) == (
            expected["flagged"],
            expected["flag"],
            expected["note"],
        )
        assert row["median_time_ms"] == expected["median_time_ms"]
        assert row["consensus_agreement"] == pytest.approx(expected["consensus_agreement"])
    assert not any(rows[name]["flagged"] for name in ("r0", "r1", "r2", "r3"))


def test_per_hour_agrees_with_the_time_per_item():
    frame = simulated_pool(seed=3)
    rows = {row["annotator"]: row for row in monitoring.records(monitoring.annotator_table(frame))}
    # speedy: 60 items of 0.4 s = 24 s on items: 60 / (24 / 3600) = 9,000 an hour.
    assert rows["speedy"]["per_hour"] == pytest.approx(9_000)
    for name in ("r0", "r1", "r2", "r3"):
        mine = frame[frame["annotator"] == name]["client_time_ms"]
        assert rows[name]["per_hour"] == pytest.approx(3_600_000 / mine.mean())
        # Times drawn from 20–60 s: the pace is near 3,600 / median, tens an hour, not thousands.
        assert 0.7 < rows[name]["per_hour"] * rows[name]["median_time_ms"] / 3_600_000 < 1.3


def test_flags_do_not_depend_on_names_or_row_order():
    frame = simulated_pool(seed=11)
    table = monitoring.annotator_table(frame)
    renamed = frame.assign(annotator=frame["annotator"].map(lambda name: f"x-{name}"))
    shuffled = renamed.sample(frac=1.0, random_state=1).reset_index(drop=True)
    other = monitoring.annotator_table(shuffled)
    other.index = pd.Index([name.removeprefix("x-") for name in other.index], dtype=object)
    columns = ["judgments", "per_hour", "median_time_ms", "consensus_agreement", "flagged"]
    pd.testing.assert_frame_equal(
        table[columns], other.loc[table.index, columns], check_names=False
    )


def test_pace_counts_the_visible_time_and_falls_back_to_the_lease_time(judgments):
    pace = monitoring.pace(judgments)
    # ann: browser times 50, 100, 40 s; lease times 120 and 180 s where none: 490 s on items.
    assert pace.loc["ann", "hours_on_items"] == pytest.approx(490 / 3600)
    assert pace.loc["ann", "per_hour"] == pytest.approx(5 / (490 / 3600))
    assert pace.loc["ann", "median_server_ms"] == 120_000  # 60, 60, 120, 180, 180 s
    assert pace.loc["lefty", "per_hour"] == pytest.approx(120.0)  # 30 s each


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
    # visible times 50, 120 (lease), 100, 40, 180 (lease) s -> median 100 s, mixed clocks.
    assert ann["median_time_ms"] == 100_000 and ann["time_source"] == "mixed"
    assert (ann["gold_correct"], ann["gold_n"]) == (2, 3)
    assert ann["gold_accuracy"] == pytest.approx(2 / 3)
    # screen votes -2, -1, 0, 1, -1 -> 4 non-tie, 3 left; P(|X-2| >= 1 | n=4) = 10/16.
    assert (ann["left"], ann["non_tie"], ann["left_rate"]) == (3, 4, 0.75)
    assert ann["left_p"] == pytest.approx(0.625)
    assert ann["skips"] == 1 and ann["skip_reasons"] == {"language": 1}
    lefty = rows["lefty"]
    # 12 of 12 left: p = 2 / 4096, far outside 35–65%: the agreement report's position flag.
    assert lefty["left_p"] == pytest.approx(2 / 4096)
    assert lefty["flagged"] and lefty["flag"].startswith("position: picks the left side in 100%")
    assert lefty["gold_accuracy"] is None and lefty["time_source"] == "server"
    idle = rows["idle"]  # in the pool, never voted, skipped once
    assert idle["judgments"] == 0 and idle["per_hour"] is None and idle["left_rate"] is None
    assert idle["skips"] == 1 and not idle["flagged"] and idle["flag"] == ""


def test_overall_row_pools_the_votes_without_flags(judgments):
    overall = monitoring.overall_row(judgments)
    assert overall["judgments"] == 17
    assert overall["non_tie"] == 16 and overall["left"] == 15  # 3 of ann + 12 of lefty
    assert overall["gold_n"] == 3 and overall["gold_correct"] == 2
    # Hours on items are summed: 490 s of ann + 12 × 30 s of lefty.
    assert overall["per_hour"] == pytest.approx(17 / (850 / 3600))
    assert not overall["flagged"] and overall["flag"] == ""


def test_empty_campaign_gives_a_row_per_pool_member():
    frame = monitoring.judgments_frame([])
    table = monitoring.annotator_table(frame, None, pool=["a", "b"])
    rows = monitoring.records(table)
    assert [r["annotator"] for r in rows] == ["a", "b"]
    assert all(r["judgments"] == 0 and r["per_hour"] is None and not r["flagged"] for r in rows)
    assert isinstance(table, pd.DataFrame) and list(table.columns) == monitoring.TABLE_COLUMNS


def test_a_missing_time_leaves_the_pace_empty():
    frame = monitoring.judgments_frame([vote("a", 1, 1, 1, None, None)])
    row = monitoring.records(monitoring.annotator_table(frame))[0]
    assert row["per_hour"] is None and row["hours_on_items"] is None
    assert row["time_source"] == "none"


# ---------------------------------------------------------------- the database side


@pytest.fixture
def fast_campaign(researcher, django_user_model):
    """Four careful raters and one at 0.4 s per item on every comparison of a campaign."""
    raters = factories.annotators(django_user_model, 4)
    speedy = factories.annotators(django_user_model, 1, prefix="speedy")[0]
    campaign = factories.campaign(researcher, [*raters, speedy], n_scenarios=8, overlap=5)
    rng = np.random.default_rng(2)
    now = timezone.now()
    votes = []
    for comparison in campaign.comparisons.order_by("pk"):
        for rater in [*raters, speedy]:
            ms = 400 if rater == speedy else int(rng.integers(20_000, 60_000))
            pick = 1 if rng.random() < 0.85 else -1
            left_is_a = bool(rng.random() < 0.5)
            votes.append(
                submitted_vote(
                    comparison,
                    rater,
                    pick,
                    now,
                    left_is_a=left_is_a,
                    client_time_ms=ms,
                    time_on_task_ms=ms + 250,
                )
            )
    save_votes(votes)
    return campaign


def test_campaign_page_api_and_agreement_report_flag_the_same_annotators(
    researcher_client, fast_campaign
):
    expected = {row["annotator"]: row for row in agreement.annotator_flags(fast_campaign)}
    assert expected["speedy0"]["flagged"] and expected["speedy0"]["flag"].startswith("fast")
    shown = campaigns.annotator_monitoring(fast_campaign)["rows"]
    assert {row["annotator"]: (row["flagged"], row["flag"]) for row in shown} == {
        name: (row["flagged"], row["flag"]) for name, row in expected.items()
    }
    api = researcher_client.get(f"/api/campaigns/{fast_campaign.pk}/progress/").json()
    assert {row["annotator"]: row["flag"] for row in api["annotators"]} == {
        name: row["flag"] for name, row in expected.items()
    }
    assert api["pool"] == 5
    page = researcher_client.get(reverse("campaigns:detail", args=[fast_campaign.pk]))
    text = page.content.decode()
    start = text.index('id="annotator-speedy0"')
    row = text[start : text.index("</tr>", start)]
    assert 'class="flagged"' in text[start - 40 : start + 40] and "fast: median time 0.4 s" in row
    # 0.4 s per item is 9,000 an hour on items; the careful raters' pace matches their median.
    assert '"per-hour">9000.0<' in row
    for name in ("rater0", "rater1", "rater2", "rater3"):
        mine = next(r for r in shown if r["annotator"] == name)
        assert 60 <= mine["per_hour"] <= 180 and 20 <= mine["median_time_s"] <= 60


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
