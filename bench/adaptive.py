"""Adaptive pairing vs the random design, on simulated votes with known model strengths.

Votes needed until every model pair's order is separated at 95% (order uncertainty < 2.5%),
and how often the fitted order is then exactly right. No database work.
"""

import os

import numpy as np

from bench._common import log
from tests.simulators import simulate_design

SEEDS = int(os.environ.get("BENCH_ADAPTIVE_SEEDS", "20"))
SETTINGS = {
    "8 models, evenly spaced (0.3 apart)": np.arange(8) * 0.3,
    "8 models, two close clusters": np.array([0, 0.15, 0.3, 0.45, 1.6, 1.75, 1.9, 2.05]),
}


def run() -> list[dict]:
    rows = []
    for label, truth in SETTINGS.items():
        results = {}
        for design in ("random", "adaptive"):
            runs = [simulate_design(design, truth, seed) for seed in range(SEEDS)]
            votes = [v for v, _ in runs]
            results[design] = np.median(votes)
            log(f"{label}, {design}: median {np.median(votes):.0f} votes")
            rows.append(
                {
                    "benchmark": f"adaptive pairing: {label}, {design}",
                    "rows": int(np.median(votes)),
                    "notes": f"median votes to separate all pairs over {SEEDS} seeds "
                    f"(p25 {np.percentile(votes, 25):.0f}, p75 {np.percentile(votes, 75):.0f}); "
                    f"order exactly right in {sum(ok for _, ok in runs)}/{SEEDS}",
                }
            )
        rows.append(
            {
                "benchmark": f"adaptive pairing: {label}, saving",
                "notes": f"adaptive needs {results['adaptive'] / results['random']:.0%} "
                "of the random design's votes",
            }
        )
    return rows
