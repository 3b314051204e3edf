"""Nested cross-validation by scenario of the three judges (raw, composite, calibrated), the
comparison of their held-out log-loss, and the held-out part of an exported document."""

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.special import expit

from ..leaderboard import json_safe
from . import splits
from .data import design_matrix, votes_of
from .metrics import (
    ECE_BINS,
    EPSILON,
    accuracy_without_ties,
    choose_tie_band,
    pooled_metrics,
    vote_log_loss,
    vote_outcomes,
)
from .model import C_GRID, fit_model, fit_slope
from .system import system_level

JUDGES = ("raw", "composite", "calibrated")
BOOTSTRAP_DRAWS = 1000


@dataclass
class CVResult:
    """Held-out predictions of every judge (NaN where a judge had none) and their metrics."""

    predictions: dict[str, np.ndarray]
    fold: np.ndarray  # outer fold each comparison was tested in
    tie_band: dict[str, np.ndarray]  # δ per comparison (its fold's, from training data)
    folds: list[dict]  # per fold: sizes, C, slope, δs, accuracy and log-loss per judge
    metrics: dict[str, dict | None]
    system: dict
    comparison: dict  # calibrated vs composite (and raw): log-loss differences with CIs
    n_comparisons: int
    n_votes: int
    n_scenarios: int
    n_folds: int
    judges: list[str] = field(default_factory=list)


def cross_validate(
    frame: pd.DataFrame,
    features: list[str],
    folds: int = 5,
    Cs=C_GRID,
    inner_folds: int = 5,
    seed: int = 0,
    bins: int = ECE_BINS,
    progress: Callable[[int, int, str], None] | None = None,
) -> CVResult:
    """Nested GroupKFold by scenario: held-out predictions for raw, composite and calibrated.

    `frame` columns: scenario, companion_a, companion_b, votes_a, votes_tie, votes_b,
    majority, ``d_<feature>`` for each feature; optional ``raw`` (the judge's P(A), NaN =
    none) and ``composite_diff`` (composite of A − composite of B).
    """
    held = _HeldOut.of(frame, features)
    outer = list(splits.group_splits(held.groups, folds, seed))
    fold_rows = []
    for k, (train, test) in enumerate(outer):
        if progress:
            progress(k, len(outer), f"fold {k + 1} of {len(outer)}")
        fold_rows.append(_run_fold(held, k, train, test, features, Cs, inner_folds, seed))
    if progress:
        progress(len(outer), len(outer), "held-out metrics")
    metrics = {
        name: pooled_metrics(
            held.predictions[name], held.votes, held.majority, held.bands[name], bins
        )
        if name in held.judges
        else None
        for name in JUDGES
    }
    system = system_level(frame, held.predictions)
    for name in held.judges:
        metrics[name]["spearman"] = system["correlations"][name]["spearman"]
        metrics[name]["kendall"] = system["correlations"][name]["kendall"]
    return CVResult(
        predictions=held.predictions,
        fold=held.fold_of,
        tie_band=held.bands,
        folds=fold_rows,
        metrics=metrics,
        system=system,
        comparison=compare_judges(held.predictions, held.votes, held.groups, seed),
        n_comparisons=len(frame),
        n_votes=int(held.votes.sum()),
        n_scenarios=len(np.unique(held.groups)),
        n_folds=len(outer),
        judges=held.judges,
    )


@dataclass
class _HeldOut:
    """The table every outer fold reads, and the held-out predictions and tie bands the folds
    fill in (each comparison in the one fold that tests it)."""

    frame: pd.DataFrame
    X: np.ndarray
    votes: np.ndarray
    groups: np.ndarray
    majority: np.ndarray
    judges: list[str]
    predictions: dict[str, np.ndarray]
    bands: dict[str, np.ndarray]
    fold_of: np.ndarray

    @classmethod
    def of(cls, frame: pd.DataFrame, features: list[str]) -> "_HeldOut":
        n = len(frame)
        judges = _judges(frame)
        return cls(
            frame=frame,
            X=design_matrix(frame, features),
            votes=votes_of(frame),
            groups=frame["scenario"].to_numpy(),
            majority=frame["majority"].to_numpy(),
            judges=judges,
            predictions={name: np.full(n, np.nan) for name in judges},
            bands={name: np.full(n, np.nan) for name in judges},
            fold_of=np.full(n, -1),
        )


