"""The planner's flag-gap mode, planned vs realised: `python -m bench gap_planner`.

For each setting the flag-gap planner (h2htalk.stats.gap_planner.plan, its own search with the
fast estimator) recommends a number of scenarios for 80% power to mark a companion whose flag
gap exceeds the field's by the given Elo. Then BENCH_GAP_STUDIES (default 300) fresh studies of
exactly that size, with seeds the search never used, are estimated as the release does (each
group's Bradley–Terry with its scenario bootstrap, BENCH_GAP_DRAWS draws, default 1,000; the
gaps read from the field's biweight draw by draw; 95% percentile intervals): the realised
power is the share of weakened companions marked, its standard error the spread of the
per-study share over √studies; beside it, the share of field companions marked either way
(what the release's rule costs in false marks). The first setting is the effect of
tests/scoring/test_release_field (8 companions, k 1, all 28 pairs, half the scenarios flagged,
B and E losing 0.8 logits, σ 1, no ties); for it BENCH_GAP_RELEASES (default 300) releases of
that test's own data (tests/scenario_studies.flag_release: with G weak everywhere and the whole
field losing on implicit needs, which the planner does not simulate) at the planned size also go
through the release's computation (scoring.releases.computing.compute_results, 200 draws as in
the test). No database work.
"""

import time

import numpy as np

from bench._common import env_int, log

STUDIES = env_int("BENCH_GAP_STUDIES", 300)
DRAWS = env_int("BENCH_GAP_DRAWS", 1_000)
RELEASES = env_int("BENCH_GAP_RELEASES", 300)


def settings():
    from h2htalk.stats import gap_planner as gp

    test_gap = gp.release_gap(8, 2, 0.8, 1.0, 0.0)
    return {
        "8 companions, 2 weakened by 0.8 logits, half flagged, σ 1, k 1 (the release test)": (
            gp.GapSetting(
                8, overlap=1, sigma=1.0, tau=0.0, tie_rate=0.0, min_gap=test_gap, weakened=2
            )
        ),
        "10 companions, 1 weakened by 120 Elo, 30% flagged, α 0.35, 15% ties, k 2, 12 pairs": (
            gp.GapSetting(
                10,
                overlap=2,
                alpha=0.35,
                tie_rate=0.15,
                min_gap=120,
                flag_share=0.3,
                weakened=1,
                pairs_per_scenario=12,
            )
        ),
    }


def one(label: str, setting, seed: int) -> dict:
    from h2htalk.stats import gap_planner as gp

    start = time.perf_counter()
    plan = gp.plan(setting, seed=seed)
    planning = time.perf_counter() - start
    start = time.perf_counter()
    marks = gp.realised_marks(setting, plan.n_scenarios, STUDIES, 1_000_000 + seed, DRAWS)
    checking = time.perf_counter() - start
    w = setting.weakened
    per_study = (marks[:, :w] == 1).mean(axis=1)
    realised = float(per_study.mean())
    se = float(per_study.std(ddof=1) / np.sqrt(len(per_study)))
    field = float((marks[:, w:] != 0).mean())
    gap = realised - plan.planned_power
    verdict = "within ±5 points" if abs(gap) <= 0.05 else "OUTSIDE ±5 points"
    notes = (
        f"{plan.n_scenarios} scenarios ({plan.n_flagged} flagged) = {plan.n_comparisons:,} "
        f"comparisons, {plan.n_votes:,} votes, {plan.annotator_hours:,.1f} annotator-h; "
        f"planned power {plan.planned_power:.3f} (search's own check {plan.simulated_power:.3f}), "
        f"realised {realised:.3f} ± {se:.3f} (SE; {STUDIES} studies, release estimator with "
        f"{DRAWS} draws), difference {100 * gap:+.1f} points: {verdict}; field companions "
        f"marked {field:.1%} (search said {plan.field_marked:.1%}); latent loss "
        f"{plan.model['latent_loss']:.3f} logits, σ {plan.model['sigma']:.2f}; planning "
        f"{planning:.1f} s, checking {checking:.1f} s"
    )
    log(f"{label}: {notes}")
    return {
        "benchmark": f"gap planner: {label}",
        "rows": STUDIES,
        "seconds": round(planning, 3),
        "notes": notes,
        "planned": plan.planned_power,
        "realised": realised,
        "realised_se": se,
    }


def releases(label: str, setting) -> dict:
    """The test's own data through compute_results at the size planned for its effect."""
    from h2htalk.stats import gap_planner as gp
    from scoring.releases import computing
    from tests import scenario_studies as studies

    plan = gp.plan(setting, seed=0)
    marked = dict.fromkeys(studies.NAMES, 0)
    start = time.perf_counter()
    for seed in range(10_000, 10_000 + RELEASES):
        results = computing.compute_results(studies.flag_release(seed, plan.n_scenarios))
        for name, mark in studies.flag_marks(results).items():
            marked[name] += mark == 1 if name in studies.IMPLICIT_WEAK else mark != 0
    weak = np.mean([marked[n] for n in studies.IMPLICIT_WEAK]) / RELEASES
    shares = ", ".join(f"{n} {v / RELEASES:.1%}" for n, v in marked.items())
    notes = (
        f"{plan.n_scenarios} scenarios (planner seed 0, as the test), {RELEASES} releases of "
        "flag_release through "
        f"compute_results: weakened marked {weak:.3f} (planned {plan.planned_power:.3f}); "
        f"marked: {shares}; {time.perf_counter() - start:.1f} s"
    )
    log(f"{label}, release computation: {notes}")
    return {"benchmark": f"gap planner: {label}, compute_results", "rows": RELEASES, "notes": notes}


def run() -> list[dict]:
    items = list(settings().items())
    rows = [one(label, s, seed) for seed, (label, s) in enumerate(items, start=1)]
    if RELEASES:
        rows.append(releases(*items[0]))
    return rows
