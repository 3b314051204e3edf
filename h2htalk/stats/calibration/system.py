"""System level: companion strengths (Bradley–Terry) from the humans and from a judge's
probabilities on the same comparisons, and the rank correlations between them."""

import numpy as np
import pandas as pd
from scipy import stats

from .. import bradley_terry
from .data import votes_of
from .metrics import vote_outcomes


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


def system_level(frame: pd.DataFrame, predictions: dict[str, np.ndarray]) -> dict:
    """Companion strengths (Bradley–Terry, Elo scale) from the humans and from each judge's
    held-out probabilities, and the rank correlations with the humans'."""
    a = frame["companion_a"].to_numpy()
    b = frame["companion_b"].to_numpy()
    companions = sorted(set(a.tolist()) | set(b.tolist()))
    votes = votes_of(frame)
    human = bt_strengths(a, b, *vote_outcomes(votes), companions)
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
