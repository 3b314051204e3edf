"""Coverage of the human Bradley–Terry intervals with a known truth, larger than the suite's
(tests/test_scenario_bootstrap.py): simulated studies where every response has its own N(0, sd)
logit quality shared by every vote on it (tests/scenario_studies.py). For the scenario
bootstrap (stats.vote_scenario_strengths, what releases use) and the multinomial reweighting of
vote counts (stats.vote_strengths, the earlier method): the share of 95% intervals of pairwise
Elo differences that cover the population truth, and the mean interval width. Then the flag
gaps read against the field (tests/scoring/test_release_field.py, over more seeds): how often
each of eight companions is marked on implicit needs when B and E struggle there and G
everywhere, through compute_results. No database work.
Sizes: BENCH_COVERAGE_STUDIES (default 1,000), BENCH_COVERAGE_DRAWS (default 1,000),
BENCH_FLAG_SEEDS (default 200), BENCH_FLAG_SCENARIOS (default 200 and 120).
"""

import os

from bench._common import log
from h2htalk.stats.bradley_terry import ELO_SCALE
from tests import scenario_studies as studies

STUDIES = int(os.environ.get("BENCH_COVERAGE_STUDIES", "1000"))
DRAWS = int(os.environ.get("BENCH_COVERAGE_DRAWS", "1000"))
FLAG_SEEDS = int(os.environ.get("BENCH_FLAG_SEEDS", "200"))
FLAG_SCENARIOS = [int(v) for v in os.environ.get("BENCH_FLAG_SCENARIOS", "200,120").split(",")]
SETTINGS = {  # label: (response sd, scenarios, votes per pair and scenario)
    "response sd 1, 60 scenarios × 3 votes per pair": (1.0, 60, 3),
    "response sd 1, 200 scenarios × 1 vote per pair": (1.0, 200, 1),
    "response sd 0.5, 120 scenarios × 2 votes per pair": (0.5, 120, 2),
    "no response effect, 60 scenarios × 3 votes per pair": (0.0, 60, 3),
}


def flag_rows() -> list[dict]:
    from scoring.releases import computing

    rows = []
    for size in FLAG_SCENARIOS:
        marked = dict.fromkeys(studies.NAMES, 0)
        shared = 0
        for seed in range(FLAG_SEEDS):
            data = studies.flag_release(seed, size, n_boot=DRAWS)
            results = computing.compute_results(data)
            for name, mark in studies.flag_marks(results).items():
                marked[name] += mark == 1 if name in studies.IMPLICIT_WEAK else mark != 0
            block = results["flag_differences"]["implicit_need"]["shared"]
            shared += block["low"] <= studies.FIELD_DROP * ELO_SCALE <= block["high"]
        rates = ", ".join(f"{name} {count / FLAG_SEEDS:.0%}" for name, count in marked.items())
        log(f"{size} scenarios: {rates}; shared shift covered {shared}/{FLAG_SEEDS}")
        rows.append(
            {
                "benchmark": f"flag gaps from the field: 8 companions, {size} scenarios × 28 pairs",
                "rows": FLAG_SEEDS,
                "notes": f"marked on implicit needs (B, E: ▲; others: any mark) over "
                f"{FLAG_SEEDS} seeds, {DRAWS} draws: {rates}; the shared shift's interval "
                f"covers the truth in {shared}/{FLAG_SEEDS}",
            }
        )
    return rows


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
    return rows + flag_rows()
