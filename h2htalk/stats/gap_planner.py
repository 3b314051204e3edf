"""How many votes are enough to see where a companion struggles: the planner's flag-gap mode.

The release reads each companion's flag gap (its Elo on scenarios without the flag, e.g. an
explicit need, minus its Elo on those with it, each group fitted alone with its own scenario
bootstrap) from the field's (scoring.releases.flags: Tukey's biweight of the companions' gaps,
draw by draw, h2htalk.stats.field), and marks a companion whose 95% interval of gap − field
excludes 0. This module answers: how many scenarios until a companion whose gap exceeds the
field's by `min_gap` Elo is marked with the chosen power (default 80%)?

The design simulated: the vote model of h2htalk.stats.planner (response effects σ shared by the
votes on a response, ties below τ, k votes a comparison, all pairs or `pairs_per_scenario` a
scenario); a share `flag_share` of the scenarios carries the flag; every companion is equal
(the field) except `weakened` of them, which lose a latent L logits on flagged scenarios.
`min_gap` is on the release's scale, as the planner's δ is: the gap from the field of the
Bradley–Terry fits of the expected votes (response effects shrink latent differences, so L is
larger than min_gap); `release_gap` gives it for a latent loss.

The fast estimator (the inner loop). Each group's Bradley–Terry fit with its scenario-clustered
sandwich covariance (planner.sandwich_fit), the large-sample form of its scenario bootstrap;
the two groups are independent, so the gaps are normal around the fitted gaps with the summed
covariance. Draws from that normal stand in for the release's paired bootstrap draws and go
through the release's own rule: the field's biweight draw by draw (field.biweight), a
percentile interval of gap − field per companion. Studies simulated at three sizes correct
the large-sample curve Φ(c·a·√S − z) as the adjacent-pair planner does; `realised_marks`
checks a size with the release's estimator (leaderboard.vote_scenario_strengths per group).
"""

import math
from dataclasses import asdict, dataclass, field

import numpy as np
from scipy.optimize import brentq

from . import bradley_terry as bt
from . import leaderboard as lb
from . import planner as pl
from .field import biweight
from .vote_model import PlanError, design_alpha, expected_strengths, noise_for, tau_for

DRAWS = 400  # normal draws per study standing in for the release's bootstrap draws
ROUNDING = 1e-6  # as scoring.releases.flags: a difference this small is no sign
MIN_GROUP = 10  # scenarios a group needs at least (with and without the flag)
MAX_LATENT = 20.0  # logits


@dataclass(frozen=True)
class GapSetting(pl.Setting):
    """The planner's Setting (votes, agreement, power) and the flag-gap effect."""

    min_gap: float = 100.0  # Elo, release scale: a weakened companion's gap beyond the field's
    flag_share: float = 0.5  # share of scenarios carrying the flag
    weakened: int = 1  # companions with that gap (the rest are the field)

    def check(self) -> None:
        super().check()
        problems = []
        if not 1 <= self.min_gap <= 800:
            problems.append("a flag gap from 1 to 800 Elo")
        if not 0.05 <= self.flag_share <= 0.95:
            problems.append("a share of flagged scenarios from 0.05 to 0.95")
        if self.weakened < 1 or 2 * self.weakened >= self.n_companions:
            problems.append("weakened companions from 1 to fewer than half of the companions")
        if problems:
            raise PlanError("The flag-gap planner needs " + "; ".join(problems) + ".")

    def groups(self, n_scenarios: int) -> tuple[int, int]:
        """(scenarios without the flag, with it) in a study of n_scenarios."""
        flagged = math.floor(self.flag_share * n_scenarios + 1e-9)
        return n_scenarios - flagged, flagged


def _latent(n: int, weakened: int, loss: float) -> tuple[np.ndarray, np.ndarray]:
    """Latent strengths without and with the flag: the first `weakened` lose `loss` with it."""
    flagged = np.zeros(n)
    flagged[:weakened] -= loss
    return np.zeros(n), flagged


def release_gap(n: int, weakened: int, loss: float, sigma: float, tau: float) -> float:
    """The release-scale gap beyond the field (Elo) of a latent loss (logits) on the flag:
    Elo gap of a weakened companion minus a field companion's, from the fits of the expected
    votes of each group."""
    plain, flagged = _latent(n, weakened, loss)
    gap = expected_strengths(plain, sigma, tau) - expected_strengths(flagged, sigma, tau)
    return float(bt.ELO_SCALE * (gap[0] - gap[-1]))


@dataclass
class GapModel:
    sigma: float
    tau: float
    loss: float  # latent logits the weakened lose on the flag
    plain: pl.Model  # the group without the flag (planner.Model: theta, sigma, tau, target)
    flagged: pl.Model
    alpha: float  # α and tie rate of the field's votes
    tie_rate: float
    alpha_floor: float


