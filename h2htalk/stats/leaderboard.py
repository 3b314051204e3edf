"""Leaderboard statistics: Bradley–Terry strengths with bootstrap CIs, which differences are
significant, CI-based ranks, empirical win rates and the anchor win rate corrected with PPI.

Plain arrays in and out; nothing here touches the database (scoring.releases.data does).

- Human votes: one outcome per vote (A better 1, tie ½, B better 0: the 5-point strength is not
  used), summed per (scenario, pair) like the judge's (vote_scenario_strengths); the bootstrap
  resamples scenarios, every vote of a drawn scenario with it. Votes on one scenario share its
  responses (a response's own quality moves every vote on it), so they are not independent:
  the multinomial reweighting of (pair, outcome) counts (vote_strengths, the Chatbot Arena
  method) gives intervals too narrow for claims about scenarios and is kept for comparison.
- Judge predictions: every (scenario, pair) contributes a fractional outcome p to i and 1 − p
  to j; the bootstrap resamples *scenarios* with replacement (all pairs of a scenario move
  together), the same unit as the humans'.
- Canonical order: a draw's scenario weights go to the cells' rows in the order of their
  scenario keys (sorted), and the fits run in the order of the model indices given; callers
  that want numbers independent of database ids pass content keys and content-ordered indices
  (scoring.releases.computing: scenarios by text sha256, companions by name).
- Significance: from the bootstrap draws of the Elo scale, P(i > j) and the percentile interval
  of elo_i − elo_j; a difference is significant when that interval excludes 0. The rank of a
  model is 1 + the number of models significantly better than it, so the rank column and the
  significance matrix always agree (ranks by non-overlapping intervals, bradley_terry.ci_ranks,
  are more conservative: two 95% intervals can overlap while their difference excludes 0).
- Anchor win rate: Y = human outcome of X against the anchor on a labelled comparison (mean over
  its annotators, tie ½), f = the judge's P(X beats the anchor); PPI++ (ppi.ppi_mean) combines f
  on every scenario with the labelled subset, beside the judge alone and the humans alone.
"""

import math
import zlib
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import sparse
from scipy.special import expit, ndtri

from . import LEVEL, N_BOOT, ppi
from . import bradley_terry as bt

DENSE_LIMIT = 25_000_000  # scenario × pair cells held densely for the scenario bootstrap
DENSE_SHARE = 0.25  # … when at least this share of them is played (the judge: all; votes: few)
VOTES = "votes"  # cell_strengths' source for human votes
BATCH = 100  # bootstrap draws per matrix product and batched fit
MAX_STEP = 1.0  # largest change of a log-strength per Newton step in fit_batch


@dataclass
class Strengths:
    """Bradley–Terry strengths of n models on the Elo scale with bootstrap percentile CIs."""

    elo: np.ndarray
    low: np.ndarray
    high: np.ndarray
    rank: np.ndarray  # 1 + number of models significantly better
    p_better: np.ndarray  # n × n: bootstrap P(elo_i > elo_j) (ties count half)
    significant: np.ndarray  # n × n: +1 i significantly better than j, −1 worse, 0 neither
    diff_low: np.ndarray  # n × n: percentile interval of elo_i − elo_j
    diff_high: np.ndarray
    games: np.ndarray  # outcomes (votes, or scenario pairs for the judge) involving each model
    level: float
    n_boot: int
    method: str
    draws: np.ndarray | None = None  # n_boot × n (not serialised)

    def as_dict(self) -> dict:
        return json_safe(
            {
                "elo": self.elo,
                "low": self.low,
                "high": self.high,
                "rank": self.rank,
                "p_better": self.p_better,
                "significant": self.significant,
                "diff_low": self.diff_low,
                "diff_high": self.diff_high,
                "games": self.games,
                "level": self.level,
                "n_boot": self.n_boot,
                "method": self.method,
            }
        )


def derived_seed(seed: int, name: str) -> int:
    """A stable per-analysis seed (crc32 of the name, not Python's salted hash)."""
    state = np.random.SeedSequence([int(seed), zlib.crc32(name.encode("utf-8"))])
    return int(state.generate_state(1)[0])


