"""Style control (h2htalk.stats.style_control) on simulated votes with a known truth: a
companion that wins only by being longer loses its advantage and returns to its true rank, a
better companion that is not longer keeps its rank, the length coefficient's interval covers
the truth; the numbers are the same bit for bit for renumbered companions, renumbered scenarios
and swapped sides.

The simulation: four companions with true strengths θ; votes follow
P(A beats B) = σ(θA − θB + γ·log(LA/LB)), γ = 1; "Verbose" writes twice as long as the
others (each response's length log-normal around its companion's), so the plain fit lifts it
above "Good", which is truly stronger. The other features are noise (Poisson counts) that the
votes ignore."""

import numpy as np
import pytest

from h2htalk.stats import style_control as sc
from h2htalk.stats.leaderboard import cell_strengths, scenario_cells
from h2htalk.stats.style_features import FEATURES

NAMES = ["Best", "Good", "Verbose", "Weak"]
THETA = np.array([1.0, 0.4, 0.0, -0.6])  # true order: Best, Good, Verbose, Weak
LENGTH = np.array([150.0, 150.0, 300.0, 150.0])
GAMMA = 1.0  # log-odds per unit of log(LA / LB)
KINDS = [sc.LOG_RATIO] + [sc.SHARE] * (len(FEATURES) - 1)


def simulate(n_scenarios=120, votes=3, seed=1):
    """(a, b, outcome, scenario keys, features of A, of B) over every pair on every scenario."""
    rng = np.random.default_rng(seed)
    n = len(NAMES)
    length = LENGTH * np.exp(rng.normal(0, 0.35, (n_scenarios, n)))
    counts = rng.poisson(1.0, (n_scenarios, n, len(FEATURES) - 1))
    table = np.concatenate([np.round(length)[:, :, None], counts], axis=2)
    i, j = np.triu_indices(n, 1)
    s = np.repeat(np.arange(n_scenarios), len(i) * votes)
    a, b = np.tile(np.repeat(i, votes), n_scenarios), np.tile(np.repeat(j, votes), n_scenarios)
    z = np.log1p(table[s, a, 0]) - np.log1p(table[s, b, 0])
    p = 1 / (1 + np.exp(-(THETA[a] - THETA[b] + GAMMA * z)))
    outcome = (rng.random(len(s)) < p).astype(float)  # no ties: a tie drawn apart from p would
    # shrink every effect (ties count half: the release tests have them)
    keys = np.array([f"{k:06d}" for k in range(n_scenarios)])[s]
    return a, b, outcome, keys, table[s, a], table[s, b]


def fit(a, b, outcome, keys, fa, fb, names=NAMES, n_boot=100):
    return sc.style_strengths(a, b, outcome, keys, fa, fb, KINDS, names, n_boot=n_boot, seed=7)


@pytest.fixture(scope="module")
def votes():
    return simulate()


@pytest.fixture(scope="module")
def fitted(votes):
    return fit(*votes)


def order(elo) -> list[str]:
    return [NAMES[k] for k in np.argsort(-np.asarray(elo), kind="stable")]


def test_longer_only_loses_its_advantage_and_better_keeps_its_rank(fitted):
    truth = order(THETA)
    plain, controlled = order(fitted.plain.elo), order(fitted.controlled.elo)
    assert plain == ["Best", "Verbose", "Good", "Weak"]  # length lifts Verbose above Good
    assert controlled == truth  # … and style control puts it back
    verbose, good = NAMES.index("Verbose"), NAMES.index("Good")
    assert fitted.controlled.rank[verbose] > fitted.plain.rank[verbose]  # loses rank
    assert fitted.controlled.rank[good] <= fitted.plain.rank[good]
    best = NAMES.index("Best")
    assert fitted.plain.rank[best] == fitted.controlled.rank[best] == 1  # keeps its rank
    # The controlled Elo lies near the truth (mean-0 θ on the Elo scale), the plain one not.
    true_elo = 1000 + 400 / np.log(10) * (THETA - THETA.mean())
    assert abs(fitted.controlled.elo[verbose] - true_elo[verbose]) < 25
    assert fitted.plain.elo[verbose] - true_elo[verbose] > 50