def fit_model(setting: GapSetting) -> GapModel:
    """σ and τ (given, or from α and the tie rate of votes among the field) and the latent
    loss whose release-scale gap is min_gap."""
    setting.check()
    n, w = setting.n_companions, setting.weakened
    zeros = np.zeros(n)
    if setting.sigma is None:
        sigma, tau, floor = noise_for(zeros, setting.alpha, setting.tie_rate)
    else:
        sigma = setting.sigma
        tau = tau_for(zeros, sigma, setting.tie_rate) if setting.tau is None else setting.tau
        floor = design_alpha(zeros, 0.0, tau)[0]

    def miss(loss):
        return release_gap(n, w, loss, sigma, tau) - setting.min_gap

    if miss(MAX_LATENT) < 0:
        raise PlanError("No latent difference gives this flag gap with this much noise.")
    loss = brentq(miss, 0.0, MAX_LATENT, xtol=1e-9)
    alpha, tie = design_alpha(zeros, sigma, tau)

    def model(theta):
        target = expected_strengths(theta, sigma, tau)
        return pl.Model(theta - theta.mean(), sigma, tau, target, alpha, tie, floor)

    plain, flagged = _latent(n, w, loss)
    return GapModel(sigma, tau, loss, model(plain), model(flagged), alpha, tie, floor)


# ---------------------------------------------------------------- the release's rule


def marks(draws: np.ndarray, level: float) -> np.ndarray:
    """The release's marks (scoring.releases.flags.difference) from draws of the companions'
    gaps, ... × D × n: the field's biweight draw by draw, the percentile interval of each
    companion's gap minus it; +1 above 0, −1 below, 0 across. ... × n."""
    shape = draws.shape
    field_draws = biweight(draws.reshape(-1, shape[-1]))[0].reshape(shape[:-1])
    tail = (1 - level) / 2
    low, high = np.quantile(draws - field_draws[..., None], [tail, 1 - tail], axis=-2)
    return np.where(low > ROUNDING, 1, np.where(high < -ROUNDING, -1, 0))


def fast_marks(model: GapModel, setting: GapSetting, n_scenarios: int, n_studies: int, rng):
    """R × n marks of simulated studies by the fast estimator: each group's sandwich fit, the
    gaps' normal draws through the release's rule."""
    sizes = setting.groups(n_scenarios)
    fits = []
    for group, size in zip((model.plain, model.flagged), sizes, strict=True):
        studies = pl.draw_studies(group, setting, size, n_studies, rng)
        fits.append(pl.sandwich_fit(studies, group.target))
    gap = bt.ELO_SCALE * (fits[0][0] - fits[1][0])  # R × n
    values, vectors = np.linalg.eigh(bt.ELO_SCALE**2 * (fits[0][1] + fits[1][1]))
    root = vectors * np.sqrt(np.maximum(values, 0.0))[:, None, :]
    noise = rng.standard_normal((n_studies, DRAWS, setting.n_companions))
    return marks(gap[:, None, :] + noise @ root.transpose(0, 2, 1), setting.level)


