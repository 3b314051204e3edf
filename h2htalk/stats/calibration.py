"""Calibrating an automatic judge to human pairwise preferences, and judging judges.

Plain functions on arrays and DataFrames; nothing here touches the database.

The model. For a comparison of response A with response B (A is the canonical side: the
companion with the lower id, as in annotation.models; it is not a screen position),

    P(a human prefers A over B) = σ(b + Σ_k w_k · (Δ_k − mean_k) / scale_k),  Δ_k = f_k(A) − f_k(B)

where f are judge features (reference metrics, LLM rubric scores, length). A feature missing
on either side gives Δ_k = 0 (it says nothing about the pair). Because A/B is only the
canonical order, the model is fitted *antisymmetric*: no intercept (b = 0) and mean_k = 0, so
P(A over B) = 1 − P(B over A) exactly and an identity effect of "the lower-id companion" cannot
leak into the weights. scale_k is the root mean square of Δ_k on the training data (the
standard deviation of the mirrored, ±Δ, data), 1 for a feature that is always 0.

Targets. Every human vote is an outcome: A better = 1, B better = 0, tie = ½. A comparison
with votes (n_A, n_tie, n_B) enters the likelihood as two rows, y = 1 with weight n_A + ½n_tie
and y = 0 with weight n_B + ½n_tie: the fitted p is the probability that one more human prefers
A (ties counting half). The L2 strength C of scikit-learn's LogisticRegression is chosen from
a grid by cross-validated vote-level log-loss with GroupKFold *by scenario* inside the training
data; held-out numbers come from an outer GroupKFold by scenario, so no scenario is ever both
trained and tested on (`group_splits` checks it on every split).

The three judges compared, each giving p = P(A over B) for a comparison:
- raw: the LLM judge's own verdict turned into a probability (single-answer grading:
  σ(mean rubric score of A − mean of B), scale 1; pairwise: the share of its verdicts for A
  over both presentation orders, ties half); it has no parameter, so nothing is fitted;
- composite: the paper's hand-set composite, σ(s · Δcomposite) with the single slope s fitted
  on the training folds only (so it is calibrated as fairly as one parameter allows);
- calibrated: the full model above.

Metrics on held-out predictions (pooled over the outer folds):
- accuracy against the human majority (agreement.majority_labels: plurality of A / tie / B,
  a tied top broken by the summed 5-point preference):
  * without ties: comparisons whose majority is A or B; the judge is right when p is on that
    side of ½; p exactly ½ scores ½ (a coin flip);
  * with ties: all comparisons; the judge says "tie" when |p − ½| ≤ δ, the tie band δ chosen on
    the *training* folds to maximise this accuracy (grid TIE_BANDS); A when p > ½ + δ, B below;
- Cohen's κ between those three-way calls and the majority, on mirrored items (each
  comparison once as (call, majority) and once as (−call, −majority), agreement.pair_kappa):
  with A = the lower companion id and id order following strength, an unmirrored κ collapses
  towards 0 for a good judge because both marginals pile up on one side;
- log-loss and Brier score over votes (each vote an outcome as above, so the Brier score includes
  the humans' own disagreement, the same for every judge);
- expected calibration error: equal-width bins of p (10 by default), the vote-weighted
  |observed share − mean p| per bin, weighted by the bin's share of votes, on mirrored items
  (each comparison as p and as 1 − p with its votes swapped, `mirrored_reliability`, so
  it does not depend on which companion is A); the bins are the data of the reliability
  diagram;
- system level: Bradley–Terry strengths of the companions from the human votes (a tie half a
  win each) and from the judge's held-out probabilities (each comparison p wins for A, 1 − p
  for B: the same comparisons, so both rankings rest on the same design; a judge's mean score
  would instead depend on which scenarios each companion happened to meet), and the Spearman
  and Kendall (τ-b) correlations between the two; undefined (None) with fewer than three
  companions.
"""

import hashlib
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import optimize, stats
from scipy.special import expit, log_expit
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GroupKFold

from . import bradley_terry
from .agreement import majority_labels, pair_kappa

