"""The planner's flag-gap mode (h2htalk.stats.gap_planner) against what it promises.

- Its rule is the release's: the marks it takes from draws of the companions' gaps are those
  scoring.releases.flags.difference gives from the same draws, whatever the companions' order.
- Its effect is on the release's scale: with no response effects the Bradley–Terry fit of the
  expected votes is the latent truth, so the gap is the latent loss; response effects shrink it.
- Planned ≈ realised power: at the recommended size, fresh studies estimated as the release
  does (each group's scenario bootstrap, the field's biweight draw by draw) mark the weakened
  companion as often as planned, and the field's companions about as often as the level says.
  The full version (300 studies, 1,000 draws, and the release test's own data through
  compute_results): `python -m bench gap_planner`.
"""

import numpy as np
import pytest
from scipy.stats import binom

from h2htalk.stats import bradley_terry as bt
from h2htalk.stats import gap_planner as gp
from h2htalk.stats import leaderboard as lb
from h2htalk.stats.vote_model import PlanError
from scoring.releases import flags

SMALL = gp.GapSetting(6, overlap=2, alpha=0.3, tie_rate=0.1, min_gap=160, weakened=1)


def _release_difference(fits) -> dict:
    """scoring.releases.flags.difference on two group fits (explicit, implicit)."""
    section = {
        "by_implicit_need": {"explicit": {"elo": fits[0].elo}, "implicit": {"elo": fits[1].elo}}
    }
    draws = {
        "human/implicit_need/explicit": fits[0].draws,
        "human/implicit_need/implicit": fits[1].draws,
    }
    return flags.difference(section, draws, "human", "implicit_need", 0.95)


def _one_study(setting, n_scenarios, seed, n_boot=200):
    model = gp.fit_model(setting)
    rng = np.random.default_rng(seed)
    fits = []
    for part, (group, size) in enumerate(
        zip((model.plain, model.flagged), setting.groups(n_scenarios), strict=True)
    ):
        votes = gp.pl.draw_studies(group, setting, size, 1, rng).votes(0)
        fits.append(lb.vote_scenario_strengths(*votes, setting.n_companions, n_boot, 0.95, part))
    return fits


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_its_marks_are_the_releases_whatever_the_order(seed):
    fits = _one_study(SMALL, 60, seed)
    paired = fits[0].draws - fits[1].draws
    release = _release_difference(fits)["significant"]
    assert gp.marks(paired[None], 0.95)[0].tolist() == release
    order = np.random.default_rng(seed).permutation(SMALL.n_companions)
    assert gp.marks(paired[None, :, order], 0.95)[0].tolist() == [release[k] for k in order]


def test_the_gap_is_the_latent_loss_without_response_effects_and_shrinks_with_them():
    assert gp.release_gap(8, 2, 0.8, 0.0, 0.0) == pytest.approx(0.8 * bt.ELO_SCALE, rel=1e-6)
    assert gp.release_gap(8, 2, 0.8, 1.0, 0.0) < 0.8 * bt.ELO_SCALE * 0.8
    model = gp.fit_model(SMALL)
    assert gp.release_gap(6, 1, model.loss, model.sigma, model.tau) == pytest.approx(160, abs=1e-4)
    assert model.alpha == pytest.approx(0.3, abs=1e-4)
    assert model.tie_rate == pytest.approx(0.1, abs=1e-4)


def test_it_refuses_a_field_that_is_not_a_majority():
    with pytest.raises(PlanError):
        gp.GapSetting(6, weakened=3).check()


def test_planned_power_is_realised_by_the_releases_estimator():
    plan = gp.plan(SMALL, seed=3)
    marks = gp.realised_marks(SMALL, plan.n_scenarios, 120, seed=77, n_boot=200)
    marked = int((marks[:, 0] == 1).sum())
    # Binomial bounds at the planned power over 120 studies, two-sided 0.1% (3.3 SDs, which
    # also leaves room for 200 draws against the planner's continuous intervals): a wrong
    # plan, e.g. the adjacent-pair planner's size or twice the size, falls outside.
    low, high = binom.ppf([0.0005, 0.9995], 120, plan.planned_power)
    assert low <= marked <= high, (marked, plan.planned_power, plan.n_scenarios)
    # The field's companions: the release's two-sided 95% rule, a few percent.
    assert (marks[:, 1:] != 0).mean() < 0.12