def power_at(model: GapModel, setting: GapSetting, n_scenarios: int, n_studies: int, seed: int):
    """R × n marks by the fast estimator, simulated in chunks of at most CELL_BUDGET cells."""
    rng = np.random.default_rng(seed)
    chunk = max(1, pl.CELL_BUDGET // max(n_scenarios * setting.pairs(), 1))
    out = []
    for begin in range(0, n_studies, chunk):
        out.append(fast_marks(model, setting, n_scenarios, min(chunk, n_studies - begin), rng))
    return np.concatenate(out)


def realised_marks(
    setting: GapSetting, n_scenarios: int, n_studies: int, seed: int, n_boot: int = 1_000
) -> np.ndarray:
    """R × n marks of studies simulated afresh (seed) and estimated as the release does: each
    group's Bradley–Terry with its scenario bootstrap (leaderboard.vote_scenario_strengths),
    the paired draws' gaps read from the field's draw by draw (`marks`, the rule of
    scoring.releases.flags.difference), percentile intervals."""
    model = fit_model(setting)
    rng = np.random.default_rng(seed)
    n, sizes = setting.n_companions, setting.groups(n_scenarios)
    out = np.zeros((n_studies, n), dtype=int)
    for study in range(n_studies):
        fits = []
        for part, (group, size) in enumerate(zip((model.plain, model.flagged), sizes, strict=True)):
            votes = pl.draw_studies(group, setting, size, 1, rng).votes(0)
            boot_seed = 2 * (seed + study) + part
            fits.append(lb.vote_scenario_strengths(*votes, n, n_boot, setting.level, boot_seed))
        out[study] = marks((fits[0].draws - fits[1].draws)[None], setting.level)[0]
    return out


# ---------------------------------------------------------------- the search


@dataclass
class GapPlan:
    """The flag-gap planner's answer."""

    setting: dict
    n_scenarios: int
    n_flagged: int  # of them, scenarios carrying the flag
    n_comparisons: int
    n_votes: int
    annotator_hours: float
    planned_power: float  # the corrected curve at n_scenarios: P(a weakened companion marked)
    simulated_power: float  # simulated at n_scenarios (fast estimator)
    field_marked: float  # simulated share of field companions marked either way
    model: dict
    search: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return lb.json_safe(asdict(self))


def unit_information(model: GapModel, setting: GapSetting, seed: int = 0) -> float:
    """Variance of a weakened companion's gap minus the field companions' mean gap (logits²)
    times the number of scenarios (the sandwich over a large simulated study)."""
    size = max(2_000, min(40_000, 1_000_000 // setting.pairs()))
    rng = np.random.default_rng(seed)
    cov = 0.0
    for group, part in zip((model.plain, model.flagged), setting.groups(size), strict=True):
        cov = (
            cov + pl.sandwich_fit(pl.draw_studies(group, setting, part, 1, rng), group.target)[1][0]
        )
    contrast = np.full(setting.n_companions, -1.0 / (setting.n_companions - setting.weakened))
    contrast[: setting.weakened] = 0.0
    contrast[0] = 1.0
    return float(size * contrast @ cov @ contrast)


def smallest(setting: GapSetting) -> int:
    """Fewest scenarios planned: the planner's minimum and MIN_GROUP in each group."""
    share = min(setting.flag_share, 1 - setting.flag_share)
    return max(pl.MIN_SCENARIOS, math.ceil(MIN_GROUP / share))


@dataclass
class Start:
    """The search's start (as planner.Start): the model, a (the gap over its standard error
    per √scenario, one per weakened companion), the large-sample size, the studies per size
    and the cells the search will simulate."""

    model: GapModel
    a: np.ndarray
    first: int
    studies: int
    sizes: list
    cells: int


def start(setting: GapSetting, seed: int = 0, studies: int = pl.STUDIES) -> Start:
    model = fit_model(setting)
    w, pairs = setting.weakened, setting.pairs()
    unit = unit_information(model, setting)  # seed 0: the first size only
    a = np.full(w, setting.min_gap / bt.ELO_SCALE / math.sqrt(unit))
    least = smallest(setting)
    first = max(least, math.ceil(pl._size_for(a, 1.0, setting)))
    if first * pairs > pl.MAX_COMPARISONS:
        raise PlanError(
            f"About {first * pairs:,} comparisons would be needed, more than the planner "
            f"simulates ({pl.MAX_COMPARISONS:,}): a larger gap, more flagged scenarios or more "
            "annotators per comparison would need fewer."
        )
    studies = min(studies, max(pl.MIN_STUDIES, pl.SEARCH_CELLS // (first * pairs)))
    sizes = sorted({max(least, round(first * f)) for f in pl.SIZES})
    cells = studies * pairs * (sum(sizes) + first)
    return Start(model, a, first, studies, sizes, cells)


def plan(setting: GapSetting, seed: int = 0, studies: int = pl.STUDIES) -> GapPlan:
    """Scenarios, comparisons, votes and annotator-hours until a weakened companion is marked
    with the setting's power (the mean over the weakened of P(marked +1))."""
    begun = start(setting, seed, studies)
    model, a, first, studies, sizes = begun.model, begun.a, begun.first, begun.studies, begun.sizes
    w, pairs, least = setting.weakened, setting.pairs(), smallest(setting)
    runs = [power_at(model, setting, size, studies, seed + 1 + k) for k, size in enumerate(sizes)]
    hits = [run[:, :w] == 1 for run in runs]
    correction = pl._fit_correction(a, sizes, hits, setting)
    chosen = max(least, math.ceil(pl._size_for(a, correction, setting)))
    check = power_at(model, setting, chosen, studies, seed + 1 + len(sizes))
    comparisons = chosen * pairs
    return GapPlan(
        setting=asdict(setting),
        n_scenarios=chosen,
        n_flagged=setting.groups(chosen)[1],
        n_comparisons=comparisons,
        n_votes=comparisons * setting.overlap,
        annotator_hours=comparisons * setting.overlap * setting.seconds_per_item / 3600,
        planned_power=float(pl.curve(a, chosen, correction, setting.level).mean()),
        simulated_power=float((check[:, :w] == 1).mean()),
        field_marked=float((check[:, w:] != 0).mean()),
        model={
            "sigma": model.sigma,
            "tau": model.tau,
            "alpha": model.alpha,
            "alpha_floor": model.alpha_floor,
            "tie_rate": model.tie_rate,
            "latent_loss": model.loss,
        },
        search=pl.search_dict(studies, sizes, hits, first, correction),
    )
