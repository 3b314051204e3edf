"""Held-out numbers of one judge: accuracy with and without ties, κ, log-loss, Brier score and
the (mirrored) reliability table with its expected calibration error."""

import numpy as np

from ..agreement.coefficients import pair_kappa
from .data import soft_target

TIE_BANDS = tuple(round(0.01 * i, 2) for i in range(31))  # δ in 0 … 0.30
ECE_BINS = 10
EPSILON = 1e-15  # probabilities are clipped to [ε, 1 − ε] for the log-loss


def vote_log_loss(p, votes) -> float:
    """Mean log-loss over votes (A = 1, B = 0, tie = ½) of predictions p = P(A)."""
    p = np.clip(np.asarray(p, dtype=float), EPSILON, 1 - EPSILON)
    votes = np.asarray(votes, dtype=float)
    a, b = vote_outcomes(votes)
    total = votes.sum()
    if total == 0:
        return float("nan")
    return float(-(a * np.log(p) + b * np.log1p(-p)).sum() / total)


def vote_outcomes(votes) -> tuple[np.ndarray, np.ndarray]:
    """Per comparison, the votes counted for A and for B, a tie counting half for each."""
    votes = np.asarray(votes, dtype=float)
    return votes[:, 0] + 0.5 * votes[:, 1], votes[:, 2] + 0.5 * votes[:, 1]


def three_way(p, delta) -> np.ndarray:
    """Calls from probabilities: −1 (A) when p > ½ + δ, 1 (B) when p < ½ − δ, else 0 (tie).
    `delta` is one band or one per comparison (the band of the fold it was tested in)."""
    p = np.asarray(p, dtype=float)
    return np.where(p - 0.5 > delta, -1, np.where(0.5 - p > delta, 1, 0))


def accuracy_without_ties(p, majority) -> tuple[float, int]:
    """(accuracy, comparisons) on comparisons whose human majority is A or B; p = ½ scores ½."""
    p = np.asarray(p, dtype=float)
    majority = np.asarray(majority)
    decided = majority != 0
    if not decided.any():
        return float("nan"), 0
    side = np.sign(0.5 - p[decided])  # −1 = A, like the majority's keying
    score = np.where(side == 0, 0.5, (side == majority[decided]).astype(float))
    return float(score.mean()), int(decided.sum())


def accuracy_with_ties(p, majority, delta: float) -> float:
    majority = np.asarray(majority)
    if len(majority) == 0:
        return float("nan")
    return float((three_way(p, delta) == majority).mean())


def choose_tie_band(p, majority, bands=TIE_BANDS) -> float:
    """The δ with the best accuracy-with-ties on this (training) data; the smallest on a tie."""
    scores = [accuracy_with_ties(p, majority, delta) for delta in bands]
    return float(bands[int(np.argmax(scores))])


def kappa(p, majority, delta: float) -> float:
    """Cohen's κ (unweighted) between the judge's three-way calls and the human majority, each
    comparison counted once as (call, majority) and once mirrored (agreement.pair_kappa), so it
    does not depend on which companion is A."""
    return pair_kappa(three_way(p, delta).astype(float), np.asarray(majority, dtype=float))


def brier(p, votes) -> float:
    """Mean (p − outcome)² over votes (A = 1, B = 0, tie = ½)."""
    p = np.asarray(p, dtype=float)
    votes = np.asarray(votes, dtype=float)
    total = votes.sum()
    if total == 0:
        return float("nan")
    squared = votes[:, 0] * (p - 1) ** 2 + votes[:, 1] * (p - 0.5) ** 2 + votes[:, 2] * p**2
    return float(squared.sum() / total)


def reliability(p, votes, bins: int = ECE_BINS) -> tuple[float, list[dict]]:
    """Expected calibration error and the reliability table (equal-width bins of p).

    Per bin: lo, hi, comparisons, votes, mean_p and observed (vote-weighted), gap. The last bin
    is closed ([0.9, 1.0]); empty bins are listed with comparisons 0 and None values.
    """
    p = np.asarray(p, dtype=float)
    y, n = soft_target(votes)
    index = np.minimum((p * bins).astype(int), bins - 1)
    total = n.sum()
    ece = 0.0
    table = []
    for b in range(bins):
        inside = index == b
        weight = n[inside].sum()
        row = {
            "lo": b / bins,
            "hi": (b + 1) / bins,
            "comparisons": int(inside.sum()),
            "votes": float(weight),
            "mean_p": None,
            "observed": None,
            "gap": None,
        }
        if weight > 0:
            mean_p = float((n[inside] * p[inside]).sum() / weight)
            observed = float((n[inside] * y[inside]).sum() / weight)
            row.update(mean_p=mean_p, observed=observed, gap=observed - mean_p)
            ece += weight / total * abs(observed - mean_p)
        table.append(row)
    return (float(ece) if total else float("nan")), table


def mirrored_reliability(p, votes, bins: int = ECE_BINS) -> tuple[float, list[dict]]:
    """`reliability` with every comparison counted once as (p, votes) and once mirrored as
    (1 − p, votes with A and B swapped), as agreement's "Orientation" does for α and κ: which
    companion is A then changes nothing, and the diagram is symmetric about (½, ½). A bin's
    ``comparisons`` counts mirrored items (each comparison twice in all)."""
    p = np.asarray(p, dtype=float)
    votes = np.asarray(votes, dtype=float)
    return reliability(np.concatenate([p, 1 - p]), np.vstack([votes, votes[:, ::-1]]), bins)


def judge_metrics(p, votes, majority, delta: float, bins: int = ECE_BINS) -> dict:
    """Every held-out number of one judge on pooled predictions (see the module docstring)."""
    accuracy, decided = accuracy_without_ties(p, majority)
    ece, table = mirrored_reliability(p, votes, bins)
    return {
        "accuracy_without_ties": accuracy,
        "comparisons_without_ties": decided,
        "accuracy_with_ties": accuracy_with_ties(p, majority, delta),
        "kappa": kappa(p, majority, delta),
        "log_loss": vote_log_loss(p, votes),
        "brier": brier(p, votes),
        "ece": ece,
        "reliability": table,
    }


def pooled_metrics(p, votes, majority, band, bins) -> dict:
    """Metrics on the pooled held-out predictions; each comparison's three-way call uses the
    tie band of the fold it was tested in. The reported tie band is their vote-weighted mean."""
    out = judge_metrics(p, votes, majority, 0.0, bins)
    calls = three_way(p, np.asarray(band, dtype=float))
    majority = np.asarray(majority)
    out["accuracy_with_ties"] = float((calls == majority).mean()) if len(p) else float("nan")
    out["kappa"] = pair_kappa(calls.astype(float), majority.astype(float))
    out["tie_band"] = float(np.mean(band)) if len(band) else float("nan")
    return out
