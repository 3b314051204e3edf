"""The calibrated judge's model: antisymmetric L2 logistic regression on feature differences
(C chosen by cross-validation by scenario), and the one-slope fit of the paper's composite."""

from dataclasses import dataclass

import numpy as np
from scipy import optimize
from scipy.special import expit, log_expit
from sklearn.linear_model import LogisticRegression

from . import splits
from .data import soft_target
from .decision import linear_decision  # also imported from here by the fitting code
from .metrics import vote_log_loss, vote_outcomes

C_GRID = tuple(float(c) for c in np.logspace(-3, 3, 7))


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


def choose_C(
    X: np.ndarray, votes: np.ndarray, groups, Cs=C_GRID, folds: int = 5, seed: int = 0
) -> tuple[float, list[float]]:
    """The C with the lowest pooled vote-level log-loss over GroupKFold(by scenario) validation
    folds of this data (the smaller C on an exact tie), and the log-loss of every C."""
    Cs = sorted(float(c) for c in Cs)
    losses = np.zeros(len(Cs))
    for train, test in splits.group_splits(groups, folds, seed):
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
    a, b = vote_outcomes(votes)

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