def _run_fold(held: _HeldOut, k: int, train, test, features, Cs, inner_folds, seed) -> dict:
    """Fit every judge on the training comparisons of outer fold `k`, predict its test
    comparisons into `held`, and return the fold's row (sizes, C, slope, δs, accuracy and
    log-loss per judge)."""
    frame, votes, majority, predictions = held.frame, held.votes, held.majority, held.predictions
    held.fold_of[test] = k
    row = {
        "fold": k + 1,
        "train": len(train),
        "test": len(test),
        "test_scenarios": len(np.unique(held.groups[test])),
    }
    in_sample = {}
    if "raw" in held.judges:
        predictions["raw"][test] = frame["raw"].to_numpy(dtype=float)[test]
        in_sample["raw"] = frame["raw"].to_numpy(dtype=float)[train]
    if "composite" in held.judges:
        diff = frame["composite_diff"].to_numpy(dtype=float)
        slope = fit_slope(diff[train], votes[train])
        predictions["composite"][test] = expit(slope * diff[test])
        in_sample["composite"] = expit(slope * diff[train])
        row["slope"] = slope
    X, groups = held.X, held.groups
    model, _ = fit_model(
        X[train], votes[train], groups[train], features, Cs, inner_folds, seed + k + 1
    )
    predictions["calibrated"][test] = model.predict(X[test])
    in_sample["calibrated"] = model.predict(X[train])
    row["C"] = model.C
    for name, p_train in in_sample.items():
        delta = choose_tie_band(p_train, majority[train])
        held.bands[name][test] = delta
        row[f"tie_band_{name}"] = delta
        p_test = predictions[name][test]
        row[f"accuracy_{name}"] = accuracy_without_ties(p_test, majority[test])[0]
        row[f"log_loss_{name}"] = vote_log_loss(p_test, votes[test])
    return row


def _judges(frame: pd.DataFrame) -> list[str]:
    judges = []
    if "raw" in frame.columns and frame["raw"].notna().any():
        if frame["raw"].isna().any():
            raise ValueError("the raw judge has no probability for some comparisons")
        judges.append("raw")
    if "composite_diff" in frame.columns and frame["composite_diff"].notna().any():
        judges.append("composite")
    judges.append("calibrated")
    return judges


def compare_judges(
    predictions: dict[str, np.ndarray],
    votes,
    groups,
    seed: int = 0,
    draws: int = BOOTSTRAP_DRAWS,
) -> dict:
    """Held-out log-loss of the calibrated judge minus that of the composite and of the raw
    judge, with 95% percentile intervals from resampling scenarios (groups) with replacement."""
    votes = np.asarray(votes, dtype=float)
    codes, _ = pd.factorize(np.asarray(groups))
    n_groups = codes.max() + 1 if len(codes) else 0
    weight = np.bincount(codes, weights=votes.sum(axis=1), minlength=n_groups)

    def per_group(p):
        p = np.clip(p, EPSILON, 1 - EPSILON)
        a, b = vote_outcomes(votes)
        loss = -(a * np.log(p) + b * np.log1p(-p))
        return np.bincount(codes, weights=loss, minlength=n_groups)

    out = {}
    calibrated = per_group(predictions["calibrated"])
    rng = np.random.default_rng(seed)
    resample = rng.multinomial(n_groups, np.full(n_groups, 1 / n_groups), size=draws).astype(float)
    for other in ("composite", "raw"):
        if other not in predictions:
            continue
        difference = calibrated - per_group(predictions[other])
        point = float(difference.sum() / weight.sum())
        boot = (resample @ difference) / (resample @ weight)
        low, high = np.quantile(boot, [0.025, 0.975])
        out[other] = {
            "log_loss_difference": point,
            "low": float(low),
            "high": float(high),
            "ci": 0.95,
            "draws": draws,
            "worse": point > 0,
        }
    return out


def verdict_sentence(metrics: dict, comparison: dict) -> str:
    """One plain sentence: is the calibrated judge better than the paper's composite held out?
    "Beats" only when the whole interval of the log-loss difference is below 0."""
    if "composite" not in comparison or metrics.get("composite") is None:
        return "No composite to compare with: the paper's composite needs reference metrics."
    c = comparison["composite"]
    ours, theirs = metrics["calibrated"]["log_loss"], metrics["composite"]["log_loss"]
    interval = (
        f"difference {c['log_loss_difference']:+.3f}, 95% CI {c['low']:+.3f} to "
        f"{c['high']:+.3f} by resampling scenarios"
    )
    if c["worse"]:
        margin = "" if c["low"] > 0 else ", though the interval includes 0"
        return (
            f"The calibrated judge is worse than the paper's composite on held-out data "
            f"(log-loss {ours:.3f} vs {theirs:.3f}; {interval}{margin}): do not use it in place "
            "of the composite."
        )
    if c["high"] >= 0:
        return (
            f"The calibrated judge and the paper's composite are not told apart on held-out "
            f"data (log-loss {ours:.3f} vs {theirs:.3f}; {interval}, which includes 0)."
        )
    return (
        f"The calibrated judge beats the paper's composite on held-out data (log-loss "
        f"{ours:.3f} vs {theirs:.3f}; {interval})."
    )


def heldout_summary(result: CVResult) -> dict:
    """The held-out part of an exported document (JSON-safe)."""
    return json_safe(
        {
            "cv": f"{result.n_folds}-fold GroupKFold by scenario (outer); C chosen by GroupKFold "
            "by scenario inside each training fold",
            "folds": result.n_folds,
            "comparisons": result.n_comparisons,
            "votes": result.n_votes,
            "scenarios": result.n_scenarios,
            "judges": result.metrics,
            "system": result.system,
            "comparison": result.comparison,
            "per_fold": result.folds,
            "verdict": verdict_sentence(result.metrics, result.comparison),
        }
    )
