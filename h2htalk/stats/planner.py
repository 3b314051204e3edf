"""How many votes are enough: a power planner for a rating campaign, by simulation.

Arrays and numbers in, numbers out; nothing here touches the database (scoring.planning does).

The question. n companions, k annotators per comparison, the smallest Elo difference δ that
matters and the expected agreement: how many comparisons (and annotator-hours) until adjacent
companions δ apart are *separated* with a chosen probability (power, default 80%)? Separated is
the release's rule: the 95% percentile interval of the Elo difference, from the bootstrap that
resamples scenarios (h2htalk.stats.leaderboard), excludes 0 — here on the right side.
Power = the mean over the n − 1 adjacent pairs of P(separated the right way); P(all adjacent
pairs separated) is reported beside it.

The model of a vote (what is simulated). Companion i has latent strength θ_i (evenly spaced).
Every response r of a scenario has its own quality effect u_r ~ N(0, σ²) logits, shared by every
vote on every comparison that shows it (with all pairs on a scenario, a response is in n − 1
comparisons): this is the scenario clustering the release's bootstrap accounts for. A rater sees
d = θ_a + u_a − θ_b − u_b plus standard logistic noise ε (the Bradley–Terry unit; the latent
scale is arbitrary, so fixing ε's fixes it) and votes A when d + ε > τ, B when d + ε < −τ, a tie
otherwise (tie = half a win, as in the release).

The three inputs that set σ, τ and the spacing:
- δ is on the release's scale: the Bradley–Terry fit of the *expected* votes (ties half) of the
  design has its smallest adjacent difference δ Elo (response effects and rater noise shrink
  latent differences, so the latent spacing is larger than δ).
- "Expected agreement" is Krippendorff's α, nominal, on the 3-way outcome (A / tie / B) with
  every comparison mirrored: the platform's agreement report's `winner3` α (overall), taken
  in its large-sample form 1 − (1 − E Σ_c π_c²) / (1 − Σ_c π̄_c²) over the design's pairs
  (π: a comparison's outcome probabilities, π̄ their pooled mirrored mean). α grows with σ;
  its floor (σ = 0) is what the companions' differences alone give.
- The tie rate: the share of votes that are ties.
Or σ and τ themselves, from an earlier campaign (vote_model.noise_from_strengths: the σ and τ
behind its α and ties once its own companions' differences are accounted for — α depends on how
far apart the companions are, σ and τ describe the task and the rater pool); α and the tie rate
of the new design are then what they give. The model's functions are in h2htalk.stats.vote_model.

The search. A fast equivalent of the release's bootstrap runs in the inner loop: the
Bradley–Terry fit of each simulated study with the scenario-clustered sandwich variance
H⁻¹ (Σ_s g_s g_sᵀ) H⁻¹ (g_s: scenario s's score), the large-sample form of the variance of a
bootstrap that resamples scenarios; a pair is separated when |difference| / se > z. A
large-sample formula gives a first size; studies simulated at three sizes around it give the
power there, a one-parameter correction of the formula fits them, and the recommended size is
where the corrected curve reaches the target. Tests and `python -m bench planner` check the
recommendation with fresh studies through the release's own estimator.
"""

import itertools
import math
from dataclasses import asdict, dataclass, field

import numpy as np
from scipy.optimize import brentq
from scipy.special import expit, ndtr, ndtri

from . import LEVEL, N_BOOT
from . import bradley_terry as bt
from . import leaderboard as lb
from .vote_model import (
    SIGMA_MAX,
    TAU_MAX,
    PlanError,
    design_alpha,
    expected_strengths,
    noise_for,
    outcome_probabilities,
    step_for,
    tau_for,
)