def significance(draws: np.ndarray, level: float = LEVEL):
    """(p_better, significant, diff_low, diff_high, rank) from n_boot × n bootstrap draws.

    Only the pairs i < j are computed (row by row: n_boot × (n − i − 1) at a time, not
    n_boot × n × n); the rest mirrors them: elo_j − elo_i = −(elo_i − elo_j) exactly, so its
    interval is the negated interval and P(j > i) counts the draws where i < j."""
    n_boot, n = draws.shape
    tail = (1 - level) / 2
    p_better = np.full((n, n), 0.5)
    diff_low = np.zeros((n, n))
    diff_high = np.zeros((n, n))
    for i in range(n - 1):
        diff = draws[:, [i]] - draws[:, i + 1 :]
        above, equal = (diff > 0).sum(axis=0), (diff == 0).sum(axis=0)
        below = n_boot - above - equal
        p_better[i, i + 1 :] = above / n_boot + 0.5 * (equal / n_boot)
        p_better[i + 1 :, i] = below / n_boot + 0.5 * (equal / n_boot)
        low, high = np.quantile(diff, [tail, 1 - tail], axis=0)
        diff_low[i, i + 1 :], diff_high[i, i + 1 :] = low, high
        diff_low[i + 1 :, i], diff_high[i + 1 :, i] = -high, -low
    significant = np.where(diff_low > 0, 1, np.where(diff_high < 0, -1, 0))
    np.fill_diagonal(significant, 0)
    rank = 1 + (significant == -1).sum(axis=1)  # models j with elo_j − elo_i excluding 0 above
    return p_better, significant, diff_low, diff_high, rank


def _strengths(theta, draws_theta, games, level, method) -> Strengths:
    elo = bt.to_elo(theta)
    draws = bt.to_elo(draws_theta)
    tail = (1 - level) / 2
    low, high = np.quantile(draws, [tail, 1 - tail], axis=0)
    p_better, significant, diff_low, diff_high, rank = significance(draws, level)
    return Strengths(
        elo=elo,
        low=low,
        high=high,
        rank=rank,
        p_better=p_better,
        significant=significant,
        diff_low=diff_low,
        diff_high=diff_high,
        games=np.asarray(games, dtype=float),
        level=level,
        n_boot=len(draws),
        method=method,
        draws=draws,
    )


def fit_batch(
    wins: np.ndarray,
    start: np.ndarray,
    ridge: float = 1e-4,
    tol: float = 1e-6,
    max_iter: int = 60,
) -> np.ndarray:
    """bradley_terry.fit for a batch of win matrices (B × n × n) at once, warm-started at
    `start` (the point estimate): Newton steps with batched solves, each step's largest
    change capped at MAX_STEP (a trust region: bootstrap optima are near the start, far only
    when a draw separates a model), until every step (its mean removed: the mean of θ does not
    change the likelihood) is below `tol`; Newton converges quadratically, so θ is then within
    about tol² of the optimum. A draw that has not converged by then is fitted by
    bradley_terry.fit itself. Returns B × n log-strengths of mean 0.

    The gradient and the Hessian are computed over the n(n − 1)/2 pairs (i < j), not the
    n × n matrix: p_ji = 1 − p_ij and the Hessian's off-diagonal is symmetric. (The sums over
    pairs are matrix products: callers that need the last bits to repeat limit BLAS to one
    thread, as releases.computing does.)"""
    wins = np.asarray(wins, dtype=float)
    size, n, _ = wins.shape
    low, high = np.triu_indices(n, 1)
    upper, lower = low * n + high, high * n + low  # flat positions of (i, j) and (j, i)
    flat = wins.reshape(size, n * n)
    won = flat[:, upper]  # B × pairs: wins of the low model of each pair
    games = won + flat[:, lower]
    # Pair k's incidence: +1 for its low model, −1 for its high one. Products with it replace
    # gathers and scatters: θ_low − θ_high per pair, and per model the sums over its pairs.
    incidence = np.zeros((len(low), n))
    incidence[np.arange(len(low)), low] = 1.0
    incidence[np.arange(len(low)), high] = -1.0
    touches = np.abs(incidence)
    theta = np.tile(np.asarray(start, dtype=float), (size, 1))
    active = np.arange(size)
    for _ in range(max_iter):
        if not len(active):
            break
        t = theta[active]
        w, g = (won, games) if len(active) == size else (won[active], games[active])
        p = expit(t @ incidence.T)  # exact: each entry is θ_low − θ_high rounded once
        weight = g * p
        residual = w - weight  # observed − expected wins of the low model, per pair
        weight *= 1 - p  # g·p·(1 − p)
        gradient = residual @ incidence - 2 * ridge * t
        hessian = np.zeros((len(active), n * n))
        hessian[:, upper] = -weight
        hessian[:, lower] = -weight
        hessian[:, :: n + 1] = weight @ touches + 2 * ridge
        step = np.linalg.solve(hessian.reshape(-1, n, n), gradient[:, :, None])[:, :, 0]
        largest = np.abs(step).max(axis=1)
        damping = np.minimum(1.0, MAX_STEP / np.maximum(largest, 1e-300))
        theta[active] = t + damping[:, None] * step
        moved = np.abs(step - step.mean(axis=1, keepdims=True)).max(axis=1)
        active = active[(moved > tol) | (damping < 1.0)]
    for k in active:  # not converged (e.g. a model that won every draw): the careful fit
        theta[k] = bt.fit(wins[k], ridge=ridge)
    return theta - theta.mean(axis=1, keepdims=True)


