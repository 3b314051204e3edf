"""PPI / PPI++ against ppi_py, and coverage on simulated data with a biased judge."""

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