STUDIES = 200  # simulated studies per size in the search
MAX_COMPARISONS = 500_000  # a plan needing more is reported as out of reach
CELL_BUDGET = 3_000_000  # studies × scenarios × shown pairs simulated at once
SEARCH_CELLS = 6_000_000  # cells simulated per size in the search: fewer studies for big ones
MIN_STUDIES = 50
DEFAULT_SECONDS = 60.0  # median seconds per item when no earlier campaign says otherwise


@dataclass(frozen=True)
class Setting:
    """What the researcher enters (or takes from an earlier campaign)."""

    n_companions: int
    overlap: int = 3  # k: annotators per comparison
    min_elo: float = 50.0  # δ: the smallest Elo difference that matters
    alpha: float = 0.3  # expected Krippendorff's α (nominal, A/tie/B, mirrored)
    tie_rate: float = 0.15
    pairs_per_scenario: int | None = None  # None: every pair on every scenario
    power: float = 0.8
    level: float = LEVEL
    seconds_per_item: float = DEFAULT_SECONDS
    sigma: float | None = None  # response-effect sd (logits); given: α is not used
    tau: float | None = None  # tie threshold; given (with σ): the tie rate is not used

    def pairs(self) -> int:
        every = self.n_companions * (self.n_companions - 1) // 2
        return every if self.pairs_per_scenario is None else min(self.pairs_per_scenario, every)

    def check(self) -> None:
        problems = []
        if not 2 <= self.n_companions <= 40:
            problems.append("2 to 40 companions")
        if not 1 <= self.overlap <= 20:
            problems.append("k from 1 to 20")
        if not 1 <= self.min_elo <= 800:
            problems.append("an Elo difference from 1 to 800")
        if not 0 < self.alpha < 1:
            problems.append("an agreement α strictly between 0 and 1")
        if not 0 <= self.tie_rate <= 0.9:
            problems.append("a tie rate from 0 to 0.9")
        if not 0.5 <= self.power <= 0.99 or not 0.5 <= self.level <= 0.999:
            problems.append("a power from 0.5 to 0.99 and a level from 0.5 to 0.999")
        if self.sigma is not None and not 0 <= self.sigma <= SIGMA_MAX:
            problems.append(f"a response-effect sd σ from 0 to {SIGMA_MAX:g}")
        if self.tau is not None and not 0 <= self.tau <= TAU_MAX:
            problems.append(f"a tie threshold τ from 0 to {TAU_MAX:g}")
        if self.pairs_per_scenario is not None and self.pairs_per_scenario < 1:
            problems.append("at least one pair per scenario")
        if problems:
            raise PlanError("The planner needs " + "; ".join(problems) + ".")


@dataclass
class Model:
    """The simulation model fitted to a Setting: latent strengths, response sd, tie threshold,
    and what they give (the release-scale strengths, α, the tie rate)."""

    theta: np.ndarray  # latent log-strengths, increasing
    sigma: float
    tau: float
    target: np.ndarray  # the Bradley–Terry fit of the expected votes (log-strengths, mean 0)
    alpha: float
    tie_rate: float
    alpha_floor: float  # α with σ = 0


def fit_model(setting: Setting) -> Model:
    """σ, τ and the spacing that give the setting's δ, α and tie rate (each depends a little
    on the others: alternate until the spacing settles). With σ and τ given (an earlier
    campaign's, vote_model.noise_from_strengths) only the spacing is solved, and α and the
    tie rate are what they give this design."""
    setting.check()
    n = setting.n_companions
    step = setting.min_elo / bt.ELO_SCALE
    for _ in range(20):
        sigma, tau, floor = _noise(setting, step * np.arange(n))
        new = step_for(n, sigma, tau, setting.min_elo)
        if abs(new - step) < 1e-7 * max(1.0, step):
            break
        step = new
    theta = new * np.arange(n)
    sigma, tau, floor = _noise(setting, theta)
    alpha, tie = design_alpha(theta, sigma, tau)
    target = expected_strengths(theta, sigma, tau)
    return Model(theta - theta.mean(), sigma, tau, target, alpha, tie, floor)