def vote_strengths(
    a, b, outcome, n_models: int, n_boot: int = N_BOOT, level: float = LEVEL, seed: int = 0
) -> Strengths:
    """Bradley–Terry from votes (outcome for a: 1, 0.5, 0): the fit on the aggregated cells and
    the multinomial reweighting of the cell counts of bradley_terry.bootstrap (the same draws
    for the same seed), fitted in batches (fit_batch)."""
    cells = bt.aggregate(a, b, outcome, n_models)
    theta = bt.fit(cells.wins())
    rng = np.random.default_rng(seed)
    total = int(cells.count.sum())
    probabilities = cells.count / total
    n = n_models
    # wins[b] = weights[b] @ mapping: each cell adds outcome·count to (i, j), the rest to (j, i).
    rows = np.arange(len(cells.count))
    mapping = sparse.csr_matrix(
        (
            np.concatenate([cells.outcome, 1 - cells.outcome]),
            (
                np.concatenate([rows, rows]),
                np.concatenate([cells.i * n + cells.j, cells.j * n + cells.i]),
            ),
        ),
        shape=(len(rows), n * n),
    )
    draws_theta = np.empty((n_boot, n))
    for start in range(0, n_boot, BATCH):
        size = min(BATCH, n_boot - start)
        weights = rng.multinomial(total, probabilities, size=size)  # = `size` single draws
        batch = np.asarray((mapping.T @ weights.T.astype(float)).T).reshape(size, n, n)
        draws_theta[start : start + size] = fit_batch(batch, theta)
    games = np.bincount(np.asarray(a, int), minlength=n_models) + np.bincount(
        np.asarray(b, int), minlength=n_models
    )
    return _strengths(
        theta,
        draws_theta,
        games,
        level,
        f"Bradley–Terry by maximum likelihood on votes (tie = half a win each); {level:.0%} "
        f"percentile intervals from {n_boot} multinomial reweightings of the aggregated "
        "(pair, outcome) counts (votes treated as independent)",
    )


