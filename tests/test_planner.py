"""The power planner (h2htalk.stats.planner) against what it promises.

- Its simulation model delivers the inputs: the agreement α computed by the platform's own
  agreement code, the tie rate, and the smallest adjacent Elo difference of the release's fit.
- Its inner-loop estimator (the scenario-clustered sandwich) takes the same decisions as the
  release's bootstrap on the same studies.
- Planned power ≈ realised power: at the recommended size, fresh studies estimated by the
  release's own estimator (scenario bootstrap, 1,000 draws) separate adjacent companions as
  often as planned, for few/many companions and low/high agreement (the full version with 300+
  studies per setting: `python -m bench planner`).
- Clustering matters: the same studies analysed as independent votes would look more
  precise than they are, and a plan ignoring the response effects asks for too little.
- The running campaign's status does not depend on how companions or scenarios are numbered.
"""

import numpy as np
import pandas as pd
import pytest

from h2htalk.stats import bradley_terry as bt
from h2htalk.stats import leaderboard as lb
from h2htalk.stats import planner as pl
from h2htalk.stats import vote_model as vm
from h2htalk.stats.agreement.reliability import label_agreement

SETTINGS = {
    "few companions, low agreement": pl.Setting(3, overlap=3, min_elo=60, alpha=0.2),
    "few companions, high agreement": pl.Setting(4, overlap=2, min_elo=80, alpha=0.55),
    "many companions, low agreement": pl.Setting(
        8, overlap=3, min_elo=50, alpha=0.35, pairs_per_scenario=6
    ),
}


def _frame(studies: pl.Studies) -> pd.DataFrame:
    """One study's votes as the agreement code's judgments (k annotators per comparison)."""
    scenario, a, b, outcome = studies.votes(0)
    comparison = scenario * studies.n_companions**2 + a * studies.n_companions + b
    frame = pd.DataFrame({"comparison": comparison, "outcome": outcome})
    frame["annotator"] = frame.groupby("comparison").cumcount()
    frame["preference"] = np.sign(0.5 - outcome).astype(int)  # negative: A better
    return frame


@pytest.mark.parametrize(
    "setting",
    [SETTINGS["few companions, high agreement"], SETTINGS["many companions, low agreement"]],
)
def test_simulated_votes_have_the_entered_agreement_tie_rate_and_difference(setting):
    model = pl.fit_model(setting)
    studies = pl.draw_studies(model, setting, 1_500, 1, np.random.default_rng(5))
    frame = _frame(studies)
    alpha = label_agreement(frame, labels=["winner3"], n_boot=1).loc["winner3", "alpha"]
    assert alpha == pytest.approx(setting.alpha, abs=0.025)
    assert (frame["outcome"] == 0.5).mean() == pytest.approx(setting.tie_rate, abs=0.01)
    low, high = np.triu_indices(setting.n_companions, 1)
    pair_wins, pair_games = studies.pair_totals()
    wins = np.zeros((setting.n_companions,) * 2)
    wins[low, high] = pair_wins[0]
    wins[high, low] = pair_games[0] - pair_wins[0]
    adjacent = bt.ELO_SCALE * np.diff(bt.fit(wins))
    assert adjacent.mean() == pytest.approx(setting.min_elo, rel=0.12)


def test_an_earlier_campaigns_response_effects_are_recovered_apart_from_its_spread():
    """Exact: σ and τ give uneven companions an α and a tie rate; from their release-scale
    strengths, α and ties, noise_from_strengths finds σ and τ again. Simulated: the same
    from a campaign's votes, α by the platform's agreement code and a Bradley–Terry fit."""
    theta, sigma, tau = np.array([0.0, 0.3, 1.2, 1.4]), 1.0, 0.5
    target = vm.expected_strengths(theta, sigma, tau)
    alpha, tie = vm.design_alpha(theta, sigma, tau)
    found = vm.noise_from_strengths(target, alpha, tie)
    assert found[:2] == pytest.approx((sigma, tau), abs=1e-6)
    setting = pl.Setting(4, overlap=3, min_elo=60, alpha=0.5, sigma=sigma, tau=tau)
    model = pl.Model(theta - theta.mean(), sigma, tau, target, alpha, tie, 0.0)
    studies = pl.draw_studies(model, setting, 2_000, 1, np.random.default_rng(9))
    frame = _frame(studies)
    measured = label_agreement(frame, labels=["winner3"], n_boot=1).loc["winner3", "alpha"]
    _scenario, a, b, outcome = studies.votes(0)
    fitted = bt.fit(bt.aggregate(a, b, outcome, 4).wins())
    sigma_hat, tau_hat, _ = vm.noise_from_strengths(fitted, measured, (outcome == 0.5).mean())
    assert sigma_hat == pytest.approx(sigma, abs=0.15) and tau_hat == pytest.approx(tau, abs=0.1)
    # Carried over to a design of other companions, they are kept and set the new α.
    planned = pl.fit_model(setting)
    assert (planned.sigma, planned.tau) == (sigma, tau)
    assert bt.ELO_SCALE * np.diff(planned.target).min() == pytest.approx(60, abs=1e-4)
    assert planned.alpha < alpha  # companions 60 Elo apart agree less than these


def test_an_agreement_below_what_the_differences_alone_give_is_refused():
    with pytest.raises(pl.PlanError, match="below what the companions' differences"):
        pl.fit_model(pl.Setting(12, min_elo=100, alpha=0.1))