def _noise(setting: Setting, theta: np.ndarray) -> tuple[float, float, float]:
    if setting.sigma is None:
        return noise_for(theta, setting.alpha, setting.tie_rate)
    tau = tau_for(theta, setting.sigma, setting.tie_rate) if setting.tau is None else setting.tau
    return setting.sigma, tau, design_alpha(theta, 0.0, tau)[0]


# ---------------------------------------------------------------- simulated studies


@dataclass
class Studies:
    """Simulated studies: per study, scenario and shown comparison the votes for the low
    companion of its pair (`a_votes`), the ties and the votes cast (`games`); `pair` is the
    pair's index (i < j, np.triu_indices order), or None when every scenario shows every pair
    in that order. Only shown comparisons are held: R × S × P arrays, P the pairs a scenario
    shows (a design of 40 companions and 10 pairs a scenario holds 10 cells a scenario, not
    780)."""

    a_votes: np.ndarray  # R × S × P
    ties: np.ndarray  # R × S × P
    games: np.ndarray  # R × S × P
    n_companions: int
    pair: np.ndarray | None = None  # R × S × P

    @property
    def wins(self) -> np.ndarray:
        return self.a_votes + 0.5 * self.ties

    def pairs_of(self, study: int) -> np.ndarray:
        if self.pair is not None:
            return self.pair[study]
        return np.broadcast_to(np.arange(self.a_votes.shape[2]), self.a_votes.shape[1:])

    def pair_totals(self) -> tuple[np.ndarray, np.ndarray]:
        """(wins, games) per study and pair, R × K."""
        if self.pair is None:
            return self.wins.sum(axis=1), self.games.sum(axis=1)
        n_studies, n_pairs = len(self.a_votes), self.n_companions * (self.n_companions - 1) // 2
        code = (np.arange(n_studies)[:, None, None] * n_pairs + self.pair).ravel()
        size = n_studies * n_pairs

        def total(values):
            return np.bincount(code, weights=values.ravel(), minlength=size)

        shape = (n_studies, n_pairs)
        return total(self.wins).reshape(shape), total(self.games).reshape(shape)

    def votes(self, study: int):
        """One study's votes as rows (scenario, a, b, outcome for a: 1, ½, 0), the input of
        the release's estimator."""
        low, high = np.triu_indices(self.n_companions, 1)
        a_votes, ties = self.a_votes[study], self.ties[study]
        counts = np.stack([a_votes, ties, self.games[study] - a_votes - ties], axis=-1)
        counts = counts.reshape(-1).astype(int)
        cells = np.repeat(np.arange(a_votes.size), 3)
        take = np.repeat(cells, counts)
        scenario = take // a_votes.shape[1]
        pair = self.pairs_of(study).ravel()[take]
        outcome = np.repeat(np.tile([1.0, 0.5, 0.0], a_votes.size), counts)
        return scenario, low[pair], high[pair], outcome


def draw_studies(model: Model, setting: Setting, n_scenarios: int, n_studies: int, rng) -> Studies:
    """n_studies independent studies of n_scenarios scenarios each, every comparison with k
    votes (ties and all), responses with their shared quality effects."""
    n, k = setting.n_companions, setting.overlap
    low, high = np.triu_indices(n, 1)
    shape = (n_studies, n_scenarios)
    effects = rng.normal(0.0, model.sigma, size=(*shape, n))
    pair = _shown_pairs(setting, shape, rng)
    if pair is None:
        d = (model.theta[low] - model.theta[high]) + effects[..., low] - effects[..., high]
    else:
        first, second = low[pair], high[pair]
        d = model.theta[first] - model.theta[second]
        d += np.take_along_axis(effects, first, axis=2)
        d -= np.take_along_axis(effects, second, axis=2)
    p_a, p_t, _ = outcome_probabilities(d, model.tau)
    a_votes, ties = np.zeros(d.shape), np.zeros(d.shape)
    for _ in range(k):  # one uniform a vote: below P(A) an A, then a tie, else a B
        u = rng.random(d.shape)
        a_votes += u < p_a
        ties += (u >= p_a) & (u < p_a + p_t)
    games = np.full(d.shape, float(k))
    return Studies(a_votes, ties, games, n, pair)


