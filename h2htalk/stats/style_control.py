"""Style control: Bradley–Terry strengths with presentation held fixed, beside the plain fit.

Chatbot Arena's method (Li, Angelopoulos & Chiang, "Does style matter? Disentangling style and
substance in Chatbot Arena", LMSYS blog, August 2024): the style differences of the two
responses enter the Bradley–Terry regression as covariates,

    P(A beats B) = σ(θ_A − θ_B + γ · z),

so that a companion's θ is its strength once what style buys is accounted for, and γ says what
each style difference buys. Here z holds, per covariate (h2htalk.stats.style_features):
- length: the log ratio log((1 + L_A) / (1 + L_B)) (Arena's (L_A − L_B) / (L_A + L_B) is close to
  half of it for similar lengths, and stops at ±1 where the log ratio keeps counting doublings);
- every count: (f_A − f_B) / (f_A + f_B + 1), Arena's normalised difference (FastChat adds 1);
each divided by its root mean square over the votes. Arena standardises by mean and standard
deviation; subtracting a mean would act as a bonus for the side shown first and make the fit
depend on which response is A. The root mean square is the standard deviation of the mirrored
differences (each vote seen from both sides), which have mean 0. A covariate that is 0 on
every vote has nothing to tell and is left out. γ is in log-odds per such standard deviation.

θ and γ by maximum likelihood (a tie is half a win, as in the plain fit; ridge 1e-4 like
bradley_terry.fit), by Newton steps; the bootstrap draws batched and warm-started as in
leaderboard.fit_batch. Intervals: percentiles of a bootstrap that resamples scenarios (all votes
of a drawn scenario come with it: they share its responses, so their style differences are not
independent); the plain fit (leaderboard.cell_strengths on the same votes) gets the same scenario
weights in the same order, draw for draw.

Invariance by construction: companions are fitted in the order of `model_keys` (their names),
scenarios are drawn in the order of `unit_keys` (content hashes), every vote is turned so that
the companion first in that order is A (its features, its outcome), and votes with the same
scenario, companions and style differences are summed into one row. Renumbered companions or
scenarios and swapped sides give the same rows in the same order, hence the same numbers bit
for bit.
"""

from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.special import expit, log_expit

from . import LEVEL, N_BOOT
from . import leaderboard as lb

LOG_RATIO, SHARE = "log_ratio", "share"  # how a feature becomes a covariate
RIDGE = 1e-4
MAX_STEP = 1.0  # largest change of a parameter per Newton step in a bootstrap draw


def differences(features_a, features_b, kinds) -> np.ndarray:
    """Votes × covariates: the style differences of A and B (see the module docstring)."""
    fa, fb = np.asarray(features_a, dtype=float), np.asarray(features_b, dtype=float)
    out = np.empty_like(fa)
    for k, kind in enumerate(kinds):
        x, y = fa[:, k], fb[:, k]
        if kind == LOG_RATIO:
            out[:, k] = np.log1p(x) - np.log1p(y)
        elif kind == SHARE:
            out[:, k] = (x - y) / (x + y + 1)
        else:
            raise ValueError(f"unknown covariate kind {kind!r}")
    return out


@dataclass
class Rows:
    """Votes summed by (scenario, low companion, high companion, style differences)."""

    unit: np.ndarray  # R: the scenario's position in the canonical order
    low: np.ndarray  # R: canonical position of the companion first in the order (A)
    high: np.ndarray
    z: np.ndarray  # R × S: the used covariates, scaled
    count: np.ndarray  # R: votes
    wins: np.ndarray  # R: wins of `low` (ties half)
    n_models: int
    n_units: int

    def __post_init__(self):
        rows = np.arange(len(self.low))
        n = self.n_models
        signs = np.r_[np.ones(len(rows)), -np.ones(len(rows))]
        cols = np.r_[self.low, self.high]
        self.incidence = sparse.csr_matrix((signs, (np.r_[rows, rows], cols)), shape=(len(rows), n))
        self.touches = abs(self.incidence)
        pair = self.low * n + self.high
        codes, self.pair = np.unique(pair, return_inverse=True)
        self.pair_low, self.pair_high = np.divmod(codes, n)
        self.pairs = sparse.csr_matrix(
            (np.ones(len(rows)), (rows, self.pair)), shape=(len(rows), len(codes))
        )
        s = self.z.shape[1]
        self.zz = (self.z[:, :, None] * self.z[:, None, :]).reshape(len(rows), s * s)


@dataclass
class StyleFit:
    """The plain and the style-controlled strengths (in the caller's companion order) and the
    covariates' coefficients with their bootstrap intervals (NaN where a covariate is left
    out)."""

    plain: lb.Strengths
    controlled: lb.Strengths
    coefficient: np.ndarray  # S: log-odds per standard deviation of the covariate
    low: np.ndarray
    high: np.ndarray
    scale: np.ndarray  # S: the standard deviation (root mean square) of each covariate
    used: np.ndarray  # S: bool, False for a covariate with no variation
    scenarios: int
    rows: int


