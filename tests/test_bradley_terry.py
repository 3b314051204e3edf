"""Bradley–Terry against simulations with known strengths."""

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit
from scipy.stats import norm, spearmanr

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


# ---------------------------------------------------------------- independent references


def penalised_log_likelihood(theta, wins, ridge):
    """Σ W[i,j]·log σ(θi − θj) − ridge·Σθ², written out again (not the module's)."""
    total = -ridge * float(np.dot(theta, theta))
    for i in range(len(theta)):
        for j in range(len(theta)):
            if wins[i, j]:
                total -= wins[i, j] * np.logaddexp(0.0, theta[j] - theta[i])
    return total


def reference_fit(wins, ridge=1e-4):
    """The maximiser by a general-purpose optimiser (BFGS), centred like the module's."""
    result = minimize(
        lambda t: -penalised_log_likelihood(t, wins, ridge),
        np.zeros(len(wins)),
        method="BFGS",
        options={"gtol": 1e-10},
    )
    return result.x - result.x.mean()


# One tie between 0 and 1, every other result one-sided: a full Newton step from 0 overshoots
# (the likelihood falls, and without backtracking the iteration runs away).
OVERSHOOT = np.array(
    [
        [0, 0.5, 0, 0, 0],
        [0.5, 0, 0, 100, 0],
        [10, 0, 0, 0, 0],
        [0, 0, 0, 0, 0],
        [0, 0, 100, 10, 0],
    ],
    float,
)


def test_fit_where_a_full_newton_step_overshoots_matches_an_independent_optimiser():
    theta = bt.fit(OVERSHOOT)
    reference = reference_fit(OVERSHOOT)
    assert np.abs(theta - reference).max() < 1e-4
    assert (
        penalised_log_likelihood(theta, OVERSHOOT, 1e-4)
        >= penalised_log_likelihood(reference, OVERSHOOT, 1e-4) - 1e-9
    )
    assert abs(theta.mean()) < 1e-12


def test_fit_matches_an_independent_optimiser_on_ordinary_data():
    rng = np.random.default_rng(7)
    a, b, outcome = simulate(np.array([-0.6, 0.0, 0.2, 0.9]), 800, rng)
    wins = bt.aggregate(a, b, outcome, 4).wins()
    assert np.abs(bt.fit(wins) - reference_fit(wins)).max() < 1e-5
    assert np.abs(bt.fit(wins, ridge=2.0) - reference_fit(wins, ridge=2.0)).max() < 1e-5


def test_elo_follows_the_published_convention():
    """Elo: 400 points = odds of 10 to 1 (P = 1 / (1 + 10^(−Δ/400))), centred on 1000 (the
    scale and base of Chatbot Arena's leaderboard)."""
    assert bt.to_elo(np.array([0.0, np.log(10)])) == pytest.approx([1000.0, 1400.0], abs=1e-9)
    theta = np.array([-0.7, 0.1, 0.6])
    elo = bt.to_elo(theta)
    for i in range(3):
        for j in range(3):
            published = 1 / (1 + 10 ** (-(elo[i] - elo[j]) / 400))
            assert expit(theta[i] - theta[j]) == pytest.approx(published, abs=1e-12)
    assert elo.mean() == pytest.approx(1000.0, abs=1e-9)


def numerical_hessian(theta, wins, ridge, h=1e-3):
    """Second differences of the penalised negative log-likelihood."""
    size = len(theta)
    hessian = np.empty((size, size))
    step = np.eye(size) * h
    f = lambda t: -penalised_log_likelihood(t, wins, ridge)  # noqa: E731
    for i in range(size):
        for j in range(size):
            hessian[i, j] = (
                f(theta + step[i] + step[j])
                - f(theta + step[i] - step[j])
                - f(theta - step[i] + step[j])
                + f(theta - step[i] - step[j])
            ) / (4 * h * h)
    return hessian


def test_covariance_is_the_inverse_of_a_numerically_differentiated_hessian():
    rng = np.random.default_rng(8)
    a, b, outcome = simulate(np.array([-0.5, 0.0, 0.3, 0.8]), 600, rng)
    wins = bt.aggregate(a, b, outcome, 4).wins()
    theta = bt.fit(wins)
    numeric = numerical_hessian(theta, wins, 1e-4)
    information = np.linalg.inv(bt.covariance(wins, theta))
    assert np.abs(information - numeric).max() < 1e-5 * np.abs(numeric).max()
    strong = np.linalg.inv(bt.covariance(wins, theta, ridge=3.0))
    assert np.abs(strong - numerical_hessian(theta, wins, 3.0)).max() < 1e-5 * np.abs(numeric).max()