def _shown_pairs(setting: Setting, shape, rng) -> np.ndarray | None:
    """Which pairs each scenario shows: all (None), or `pairs_per_scenario` distinct ones
    drawn uniformly (every pair equally often on average, like the balanced pairing, which
    also lets a companion's response be in several comparisons of a scenario): a slot that
    repeats an earlier slot's pair is drawn again, or, for more than half of all pairs, the
    ones with the smallest random keys."""
    n_pairs = setting.n_companions * (setting.n_companions - 1) // 2
    chosen = setting.pairs()
    if chosen >= n_pairs:
        return None
    if 2 * chosen > n_pairs:
        return np.argsort(rng.random((*shape, n_pairs)), axis=-1)[..., :chosen]
    pair = rng.integers(0, n_pairs, size=(*shape, chosen))
    for slot in range(1, chosen):
        repeated = (pair[..., :slot] == pair[..., slot : slot + 1]).any(axis=-1)
        while repeated.any():
            pair[..., slot][repeated] = rng.integers(0, n_pairs, size=int(repeated.sum()))
            repeated = (pair[..., :slot] == pair[..., slot : slot + 1]).any(axis=-1)
    return pair


# ---------------------------------------------------------------- the inner loop's estimator


def sandwich_differences(studies: Studies, start: np.ndarray):
    """Per study: the Bradley–Terry fit (the release's fit_batch) and the scenario-clustered
    sandwich standard errors of the adjacent differences θ_{i+1} − θ_i. R × (n − 1) each."""
    n = studies.n_companions
    theta, cov = sandwich_fit(studies, start)
    diag = np.einsum("rii->ri", cov)
    off = cov[:, np.arange(n - 1), np.arange(1, n)]
    se = np.sqrt(np.maximum(diag[:, 1:] + diag[:, :-1] - 2 * off, 1e-300))
    return np.diff(theta, axis=1), se


def sandwich_fit(studies: Studies, start: np.ndarray):
    """Per study the Bradley–Terry fit (R × n log-strengths, mean 0) and its scenario-clustered
    sandwich covariance H⁻¹ (Σ_s g_s g_sᵀ) H⁻¹ (R × n × n)."""
    n = studies.n_companions
    low, high = np.triu_indices(n, 1)
    pair_wins, pair_games = studies.pair_totals()
    batch = np.zeros((len(pair_wins), n, n))
    batch[:, low, high] = pair_wins
    batch[:, high, low] = pair_games - pair_wins
    theta = lb.fit_batch(batch, start)
    incidence = np.zeros((len(low), n))
    incidence[np.arange(len(low)), low] = 1.0
    incidence[np.arange(len(low)), high] = -1.0
    p = expit(theta @ incidence.T)  # R × K
    scores = _scenario_scores(studies, p, low, high)  # R × S × n
    meat = scores.transpose(0, 2, 1) @ scores
    weight = pair_games * p * (1 - p)
    hessian = incidence.T @ (weight[:, :, None] * incidence)  # R × n × n
    bread = np.linalg.pinv(hessian, hermitian=True)
    return theta, bread @ meat @ bread


