"""The other agreement coefficients: percent agreement, Cohen's κ (generic and on pair-keyed
labels), Fleiss' κ, and the rater × rater agreement shares of a heat map."""

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .krippendorff_alpha import pairable_units, value_counts


def percent_agreement(matrix) -> float:
    """Pairwise percent agreement: per pairable unit, the share of rater pairs giving the
    same value, averaged over units (Fleiss' P̄, for any number of raters per unit)."""
    counts, _ = value_counts(matrix)
    counts = pairable_units(counts).astype(float)
    if len(counts) == 0:
        return float("nan")
    m = counts.sum(axis=1)
    return float(((counts * (counts - 1)).sum(axis=1) / (m * (m - 1))).mean())


def cohen_kappa(x, y, weights: str | None = None) -> float:
    """Cohen's κ of two raters on the units both rated (NaN = not rated).

    `weights` None, "linear" or "quadratic" (distances between category ranks, as sklearn).
    NaN when undefined (fewer than two shared units, or no variation).
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    both = ~np.isnan(x) & ~np.isnan(y)
    x, y = x[both], y[both]
    if len(x) < 2:
        return float("nan")
    categories, codes = np.unique(np.concatenate([x, y]), return_inverse=True)
    size = len(categories)
    observed = np.zeros((size, size))
    np.add.at(observed, (codes[: len(x)], codes[len(x) :]), 1)
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0)) / observed.sum()
    rank = np.abs(np.arange(size)[:, None] - np.arange(size)[None, :])
    if weights is None:
        penalty = (rank > 0).astype(float)
    elif weights == "linear":
        penalty = rank.astype(float)
    elif weights == "quadratic":
        penalty = rank.astype(float) ** 2
    else:
        raise ValueError("weights must be None, 'linear' or 'quadratic'")
    denominator = (penalty * expected).sum()
    if denominator == 0:
        return float("nan")
    return float(1 - (penalty * observed).sum() / denominator)


def cohen_kappa_pairs(
    matrix, min_overlap: int = 20, weights: str | None = None, mirror: bool = False
) -> pd.DataFrame:
    """Cohen's κ for every pair of raters sharing at least `min_overlap` units (`mirror`: on
    pair-keyed preferences, `pair_kappa`)."""
    coefficient = pair_kappa if mirror else cohen_kappa
    frame = matrix if isinstance(matrix, pd.DataFrame) else pd.DataFrame(np.asarray(matrix))
    data = frame.to_numpy(dtype=float)
    present = ~np.isnan(data)
    overlap = present.astype(np.int64) @ present.T.astype(np.int64)
    rows = []
    for i in range(len(data)):
        for j in range(i + 1, len(data)):
            if overlap[i, j] >= min_overlap:
                kappa = coefficient(data[i], data[j], weights)
                rows.append((frame.index[i], frame.index[j], int(overlap[i, j]), kappa))
    return pd.DataFrame(rows, columns=["rater_1", "rater_2", "n", "kappa"])


def fleiss_kappa_counts(counts) -> float:
    """Fleiss' κ from a units × categories count table with the same raters per unit."""
    counts = np.asarray(counts, dtype=float)
    n = counts.sum(axis=1)
    if len(counts) == 0 or not np.all(n == n[0]) or n[0] < 2:
        raise ValueError("Fleiss' κ needs the same number (≥ 2) of ratings on every unit")
    n = n[0]
    p_unit = ((counts * counts).sum(axis=1) - n) / (n * (n - 1))
    p_category = counts.sum(axis=0) / counts.sum()
    chance = (p_category**2).sum()
    if chance == 1:
        return float("nan")
    return float((p_unit.mean() - chance) / (1 - chance))


@dataclass
class FleissResult:
    kappa: float
    n_units: int  # units used (exactly n_raters ratings)
    n_raters: int  # ratings per unit
    n_skipped: int  # pairable units with another number of ratings


def fleiss_kappa(matrix, n_raters: int | None = None) -> FleissResult:
    """Fleiss' κ on the units with exactly `n_raters` ratings (default: the most common count
    among pairable units, the larger on a tie); the others are skipped and counted."""
    counts, _ = value_counts(matrix)
    counts = pairable_units(counts)
    m = counts.sum(axis=1)
    if len(m) == 0:
        return FleissResult(float("nan"), 0, 0, 0)
    if n_raters is None:
        sizes, frequency = np.unique(m, return_counts=True)
        n_raters = int(sizes[frequency == frequency.max()].max())
    used = m == n_raters
    if not used.any():
        return FleissResult(float("nan"), 0, n_raters, len(m))
    kappa = fleiss_kappa_counts(counts[used])
    return FleissResult(kappa, int(used.sum()), n_raters, int((~used).sum()))


def pair_kappa(x, y, weights: str | None = None) -> float:
    """Cohen's κ on pair-keyed labels (values symmetric about 0, e.g. −1 A / 0 tie / 1 B), each
    item counted once as (x, y) and once as (−x, −y): the same whichever side is A."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    return cohen_kappa(np.concatenate([x, -x]), np.concatenate([y, -y]), weights)


def pairwise_agreement(matrix: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Share of shared units on which two raters gave the same value, and the shared counts
    (raters × raters, NaN where two raters share no unit): the data of an agreement heat map."""
    data = matrix.to_numpy(dtype=float)
    present = ~np.isnan(data)
    values = np.unique(data[present])
    same = np.zeros((len(data), len(data)))
    for value in values:
        hot = (data == value).astype(np.int64)
        same += hot @ hot.T
    shared = present.astype(np.int64) @ present.T.astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(shared > 0, same / shared, np.nan)
    index = matrix.index
    return pd.DataFrame(share, index=index, columns=index), pd.DataFrame(
        shared, index=index, columns=index
    )
