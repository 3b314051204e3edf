"""Where the next votes should go: the model pairs whose order is least certain.

Chatbot Arena's active sampling idea, on the Bradley–Terry fit of the votes so far: the chance
that the fitted order of models i and j is wrong, Φ(−|θi − θj| / sd(θi − θj)), is highest for
close pairs with few votes and falls as votes separate them. New comparisons are shared out in
proportion to it; pairs already separated at the target level get none.
"""

import numpy as np

from . import bradley_terry as bt


def pair_weights(wins: np.ndarray, separated_at: float = 0.025) -> np.ndarray:
    """Upper-triangle weights over model pairs (0 where the order is already clear)."""
    n = wins.shape[0]
    games = wins + wins.T
    theta = bt.fit(wins)
    uncertainty = bt.order_uncertainty(theta, bt.covariance(wins, theta))
    uncertainty[games == 0] = 0.5  # never compared: as uncertain as it gets
    weights = np.triu(uncertainty, k=1)
    weights[weights < separated_at] = 0.0
    weights[np.tril_indices(n)] = 0.0
    return weights


def allocate(wins: np.ndarray, budget: int, rng: np.random.Generator, **kwargs):
    """`budget` (i, j) pairs with i < j drawn in proportion to their order uncertainty;
    an empty list when every pair is separated."""
    weights = pair_weights(wins, **kwargs)
    total = weights.sum()
    if total <= 0 or budget <= 0:
        return []
    flat = weights.ravel() / total
    picks = rng.choice(flat.size, size=budget, p=flat)
    n = wins.shape[0]
    return [(int(k // n), int(k % n)) for k in picks]


def all_separated(wins: np.ndarray, separated_at: float = 0.025) -> bool:
    return not pair_weights(wins, separated_at).any()


def simulate_design(design: str, truth, seed: int, batch: int = 20, limit: int = 50_000):
    """Votes a design needs until every pair is separated, with votes drawn from known
    Bradley–Terry strengths `truth`; returns (votes, fitted order correct?). For benchmarks and
    tests: `design` is "random" (uniform over pairs, like a fixed random campaign) or
    "adaptive"."""
    rng = np.random.default_rng(seed)
    truth = np.asarray(truth, float)
    n = len(truth)
    wins = np.zeros((n, n))
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    votes = 0
    while votes < limit and not all_separated(wins):
        if design == "adaptive":
            chosen = allocate(wins, batch, rng)
        else:
            chosen = [pairs[k] for k in rng.integers(0, len(pairs), batch)]
        for i, j in chosen:
            if rng.random() < 1 / (1 + np.exp(-(truth[i] - truth[j]))):
                wins[i, j] += 1
            else:
                wins[j, i] += 1
        votes += len(chosen)
    fitted = bt.fit(wins)
    return votes, bool((np.argsort(fitted) == np.argsort(truth)).all())