def _scenario_scores(studies: Studies, p: np.ndarray, low, high) -> np.ndarray:
    """Each scenario's score (observed − expected wins, summed per companion), R × S × n."""
    n_studies, n_scenarios, _ = studies.a_votes.shape
    n = studies.n_companions
    if studies.pair is None:
        incidence = np.zeros((len(low), n))
        incidence[np.arange(len(low)), low] = 1.0
        incidence[np.arange(len(low)), high] = -1.0
        return (studies.wins - studies.games * p[:, None, :]) @ incidence
    cell_p = np.take_along_axis(p, studies.pair.reshape(n_studies, -1), axis=1)
    residual = (studies.wins - studies.games * cell_p.reshape(studies.pair.shape)).ravel()
    base = (np.arange(n_studies * n_scenarios) * n).reshape(n_studies, n_scenarios, 1)
    size = n_studies * n_scenarios * n
    scores = np.bincount((base + low[studies.pair]).ravel(), residual, minlength=size)
    scores -= np.bincount((base + high[studies.pair]).ravel(), residual, minlength=size)
    return scores.reshape(n_studies, n_scenarios, n)


def separated(difference: np.ndarray, se: np.ndarray, level: float) -> np.ndarray:
    """Separated the right way (the truth increases with the index): difference / se > z."""
    return difference / se > ndtri(0.5 + level / 2)