def _canonical(a, b, outcome, unit_keys, features_a, features_b, model_keys):
    """(order, unit, low, high, features of low, of high, outcome of low, units): every vote in
    the canonical orders (companions by key, scenarios by key) and turned low-first."""
    order = sorted(range(len(model_keys)), key=lambda i: model_keys[i])
    position = np.empty(len(order), dtype=np.int64)
    position[order] = np.arange(len(order))
    a, b = position[np.asarray(a, dtype=np.int64)], position[np.asarray(b, dtype=np.int64)]
    if (a == b).any():
        raise ValueError("a model cannot be compared with itself")
    swap = a > b
    fa, fb = np.asarray(features_a, dtype=float), np.asarray(features_b, dtype=float)
    outcome = np.asarray(outcome, dtype=float)
    units, unit = np.unique(np.asarray(unit_keys), return_inverse=True)
    return (
        order,
        unit.ravel(),
        np.where(swap, b, a),
        np.where(swap, a, b),
        np.where(swap[:, None], fb, fa),
        np.where(swap[:, None], fa, fb),
        np.where(swap, 1 - outcome, outcome),
        len(units),
    )


def _rows(unit, low, high, z, y, n_models, n_units) -> tuple[Rows, np.ndarray, np.ndarray]:
    """The summed rows (covariates scaled, those without variation left out), the scale and
    the mask of used covariates."""
    keys = (*(z[:, k] for k in reversed(range(z.shape[1]))), high, low, unit)
    order = np.lexsort(keys)  # by scenario, then companions, then style differences
    stacked = np.column_stack([unit, low, high, z])[order]
    change = np.r_[True, (stacked[1:] != stacked[:-1]).any(axis=1)]
    starts = np.flatnonzero(change)
    count = np.diff(np.r_[starts, len(order)]).astype(float)
    wins = np.add.reduceat(y[order], starts) if len(starts) else np.zeros(0)
    z_rows = z[order][starts]
    scale = np.sqrt((count[:, None] * z_rows**2).sum(axis=0) / count.sum())
    used = scale > 0
    rows = Rows(
        unit[order][starts],
        low[order][starts],
        high[order][starts],
        z_rows[:, used] / scale[used],
        count,
        wins,
        n_models,
        n_units,
    )
    return rows, scale, used


def _gradient_hessian(params: np.ndarray, rows: Rows, count: np.ndarray, wins: np.ndarray):
    """Gradient of the penalised log-likelihood and its negative Hessian, for a batch of
    parameter vectors (B × (n + S)) and row weights (B × R counts and wins). The companion
    block is summed per pair and per companion through sparse incidence matrices, not as
    R × (n + S)² products."""
    n, s = rows.n_models, rows.z.shape[1]
    theta, gamma = params[:, :n], params[:, n:]
    eta = (rows.incidence @ theta.T).T + gamma @ rows.z.T
    p = expit(eta)
    residual = wins - count * p
    h = count * p * (1 - p)
    size = len(params)
    gradient = np.empty_like(params)
    gradient[:, :n] = (rows.incidence.T @ residual.T).T
    gradient[:, n:] = residual @ rows.z
    gradient -= 2 * RIDGE * params
    hessian = np.zeros((size, n + s, n + s))
    per_pair = (rows.pairs.T @ h.T).T
    hessian[:, rows.pair_low, rows.pair_high] = -per_pair
    hessian[:, rows.pair_high, rows.pair_low] = -per_pair
    diagonal = np.arange(n)
    hessian[:, diagonal, diagonal] = (rows.touches.T @ h.T).T
    for k in range(s):
        cross = (rows.incidence.T @ (h * rows.z[:, k]).T).T
        hessian[:, :n, n + k] = cross
        hessian[:, n + k, :n] = cross
    hessian[:, n:, n:] = (h @ rows.zz).reshape(size, s, s)
    everything = np.arange(n + s)
    hessian[:, everything, everything] += 2 * RIDGE
    return gradient, hessian


def _log_likelihood(params: np.ndarray, rows: Rows, count, wins) -> float:
    n = rows.n_models
    eta = rows.incidence @ params[:n] + rows.z @ params[n:]
    value = (wins * log_expit(eta) + (count - wins) * log_expit(-eta)).sum()
    return float(value - RIDGE * (params @ params))


def fit_one(rows: Rows, count, wins, tol: float = 1e-10, max_iter: int = 100) -> np.ndarray:
    """θ (mean 0) and γ maximising the penalised log-likelihood, by Newton steps with
    backtracking (every step an ascent step), as bradley_terry.fit."""
    params = np.zeros(rows.n_models + rows.z.shape[1])
    current = _log_likelihood(params, rows, count, wins)
    for _ in range(max_iter):
        gradient, hessian = _gradient_hessian(params[None, :], rows, count[None], wins[None])
        step = np.linalg.solve(hessian[0], gradient[0])
        scale = 1.0
        while True:
            candidate = params + scale * step
            value = _log_likelihood(candidate, rows, count, wins)
            if value >= current - 1e-12 or scale < 1e-6:
                break
            scale /= 2
        params, previous, current = candidate, current, value
        if abs(current - previous) <= tol * max(1.0, abs(current)):
            break
    params[: rows.n_models] -= params[: rows.n_models].mean()
    return params


