"""A release's numbers on simulated data with known truths (scoring.releases.computing.compute_results,
no database): the human ranking recovers the strengths, PPI covers the true win rate against
the anchor where a biased judge does not, the numbers are deterministic for a seed, and a release
without a judge says so."""

import json

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit
from scipy.stats import spearmanr

from h2htalk import provenance
from scenarios.taxonomy import Subtask
from scoring.releases import computing
from scoring.releases import data as release_data

SUBTASKS = ["dialogue_base", "dialogue_emotion", "recollection_refine", "itinerary_basic"]
ANCHOR = 10


def simulate(
    seed=0, n_scenarios=1_500, n_labelled=250, votes=3, bias=0.9, n_boot=100, with_judge=True
):
    """Companions 10 (anchor), 11, 12, 13 with strengths 0, 0.6, −0.5, 0.2. On scenario s the
    quality of companion c is strength + N(0, 1); humans prefer A with P = σ(q_A − q_B) (ties
    allowed, E[vote] = P). The judge sees σ(q_A − q_B + 0.9·(long_A − long_B)): companion 11
    writes long answers the judge likes and humans do not care about, so the judge overrates 11
    against the anchor by a known bias. Humans label n_labelled random scenarios (every pair,
    `votes` votes each). Returns (ReleaseData, true P(c beats the anchor) over the release's
    scenarios per companion)."""
    rng = np.random.default_rng(seed)
    ids = [10, 11, 12, 13]
    strength = np.array([0.0, 0.6, -0.5, 0.2])
    long = np.array([0.0, 1.0, 0.0, 0.0])
    quality = strength + rng.normal(0, 1.0, (n_scenarios, 4))
    scenarios = np.arange(1, n_scenarios + 1)
    subtask = {int(s): SUBTASKS[s % len(SUBTASKS)] for s in scenarios}
    i, j = np.triu_indices(4, 1)
    rows_s = np.repeat(np.arange(n_scenarios), len(i))
    rows_a, rows_b = np.tile(i, n_scenarios), np.tile(j, n_scenarios)
    true_p = expit(quality[rows_s, rows_a] - quality[rows_s, rows_b])
    judge_p = expit(
        quality[rows_s, rows_a] - quality[rows_s, rows_b] + bias * (long[rows_a] - long[rows_b])
    )
    population = pd.DataFrame(
        {
            "scenario": scenarios[rows_s],
            "companion_a": np.array(ids)[rows_a],
            "companion_b": np.array(ids)[rows_b],
            "p_a": judge_p,
        }
    )
    truth = {}
    for k in range(1, 4):
        mask = (rows_a == 0) & (rows_b == k)  # the anchor (index 0) is always side A
        truth[ids[k]] = float(1 - true_p[mask].mean())
    labelled_scenarios = rng.choice(n_scenarios, n_labelled, replace=False)
    keep = np.isin(rows_s, labelled_scenarios)
    comparison = np.flatnonzero(keep) + 1
    p = true_p[keep]
    p_tie = 0.2 * 4 * p * (1 - p)
    u = rng.random((len(p), votes))
    outcome = np.where(
        u < (p - p_tie / 2)[:, None], 1.0, np.where(u < (p + p_tie / 2)[:, None], 0.5, 0.0)
    )
    preference = np.where(outcome == 1.0, -1, np.where(outcome == 0.5, 0, 1))
    votes_frame = pd.DataFrame(
        {
            "comparison": np.repeat(comparison, votes),
            "scenario": np.repeat(scenarios[rows_s[keep]], votes),
            "companion_a": np.repeat(np.array(ids)[rows_a[keep]], votes),
            "companion_b": np.repeat(np.array(ids)[rows_b[keep]], votes),
            "annotator": np.tile(np.arange(votes), len(p)),
            "preference": preference.ravel(),
        }
    )
    labelled = pd.DataFrame({"comparison": comparison, "p_a": judge_p[keep]})
    composite = pd.DataFrame(
        {
            "response": np.arange(n_scenarios * 4),
            "scenario": np.repeat(scenarios, 4),
            "companion": np.tile(ids, n_scenarios),
            "composite": (0.3 + 0.05 * quality).ravel(),
        }
    )
    data = release_data.ReleaseData(
        companions=[(c, f"companion-{c}") for c in ids],
        anchor=ANCHOR,
        subtask=subtask,
        votes=votes_frame,
        composite=composite,
        composite_note="Simulated composite.",
        seed=seed,
        n_boot=n_boot,
        judge={"id": 1, "name": "biased judge", "version": 1, "document_sha256": "0" * 64}
        if with_judge
        else None,
        population=population if with_judge else None,
        labelled=labelled if with_judge else None,
    )
    return data, truth, strength