def test_bootstrap_is_the_point_fit_and_percentiles_of_seeded_draws():
    rng = np.random.default_rng(9)
    a, b, outcome = simulate(np.array([-0.4, 0.0, 0.5]), 300, rng)
    cells = bt.aggregate(a, b, outcome, 3)
    ranking = bt.bootstrap(cells, n_boot=40, level=0.8, seed=5)
    assert ranking.elo == pytest.approx(bt.to_elo(bt.fit(cells.wins())), abs=1e-9)
    assert ranking.draws.shape == (40, 3) and ranking.level == 0.8
    assert ranking.low == pytest.approx(np.quantile(ranking.draws, 0.1, axis=0), abs=1e-9)
    assert ranking.high == pytest.approx(np.quantile(ranking.draws, 0.9, axis=0), abs=1e-9)
    weights = np.random.default_rng(5).multinomial(300, cells.count / 300).astype(float)
    first = bt.to_elo(bt.fit(cells.wins(weights)))
    assert ranking.draws[0] == pytest.approx(first, abs=1e-9)
    assert (ranking.draws[1] != ranking.draws[0]).any()


def test_aggregate_refuses_self_comparisons_and_other_outcomes():
    with pytest.raises(ValueError, match="itself"):
        bt.aggregate([0, 1], [1, 1], [1, 0], 2)
    with pytest.raises(ValueError, match="outcomes"):
        bt.aggregate([0], [1], [0.7], 2)


def test_order_uncertainty_is_the_normal_tail_of_the_difference():
    theta = np.array([0.0, 0.3, 1.0])
    cov = np.array([[0.04, 0.01, 0.0], [0.01, 0.05, 0.0], [0.0, 0.0, 0.02]])
    uncertainty = bt.order_uncertainty(theta, cov)
    assert uncertainty[0, 1] == pytest.approx(norm.cdf(-0.3 / np.sqrt(0.04 + 0.05 - 0.02)))
    assert uncertainty[1, 2] == pytest.approx(norm.cdf(-0.7 / np.sqrt(0.05 + 0.02)))
    assert np.diag(uncertainty) == pytest.approx([0.5, 0.5, 0.5])


def test_touching_intervals_do_not_make_a_model_significantly_better():
    """Strictly above: a lower bound equal to another model's upper bound is an overlap."""
    low = np.array([1000.0, 900.0, 800.0])
    high = np.array([1100.0, 1000.0, 899.0])
    assert bt.ci_ranks(low, high).tolist() == [1, 1, 3]


def test_aggregate_counts_every_comparison_in_its_cell():
    """The win matrix from the cells equals a plain count over the comparisons (ties half to
    each side), whichever side each model was on."""
    rng = np.random.default_rng(11)
    n = 5
    a = rng.integers(0, n, 400)
    b = (a + rng.integers(1, n, 400)) % n
    outcome = rng.choice([0.0, 0.5, 1.0], 400)
    expected = np.zeros((n, n))
    for i, j, result in zip(a, b, outcome, strict=True):
        expected[i, j] += result
        expected[j, i] += 1 - result
    cells = bt.aggregate(a, b, outcome, n)
    assert np.array_equal(cells.wins(), expected)
    assert cells.count.sum() == 400 and (cells.i < cells.j).all()
    assert set(cells.outcome) <= {0.0, 0.5, 1.0}
    swapped = bt.aggregate(b, a, 1 - outcome, n)
    assert np.array_equal(swapped.wins(), expected)


def test_bootstrap_defaults_are_1000_draws_at_95_percent_from_seed_0():
    rng = np.random.default_rng(12)
    cells = bt.aggregate(*simulate(np.array([-0.3, 0.0, 0.4]), 200, rng), 3)
    default = bt.bootstrap(cells)
    explicit = bt.bootstrap(cells, n_boot=1000, level=0.95, seed=0)
    assert default.draws.shape == (1000, 3) and default.level == 0.95
    assert np.array_equal(default.draws, explicit.draws)
