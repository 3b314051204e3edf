"""The human Bradley–Terry intervals resample scenarios (stats.vote_scenario_strengths): with a
response-level quality effect shared by every vote on a response, their 95% intervals of the
pairwise Elo differences cover the population truth; the multinomial reweighting of vote
counts (stats.vote_strengths, the earlier method) does not. Without a response effect the
scenario intervals are no wider. The draws follow the scenarios' keys, not the rows' order.
Simulations with known truth: tests/scenario_studies.py (larger: bench/scenario_bootstrap_bench)."""

import numpy as np
import pytest

from h2htalk.stats import leaderboard as stats
from tests import scenario_studies as studies


def test_with_response_noise_the_scenario_intervals_cover_the_truth_and_the_vote_ones_do_not():
    result = studies.coverage(n_studies=300, response_sd=1.0, n_scenarios=60, raters=3)
    assert result["cases"] >= 1_200
    assert result["coverage"]["scenarios"] >= 0.93, result
    assert result["coverage"]["votes"] < 0.90, result  # too narrow: votes are not independent
    assert result["width"]["scenarios"] > 1.2 * result["width"]["votes"]


def test_without_response_noise_the_scenario_intervals_are_no_wider():
    result = studies.coverage(n_studies=200, response_sd=0.0, n_scenarios=60, raters=3, seed=1)
    assert result["width"]["scenarios"] <= 1.05 * result["width"]["votes"], result
    assert result["coverage"]["scenarios"] >= 0.92, result


def test_the_population_truth_is_the_plain_strengths_without_response_noise():
    elo = studies.population_elo(studies.THETA, 0.0)
    expected = stats.bt.to_elo(studies.THETA - studies.THETA.mean())
    assert elo == pytest.approx(expected, abs=1e-6)
    # A response effect pulls the population strengths together (every difference shrinks).
    noisy = studies.population_elo(studies.THETA, 1.0)
    assert np.ptp(noisy) < 0.9 * np.ptp(elo)


def test_the_draws_follow_the_scenario_keys_not_the_row_order():
    rng = np.random.default_rng(3)
    scenario, a, b, outcome = studies.study(rng, studies.THETA, 30, 2, 1.0)
    base = stats.vote_scenario_strengths(scenario, a, b, outcome, 4, n_boot=100, seed=5)
    order = rng.permutation(len(a))
    keys = np.array([f"{s:04d}" for s in scenario])  # other keys, the same order
    shuffled = stats.vote_scenario_strengths(
        keys[order], a[order], b[order], outcome[order], 4, n_boot=100, seed=5
    )
    swapped = stats.vote_scenario_strengths(scenario, b, a, 1 - outcome, 4, n_boot=100, seed=5)
    for fit in (shuffled, swapped):
        for field in ("elo", "low", "high", "diff_low", "diff_high", "p_better"):
            np.testing.assert_array_equal(getattr(fit, field), getattr(base, field))
    assert "resamples of the 30 scenarios" in base.method and "votes" in base.method
    with pytest.raises(ValueError, match="outcomes"):
        stats.vote_scenario_strengths(scenario, a, b, outcome * 0.9, 4, n_boot=10)
