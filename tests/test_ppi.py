"""PPI / PPI++ against ppi_py, and coverage on simulated data with a biased judge."""

import math
import statistics

import numpy as np
import pytest

from h2htalk.stats import ppi


def biased_world(seed, n=300, big_n=20_000, bias=0.12):
    """Y = did model X beat the anchor (truth rate 0.6); the judge sees it through noise and
    systematically overrates X by `bias`."""
    rng = np.random.default_rng(seed)
    total = n + big_n
    y = (rng.random(total) < 0.6).astype(float)
    f = np.clip(0.6 * y + 0.2 + bias + rng.normal(0, 0.15, total), 0, 1)
    labelled = rng.choice(total, n, replace=False)
    mask = np.zeros(total, bool)
    mask[labelled] = True
    return y[mask], f[mask], f[~mask], y.mean()


@pytest.mark.parametrize("tune", [False, True])
def test_matches_ppi_py(tune):
    ppi_py = pytest.importorskip("ppi_py")
    y, f, f_all, _ = biased_world(1)
    mine = ppi.ppi_mean(y, f, f_all, level=0.9, tune=tune)
    lam = None if tune else 1
    low, high = ppi_py.ppi_mean_ci(y, f, f_all, alpha=0.1, lam=lam)
    point = ppi_py.ppi_mean_pointestimate(y, f, f_all, lam=lam)
    assert mine.estimate == pytest.approx(float(np.ravel(point)[0]), abs=2e-3)
    assert mine.low == pytest.approx(float(np.ravel(low)[0]), abs=2e-3)
    assert mine.high == pytest.approx(float(np.ravel(high)[0]), abs=2e-3)


def test_ppi_covers_the_truth_where_the_biased_judge_does_not():
    ppi_hits, judge_hits, widths = 0, 0, []
    runs = 200
    for seed in range(runs):
        y, f, f_all, truth = biased_world(100 + seed)
        corrected = ppi.ppi_mean(y, f, f_all)
        judge = ppi.naive_mean(np.concatenate([f, f_all]))
        ppi_hits += corrected.low <= truth <= corrected.high
        judge_hits += judge.low <= truth <= judge.high
        widths.append(
            (corrected.high - corrected.low, ppi.classical_mean(y).high - ppi.classical_mean(y).low)
        )
    assert 0.92 <= ppi_hits / runs <= 0.98, ppi_hits / runs
    assert judge_hits / runs < 0.05
    # The judge's predictions buy precision: PPI++ is narrower than humans alone.
    assert np.mean([w[0] for w in widths]) < np.mean([w[1] for w in widths])


def test_lambda_is_zero_for_a_useless_judge_and_high_for_a_good_one():
    rng = np.random.default_rng(0)
    y = (rng.random(500) < 0.5).astype(float)
    noise = rng.random(500)
    assert ppi.tuned_lambda(y, noise, rng.random(5000)) < 0.15
    assert ppi.tuned_lambda(y, y * 0.9 + 0.05, rng.random(5000) * 0.9 + 0.05) > 0.8


# ---------------------------------------------------------------- exact references
# ppi_py divides its variances by n, this module by n − 1. Scaling the data about their means
# by √(n/(n−1)) makes ppi_py's 1/n variances equal ours without moving any mean, so with the
# same λ the two intervals agree to rounding (a tolerance no change of a formula hides under).


def interior_world(seed=5, n=120, big_n=150):
    """A judge correlated with Y but noisier, few unlabelled items: λ lands well inside (0, 1)
    and the unlabelled term weighs in the variance."""
    rng = np.random.default_rng(seed)
    y = rng.normal(0.6, 0.3, n + big_n)
    f = 0.8 * y + rng.normal(0.1, 0.2, n + big_n)
    return y[:n], f[:n], f[n:]


def stretched(values):
    values = np.asarray(values, float)
    return values.mean() + (values - values.mean()) * np.sqrt(len(values) / (len(values) - 1))


def ppi_py_interval(y, f, f_all, lam, level):
    ppi_py = pytest.importorskip("ppi_py")
    centre = y.mean()
    y2 = stretched(y - lam * f) + lam * f  # the rectifier's spread scaled, means unchanged
    y2 += centre - y2.mean()
    low, high = ppi_py.ppi_mean_ci(y2, f, stretched(f_all), alpha=1 - level, lam=lam)
    return float(np.ravel(low)[0]), float(np.ravel(high)[0])


@pytest.mark.parametrize("level", [0.8, 0.9, 0.95])
@pytest.mark.parametrize("tune", [False, True])
def test_interval_equals_ppi_py_exactly_with_the_same_lambda(tune, level):
    y, f, f_all = interior_world()
    mine = ppi.ppi_mean(y, f, f_all, level=level, tune=tune)
    if tune:
        assert 0.2 < mine.lam < 0.8  # the weight matters: λ² ≠ 2λ ≠ λ
    low, high = ppi_py_interval(y, f, f_all, mine.lam, level)
    assert mine.low == pytest.approx(low, rel=1e-12, abs=1e-12)
    assert mine.high == pytest.approx(high, rel=1e-12, abs=1e-12)
    point = pytest.importorskip("ppi_py").ppi_mean_pointestimate(y, f, f_all, lam=mine.lam)
    assert mine.estimate == pytest.approx(float(np.ravel(point)[0]), rel=1e-12)
    assert (mine.level, mine.n_labelled, mine.n_unlabelled) == (level, len(y), len(f_all))
    assert mine.method == ("PPI++ (power-tuned)" if tune else "PPI")