def test_the_length_coefficient_covers_the_truth_and_noise_is_not_significant(fitted):
    per_unit = fitted.coefficient / fitted.scale  # log-odds per unit of the log ratio
    low, high = fitted.low / fitted.scale, fitted.high / fitted.scale
    assert low[0] < GAMMA < high[0] and low[0] > 0.5
    noise = [k for k in range(1, len(FEATURES)) if not fitted.low[k] < 0 < fitted.high[k]]
    assert len(noise) <= 1  # five covariates the votes ignore: one in 20 misses by chance
    assert abs(per_unit[0] - GAMMA) < 0.3
    assert fitted.used.all() and fitted.scenarios == 120


def test_renumbered_companions_and_reordered_votes_give_the_same_numbers_bit_for_bit(votes, fitted):
    a, b, outcome, keys, fa, fb = votes
    perm = np.array([2, 0, 3, 1])  # companion k is index perm[k] in the renumbered problem
    names = [None] * 4
    for k, name in enumerate(NAMES):
        names[perm[k]] = name
    shuffle = np.random.default_rng(3).permutation(len(a))  # votes in another order
    again = fit(
        perm[a][shuffle],
        perm[b][shuffle],
        outcome[shuffle],
        keys[shuffle],
        fa[shuffle],
        fb[shuffle],
        names,
    )
    for key in ("elo", "low", "high", "rank"):
        assert np.array_equal(getattr(again.controlled, key)[perm], getattr(fitted.controlled, key))
        assert np.array_equal(getattr(again.plain, key)[perm], getattr(fitted.plain, key))
    grid = np.ix_(perm, perm)
    assert np.array_equal(again.controlled.p_better[grid], fitted.controlled.p_better)
    for key in ("coefficient", "low", "high", "scale"):
        assert np.array_equal(getattr(again, key), getattr(fitted, key))


def test_swapped_sides_give_the_same_numbers_bit_for_bit(votes, fitted):
    a, b, outcome, keys, fa, fb = votes
    swap = np.random.default_rng(4).random(len(a)) < 0.5
    again = fit(
        np.where(swap, b, a),
        np.where(swap, a, b),
        np.where(swap, 1 - outcome, outcome),
        keys,
        np.where(swap[:, None], fb, fa),
        np.where(swap[:, None], fa, fb),
    )
    for key in ("elo", "low", "high", "rank"):
        assert np.array_equal(getattr(again.controlled, key), getattr(fitted.controlled, key))
    assert np.array_equal(again.coefficient, fitted.coefficient)
    assert np.array_equal(again.low, fitted.low)


def test_the_plain_fit_is_the_scenario_bootstrap_of_the_votes(votes, fitted):
    a, b, outcome, keys, *_ = votes
    _, unit = np.unique(keys, return_inverse=True)
    reference = cell_strengths(scenario_cells(unit, a, b, outcome, 4), n_boot=100, seed=7)
    assert np.array_equal(reference.elo, fitted.plain.elo)
    assert np.array_equal(reference.low, fitted.plain.low)


def test_without_style_effects_both_fits_agree_and_a_flat_covariate_is_left_out():
    a, b, outcome, keys, fa, fb = simulate(n_scenarios=60, seed=2)
    fa, fb = fa.copy(), fb.copy()
    fa[:, 0] = fb[:, 0] = 200  # every response as long: no length covariate
    fa[:, 4] = fb[:, 4] = 0  # no emoji anywhere
    result = fit(a, b, outcome, keys, fa, fb)
    assert not result.used[0] and not result.used[4] and result.used[1]
    assert np.isnan(result.coefficient[0]) and np.isnan(result.low[4])
    assert np.abs(result.controlled.elo - result.plain.elo).max() < 15
    assert order(result.controlled.elo)[0] == "Best"


def test_differences_are_antisymmetric_and_checked():
    fa, fb = np.array([[100.0, 3.0]]), np.array([[50.0, 0.0]])
    forward = sc.differences(fa, fb, [sc.LOG_RATIO, sc.SHARE])
    assert np.array_equal(forward, -sc.differences(fb, fa, [sc.LOG_RATIO, sc.SHARE]))
    assert forward[0, 0] == pytest.approx(np.log(101 / 51)) and forward[0, 1] == 0.75
    with pytest.raises(ValueError, match="unknown covariate kind"):
        sc.differences(fa, fb, ["cubic", sc.SHARE])
