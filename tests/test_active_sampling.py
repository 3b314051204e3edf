"""Active sampling puts votes on uncertain pairs and needs fewer votes than random pairing."""

import numpy as np

from h2htalk.stats import active_sampling as active
from tests import simulators


def test_clear_pairs_get_no_votes_and_close_ones_get_them():
    wins = np.zeros((3, 3))
    wins[0, 2], wins[2, 0] = 200, 0  # 0 ≫ 2: separated
    wins[0, 1], wins[1, 0] = 50, 48  # 0 ≈ 1: open
    wins[1, 2], wins[2, 1] = 200, 1
    picks = active.allocate(wins, 100, np.random.default_rng(0))
    assert set(picks) == {(0, 1)}
    assert not active.all_separated(wins)


def test_unseen_pairs_are_maximally_uncertain():
    weights = active.pair_weights(np.zeros((4, 4)))
    assert np.allclose(weights[np.triu_indices(4, 1)], 0.5)


def test_adaptive_needs_fewer_votes_to_separate_the_models_and_is_as_right():
    truth = [0.0, 0.35, 0.7, 1.05, 1.4, 2.5]
    random_runs = [simulators.simulate_design("random", truth, seed) for seed in range(8)]
    adaptive_runs = [simulators.simulate_design("adaptive", truth, seed) for seed in range(8)]
    assert np.median([v for v, _ in adaptive_runs]) < 0.8 * np.median([v for v, _ in random_runs])
    assert sum(ok for _, ok in adaptive_runs) >= sum(ok for _, ok in random_runs) - 1


def test_pairs_with_nothing_left_to_compare_do_not_take_the_draws():
    available = np.zeros((3, 3), dtype=bool)
    available[0, 2] = True  # the other pairs have used up their scenarios
    picks = active.allocate(np.zeros((3, 3)), 50, np.random.default_rng(0), available=available)
    assert set(picks) == {(0, 2)}
    assert active.allocate(np.zeros((3, 3)), 5, np.random.default_rng(0), available=~available)


def test_a_short_lucky_streak_does_not_settle_a_pair():
    wins = np.zeros((2, 2))
    wins[0, 1], wins[1, 0] = 9, 1  # 9–1 after ten votes
    assert active.pair_weights(wins)[0, 1] == 0  # the Wald interval alone calls it settled
    assert active.pair_weights(wins, min_games=20)[0, 1] > 0
    wins[0, 1], wins[1, 0] = 27, 3
    assert active.pair_weights(wins, min_games=20)[0, 1] == 0
