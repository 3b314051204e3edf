"""The release's faster numerics give the numbers of the straightforward computations: batched
Bradley–Terry fits reach the optimum (zero gradient, the careful fit iterated to the end), the
significance matrix computed from the pairs i < j equals every pair computed, and the results'
JSON conversion equals the element-by-element one."""

import math

import numpy as np
import pytest

from h2htalk.stats import bradley_terry as bt
from h2htalk.stats import leaderboard as lb
from tests import simulators


def _gradient(theta, wins, ridge=1e-4):
    p = 1 / (1 + np.exp(-(theta[:, None] - theta[None, :])))
    return (wins - (wins + wins.T) * p).sum(axis=1) - 2 * ridge * theta


def _batch(seed, models, votes, size):
    """`size` multinomial reweightings of simulated votes, as win matrices."""
    rng = np.random.default_rng(seed)
    a, b, outcome = simulators.simulate_votes(rng.normal(0, 0.8, models), votes, rng)
    cells = bt.aggregate(a, b, outcome, models)
    total = int(cells.count.sum())
    weights = rng.multinomial(total, cells.count / total, size=size).astype(float)
    return np.stack([cells.wins(w) for w in weights]), bt.fit(cells.wins())


@pytest.mark.parametrize(("models", "votes"), [(3, 200), (12, 3_000), (50, 30_000)])
def test_fit_batch_reaches_the_optimum(models, votes):
    wins, start = _batch(models, models, votes, 40)
    fitted = lb.fit_batch(wins, start)
    for k in range(len(wins)):
        exact = bt.fit(wins[k], tol=0, max_iter=500)  # until the likelihood stops changing
        assert np.abs(fitted[k] - exact).max() < 1e-9
        assert np.abs(_gradient(fitted[k], wins[k])).max() < 1e-6 * wins[k].sum()
        assert abs(fitted[k].mean()) < 1e-12


def test_fit_batch_is_invariant_to_renumbering_the_models():
    wins, start = _batch(7, 9, 1_500, 20)
    order = np.random.default_rng(1).permutation(9)
    fitted = lb.fit_batch(wins, start)
    renumbered = lb.fit_batch(wins[:, order][:, :, order], start[order])
    assert np.abs(renumbered - fitted[:, order]).max() < 1e-9


def _significance_every_pair(draws, level):
    """The significance matrix with every ordered pair computed on its own."""
    n = draws.shape[1]
    tail = (1 - level) / 2
    p_better, low, high = np.full((n, n), 0.5), np.zeros((n, n)), np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if i != j:
                diff = draws[:, i] - draws[:, j]
                p_better[i, j] = (diff > 0).mean() + 0.5 * (diff == 0).mean()
                low[i, j], high[i, j] = np.quantile(diff, [tail, 1 - tail])
    return p_better, low, high


def test_significance_from_the_upper_triangle_equals_every_pair():
    rng = np.random.default_rng(3)
    draws = np.round(rng.normal(1000, 40, (500, 8)) + np.arange(8) * 15, 1)  # some exact ties
    draws[:, 5] = draws[:, 4]  # two models with the same draws: P = ½, never significant
    p_better, significant, low, high, rank = lb.significance(draws, 0.9)
    p_ref, low_ref, high_ref = _significance_every_pair(draws, 0.9)
    assert np.array_equal(p_better, p_ref)
    assert np.abs(low - low_ref).max() < 1e-9 and np.abs(high - high_ref).max() < 1e-9
    assert significant[4, 5] == 0 and p_better[4, 5] == 0.5
    expected = np.where(low_ref > 0, 1, np.where(high_ref < 0, -1, 0))
    np.fill_diagonal(expected, 0)
    assert np.array_equal(significant, expected)
    assert np.array_equal(rank, 1 + (expected == -1).sum(axis=1))


def _json_safe_by_element(value):
    """The element-by-element conversion the results used before (the reference)."""
    if isinstance(value, dict):
        return {str(k): _json_safe_by_element(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe_by_element(v) for v in value]
    if isinstance(value, np.ndarray):
        return [_json_safe_by_element(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool) or value is None or isinstance(value, int | str):
        return value
    if isinstance(value, float):
        return value + 0.0 if math.isfinite(value) else None
    return value


def test_json_safe_equals_the_element_by_element_conversion():
    rng = np.random.default_rng(5)
    matrix = rng.normal(0, 1, (6, 6))
    matrix[0, 0], matrix[1, 2], matrix[2, 3], matrix[3, 1] = np.nan, np.inf, -np.inf, -0.0
    value = {
        "matrix": matrix,
        "ints": np.arange(4),
        "bools": np.array([True, False]),
        "nested": [matrix.tolist(), (np.float64(-0.0), np.int64(3), None, "x", True)],
        "scalars": [math.nan, -0.0, 1.5, 7, np.bool_(True)],
        "empty": np.zeros((0, 3)),
        3: {"rows": [[None, 1.0], [float("inf"), -0.0]]},
    }
    converted = lb.json_safe(value)
    expected = _json_safe_by_element(value)
    assert converted == expected
    assert repr(converted) == repr(expected)  # types too: -0.0 → 0.0, NaN → None, bool stays


def test_rank_correlation_equals_scipy_spearman_with_ties():
    from scipy.stats import rankdata, spearmanr

    rng = np.random.default_rng(8)
    for size in (3, 7, 50):
        x = np.round(rng.normal(0, 1, size), 1)  # ties
        y = np.round(x + rng.normal(0, 1, size), 0)
        assert np.array_equal(lb.average_ranks(x), rankdata(x))
        expected = spearmanr(x, y).statistic
        assert abs(lb.rank_correlation(x, y) - expected) < 1e-12
        order = rng.permutation(size)  # the order of the pairs does not matter
        assert abs(lb.rank_correlation(x[order], y[order]) - expected) < 1e-12
    assert lb.rank_correlation([1, 2, np.nan, 3], [3, 2, 1, 0]) == pytest.approx(-1.0)
    assert lb.rank_correlation([1, 1, 1], [1, 2, 3]) is None
