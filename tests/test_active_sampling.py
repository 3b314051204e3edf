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
