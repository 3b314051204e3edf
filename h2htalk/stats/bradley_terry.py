"""Bradley–Terry strengths by maximum likelihood on aggregated pair counts, bootstrap CIs.

Outcomes are aggregated first into a win matrix W (W[i, j] = wins of i over j, a tie counting
half to each side), so a fit costs the same for a thousand or a million comparisons, and a
bootstrap draw is a multinomial reweighting of the (i, j, outcome) cell counts (the method of
Chatbot Arena's FastChat) instead of resampling rows.
"""

from dataclasses import dataclass

import numpy as np
from scipy.special import expit, log_expit, ndtr  # ndtr: the normal cdf (scipy.stats.norm.cdf)

ELO_SCALE = 400 / np.log(10)
ELO_BASE = 1000.0


@dataclass
class Cells:
    """Unique (i, j, outcome) cells and how often each occurred; outcome 1 = i won, 0.5 tie."""

    i: np.ndarray
    j: np.ndarray
    outcome: np.ndarray
    count: np.ndarray
    n_models: int

    def wins(self, weights: np.ndarray | None = None) -> np.ndarray:
        count = self.count if weights is None else weights
        matrix = np.zeros((self.n_models, self.n_models))
        np.add.at(matrix, (self.i, self.j), count * self.outcome)
        np.add.at(matrix, (self.j, self.i), count * (1 - self.outcome))
        return matrix


def aggregate(a, b, outcome, n_models: int) -> Cells:
    """Comparisons (model index a, model index b, outcome for a in {0, 0.5, 1}) → cells."""
    a, b, outcome = np.asarray(a, int), np.asarray(b, int), np.asarray(outcome, float)
    if not np.isin(outcome, (0.0, 0.5, 1.0)).all():
        raise ValueError("outcomes must be 0 (b won), 0.5 (tie) or 1 (a won)")
    if (a == b).any():
        raise ValueError("a model cannot be compared with itself")
    # Orient every cell low → high so (i, j) and (j, i) share cells; count with one bincount.
    swap = a > b
    low, high = np.where(swap, b, a), np.where(swap, a, b)
    won_twice = np.where(swap, 2 - 2 * outcome, 2 * outcome).astype(np.int64)
    codes = (low.astype(np.int64) * n_models + high) * 3 + won_twice
    counts = np.bincount(codes, minlength=n_models * n_models * 3)
    present = np.flatnonzero(counts)
    pair, won = np.divmod(present, 3)
    i, j = np.divmod(pair, n_models)
    return Cells(i, j, won / 2, counts[present].astype(float), n_models)


def _gradient_hessian(theta, wins, games, ridge):
    p = expit(theta[:, None] - theta[None, :])
    gradient = (wins - games * p).sum(axis=1) - 2 * ridge * theta
    weight = games * p * (1 - p)
    hessian = -weight
    np.fill_diagonal(hessian, weight.sum(axis=1) + 2 * ridge)
    return gradient, hessian  # hessian of the negative log-likelihood (positive definite)


def _log_likelihood(theta, wins, ridge):
    return (wins * log_expit(theta[:, None] - theta[None, :])).sum() - ridge * (theta @ theta)


def fit(
    wins: np.ndarray, ridge: float = 1e-4, tol: float = 1e-10, max_iter: int = 100
) -> np.ndarray:
    """Log-strengths θ (mean 0) maximising Σ W[i,j]·log σ(θi − θj) − ridge·Σθ², by Newton steps.

    The small ridge keeps the fit finite when a model won or lost every comparison.
    """
    games = wins + wins.T
    theta = np.zeros(wins.shape[0])
    current = _log_likelihood(theta, wins, ridge)
    for _ in range(max_iter):
        gradient, hessian = _gradient_hessian(theta, wins, games, ridge)
        step = np.linalg.solve(hessian, gradient)
        scale = 1.0
        while True:  # backtracking keeps every step an ascent step
            candidate = theta + scale * step
            value = _log_likelihood(candidate, wins, ridge)
            if value >= current - 1e-12 or scale < 1e-6:
                break
            scale /= 2
        theta, previous, current = candidate, current, value
        if abs(current - previous) <= tol * max(1.0, abs(current)):
            break
    return theta - theta.mean()


def covariance(wins: np.ndarray, theta: np.ndarray, ridge: float = 1e-4) -> np.ndarray:
    """Inverse observed information of θ (sum-to-zero constraint via the pseudo-inverse)."""
    _, hessian = _gradient_hessian(theta, wins, wins + wins.T, ridge)
    return np.linalg.pinv(hessian)


def to_elo(theta: np.ndarray) -> np.ndarray:
    return ELO_BASE + ELO_SCALE * theta


@dataclass
class Ranking:
    elo: np.ndarray  # point estimate per model
    low: np.ndarray  # lower CI bound
    high: np.ndarray  # upper CI bound
    rank: np.ndarray  # 1 + number of models significantly better
    level: float
    draws: np.ndarray  # bootstrap draws (n_boot × n_models) on the Elo scale


def bootstrap(cells: Cells, n_boot: int = 1000, level: float = 0.95, seed: int = 0) -> Ranking:
    """Point fit plus percentile CIs from multinomial reweighting of the cell counts."""
    rng = np.random.default_rng(seed)
    total = int(cells.count.sum())
    probabilities = cells.count / total
    theta = fit(cells.wins())
    draws = np.empty((n_boot, cells.n_models))
    for k in range(n_boot):
        weights = rng.multinomial(total, probabilities).astype(float)
        draws[k] = fit(cells.wins(weights))
    elo_draws = to_elo(draws)
    tail = (1 - level) / 2
    low, high = np.quantile(elo_draws, [tail, 1 - tail], axis=0)
    return Ranking(to_elo(theta), low, high, ci_ranks(low, high), level, elo_draws)


def ci_ranks(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Rank = 1 + number of models whose lower bound is above this model's upper bound."""
    return 1 + (low[None, :] > high[:, None]).sum(axis=1)


def order_uncertainty(theta: np.ndarray, cov: np.ndarray) -> np.ndarray:
    """P(the fitted order of i and j is wrong) ≈ Φ(−|θi − θj| / sd(θi − θj)), per pair."""
    diag = np.diag(cov)
    variance = diag[:, None] + diag[None, :] - 2 * cov
    sd = np.sqrt(np.clip(variance, 1e-12, None))
    return ndtr(-np.abs(theta[:, None] - theta[None, :]) / sd)