def _row(results, companion):
    return next(r for r in results["anchor_win_rate"]["rows"] if r["companion"] == companion)


def test_ppi_covers_the_true_win_rate_where_the_biased_judge_does_not():
    data, truth, _ = simulate(seed=3)
    results = computing.compute_results(data)
    biased = _row(results, 11)
    assert biased["ppi"]["low"] <= truth[11] <= biased["ppi"]["high"]
    assert not biased["judge"]["low"] <= truth[11] <= biased["judge"]["high"]
    assert biased["judge"]["estimate"] - truth[11] > 0.08  # the judge overrates companion 11
    assert biased["ppi"]["level"] == 0.95 and biased["judge"]["level"] == 0.95
    # For an unbiased pair the judge is fine too, and PPI agrees with it.
    fair = _row(results, 12)
    assert fair["judge"]["low"] <= truth[12] <= fair["judge"]["high"]
    assert fair["ppi"]["low"] <= truth[12] <= fair["ppi"]["high"]


def test_ppi_coverage_over_seeded_release_repetitions():
    """30 simulated releases: PPI's 95% interval covers companion 11's true win rate in most,
    the biased judge's in none, and PPI is narrower than the humans alone."""
    ppi_hits = judge_hits = 0
    widths = []
    for seed in range(30):
        data, truth, _ = simulate(seed=100 + seed, n_scenarios=800, n_labelled=150, n_boot=10)
        row = _row(computing.compute_results(data), 11)
        ppi_hits += row["ppi"]["low"] <= truth[11] <= row["ppi"]["high"]
        judge_hits += row["judge"]["low"] <= truth[11] <= row["judge"]["high"]
        widths.append(
            (row["ppi"]["high"] - row["ppi"]["low"], row["humans"]["high"] - row["humans"]["low"])
        )
    assert ppi_hits >= 26, ppi_hits  # ≈ 95% of 30 (binomial: ≥ 26 with probability ≈ 0.94)
    assert judge_hits == 0
    assert np.mean([w[0] for w in widths]) < np.mean([w[1] for w in widths])


def test_human_ranking_recovers_the_strengths_and_marks_significant_differences():
    data, _, strength = simulate(seed=5, n_labelled=400)
    results = computing.compute_results(data)
    human = results["human"]["overall"]
    assert spearmanr(human["elo"], strength).statistic == pytest.approx(1.0)
    assert human["level"] == 0.95 and human["n_boot"] == 100
    best = int(np.argmax(strength))
    assert human["rank"][best] == 1
    worst = int(np.argmin(strength))
    assert human["significant"][best][worst] == 1 and human["significant"][worst][best] == -1
    # The judge's Bradley–Terry ranks every pair of every scenario, resampling scenarios.
    judge = results["judge"]["overall"]
    assert (
        judge["games"] == [3 * 1_500] * 4 and "resamples of the 1500 scenarios" in judge["method"]
    )
    # Per dimension and subtask: the same fits on their parts.
    assert set(results["human"]["by_subtask"]) == set(SUBTASKS)
    assert all("elo" in block for block in results["human"]["by_subtask"].values())
    assert results["subtasks"] == [t for t in Subtask.values if t in SUBTASKS]


def test_numbers_are_deterministic_for_a_seed_and_change_with_it():
    first = provenance.canonical(computing.compute_results(simulate(seed=1, n_boot=50)[0]))
    again = provenance.canonical(computing.compute_results(simulate(seed=1, n_boot=50)[0]))
    assert first == again
    data, _, _ = simulate(seed=1, n_boot=50)
    data.seed = 2  # same data, another bootstrap seed
    assert provenance.canonical(computing.compute_results(data)) != first
    assert json.loads(first)["schema"] == computing.RESULTS_SCHEMA


def test_without_a_judge_the_judge_columns_say_so_and_the_rest_works():
    data, truth, _ = simulate(seed=2, with_judge=False, n_boot=50)
    results = computing.compute_results(data)
    assert results["judge"] is None and results["judge_note"] == release_data.NO_JUDGE
    row = _row(results, 12)
    assert row["ppi"] is None and row["ppi_reason"] == release_data.NO_JUDGE
    assert row["judge"] is None and row["judge_reason"] == release_data.NO_JUDGE
    assert row["humans"]["low"] <= truth[12] <= row["humans"]["high"]
    assert results["human"]["overall"]["elo"][0] is not None
    assert results["composite"]["overall"][0]["n"] == 1_500


def test_small_groups_are_skipped_with_a_reason():
    data, _, _ = simulate(seed=4, n_labelled=6, n_boot=20)  # about 27 votes per subtask
    results = computing.compute_results(data)
    for block in results["human"]["by_subtask"].values():
        assert "skipped" in block and "human votes" in block["skipped"]
    assert "elo" in results["human"]["overall"]