def test_the_fast_estimator_takes_the_release_bootstraps_decisions():
    """On 60 studies of 4 companions, the sandwich's 'separated' equals the scenario
    bootstrap's (1,000 draws) for at least 90% of adjacent pairs, and the two powers are
    within 6 points."""
    setting = pl.Setting(4, overlap=3, min_elo=70, alpha=0.4)
    model = pl.fit_model(setting)
    studies = pl.draw_studies(model, setting, 90, 60, np.random.default_rng(8))
    fast = pl.separated(*pl.sandwich_differences(studies, model.target), setting.level)
    full = np.zeros_like(fast)
    for r in range(60):
        strengths = pl.release_strengths(*studies.votes(r), 4, 1_000, 0.95, r)
        full[r] = strengths.significant[[1, 2, 3], [0, 1, 2]] == 1
    assert (fast == full).mean() >= 0.9
    assert abs(fast.mean() - full.mean()) <= 0.06


@pytest.mark.parametrize("name", list(SETTINGS))
def test_planned_power_is_realised_by_the_release_estimator(name):
    """120 fresh studies at the recommended size through the release's estimator. Tolerance:
    3.5 standard errors of the difference (realised: the spread of the per-study share of
    separated pairs over √120; planned: a binomial share over the search's simulated pairs),
    about ±0.08-0.11 here; a plan off by the clustering misses by far more (next test)."""
    setting = SETTINGS[name]
    result = pl.plan(setting, seed=3)
    assert result.planned_power >= setting.power - 1e-9
    assert result.planned_power < setting.power + 0.05  # not wastefully large
    hits = pl.realised_power(setting, result.n_scenarios, 120, seed=10_000)
    per_study = hits.mean(axis=1)
    realised = per_study.mean()
    planned_pairs = 4 * result.search["studies_per_size"] * (setting.n_companions - 1)
    se = np.hypot(per_study.std(ddof=1) / np.sqrt(len(per_study)), np.sqrt(0.16 / planned_pairs))
    assert abs(realised - result.planned_power) <= 3.5 * se, (realised, result.planned_power)


def test_ignoring_the_response_effects_plans_too_few_votes():
    """The same setting planned as if votes were independent (no shared response effects, the
    agreement coming from nowhere) asks for fewer scenarios, and the release's estimator on the
    clustered truth then falls well short of 80%."""
    setting = pl.Setting(4, overlap=3, min_elo=70, alpha=0.5)
    model = pl.fit_model(setting)
    naive = pl.Model(model.theta, 0.0, model.tau, model.target, model.alpha, model.tie_rate, 0)
    a = np.diff(naive.target) / np.sqrt(pl.unit_information(naive, setting))
    too_few = int(np.ceil(pl._size_for(a, 1.0, setting)))
    right = pl.plan(setting, seed=4).n_scenarios
    assert too_few < 0.6 * right
    hits = pl.realised_power(setting, too_few, 60, seed=20_000)
    assert hits.mean() < 0.65


def test_vote_level_intervals_are_too_narrow_under_clustering():
    """Why the release resamples scenarios: on the same clustered votes, the multinomial
    vote bootstrap's interval of an adjacent difference is narrower than the scenario
    bootstrap's (which the planner simulates)."""
    setting = pl.Setting(4, overlap=3, min_elo=70, alpha=0.5)
    model = pl.fit_model(setting)
    votes = pl.draw_studies(model, setting, 150, 1, np.random.default_rng(2)).votes(0)
    scenario = pl.release_strengths(*votes, 4, 500, 0.95, 1)
    vote = lb.vote_strengths(*votes[1:], 4, n_boot=500, seed=1)
    width = lambda s: (s.diff_high - s.diff_low)[[1, 2, 3], [0, 1, 2]].mean()  # noqa: E731
    assert width(vote) < 0.8 * width(scenario)


def test_status_counts_separated_pairs_and_does_not_depend_on_numbering():
    setting = pl.Setting(5, overlap=3, min_elo=60, alpha=0.3)
    model = pl.fit_model(setting)
    scenario, a, b, outcome = pl.draw_studies(
        model, setting, 60, 1, np.random.default_rng(1)
    ).votes(0)
    status = pl.separation_status(scenario, a, b, outcome, 5, 60, n_boot=300, seed=2)
    assert status["n_adjacent"] == 4
    assert status["votes"] == len(outcome)
    assert 0 <= status["n_separated"] <= 4
    if status["n_separated"] < 4:
        assert status["more_votes"] > 0
    # Renumber companions and scenario ids (in the same order: the bootstrap draws scenarios
    # by their sorted position) and swap every vote's sides: the same numbers.
    perm = np.array([3, 0, 4, 1, 2])
    renamed = pl.separation_status(
        1_000 + 7 * scenario, perm[b], perm[a], 1 - outcome, 5, 60, n_boot=300, seed=2
    )
    assert renamed["n_separated"] == status["n_separated"]
    assert [perm[p["better"]] for p in status["adjacent"]] == [
        p["better"] for p in renamed["adjacent"]
    ]
    assert renamed["more_votes"] == pytest.approx(status["more_votes"], abs=1)


def test_status_needs_no_votes_once_every_pair_is_separated():
    setting = pl.Setting(3, overlap=3, min_elo=200, alpha=0.7)
    model = pl.fit_model(setting)
    votes = pl.draw_studies(model, setting, 400, 1, np.random.default_rng(4)).votes(0)
    status = pl.separation_status(*votes, 3, 200, n_boot=300)
    assert status["n_separated"] == 2 and status["more_votes"] == 0
    for pair in status["adjacent"]:
        assert pair["difference"] > 0 and pair["low"] > 0  # better first, interval above 0