def fit_batch(rows: Rows, weights: np.ndarray, start: np.ndarray, tol=1e-6, max_iter=60):
    """fit_one for a batch of scenario weights (B × scenarios), warm-started at `start`:
    Newton steps capped at MAX_STEP until every step is below `tol` (θ's mean removed: it does
    not change the likelihood); a draw that has not converged is fitted by fit_one."""
    row_weight = weights[:, rows.unit]
    count, wins = row_weight * rows.count, row_weight * rows.wins
    n = rows.n_models
    params = np.tile(start, (len(weights), 1))
    active = np.arange(len(weights))
    for _ in range(max_iter):
        if not len(active):
            break
        current = params[active]
        gradient, hessian = _gradient_hessian(current, rows, count[active], wins[active])
        step = np.linalg.solve(hessian, gradient[:, :, None])[:, :, 0]
        largest = np.abs(step).max(axis=1)
        damping = np.minimum(1.0, MAX_STEP / np.maximum(largest, 1e-300))
        params[active] = current + damping[:, None] * step
        step[:, :n] -= step[:, :n].mean(axis=1, keepdims=True)
        moved = np.abs(step).max(axis=1)
        active = active[(moved > tol) | (damping < 1.0)]
    for k in active:
        params[k] = fit_one(rows, count[k], wins[k])
    params[:, :n] -= params[:, :n].mean(axis=1, keepdims=True)
    return params


def _reordered(strengths: lb.Strengths, position: np.ndarray) -> lb.Strengths:
    """Strengths in canonical order → in the caller's (position[i]: caller i's place)."""
    grid = np.ix_(position, position)
    for key in ("elo", "low", "high", "rank", "games"):
        setattr(strengths, key, getattr(strengths, key)[position])
    for key in ("p_better", "significant", "diff_low", "diff_high"):
        setattr(strengths, key, getattr(strengths, key)[grid])
    strengths.draws = strengths.draws[:, position]
    return strengths


def style_strengths(
    a,
    b,
    outcome,
    unit_keys,
    features_a,
    features_b,
    kinds,
    model_keys,
    n_boot: int = N_BOOT,
    level: float = LEVEL,
    seed: int = 0,
) -> StyleFit:
    """The plain and the style-controlled Bradley–Terry fits of votes (a, b: companion indices
    into `model_keys`; outcome for a: 1, ½, 0; unit_keys: each vote's scenario key; features
    of A's and B's response, votes × covariates, turned into covariates by `kinds`)."""
    n = len(model_keys)
    order, unit, low, high, fl, fh, y, units = _canonical(
        a, b, outcome, unit_keys, features_a, features_b, model_keys
    )
    rows, scale, used = _rows(unit, low, high, differences(fl, fh, kinds), y, n, units)
    plain = lb.cell_strengths(lb.scenario_cells(unit, low, high, y, n), n_boot, level, seed)
    start = fit_one(rows, rows.count, rows.wins)
    rng = np.random.default_rng(seed)  # the draws of cell_strengths, weight for weight
    uniform = np.full(units, 1 / units)
    draws = np.empty((n_boot, len(start)))
    for first in range(0, n_boot, lb.BATCH):
        size = min(lb.BATCH, n_boot - first)
        weights = rng.multinomial(units, uniform, size=size).astype(float)
        draws[first : first + size] = fit_batch(rows, weights, start)
    tail = (1 - level) / 2
    controlled = lb._strengths(start[:n], draws[:, :n], plain.games, level, "")
    plain.method = controlled.method = _method(level, n_boot, units)
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)
    coefficient = np.full(len(kinds), np.nan)
    low_end, high_end = coefficient.copy(), coefficient.copy()
    if used.any():
        coefficient[used] = start[n:]
        low_end[used], high_end[used] = np.quantile(draws[:, n:], [tail, 1 - tail], axis=0)
    return StyleFit(
        plain=_reordered(plain, position),
        controlled=_reordered(controlled, position),
        coefficient=coefficient,
        low=low_end,
        high=high_end,
        scale=scale,
        used=used,
        scenarios=units,
        rows=len(rows.count),
    )


def _method(level: float, n_boot: int, units: int) -> str:
    return (
        f"Bradley–Terry by maximum likelihood on votes (tie = half a win each); {level:.0%} "
        f"percentile intervals from {n_boot} bootstrap resamples of the {units} scenarios "
        "(all votes of a drawn scenario with it; the plain and the style-controlled fit share "
        "every draw)"
    )