def test_tuned_lambda_is_ppi_pys_with_an_unbiased_covariance():
    """ppi_py's λ (read back from its tuned point estimate) uses Cov with 1/n; ours 1/(n − 1)."""
    ppi_py = pytest.importorskip("ppi_py")
    y, f, f_all = interior_world()
    point = float(np.ravel(ppi_py.ppi_mean_pointestimate(y, f, f_all, lam=None))[0])
    theirs = (point - y.mean()) / (f_all.mean() - f.mean())
    assert 0.2 < theirs < 0.8
    n = len(y)
    assert ppi.tuned_lambda(y, f, f_all) == pytest.approx(theirs * n / (n - 1), rel=1e-10)


def test_defaults_are_a_tuned_95_percent_interval():
    y, f, f_all = interior_world()
    default = ppi.ppi_mean(y, f, f_all)
    assert default == ppi.ppi_mean(y, f, f_all, level=0.95, tune=True)
    assert default.level == 0.95 and np.isfinite([default.low, default.high]).all()
    assert ppi.classical_mean(y) == ppi.classical_mean(y, level=0.95)
    assert ppi.naive_mean(f_all) == ppi.naive_mean(f_all, level=0.95)


def test_lambda_is_clipped_to_zero_and_one():
    y, f, f_all = interior_world()
    assert ppi.tuned_lambda(y, -f, -f_all) == 0.0  # a judge that predicts the opposite
    # A judge at half the scale of Y: unclipped λ would be about 2.
    rng = np.random.default_rng(3)
    truth = rng.normal(0, 1, 400)
    assert ppi.tuned_lambda(truth[:100], truth[:100] / 2, truth[100:] / 2) == 1.0


def test_a_constant_judge_gives_the_humans_only_interval():
    """Zero variance of the predictions: λ = 0, and PPI++ is the classical interval exactly."""
    y, _, _ = interior_world()
    constant = ppi.ppi_mean(y, np.full(len(y), 0.7), np.full(50, 0.7), level=0.9)
    classical = ppi.classical_mean(y, level=0.9)
    assert ppi.tuned_lambda(y, np.full(len(y), 0.7), np.full(50, 0.7)) == 0.0
    assert (constant.estimate, constant.low, constant.high, constant.lam) == (
        classical.estimate,
        classical.low,
        classical.high,
        0.0,
    )


def normal_interval(values, level):
    """The textbook interval mean ± z·s/√n, from the standard library alone."""
    values = [float(v) for v in values]
    z = statistics.NormalDist().inv_cdf(0.5 + level / 2)
    half = z * statistics.stdev(values) / math.sqrt(len(values))
    return statistics.fmean(values) - half, statistics.fmean(values) + half


@pytest.mark.parametrize("level", [0.9, 0.95])
def test_humans_only_and_judge_only_are_the_textbook_interval(level):
    y, _, f_all = interior_world()
    classical, naive = ppi.classical_mean(y, level), ppi.naive_mean(f_all, level)
    for estimate, values in ((classical, y), (naive, f_all)):
        low, high = normal_interval(values, level)
        assert estimate.low == pytest.approx(low, rel=1e-12)
        assert estimate.high == pytest.approx(high, rel=1e-12)
        assert estimate.estimate == pytest.approx(np.mean(values), rel=1e-12)
        assert estimate.level == level
    assert (classical.lam, classical.n_labelled, classical.n_unlabelled) == (0.0, len(y), 0)
    assert (naive.lam, naive.n_labelled, naive.n_unlabelled) == (1.0, 0, len(f_all))
    assert (classical.method, naive.method) == ("humans only", "judge only")
    ppi_py = pytest.importorskip("ppi_py")
    low, high = ppi_py.classical_mean_ci(stretched(y), alpha=1 - level)
    assert (classical.low, classical.high) == pytest.approx((low, high), rel=1e-12)


def test_inputs_that_cannot_give_an_estimate_are_refused():
    y, f, f_all = interior_world()
    with pytest.raises(ValueError, match="same item"):
        ppi.ppi_mean(y, f[:-1], f_all)
    with pytest.raises(ValueError, match="at least two"):
        ppi.ppi_mean(y[:1], f[:1], f_all)
    with pytest.raises(ValueError, match="at least two"):
        ppi.ppi_mean(y, f, f_all[:1])
    smallest = ppi.ppi_mean(y[:2], f[:2], f_all[:2], tune=False)  # two and two are enough
    assert np.isfinite([smallest.low, smallest.high]).all()


def test_plain_lists_are_accepted():
    y, f, f_all = (list(map(float, a)) for a in interior_world())
    assert ppi.classical_mean(y) == ppi.classical_mean(np.array(y))
    assert ppi.naive_mean(f_all) == ppi.naive_mean(np.array(f_all))
    assert ppi.ppi_mean(y, f, f_all) == ppi.ppi_mean(np.array(y), np.array(f), np.array(f_all))
