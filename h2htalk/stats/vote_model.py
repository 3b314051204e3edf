"""The power planner's model of a vote (h2htalk.stats.planner), on plain arrays.

Companion i has latent strength θ_i; each response has a quality effect N(0, σ²) logits shared
by every vote on it; a rater sees d = θ_a + u_a − θ_b − u_b plus standard logistic noise and
votes A above τ, B below −τ, a tie between. Expectations over the response effects are
Gauss–Hermite sums (48 nodes), so every function here is exact to ~1e-12 and fast.

- `expected_strengths`: the Bradley–Terry fit of the expected votes (ties half), the release
  scale; `latent_for` inverts it (the latent strengths whose votes fit to given strengths).
- `design_alpha`: Krippendorff's α, nominal on A/tie/B with every comparison mirrored (the
  agreement report's `winner3`), in its large-sample form 1 − (1 − E Σ_c π_c²) / (1 − Σ_c π̄_c²)
  over the design's pairs (all pairs equally often), and the tie rate.
- `noise_for` / `noise_from_strengths`: σ and τ that give an α and a tie rate, for a planned
  layout or for an earlier campaign's own fitted strengths. α has a floor, the σ = 0 value:
  with randomly assigned raters, votes on one comparison cannot agree less than independent
  draws from its win probabilities do.
"""

import math

import numpy as np
from numpy.polynomial.hermite_e import hermegauss
from scipy.optimize import brentq
from scipy.special import expit

from . import bradley_terry as bt

NODES, WEIGHTS = hermegauss(48)
WEIGHTS = WEIGHTS / WEIGHTS.sum()  # E f(Z), Z ~ N(0, 1) ≈ Σ w f(node)
SIGMA_MAX = 12.0  # largest response-effect sd tried (logits)
TAU_MAX = 50.0


class PlanError(ValueError):
    """The inputs describe nothing the model can produce (e.g. an agreement below the floor)."""


def outcome_probabilities(d, tau: float):
    """(P(A), P(tie), P(B)) of one vote given the latent difference d."""
    p_a, p_b = expit(d - tau), expit(-d - tau)
    return p_a, 1 - p_a - p_b, p_b


def moments(gaps: np.ndarray, sigma: float, tau: float):
    """Over every design pair (latent gap) and response effects: mean tie rate, E Σπ², and
    the expected outcome (ties half) of each gap."""
    d = gaps[:, None] + math.sqrt(2) * sigma * NODES[None, :]
    p_a, p_t, p_b = outcome_probabilities(d, tau)
    tie = float((p_t @ WEIGHTS).mean())
    agree = float(((p_a**2 + p_t**2 + p_b**2) @ WEIGHTS).mean())
    expected = (p_a + 0.5 * p_t) @ WEIGHTS
    return tie, agree, expected


def gaps_of(theta: np.ndarray) -> np.ndarray:
    low, high = np.triu_indices(len(theta), 1)
    return theta[high] - theta[low]


def design_alpha(theta: np.ndarray, sigma: float, tau: float) -> tuple[float, float]:
    """(α, tie rate) of the design: α nominal on A/tie/B with mirrored units, large-sample."""
    tie, agree, _ = moments(gaps_of(theta), sigma, tau)
    pooled = tie**2 + 2 * ((1 - tie) / 2) ** 2  # mirrored: P(A) = P(B)
    return 1 - (1 - agree) / (1 - pooled), tie


def expected_strengths(theta: np.ndarray, sigma: float, tau: float) -> np.ndarray:
    """The Bradley–Terry fit (log-strengths, mean 0) of the design's expected votes: what the
    release's estimate converges to."""
    n = len(theta)
    low, high = np.triu_indices(n, 1)
    _, _, expected = moments(theta[low] - theta[high], sigma, tau)
    wins = np.zeros((n, n))
    wins[low, high] = 1_000 * expected  # 1,000 games a pair: the ridge does not matter
    wins[high, low] = 1_000 * (1 - expected)
    return bt.fit(wins)


def latent_for(target: np.ndarray, sigma: float, tau: float, tol: float = 1e-9) -> np.ndarray:
    """The latent strengths whose expected votes fit to `target` (release-scale log-strengths,
    mean 0): fixed-point steps scaled by the current shrinkage of the spread."""
    target = np.asarray(target, dtype=float) - np.mean(target)
    theta = target.copy()
    for _ in range(200):
        got = expected_strengths(theta, sigma, tau)
        miss = target - got
        if np.abs(miss).max() < tol:
            break
        spread = np.ptp(theta)
        shrink = np.ptp(got) / spread if spread > 0 else 1.0
        theta = theta + miss / max(shrink, 1e-3)
    return theta - theta.mean()


def tau_for(theta, sigma: float, tie_rate: float) -> float:
    if tie_rate <= 0:
        return 0.0
    gaps = gaps_of(theta)
    return brentq(lambda t: moments(gaps, sigma, t)[0] - tie_rate, 0.0, TAU_MAX, xtol=1e-8)


def noise_for(theta, alpha: float, tie_rate: float) -> tuple[float, float, float]:
    """(σ, τ, α floor) giving the design with latent strengths θ this α and tie rate."""

    def gap(sigma):
        return design_alpha(theta, sigma, tau_for(theta, sigma, tie_rate))[0] - alpha

    floor = gap(0.0) + alpha
    if alpha <= floor:
        raise PlanError(
            f"An agreement α of {alpha:.2f} is below what the companions' differences alone "
            f"give ({floor:.2f} with every vote independent, for companions this far apart): "
            "enter a higher α, a smaller Elo difference or fewer companions."
        )
    if gap(SIGMA_MAX) < 0:
        raise PlanError(f"An agreement α of {alpha:.2f} is more than this model reaches.")
    sigma = brentq(gap, 0.0, SIGMA_MAX, xtol=1e-6)
    return sigma, tau_for(theta, sigma, tie_rate), floor


def noise_from_strengths(target, alpha: float, tie_rate: float) -> tuple[float, float, float]:
    """(σ, τ, α floor) for votes among companions with these release-scale strengths (an
    earlier campaign's fit) to show this α and tie rate: the response effects and the tie
    threshold of that rater pool and task, apart from how far apart its companions were."""

    def solved(sigma):
        tau = tau_for(latent_for(target, sigma, 0.0), sigma, tie_rate)
        for _ in range(50):
            theta = latent_for(target, sigma, tau)
            new = tau_for(theta, sigma, tie_rate)
            if abs(new - tau) < 1e-8:
                break
            tau = new
        return theta, new

    def gap(sigma):
        theta, tau = solved(sigma)
        return design_alpha(theta, sigma, tau)[0] - alpha

    floor = gap(0.0) + alpha
    if alpha <= floor:
        raise PlanError(
            f"An agreement α of {alpha:.2f} is at or below what that campaign's companion "
            f"differences alone give ({floor:.2f}): no response effect to carry over."
        )
    if gap(SIGMA_MAX) < 0:
        raise PlanError(f"An agreement α of {alpha:.2f} is more than this model reaches.")
    sigma = brentq(gap, 0.0, SIGMA_MAX, xtol=1e-5)
    return sigma, solved(sigma)[1], floor


def step_for(n: int, sigma: float, tau: float, min_elo: float) -> float:
    """The latent spacing whose expected votes put adjacent companions min_elo apart (the
    smallest adjacent difference of the release-scale fit)."""

    def gap(step):
        target = expected_strengths(step * np.arange(n), sigma, tau)
        return bt.ELO_SCALE * np.diff(target).min() - min_elo

    return brentq(gap, 1e-6, 40.0, xtol=1e-9)