@dataclass
class ScenarioCells:
    """Fractional outcomes grouped by scenario: p[s, k] wins of the low model of pair k."""

    wins: np.ndarray | sparse.csr_matrix  # S × K
    games: np.ndarray | sparse.csr_matrix  # S × K
    low: np.ndarray  # K: model index of the pair's low side
    high: np.ndarray
    n_models: int
    once: bool = False  # dense, and every pair once on every scenario (games all 1)
    scenarios: np.ndarray | None = None  # S: the scenario of each row, in order

    def part(self, rows: np.ndarray) -> tuple["ScenarioCells", np.ndarray]:
        """The cells scenario_cells builds from these rows' scenarios alone (the same numbers:
        only the pairs played there, the models that play renumbered in order), and the
        positions here of those models. A slice of a release is cut from the whole's cells
        instead of re-selecting its rows among millions of judge pairs."""
        rows = np.asarray(rows, dtype=np.int64)  # distinct, in order
        whole = len(rows) == self.games.shape[0]
        games = self.games if whole else self.games[rows]
        played = np.asarray(games.sum(axis=0)).ravel() > 0
        low, high = self.low[played], self.high[played]
        n = self.n_models
        present = np.flatnonzero(np.bincount(low, minlength=n) + np.bincount(high, minlength=n))
        if whole and played.all() and len(present) == n:
            return self, present  # nothing to cut
        pairs = np.flatnonzero(played)
        if sparse.issparse(games):
            wins, games = self.wins[rows][:, pairs], games[:, pairs]
            if _dense(wins.shape, games.nnz):
                wins, games = wins.toarray(), games.toarray()
        else:
            wins, games = self.wins[np.ix_(rows, pairs)], games[:, pairs]
        scenarios = None if self.scenarios is None else self.scenarios[rows]
        local = np.full(n, -1)
        local[present] = np.arange(len(present))
        once = not sparse.issparse(games) and bool((games == 1).all())
        part = ScenarioCells(wins, games, local[low], local[high], len(present), once, scenarios)
        return part, present

    def totals(self, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(wins, games) per pair for a batch of scenario weights (B × S)."""
        if sparse.issparse(self.wins):
            return (self.wins.T @ weights.T).T, (self.games.T @ weights.T).T
        if self.once:  # integer sums, exact in any order: the same numbers as the product
            games = np.repeat(weights.sum(axis=1)[:, None], self.games.shape[1], axis=1)
            return weights @ self.wins, games
        return weights @ self.wins, weights @ self.games

    def matrix(self, pair_wins: np.ndarray, pair_games: np.ndarray) -> np.ndarray:
        wins = np.zeros((self.n_models, self.n_models))
        wins[self.low, self.high] = pair_wins
        wins[self.high, self.low] = pair_games - pair_wins
        return wins


def scenario_cells(scenario, a, b, p, n_models: int) -> ScenarioCells:
    """Group (scenario, a, b, P(a beats b)) rows into per-scenario pair totals."""
    scenario = np.asarray(scenario)
    a, b, p = np.asarray(a, int), np.asarray(b, int), np.asarray(p, float)
    if (a == b).any():
        raise ValueError("a model cannot be compared with itself")
    if np.isnan(p).any() or (p < 0).any() or (p > 1).any():
        raise ValueError("probabilities must lie in [0, 1]")
    # Pair and scenario codes by counting and hashing, not by sorting millions of rows; each
    # array of a value per row is dropped once used and computed in place where it can be
    # (a release's judge has millions of rows: each such array is tens of MB).
    p_low = p.copy()
    np.subtract(1, p, out=p_low, where=a > b)
    code = np.minimum(a, b).astype(np.int64, copy=False)  # low · n_models + high
    code *= n_models
    code += np.maximum(a, b)
    del a, b  # (freed here when the caller passed arrays it does not keep)
    seen = np.zeros(n_models * n_models, dtype=bool)
    seen[code] = True
    codes = np.flatnonzero(seen)
    pair = (np.cumsum(seen) - 1)[code]
    del code
    row, scenarios = _scenario_codes(scenario)
    shape = (len(scenarios), len(codes))
    if _dense(shape, len(p_low)):
        flat = row.astype(np.int64, copy=False)  # row · pairs + pair
        flat *= shape[1]
        flat += pair
        del row, pair
        size = shape[0] * shape[1]
        wins = np.bincount(flat, weights=p_low, minlength=size).reshape(shape)
        games = np.bincount(flat, minlength=size).astype(float).reshape(shape)
    else:
        wins = sparse.csr_matrix((p_low, (row, pair)), shape=shape)
        games = sparse.csr_matrix((np.ones_like(p_low), (row, pair)), shape=shape)
    pair_low, pair_high = np.divmod(codes, n_models)
    once = not sparse.issparse(games) and bool((games == 1).all())
    return ScenarioCells(wins, games, pair_low, pair_high, n_models, once, scenarios)


def _dense(shape: tuple[int, int], played: int) -> bool:
    """Hold S × K cells densely: few enough, and enough of them played (rows at most)."""
    size = shape[0] * shape[1]
    return size <= DENSE_LIMIT and played >= DENSE_SHARE * size


def _scenario_codes(scenario: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """pd.factorize(scenario, sort=True): the codes and the scenarios; a sorted column (a
    release's pairs come by scenario) from where it changes, without hashing millions of ids."""
    if len(scenario) and (scenario[1:] >= scenario[:-1]).all():
        starts = np.r_[True, scenario[1:] != scenario[:-1]]
        codes = np.cumsum(starts)
        codes -= 1
        return codes, scenario[starts]
    row, groups = pd.factorize(scenario, sort=True)
    return row, np.asarray(groups)


def scenario_strengths(
    scenario,
    a,
    b,
    p,
    n_models: int,
    n_boot: int = N_BOOT,
    level: float = LEVEL,
    seed: int = 0,
) -> Strengths:
    """Bradley–Terry from fractional outcomes (p wins for a, 1 − p for b); the bootstrap
    resamples scenarios with replacement (multinomial scenario weights)."""
    cells = scenario_cells(scenario, a, b, p, n_models)
    return cell_strengths(cells, n_boot, level, seed)


def vote_scenario_strengths(
    scenario, a, b, outcome, n_models: int, n_boot: int = N_BOOT, level: float = LEVEL, seed=0
) -> Strengths:
    """Bradley–Terry from human votes (outcome for a: 1, 0.5, 0) with intervals from resampling
    scenarios: the votes summed per (scenario, pair) (scenario_cells), every vote of a drawn
    scenario drawn with it (cell_strengths). Scenarios are taken in the order of their keys."""
    outcome = np.asarray(outcome, dtype=float)
    if not np.isin(outcome, (0.0, 0.5, 1.0)).all():
        raise ValueError("outcomes must be 0 (b won), 0.5 (tie) or 1 (a won)")
    cells = scenario_cells(scenario, a, b, outcome, n_models)
    return cell_strengths(cells, n_boot, level, seed, source=VOTES)


def cell_strengths(
    cells: ScenarioCells,
    n_boot: int = N_BOOT,
    level: float = LEVEL,
    seed: int = 0,
    source: str = "judge",
) -> Strengths:
    """scenario_strengths from the per-scenario cells (scenario_cells, or a part of them);
    `source` VOTES when the cells hold human votes (for the method's description)."""
    n_models = cells.n_models
    n_scenarios = cells.wins.shape[0]
    ones = np.ones((1, n_scenarios))
    pair_wins, pair_games = cells.totals(ones)
    theta = bt.fit(cells.matrix(pair_wins[0], pair_games[0]))
    rng = np.random.default_rng(seed)
    draws = np.empty((n_boot, n_models))
    uniform = np.full(n_scenarios, 1 / n_scenarios)
    for start in range(0, n_boot, BATCH):
        size = min(BATCH, n_boot - start)
        weights = rng.multinomial(n_scenarios, uniform, size=size).astype(float)
        batch_wins, batch_games = cells.totals(weights)
        batch = np.zeros((size, n_models, n_models))
        batch[:, cells.low, cells.high] = batch_wins
        batch[:, cells.high, cells.low] = batch_games - batch_wins
        draws[start : start + size] = fit_batch(batch, theta)
    games = np.zeros(n_models)
    np.add.at(games, cells.low, pair_games[0])
    np.add.at(games, cells.high, pair_games[0])
    if source == VOTES:
        fitted = "votes (tie = half a win each)"
        why = "votes on one scenario share its responses, so they are not independent"
    else:
        fitted = (
            "the judge's expected outcomes (each scenario pair: P(i beats j) a win for i, "
            "the rest for j)"
        )
        why = "fractional outcomes are not independent votes"
    return _strengths(
        theta,
        draws,
        games,
        level,
        f"Bradley–Terry by maximum likelihood on {fitted}; {level:.0%} percentile intervals "
        f"from {n_boot} bootstrap resamples of the {n_scenarios} scenarios, all of a drawn "
        f"scenario's outcomes with it ({why}, so scenarios are the resampled unit)",
    )


def win_matrix(a, b, outcome, n_models: int) -> tuple[np.ndarray, np.ndarray]:
    """(wins, games): wins[i, j] = outcomes won by i against j (ties half), games[i, j]."""
    wins = bt.aggregate(a, b, outcome, n_models).wins() if len(a) else np.zeros((n_models,) * 2)
    return wins, wins + wins.T


def estimate_dict(estimate: ppi.Estimate) -> dict:
    return json_safe(
        {
            "estimate": estimate.estimate,
            "low": estimate.low,
            "high": estimate.high,
            "level": estimate.level,
            "lam": estimate.lam,
            "n_labelled": estimate.n_labelled,
            "n_unlabelled": estimate.n_unlabelled,
            "method": estimate.method,
            "significant": _excludes_half(estimate),
        }
    )


def _excludes_half(estimate: ppi.Estimate) -> int:
    """+1 when the interval lies above ½ (better than the anchor), −1 below, 0 neither."""
    if not (math.isfinite(estimate.low) and math.isfinite(estimate.high)):
        return 0
    return 1 if estimate.low > 0.5 else -1 if estimate.high < 0.5 else 0


def anchor_win_rate(y, f_labelled, f_all, level: float = LEVEL) -> dict:
    """PPI++ estimate of P(X beats the anchor) with the judge alone and humans alone beside it.

    y: human outcomes on the labelled items (mean over annotators, tie ½); f_labelled: the
    judge's P(X beats the anchor) on those items; f_all: the judge on every scenario of the
    population. Entries are None with a reason when there is too little data.
    """
    y, f, f_all = (np.asarray(v, dtype=float) for v in (y, f_labelled, f_all))
    out: dict = {"n_labelled": len(y), "n_all": len(f_all)}
    if len(f_all) >= 2:
        out["judge"] = estimate_dict(ppi.naive_mean(f_all, level))
    else:
        out["judge"] = None
        out["judge_reason"] = "fewer than two scenarios with a judge prediction"
    if len(y) >= 2:
        out["humans"] = estimate_dict(ppi.classical_mean(y, level))
    else:
        out["humans"] = None
        out["humans_reason"] = "fewer than two labelled comparisons"
    if len(y) >= 2 and len(f_all) >= 2:
        out["ppi"] = estimate_dict(ppi.ppi_mean(y, f, f_all, level=level, tune=True))
    else:
        out["ppi"] = None
        out["ppi_reason"] = "PPI needs at least two labelled comparisons and two scenarios"
    return out


def rank_correlation(x, y) -> float | None:
    """Spearman's ρ of two score vectors (None for fewer than three finite pairs or no spread):
    the Pearson correlation of their average ranks (scipy.stats.spearmanr, without loading
    scipy.stats in a release's computation)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    if keep.sum() < 3 or np.ptp(x[keep]) == 0 or np.ptp(y[keep]) == 0:
        return None
    return float(np.corrcoef(average_ranks(x[keep]), average_ranks(y[keep]))[1, 0])


def average_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks 1…n, tied values sharing the mean of their ranks (scipy.stats.rankdata)."""
    order = np.argsort(values, kind="mergesort")
    ordered = values[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    ends = np.r_[starts[1:], len(values)]
    group = np.cumsum(np.r_[True, ordered[1:] != ordered[:-1]]) - 1
    ranks = np.empty(len(values))
    ranks[order] = 0.5 * (starts + 1 + ends)[group]
    return ranks


def mean_interval(values, level: float = LEVEL) -> dict:
    """Mean with a normal-approximation interval (None bounds for fewer than two values)."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    if not len(values):
        return {"mean": None, "low": None, "high": None, "n": 0, "level": level}
    mean = float(values.mean())
    if len(values) < 2:
        return {"mean": mean, "low": None, "high": None, "n": 1, "level": level}
    half = float(ndtri(0.5 + level / 2) * values.std(ddof=1) / math.sqrt(len(values)))
    return json_safe(
        {"mean": mean, "low": mean - half, "high": mean + half, "n": len(values), "level": level}
    )


# ---------------------------------------------------------------- JSON


def json_safe(value):
    """Plain JSON values: numpy → Python, NaN/inf → None, −0.0 → 0.0 (PostgreSQL's jsonb has
    no negative zero, and stored numbers must read back exactly as computed).

    A release's results hold hundreds of thousands of numbers: arrays are converted whole
    (_array) and plain floats in lists are handled in place, not by a call each."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return _json_safe_list(value)
    if isinstance(value, np.ndarray):
        return _json_safe_array(value)
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool) or value is None or isinstance(value, int | str):
        return value
    if isinstance(value, float):
        return value + 0.0 if math.isfinite(value) else None
    return value


def _json_safe_list(values) -> list:
    out = []
    for v in values:
        kind = type(v)
        if kind is float:  # exactly float: numpy's float64 (a subclass) goes through .item()
            out.append(v + 0.0 if math.isfinite(v) else None)
        elif v is None or kind is int or kind is str or kind is bool:
            out.append(v)
        else:
            out.append(json_safe(v))
    return out


def _json_safe_array(array: np.ndarray) -> list:
    if array.dtype.kind != "f":
        if array.dtype.kind in "biu":
            return array.tolist()  # Python bools and ints
        return _json_safe_list(array.tolist())
    finite = np.isfinite(array)
    converted = (array + 0.0).astype(object)  # Python floats, −0.0 made 0.0
    if not finite.all():
        converted[~finite] = None
    return converted.tolist()