C_GRID = tuple(float(c) for c in np.logspace(-3, 3, 7))
TIE_BANDS = tuple(round(0.01 * i, 2) for i in range(31))  # δ in 0 … 0.30
ECE_BINS = 10
EPSILON = 1e-15  # probabilities are clipped to [ε, 1 − ε] for the log-loss
JUDGES = ("raw", "composite", "calibrated")
BOOTSTRAP_DRAWS = 1000


class LeakError(AssertionError):
    """A cross-validation split put one scenario in both training and test data."""


# ---------------------------------------------------------------- data


def votes_frame(judgments: pd.DataFrame, unit: str = "comparison") -> pd.DataFrame:
    """Per comparison from per-judgment rows (``comparison``, ``preference`` −2..2 pair-keyed):
    votes_a / votes_tie / votes_b, n_votes, mean_preference, majority (−1 A, 0 tie, 1 B) and
    majority_tied, as agreement.majority_labels counts them."""
    table = majority_labels(judgments, unit)
    mean = judgments.groupby(unit)["preference"].mean()
    table["mean_preference"] = mean.reindex(table.index).to_numpy(dtype=float)
    return table


def soft_target(votes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(share of votes for A with ties half, number of votes) from an n × 3 (A, tie, B) table."""
    votes = np.asarray(votes, dtype=float)
    n = votes.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        y = (votes[:, 0] + 0.5 * votes[:, 1]) / n
    return y, n


def votes_of(frame: pd.DataFrame) -> np.ndarray:
    return frame[["votes_a", "votes_tie", "votes_b"]].to_numpy(dtype=float)


def design_matrix(frame: pd.DataFrame, features: list[str]) -> np.ndarray:
    """The n × d matrix of feature differences (columns ``d_<feature>``), NaN → 0."""
    columns = [f"d_{name}" for name in features]
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"no column for {', '.join(missing)}")
    matrix = frame[columns].to_numpy(dtype=float) if columns else np.zeros((len(frame), 0))
    return np.where(np.isnan(matrix), 0.0, matrix)


def fingerprint(triples: Iterable[tuple[int, int, int]]) -> str:
    """sha256 of the sorted (comparison, annotator, preference) triples, one
    "comparison,annotator,preference" line each (integers, "\\n" after every line)."""
    digest = hashlib.sha256()
    for comparison, annotator, preference in sorted(
        (int(c), int(a), int(p)) for c, a, p in triples
    ):
        digest.update(f"{comparison},{annotator},{preference}\n".encode())
    return digest.hexdigest()


# ---------------------------------------------------------------- splits


def group_splits(groups, n_splits: int, seed: int = 0) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """GroupKFold (shuffled, seeded) train/test index arrays; no group is on both sides
    (checked on every split: LeakError otherwise). n_splits is capped at the number of groups."""
    groups = np.asarray(groups)
    n_groups = len(np.unique(groups))
    if n_groups < 2:
        raise ValueError("cross-validation needs at least two scenarios")
    splitter = GroupKFold(n_splits=min(n_splits, n_groups), shuffle=True, random_state=seed)
    for train, test in splitter.split(np.zeros(len(groups)), groups=groups):
        if np.intersect1d(groups[train], groups[test]).size:
            raise LeakError("a scenario is in both the training and the test fold")
        yield train, test


# ---------------------------------------------------------------- the model


@dataclass
class Model:
    """A fitted calibrated judge: p = σ(intercept + Σ w·(Δ − mean)/scale)."""

    features: list[str]
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray  # on the standardised differences
    intercept: float
    C: float

    def decision(self, X: np.ndarray) -> np.ndarray:
        return linear_decision(X, self.mean, self.scale, self.weights, self.intercept)

    def predict(self, X: np.ndarray) -> np.ndarray:
        return expit(self.decision(X))

    @property
    def raw_weights(self) -> np.ndarray:
        """Weights per unit of the unstandardised difference (w / scale)."""
        return self.weights / self.scale


def linear_decision(X, mean, scale, weights, intercept) -> np.ndarray:
    """intercept + Σ_k w_k (X_k − mean_k) / scale_k, summed feature by feature in order (the
    same arithmetic for one pair or many, so exported judges score identically everywhere)."""
    X = np.asarray(X, dtype=float)
    X = np.where(np.isnan(X), 0.0, X)
    z = np.full(X.shape[0], float(intercept))
    for k in range(X.shape[1]):
        z = z + float(weights[k]) * ((X[:, k] - float(mean[k])) / float(scale[k]))
    return z


def fit_scaling(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean, scale) of antisymmetric differences: mean 0, scale = root mean square (1 if 0)."""
    X = np.asarray(X, dtype=float)
    scale = np.sqrt((X**2).mean(axis=0)) if len(X) else np.ones(X.shape[1])
    scale = np.where(scale > 0, scale, 1.0)
    return np.zeros(X.shape[1]), scale


def _rows(Z: np.ndarray, votes: np.ndarray):
    """Two weighted rows per comparison (y = 1 and y = 0); zero-weight rows dropped."""
    y, n = soft_target(votes)
    weight = np.concatenate([n * y, n * (1 - y)])
    keep = weight > 0
    Z2 = np.vstack([Z, Z])[keep]
    y2 = np.concatenate([np.ones(len(Z)), np.zeros(len(Z))])[keep]
    return Z2, y2, weight[keep]


def _path(Z: np.ndarray, votes: np.ndarray, Cs) -> list[np.ndarray]:
    """Weights for each C (ascending), warm-started along the path."""
    Z2, y2, weight = _rows(Z, votes)
    if Z.shape[1] == 0:
        return [np.zeros(0) for _ in Cs]
    if len(np.unique(y2)) < 2:
        raise ValueError("every vote in the training data went the same way: nothing to fit")
    model = LogisticRegression(
        fit_intercept=False, solver="newton-cholesky", max_iter=200, tol=1e-8, warm_start=True
    )
    out = []
    for C in Cs:
        model.set_params(C=float(C))
        model.fit(Z2, y2, sample_weight=weight)
        out.append(model.coef_[0].copy())
    return out


def vote_log_loss(p, votes) -> float:
    """Mean log-loss over votes (A = 1, B = 0, tie = ½) of predictions p = P(A)."""
    p = np.clip(np.asarray(p, dtype=float), EPSILON, 1 - EPSILON)
    votes = np.asarray(votes, dtype=float)
    a = votes[:, 0] + 0.5 * votes[:, 1]
    b = votes[:, 2] + 0.5 * votes[:, 1]
    total = votes.sum()
    if total == 0:
        return float("nan")
    return float(-(a * np.log(p) + b * np.log1p(-p)).sum() / total)


def choose_C(
    X: np.ndarray, votes: np.ndarray, groups, Cs=C_GRID, folds: int = 5, seed: int = 0
) -> tuple[float, list[float]]:
    """The C with the lowest pooled vote-level log-loss over GroupKFold(by scenario) validation
    folds of this data (the smaller C on an exact tie), and the log-loss of every C."""
    Cs = sorted(float(c) for c in Cs)
    losses = np.zeros(len(Cs))
    for train, test in group_splits(groups, folds, seed):
        mean, scale = fit_scaling(X[train])
        Z_train = (X[train] - mean) / scale
        Z_test = (X[test] - mean) / scale
        for i, w in enumerate(_path(Z_train, votes[train], Cs)):
            p = expit(Z_test @ w) if len(w) else np.full(len(test), 0.5)
            losses[i] += vote_log_loss(p, votes[test]) * votes[test].sum()
    losses /= votes.sum()
    best = int(np.argmin(losses))
    return Cs[best], [float(v) for v in losses]


def fit_model(
    X: np.ndarray,
    votes: np.ndarray,
    groups,
    features: list[str],
    Cs=C_GRID,
    folds: int = 5,
    seed: int = 0,
) -> tuple[Model, list[float]]:
    """Choose C by GroupKFold CV on this data, then fit on all of it. Returns the model and the
    CV log-loss per C."""
    X = np.asarray(X, dtype=float)
    votes = np.asarray(votes, dtype=float)
    if len(Cs) > 1:
        C, losses = choose_C(X, votes, groups, Cs, folds, seed)
    else:
        C, losses = float(Cs[0]), [float("nan")]
    mean, scale = fit_scaling(X)
    (weights,) = _path((X - mean) / scale, votes, [C])
    return Model(list(features), mean, scale, weights, 0.0, C), losses


def fit_slope(diff, votes) -> float:
    """The s maximising the vote likelihood of σ(s · diff) (one parameter, no intercept)."""
    diff = np.asarray(diff, dtype=float)
    diff = np.where(np.isnan(diff), 0.0, diff)
    a, b = _ab(votes)

    def loss(s):
        z = s * diff
        return -(a * log_expit(z) + b * log_expit(-z)).sum()

    if not np.any(diff):
        return 0.0
    bound = 50.0 / max(float(np.abs(diff).max()), 1e-12)
    result = optimize.minimize_scalar(
        loss, bounds=(-bound, bound), method="bounded", options={"xatol": 1e-10 * bound}
    )
    return float(result.x)


def _ab(votes):
    votes = np.asarray(votes, dtype=float)
    return votes[:, 0] + 0.5 * votes[:, 1], votes[:, 2] + 0.5 * votes[:, 1]


# ---------------------------------------------------------------- metrics


def three_way(p, delta: float) -> np.ndarray:
    """Calls from probabilities: −1 (A) when p > ½ + δ, 1 (B) when p < ½ − δ, else 0 (tie)."""
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


def bt_strengths(companion_a, companion_b, wins_a, wins_b, companions) -> np.ndarray:
    """Bradley–Terry log-strengths for `companions` from per-comparison (fractional) wins."""
    index = {c: i for i, c in enumerate(companions)}
    a = np.array([index[c] for c in companion_a], dtype=np.int64)
    b = np.array([index[c] for c in companion_b], dtype=np.int64)
    wins = np.zeros((len(companions), len(companions)))
    np.add.at(wins, (a, b), np.asarray(wins_a, dtype=float))
    np.add.at(wins, (b, a), np.asarray(wins_b, dtype=float))
    return bradley_terry.fit(wins)


def rank_correlations(x, y) -> tuple[float | None, float | None]:
    """(Spearman ρ, Kendall τ-b) of two strength vectors; None with fewer than three items or
    no variation."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None, None
    rho = stats.spearmanr(x, y).statistic
    tau = stats.kendalltau(x, y).statistic
    return (None if np.isnan(rho) else float(rho)), (None if np.isnan(tau) else float(tau))


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


# ---------------------------------------------------------------- cross-validation


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
    X = design_matrix(frame, features)
    votes = votes_of(frame)
    groups = frame["scenario"].to_numpy()
    majority = frame["majority"].to_numpy()
    n = len(frame)
    judges = _judges(frame)
    predictions = {name: np.full(n, np.nan) for name in judges}
    bands = {name: np.full(n, np.nan) for name in judges}
    fold_of = np.full(n, -1)
    fold_rows = []
    splits = list(group_splits(groups, folds, seed))
    for k, (train, test) in enumerate(splits):
        if progress:
            progress(k, len(splits), f"fold {k + 1} of {len(splits)}")
        fold_of[test] = k
        row = {
            "fold": k + 1,
            "train": len(train),
            "test": len(test),
            "test_scenarios": len(np.unique(groups[test])),
        }
        in_sample = {}
        if "raw" in judges:
            predictions["raw"][test] = frame["raw"].to_numpy(dtype=float)[test]
            in_sample["raw"] = frame["raw"].to_numpy(dtype=float)[train]
        if "composite" in judges:
            diff = frame["composite_diff"].to_numpy(dtype=float)
            slope = fit_slope(diff[train], votes[train])
            predictions["composite"][test] = expit(slope * diff[test])
            in_sample["composite"] = expit(slope * diff[train])
            row["slope"] = slope
        model, _ = fit_model(
            X[train], votes[train], groups[train], features, Cs, inner_folds, seed + k + 1
        )
        predictions["calibrated"][test] = model.predict(X[test])
        in_sample["calibrated"] = model.predict(X[train])
        row["C"] = model.C
        for name, p_train in in_sample.items():
            delta = choose_tie_band(p_train, majority[train])
            bands[name][test] = delta
            row[f"tie_band_{name}"] = delta
            p_test = predictions[name][test]
            row[f"accuracy_{name}"] = accuracy_without_ties(p_test, majority[test])[0]
            row[f"log_loss_{name}"] = vote_log_loss(p_test, votes[test])
        fold_rows.append(row)
    if progress:
        progress(len(splits), len(splits), "held-out metrics")
    metrics = {}
    for name in JUDGES:
        if name not in judges:
            metrics[name] = None
            continue
        metrics[name] = _pooled_metrics(predictions[name], votes, majority, bands[name], bins)
    system = system_level(frame, predictions)
    for name in judges:
        metrics[name]["spearman"] = system["correlations"][name]["spearman"]
        metrics[name]["kendall"] = system["correlations"][name]["kendall"]
    comparison = compare_judges(predictions, votes, groups, seed)
    return CVResult(
        predictions=predictions,
        fold=fold_of,
        tie_band=bands,
        folds=fold_rows,
        metrics=metrics,
        system=system,
        comparison=comparison,
        n_comparisons=n,
        n_votes=int(votes.sum()),
        n_scenarios=len(np.unique(groups)),
        n_folds=len(splits),
        judges=judges,
    )


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


def _pooled_metrics(p, votes, majority, band, bins) -> dict:
    """Metrics on the pooled held-out predictions; each comparison's three-way call uses the
    tie band of the fold it was tested in. The reported tie band is their vote-weighted mean."""
    out = judge_metrics(p, votes, majority, 0.0, bins)
    calls = three_way_per_row(p, band)
    majority = np.asarray(majority)
    out["accuracy_with_ties"] = float((calls == majority).mean()) if len(p) else float("nan")
    out["kappa"] = pair_kappa(calls.astype(float), majority.astype(float))
    out["tie_band"] = float(np.mean(band)) if len(band) else float("nan")
    return out


def three_way_per_row(p, band) -> np.ndarray:
    p, band = np.asarray(p, dtype=float), np.asarray(band, dtype=float)
    return np.where(p - 0.5 > band, -1, np.where(0.5 - p > band, 1, 0))


def system_level(frame: pd.DataFrame, predictions: dict[str, np.ndarray]) -> dict:
    """Companion strengths (Bradley–Terry, Elo scale) from the humans and from each judge's
    held-out probabilities, and the rank correlations with the humans'."""
    a = frame["companion_a"].to_numpy()
    b = frame["companion_b"].to_numpy()
    companions = sorted(set(a.tolist()) | set(b.tolist()))
    votes = votes_of(frame)
    human = bt_strengths(
        a, b, votes[:, 0] + 0.5 * votes[:, 1], votes[:, 2] + 0.5 * votes[:, 1], companions
    )
    strengths = {"human": bradley_terry.to_elo(human)}
    correlations = {}
    for name, p in predictions.items():
        theta = bt_strengths(a, b, p, 1 - p, companions)
        strengths[name] = bradley_terry.to_elo(theta)
        rho, tau = rank_correlations(human, theta)
        correlations[name] = {"spearman": rho, "kendall": tau}
    return {
        "companions": companions,
        "elo": {name: [float(v) for v in values] for name, values in strengths.items()},
        "correlations": correlations,
    }


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
        a, b = _ab(votes)
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
    """One plain sentence: is the calibrated judge better than the paper's composite held out?"""
    if "composite" not in comparison or metrics.get("composite") is None:
        return "No composite to compare with: the paper's composite needs reference metrics."
    c = comparison["composite"]
    ours, theirs = metrics["calibrated"]["log_loss"], metrics["composite"]["log_loss"]
    interval = (
        f"difference {c['log_loss_difference']:+.3f}, 95% CI {c['low']:+.3f} to "
        f"{c['high']:+.3f} by resampling scenarios"
    )
    if c["worse"]:
        return (
            f"The calibrated judge is worse than the paper's composite on held-out data "
            f"(log-loss {ours:.3f} vs {theirs:.3f}; {interval}): do not use it in place of "
            "the composite."
        )
    return (
        f"The calibrated judge beats the paper's composite on held-out data (log-loss "
        f"{ours:.3f} vs {theirs:.3f}; {interval})."
    )


def heldout_summary(result: CVResult) -> dict:
    """The held-out part of an exported document (JSON-safe)."""
    return _json_safe(
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


def _json_safe(value):
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return [_json_safe(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


json_safe = _json_safe
