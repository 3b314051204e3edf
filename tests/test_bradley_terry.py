"""Bradley–Terry against simulations with known strengths."""

import numpy as np
from scipy.stats import spearmanr

from h2htalk.stats import bradley_terry as bt
from tests.simulators import simulate_votes as simulate


def test_aggregate_counts_and_orientation():
    cells = bt.aggregate([0, 1, 1, 2], [1, 0, 0, 0], [1, 1, 0.5, 0], 3)
    wins = cells.wins()
    # 0 beat 1 once; 1 beat 0 once; one tie 0–1; 0 beat 2 once.
    assert wins[0, 1] == 1.5 and wins[1, 0] == 1.5 and wins[0, 2] == 1 and wins[2, 0] == 0
    assert cells.count.sum() == 4


def test_fit_recovers_known_strengths():
    rng = np.random.default_rng(1)
    truth = np.linspace(-1.5, 1.5, 8)
    a, b, outcome = simulate(truth, 40_000, rng, tie_rate=0.0)
    theta = bt.fit(bt.aggregate(a, b, outcome, 8).wins())
    assert np.abs(theta - (truth - truth.mean())).max() < 0.08


def test_ranking_recovers_order_at_realistic_vote_counts():
    rng = np.random.default_rng(2)
    truth = rng.normal(0, 0.6, 20)
    a, b, outcome = simulate(truth, 6_000, rng)
    ranking = bt.bootstrap(bt.aggregate(a, b, outcome, 20), n_boot=200, seed=3)
    assert spearmanr(ranking.elo, truth).statistic >= 0.95
    assert (ranking.low <= ranking.elo).all() and (ranking.elo <= ranking.high).all()


def test_intervals_cover_the_truth_about_95_percent():
    """Coverage over seeded repetitions (simultaneous per-model 95% percentile intervals)."""
    truth = np.array([-0.8, -0.3, 0.0, 0.4, 0.7])
    truth_elo = bt.to_elo(truth - truth.mean())
    covered, total = 0, 0
    for seed in range(60):
        rng = np.random.default_rng(100 + seed)
        a, b, outcome = simulate(truth, 1_500, rng, tie_rate=0.0)
        ranking = bt.bootstrap(bt.aggregate(a, b, outcome, 5), n_boot=200, seed=seed)
        inside = (ranking.low <= truth_elo) & (truth_elo <= ranking.high)
        covered += inside.sum()
        total += inside.size
    assert 0.90 <= covered / total <= 0.99, covered / total


def test_ci_ranks_count_significantly_better_models():
    low = np.array([1100, 1000, 1020, 900])
    high = np.array([1200, 1090, 1110, 950])
    # 0 is clearly above 1 (1100 > 1090) but overlaps 2; 2 overlaps everyone above it;
    # 3 is below all three.
    assert bt.ci_ranks(low, high).tolist() == [1, 2, 1, 4]


def test_order_uncertainty_is_high_for_close_pairs_and_low_for_far_ones():
    rng = np.random.default_rng(4)
    truth = np.array([0.0, 0.0, 2.0])
    a, b, outcome = simulate(truth, 3_000, rng, tie_rate=0.0)
    wins = bt.aggregate(a, b, outcome, 3).wins()
    theta = bt.fit(wins)
    uncertainty = bt.order_uncertainty(theta, bt.covariance(wins, theta))
    assert uncertainty[0, 1] > 0.05 and uncertainty[0, 2] < 1e-6
    assert np.allclose(uncertainty, uncertainty.T)
