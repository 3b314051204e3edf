"""Coverage of the human Bradley–Terry intervals with a known truth, larger than the suite's
(tests/test_scenario_bootstrap.py): simulated studies where every response has its own N(0, sd)
logit quality shared by every vote on it (tests/scenario_studies.py). For the scenario
bootstrap (stats.vote_scenario_strengths, what releases use) and the multinomial reweighting of
vote counts (stats.vote_strengths, the earlier method): the share of 95% intervals of pairwise
Elo differences that cover the population truth, and the mean interval width. No database.
Sizes: BENCH_COVERAGE_STUDIES (default 1,000), BENCH_COVERAGE_DRAWS (default 1,000).
"""

import os

from bench._common import log
from tests import scenario_studies as studies

STUDIES = int(os.environ.get("BENCH_COVERAGE_STUDIES", "1000"))
DRAWS = int(os.environ.get("BENCH_COVERAGE_DRAWS", "1000"))
SETTINGS = {  # label: (response sd, scenarios, votes per pair and scenario)
    "response sd 1, 60 scenarios × 3 votes per pair": (1.0, 60, 3),
    "response sd 1, 200 scenarios × 1 vote per pair": (1.0, 200, 1),
    "response sd 0.5, 120 scenarios × 2 votes per pair": (0.5, 120, 2),
    "no response effect, 60 scenarios × 3 votes per pair": (0.0, 60, 3),
}


def run() -> list[dict]:
    rows = []
    for label, (sd, scenarios, raters) in SETTINGS.items():
        result = studies.coverage(STUDIES, sd, scenarios, raters, n_boot=DRAWS, seed=11)
        coverage, width = result["coverage"], result["width"]
        log(f"{label}: {coverage} {width}")
        rows.append(
            {
                "benchmark": f"scenario bootstrap coverage: {label}",
                "rows": result["cases"],
                "notes": f"95% intervals covering the truth: scenarios "
                f"{coverage['scenarios']:.1%}, vote counts {coverage['votes']:.1%}; mean width "
                f"{width['scenarios']:.1f} vs {width['votes']:.1f} Elo "
                f"({width['scenarios'] / width['votes']:.2f}×), {STUDIES} studies, "
                f"{DRAWS} draws",
            }
        )
    return rows