def power_at(model, setting, n_scenarios: int, n_studies: int, seed: int) -> np.ndarray:
    """R × (n − 1) separation indicators of n_studies simulated studies (fast estimator),
    simulated in chunks of at most CELL_BUDGET cells."""
    rng = np.random.default_rng(seed)
    per_study = n_scenarios * setting.pairs()
    chunk = max(1, CELL_BUDGET // max(per_study, 1))
    out = []
    for begin in range(0, n_studies, chunk):
        studies = draw_studies(model, setting, n_scenarios, min(chunk, n_studies - begin), rng)
        out.append(separated(*sandwich_differences(studies, model.target), setting.level))
    return np.concatenate(out)


# ---------------------------------------------------------------- the search

MIN_SCENARIOS = 20  # fewer scenarios make a bootstrap over scenarios unreliable
SIZES = (0.7, 1.0, 1.4)  # simulated sizes around the large-sample one


@dataclass
class Plan:
    """The planner's answer."""

    setting: dict
    n_scenarios: int
    n_comparisons: int
    n_votes: int
    annotator_hours: float
    planned_power: float  # the corrected curve at n_scenarios (mean over adjacent pairs)
    pair_power: list  # per adjacent pair, same curve
    all_separated: float  # simulated share of studies at n_scenarios with every pair separated
    simulated_power: float  # simulated mean power at n_scenarios (fast estimator)
    model: dict
    search: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return lb.json_safe(asdict(self))


def unit_information(model: Model, setting: Setting, seed: int = 0) -> np.ndarray:
    """Per adjacent pair, the variance of its difference times the number of scenarios (the
    sandwich at the release-scale truth, over a large simulated study)."""
    size = max(2_000, min(40_000, 1_000_000 // setting.pairs()))
    studies = draw_studies(model, setting, size, 1, np.random.default_rng(seed))
    _, se = sandwich_differences(studies, model.target)
    return size * se[0] ** 2


def curve(a: np.ndarray, n_scenarios, correction: float, level: float) -> np.ndarray:
    """Per adjacent pair, Φ(c·a·√S − z): the large-sample power, c fitted to simulations."""
    z = ndtri(0.5 + level / 2)
    return ndtr(correction * np.multiply.outer(np.sqrt(n_scenarios), a) - z)


def _size_for(a: np.ndarray, correction: float, setting: Setting) -> float:
    """Scenarios (continuous) where the mean power over adjacent pairs reaches the target."""

    def gap(size):
        return curve(a, size, correction, setting.level).mean() - setting.power

    if gap(1.0) >= 0:
        return 1.0
    top = 4.0
    while gap(top) < 0:
        top *= 4
    return brentq(gap, 1.0, top, xtol=1e-3)


def _fit_correction(a, sizes, hits, setting: Setting) -> float:
    """The c of `curve` that makes its power at each simulated size match the simulated
    share of separated pairs (the binomial likelihood's score equation, by bisection)."""
    observed = np.array([h.sum() for h in hits], dtype=float)
    trials = np.array([h.size for h in hits], dtype=float)

    def excess(c):
        expected = np.array([curve(a, s, c, setting.level).mean() for s in sizes])
        return (trials * expected).sum() - observed.sum()

    if excess(0.25) >= 0:
        return 0.25
    if excess(4.0) <= 0:
        return 4.0
    return brentq(excess, 0.25, 4.0, xtol=1e-5)


@dataclass
class Start:
    """The search's start: the fitted model, each adjacent pair's difference over its standard
    error per √scenario (a), the large-sample size and the work the search will do."""

    model: Model
    a: np.ndarray
    first: int
    studies: int
    cells: int  # cells the search simulates (studies × scenarios × shown pairs, all sizes)


def start(setting: Setting, seed: int = 0, studies: int = STUDIES) -> Start:
    """The model, the large-sample size and the search's size, in well under a second for
    most designs (a caller decides from `cells` whether to plan now or in the background)."""
    model = fit_model(setting)
    a = np.diff(model.target) / np.sqrt(unit_information(model, setting, seed))
    first = max(MIN_SCENARIOS, math.ceil(_size_for(a, 1.0, setting)))
    pairs = setting.pairs()
    if first * pairs > MAX_COMPARISONS:
        raise PlanError(
            f"About {first * pairs:,} comparisons would be needed, more than the planner "
            f"simulates ({MAX_COMPARISONS:,}): a larger difference, higher agreement or more "
            "annotators per comparison would need fewer."
        )
    studies = min(studies, max(MIN_STUDIES, SEARCH_CELLS // (first * pairs)))
    cells = studies * pairs * sum(max(MIN_SCENARIOS // 2, round(first * f)) for f in SIZES)
    return Start(model, a, first, studies, cells + studies * pairs * first)


def plan(setting: Setting, seed: int = 0, studies: int = STUDIES, progress=None) -> Plan:
    """The number of scenarios, comparisons, votes and annotator-hours for the setting."""
    begun = start(setting, seed, studies)
    model, a, first, studies = begun.model, begun.a, begun.first, begun.studies
    pairs = setting.pairs()
    sizes = sorted({max(MIN_SCENARIOS // 2, round(first * f)) for f in SIZES})
    hits = []
    for step, size in enumerate(sizes):
        hits.append(power_at(model, setting, size, studies, seed + 1 + step))
        if progress:
            progress(step + 1, len(sizes) + 1)
    correction = _fit_correction(a, sizes, hits, setting)
    chosen = max(MIN_SCENARIOS, math.ceil(_size_for(a, correction, setting)))
    check = power_at(model, setting, chosen, studies, seed + 1 + len(sizes))
    if progress:
        progress(len(sizes) + 1, len(sizes) + 1)
    pair_power = curve(a, chosen, correction, setting.level)
    comparisons = chosen * pairs
    return Plan(
        setting=asdict(setting),
        n_scenarios=chosen,
        n_comparisons=comparisons,
        n_votes=comparisons * setting.overlap,
        annotator_hours=comparisons * setting.overlap * setting.seconds_per_item / 3600,
        planned_power=float(pair_power.mean()),
        pair_power=pair_power.tolist(),
        all_separated=float(check.all(axis=1).mean()),
        simulated_power=float(check.mean()),
        model=_model_dict(model),
        search=search_dict(studies, sizes, hits, first, correction),
    )


def search_dict(studies: int, sizes, hits, first, correction: float) -> dict:
    """How a plan's size was searched (studies simulated per size, their power, the correction);
    the same record for the adjacent-pairs plan and the flag-gap plan (gap_planner)."""
    return {
        "studies_per_size": studies,
        "sizes": sizes,
        "simulated_power": [float(h.mean()) for h in hits],
        "large_sample_scenarios": first,
        "correction": correction,
    }


def _model_dict(model: Model) -> dict:
    return {
        "sigma": model.sigma,
        "tau": model.tau,
        "alpha": model.alpha,
        "alpha_floor": model.alpha_floor,
        "tie_rate": model.tie_rate,
        "latent_step": float(np.diff(model.theta).mean()),
        "adjacent_elo": (bt.ELO_SCALE * np.diff(model.target)).tolist(),
    }


# ---------------------------------------------------------------- checking a plan


def release_strengths(scenario, a, b, outcome, n_models, n_boot=N_BOOT, level=LEVEL, seed=0):
    """The release's human Bradley–Terry with the bootstrap that resamples scenarios (every
    vote of a drawn scenario comes with it): leaderboard.vote_scenario_strengths where the
    release has it (tracker issue 21, point 2), else the same estimator from its parts
    (scenario_strengths: votes summed per scenario cell, cell_strengths' bootstrap)."""
    estimator = getattr(lb, "vote_scenario_strengths", None) or lb.scenario_strengths
    return estimator(scenario, a, b, outcome, n_models, n_boot, level, seed)


def realised_power(
    setting: Setting, n_scenarios: int, n_studies: int, seed: int, n_boot: int = N_BOOT
) -> np.ndarray:
    """R × (n − 1): whether each adjacent pair came out separated the right way in studies
    simulated afresh (seed) and estimated by the release's own estimator."""
    model = fit_model(setting)
    rng = np.random.default_rng(seed)
    n = setting.n_companions
    out = np.zeros((n_studies, n - 1), dtype=bool)
    for study in range(n_studies):
        votes = draw_studies(model, setting, n_scenarios, 1, rng).votes(0)
        strengths = release_strengths(*votes, n, n_boot, setting.level, seed + study)
        out[study] = strengths.significant[np.arange(1, n), np.arange(n - 1)] == 1
    return out


# ---------------------------------------------------------------- a running campaign


def separation_status(
    scenario,
    a,
    b,
    outcome,
    n_models: int,
    min_elo: float,
    power: float = 0.8,
    level: float = LEVEL,
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> dict:
    """How many adjacent pairs (in the current Elo order) the release's rule separates, and
    about how many more votes would separate the rest.

    The estimate: a pair's interval half-width shrinks as 1/√votes when more votes come in
    the same design (new scenarios with the same pairing, so the clustering stays what it
    is); the pair needs its difference D = max(|current difference|, min_elo) to reach
    (z_level + z_power) standard errors, its standard error read off its bootstrap interval.
    The votes still needed are those of the pair that needs the most."""
    strengths = release_strengths(scenario, a, b, outcome, n_models, n_boot, level, seed)
    order = sorted(range(n_models), key=lambda i: (-strengths.elo[i], i))
    z = ndtri(0.5 + level / 2)
    votes = len(np.asarray(outcome))
    pairs = []
    for better, worse in itertools.pairwise(order):
        low, high = strengths.diff_low[better, worse], strengths.diff_high[better, worse]
        difference = strengths.elo[better] - strengths.elo[worse]
        pair = {"better": better, "worse": worse, "difference": difference, "low": low}
        pair.update(high=high, separated=bool(strengths.significant[better, worse] != 0))
        se = max((high - low) / (2 * z), 1e-9)
        factor = ((z + ndtri(power)) * se / max(abs(difference), min_elo)) ** 2
        # 0 for a separated pair, and for one whose interval is already narrow enough that a
        # difference of min_elo would show (what is left is a difference below min_elo).
        pair["more_votes"] = 0 if pair["separated"] else max(0, math.ceil(votes * (factor - 1)))
        pairs.append(pair)
    more = max((p["more_votes"] for p in pairs), default=0)
    return lb.json_safe(
        {
            "votes": votes,
            "adjacent": pairs,
            "n_adjacent": len(pairs),
            "n_separated": sum(p["separated"] for p in pairs),
            "more_votes": more,
            "min_elo": min_elo,
            "power": power,
            "level": level,
            "n_boot": n_boot,
        }
    )
