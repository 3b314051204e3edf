"""Where the next votes should go: the model pairs whose order is least certain.

Chatbot Arena's active sampling idea, on the Bradley–Terry fit of the votes so far: the chance
that the fitted order of models i and j is wrong, Φ(−|θi − θj| / sd(θi − θj)), is highest for
close pairs with few votes and falls as votes separate them. New comparisons are shared out in
proportion to it; pairs already separated at the target level get none.
"""

import numpy as np

from . import bradley_terry as bt


def pair_weights(wins: np.ndarray, separated_at: float = 0.025, min_games: int = 0) -> np.ndarray:
    """Upper-triangle weights over model pairs (0 where the order is already clear).

    A pair with fewer than `min_games` games is never taken as separated: after a handful of
    votes the Wald interval is too optimistic, and checking after every batch would otherwise
    stop a campaign on an early lucky streak between two equal models."""
    n = wins.shape[0]
    games = wins + wins.T
    theta = bt.fit(wins)
    uncertainty = bt.order_uncertainty(theta, bt.covariance(wins, theta))
    uncertainty[games == 0] = 0.5  # never compared: as uncertain as it gets
    weights = np.triu(uncertainty, k=1)
    young = games < min_games
    weights[young] = np.maximum(weights[young], separated_at)
    weights[weights < separated_at] = 0.0
    weights[np.tril_indices(n)] = 0.0
    return weights


def allocate(
    wins: np.ndarray,
    budget: int,
    rng: np.random.Generator,
    available: np.ndarray | None = None,
    **kwargs,
):
    """`budget` (i, j) pairs with i < j drawn in proportion to their order uncertainty, among
    the `available` pairs (a boolean matrix; default all: a pair with nothing left to compare
    must not take the draws of the others); an empty list when every pair that can still be
    compared is separated."""
    weights = pair_weights(wins, **kwargs)
    if available is not None:
        weights = np.where(available, weights, 0.0)
    total = weights.sum()
    if total <= 0 or budget <= 0:
        return []
    flat = weights.ravel() / total
    picks = rng.choice(flat.size, size=budget, p=flat)
    n = wins.shape[0]
    return [(int(k // n), int(k % n)) for k in picks]


def all_separated(wins: np.ndarray, separated_at: float = 0.025) -> bool:
    return not pair_weights(wins, separated_at).any()
