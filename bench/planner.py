"""The power planner, planned vs realised: `python -m bench planner`.

For each setting (few / many companions × low / high agreement, and one whose response effects
and tie threshold come from an earlier campaign) the planner recommends a study
size for 80% power to separate adjacent companions (h2htalk.stats.planner.plan: its own search
with the fast estimator). Then BENCH_PLANNER_STUDIES (default 400) fresh studies of exactly that
size are simulated with seeds the search never used and estimated by the release's estimator
(Bradley–Terry with the bootstrap that resamples scenarios, 1,000 draws, 95% intervals): the
realised power is the share of adjacent pairs they separate the right way. Its standard error
is the spread of the per-study share over √studies. The issue's bar: realised within ±5 points
of planned. No database work.
"""

import time

import numpy as np

from bench._common import env_int, log

STUDIES = env_int("BENCH_PLANNER_STUDIES", 400)
DRAWS = env_int("BENCH_PLANNER_DRAWS", 1_000)


def settings():
    from h2htalk.stats.planner import Setting

    return {
        "3 companions, α 0.20 (low)": Setting(3, overlap=3, min_elo=60, alpha=0.2),
        "4 companions, α 0.60 (high)": Setting(4, overlap=3, min_elo=60, alpha=0.6),
        "10 companions, α 0.30 (low), 5 pairs/scenario": Setting(
            10, overlap=3, min_elo=50, alpha=0.3, pairs_per_scenario=5
        ),
        "10 companions, α 0.60 (high), all pairs": Setting(10, overlap=3, min_elo=50, alpha=0.6),
        "6 companions, σ 1.0 / τ 0.4 from an earlier campaign, k 2": Setting(
            6, overlap=2, min_elo=50, sigma=1.0, tau=0.4
        ),
    }


def one(label: str, setting, seed: int) -> dict:
    from h2htalk.stats import planner

    start = time.perf_counter()
    plan = planner.plan(setting, seed=seed)
    planning = time.perf_counter() - start
    start = time.perf_counter()
    hits = planner.realised_power(
        setting, plan.n_scenarios, STUDIES, seed=1_000_000 + seed, n_boot=DRAWS
    )
    checking = time.perf_counter() - start
    per_study = hits.mean(axis=1)
    realised = float(per_study.mean())
    se = float(per_study.std(ddof=1) / np.sqrt(len(per_study)))
    gap = realised - plan.planned_power
    verdict = "within ±5 points" if abs(gap) <= 0.05 else "OUTSIDE ±5 points"
    notes = (
        f"{plan.n_scenarios} scenarios = {plan.n_comparisons:,} comparisons, "
        f"{plan.n_votes:,} votes, {plan.annotator_hours:,.1f} annotator-h at "
        f"{setting.seconds_per_item:.0f} s/item; planned power {plan.planned_power:.3f}, "
        f"realised {realised:.3f} ± {se:.3f} (SE; {STUDIES} studies, release estimator with "
        f"{DRAWS} scenario-bootstrap draws), difference {100 * gap:+.1f} points: {verdict}; "
        f"all adjacent pairs separated in {hits.all(axis=1).mean():.0%} of studies "
        f"(planner's search said {plan.all_separated:.0%}); response sd σ = "
        f"{plan.model['sigma']:.2f} logits, α floor {plan.model['alpha_floor']:.2f}; "
        f"checking took {checking:.1f} s"
    )
    log(f"{label}: {notes}")
    return {
        "benchmark": f"planner: {label}",
        "rows": STUDIES,
        "seconds": round(planning, 3),
        "notes": notes,
        "planned": plan.planned_power,
        "realised": realised,
        "realised_se": se,
    }


def run() -> list[dict]:
    rows = [one(label, s, seed) for seed, (label, s) in enumerate(settings().items(), start=1)]
    worst = max(abs(r["realised"] - r["planned"]) for r in rows)
    rows.append(
        {
            "benchmark": "planner: largest |realised − planned|",
            "notes": f"{100 * worst:.1f} points over {len(rows)} settings "
            "(seconds above: the planner's own answer time)",
        }
    )
    return rows
