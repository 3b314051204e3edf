"""Simulated rating studies with a response-level quality effect, for the scenario bootstrap's
coverage (tests/test_scenario_bootstrap.py, bench/scenario_bootstrap_bench.py).

A study: every pair of companions on every scenario, `raters` votes each; companion k's
response to scenario s has quality θ_k + u_sk with u_sk ~ N(0, response_sd) shared by every
vote on that response; a vote for A has probability σ(θ_A + u_sA − θ_B − u_sB); sides are
random. The population truth is the Bradley–Terry fit to the expected outcomes over scenarios
(what the estimator converges to as the number of scenarios grows), on the Elo scale.
"""

import numpy as np
from scipy.special import expit

from h2htalk.stats import bradley_terry as bt
from h2htalk.stats import leaderboard as stats

THETA = np.array([0.6, 0.2, -0.1, -0.7])  # log-strengths of four companions


def population_elo(theta, response_sd: float) -> np.ndarray:
    """Elo of the population truth: Bradley–Terry on E[σ(Δθ + u_a − u_b)] for every pair (the
    mean over the responses by Gauss–Hermite quadrature, u_a − u_b ~ N(0, 2·sd²))."""
    theta = np.asarray(theta, dtype=float)
    delta = theta[:, None] - theta[None, :]
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    weights = weights / weights.sum()
    spread = np.sqrt(2) * response_sd * nodes
    expected = (expit(delta[..., None] + spread) * weights).sum(axis=-1)
    np.fill_diagonal(expected, 0.0)
    return bt.to_elo(bt.fit(expected, ridge=1e-12, tol=1e-13))


def study(rng: np.random.Generator, theta, n_scenarios: int, raters: int, response_sd: float):
    """(scenario, a, b, outcome for a) of one simulated study."""
    theta = np.asarray(theta, dtype=float)
    n = len(theta)
    low, high = np.triu_indices(n, 1)
    quality = theta + rng.normal(0.0, response_sd, (n_scenarios, n))
    scenario = np.repeat(np.arange(n_scenarios), len(low) * raters)
    a = np.tile(np.repeat(low, raters), n_scenarios)
    b = np.tile(np.repeat(high, raters), n_scenarios)
    won = rng.random(len(a)) < expit(quality[scenario, a] - quality[scenario, b])
    flip = rng.random(len(a)) < 0.5
    outcome = np.where(flip, ~won, won).astype(float)
    return scenario, np.where(flip, b, a), np.where(flip, a, b), outcome


def coverage(
    n_studies: int,
    response_sd: float,
    n_scenarios: int = 60,
    raters: int = 3,
    n_boot: int = 400,
    seed: int = 0,
    theta=THETA,
) -> dict:
    """Share of the pairwise Elo differences whose interval covers the population truth, and
    the mean interval width, for the scenario bootstrap ("scenarios") and the multinomial
    reweighting of vote counts ("votes"), over `n_studies` studies."""
    rng = np.random.default_rng(seed)
    elo = population_elo(theta, response_sd)
    low, high = np.triu_indices(len(theta), 1)
    truth = elo[low] - elo[high]
    covered = {"scenarios": 0, "votes": 0}
    width = {"scenarios": 0.0, "votes": 0.0}
    for k in range(n_studies):
        scenario, a, b, outcome = study(rng, theta, n_scenarios, raters, response_sd)
        fits = {
            "scenarios": stats.vote_scenario_strengths(
                scenario, a, b, outcome, len(theta), n_boot, seed=k
            ),
            "votes": stats.vote_strengths(a, b, outcome, len(theta), n_boot, seed=k),
        }
        for name, fit in fits.items():
            lower, upper = fit.diff_low[low, high], fit.diff_high[low, high]
            covered[name] += int(((lower <= truth) & (truth <= upper)).sum())
            width[name] += float((upper - lower).mean())
    cases = n_studies * len(low)
    return {
        "cases": cases,
        "coverage": {name: covered[name] / cases for name in covered},
        "width": {name: width[name] / n_studies for name in width},
    }
