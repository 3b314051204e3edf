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


# ---------------------------------------------------------------- flag gaps (releases)

NAMES = list("ABCDEFGH")  # eight companions; B and E struggle on implicit needs, G everywhere
IMPLICIT_WEAK = ("B", "E")
EVERYWHERE_WEAK = "G"
DROP = 0.8  # logits lost by B and E on implicit needs, and by G on every scenario
FIELD_DROP = 0.5  # logits every companion loses on implicit needs (Bradley–Terry cannot see it)


def flag_release(seed: int, n_scenarios: int, n_boot: int = 200, response_sd: float = 1.0):
    """A release's data (scoring.releases.data.ReleaseData) of eight companions: every pair
    once on every scenario, half of the scenarios with an implicit need (30% evolving,
    independently); response quality θ + u (u ~ N(0, response_sd), shared by the votes on the
    response), B and E losing DROP on implicit needs, G losing DROP everywhere and everyone
    FIELD_DROP on implicit needs. The judge's own score of each response is its quality plus
    N(0, 0.3) (data.judge_scores); no pairwise judge. Ids are in no relation to the names."""
    import hashlib

    import pandas as pd

    from scoring.releases.data import ReleaseData

    rng = np.random.default_rng(seed)
    n = len(NAMES)
    ids = np.array([31, 17, 52, 8, 44, 23, 60, 12])
    scenarios = 1 + rng.permutation(n_scenarios) + 100 * seed
    implicit = np.arange(n_scenarios) % 2 == 1
    evolving = rng.random(n_scenarios) < 0.3
    theta = np.zeros((n_scenarios, n))
    theta[:, NAMES.index(EVERYWHERE_WEAK)] -= DROP
    for name in IMPLICIT_WEAK:
        theta[implicit, NAMES.index(name)] -= DROP
    theta[implicit] -= FIELD_DROP
    quality = theta + rng.normal(0.0, response_sd, theta.shape)
    low, high = np.triu_indices(n, 1)
    row = np.repeat(np.arange(n_scenarios), len(low))
    a, b = np.tile(low, n_scenarios), np.tile(high, n_scenarios)
    a_wins = rng.random(len(a)) < expit(quality[row, a] - quality[row, b])
    votes = pd.DataFrame(
        {
            "comparison": np.arange(1, len(a) + 1),
            "scenario": scenarios[row],
            "companion_a": ids[a],
            "companion_b": ids[b],
            "annotator": 1,
            "preference": np.where(a_wins, -1, 1),
        }
    )
    responses = pd.DataFrame(
        {
            "response": np.arange(n_scenarios * n),
            "scenario": np.repeat(scenarios, n),
            "companion": np.tile(ids, n_scenarios),
        }
    )
    scores = quality.ravel() + rng.normal(0.0, 0.3, n_scenarios * n)
    flags = {
        "implicit_need": dict(zip(scenarios.tolist(), implicit.tolist(), strict=True)),
        "evolving_need": dict(zip(scenarios.tolist(), evolving.tolist(), strict=True)),
        "risk_level": dict.fromkeys(scenarios.tolist(), "none"),
    }
    text = {
        int(s): hashlib.sha256(f"{seed}/{k}".encode()).hexdigest() for k, s in enumerate(scenarios)
    }
    return ReleaseData(
        companions=sorted(zip(ids.tolist(), NAMES, strict=True)),
        anchor=int(ids[0]),
        subtask=dict.fromkeys(scenarios.tolist(), "dialogue_base"),
        votes=votes,
        composite=responses.assign(composite=0.3 + 0.02 * quality.ravel()),
        composite_note="Simulated composite.",
        seed=seed,
        n_boot=n_boot,
        flags=flags,
        scenario_key=text,
        judge_scores=responses[["scenario", "companion"]].assign(score=scores),
    )


def flag_marks(results: dict, flag: str = "implicit_need") -> dict[str, int]:
    """{companion name: the human mark of its flag gap (+1 weaker there, −1, 0)}."""
    block = results["flag_differences"][flag]["human"]
    return {c["name"]: block["significant"][k] for k, c in enumerate(results["companions"])}
