"""Prediction-powered inference for a mean (PPI and PPI++ with power tuning).

A judge's predictions f on all N items are corrected by the n items humans labelled:
    θ̂ = λ·mean f(X̃) + mean(Y − λ·f(X)),
    Var θ̂ ≈ λ²·Var f(X̃)/N + Var(Y − λ·f(X))/n,
with λ = 1 for plain PPI and, for PPI++, λ̂ = Cov(Y, f) / ((1 + n/N)·Var f) clipped to [0, 1]
(Angelopoulos, Duchi & Zrnic 2023). Checked against `ppi_py` in the tests. Note that ppi_py's
own default interval is 90% (alpha=0.1); here the default is 95% and every result says so.
"""

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri  # the normal quantile (scipy.stats.norm.ppf, without scipy.stats)


@dataclass
class Estimate:
    estimate: float
    low: float
    high: float
    level: float  # confidence level of [low, high]
    lam: float  # power-tuning weight on the predictions (1 = plain PPI, 0 = humans only)
    n_labelled: int
    n_unlabelled: int
    method: str


def tuned_lambda(y, f_labelled, f_unlabelled) -> float:
    y, f, f_all = (np.asarray(a, float) for a in (y, f_labelled, f_unlabelled))
    n, big_n = len(y), len(f_all)
    pooled = np.concatenate([f, f_all])
    if pooled.min() == pooled.max():  # a constant judge: its float variance need not be 0
        return 0.0
    variance = pooled.var(ddof=1)
    covariance = np.cov(y, f, ddof=1)[0, 1]
    return float(np.clip(covariance / ((1 + n / big_n) * variance), 0.0, 1.0))


def ppi_mean(y, f_labelled, f_unlabelled, level: float = 0.95, tune: bool = True) -> Estimate:
    """Mean of Y over the whole population from n human labels and N judge predictions."""
    y, f, f_all = (np.asarray(a, float) for a in (y, f_labelled, f_unlabelled))
    if len(y) != len(f):
        raise ValueError("each human label needs the judge's prediction on the same item")
    if len(y) < 2 or len(f_all) < 2:
        raise ValueError("PPI needs at least two labelled and two unlabelled items")
    lam = tuned_lambda(y, f, f_all) if tune else 1.0
    rectifier = y - lam * f
    estimate = lam * f_all.mean() + rectifier.mean()
    variance = lam**2 * f_all.var(ddof=1) / len(f_all) + rectifier.var(ddof=1) / len(y)
    half = ndtri(0.5 + level / 2) * np.sqrt(variance)
    return Estimate(
        float(estimate),
        float(estimate - half),
        float(estimate + half),
        level,
        lam,
        len(y),
        len(f_all),
        "PPI++ (power-tuned)" if tune else "PPI",
    )


def classical_mean(y, level: float = 0.95) -> Estimate:
    """Humans only: the mean of the labels with a normal-approximation interval."""
    y = np.asarray(y, float)
    half = ndtri(0.5 + level / 2) * y.std(ddof=1) / np.sqrt(len(y))
    mean = float(y.mean())
    return Estimate(mean, mean - half, mean + half, level, 0.0, len(y), 0, "humans only")


def naive_mean(f_unlabelled, level: float = 0.95) -> Estimate:
    """The judge alone: precise, but biased by whatever the judge gets wrong."""
    f = np.asarray(f_unlabelled, float)
    half = ndtri(0.5 + level / 2) * f.std(ddof=1) / np.sqrt(len(f))
    mean = float(f.mean())
    return Estimate(mean, mean - half, mean + half, level, 1.0, 0, len(f), "judge only")
