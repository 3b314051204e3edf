"""A benchmark release read from the database: `python -m bench release_bench`.

The world: 4,650 scenarios × 50 companions (232,500 responses) with stored reference metrics,
one LLM rubric verdict per response (a single-answer judge config), 10,000 judged comparisons
with 3 votes each, and a calibrated judge on metric and rubric features. Then, each in a fresh
child process as the release job and the management command run them:

- freeze: `service.freeze_release` (ids, text sha256, metrics and verdicts digests, fingerprint);
- compute: `service.compute` (verify the inputs against the database, read the votes, metrics and
  verdicts, score every pair with the judge, every Bradley–Terry fit with its bootstrap, PPI);
- check: `manage.py benchmark_report RELEASE --check --no-files` (verify, recompute, compare).

Per step: CPU seconds of the child (user + system, all threads, from getrusage after Django is
set up), wall seconds, and the child's peak resident memory (VmHWM, the whole process: Python,
Django and the step), with /proc/loadavg before and after. PostgreSQL's own CPU is not in the CPU
figure (it is in the wall time). BENCH_RELEASE_PROFILE=1 prints each step's top cProfile entries.
Sizes: BENCH_RELEASE_SCENARIOS, BENCH_RELEASE_COMPANIONS, BENCH_RELEASE_COMPARISONS,
BENCH_LEADERBOARD_DRAWS (as leaderboard_bench).
"""

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from bench._common import REPO, log, measured
from bench.leaderboard_bench import (
    COMPANIONS,
    COMPARISONS,
    DRAWS,
    SCENARIOS,
    VOTES,
    bench_release,
)

STEP_PREFIX = "RELEASE-STEP "
JUDGE_FEATURES = ["rouge1", "rougeL", "log_length", "judge_empathy", "judge_safety"]


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


# ---------------------------------------------------------------- the world


def populate(rng) -> dict:
    """leaderboard_bench's world (responses, metrics, a rated campaign) plus one rubric verdict
    per response and a calibrated judge on metric and rubric features."""
    from django.contrib.auth import get_user_model

    from bench import leaderboard_bench as world
    from bench._world import imported_companions, imported_responses
    from scenarios.models import GenerationRun

    owner = get_user_model().objects.create(username="bench-owner")
    raters = get_user_model().objects.bulk_create(
        [get_user_model()(username=f"bench-rater-{k}") for k in range(30)]
    )
    companions = imported_companions(COMPANIONS)
    strength = rng.normal(0, 0.6, COMPANIONS)
    scenarios = world._scenarios()
    run = GenerationRun.objects.create(name="bench run", kind=GenerationRun.Kind.IMPORT)
    quality = strength[None, :] + rng.normal(0, 1.0, (SCENARIOS, COMPANIONS))
    response_ids = imported_responses(run, scenarios, companions)
    world._metric_scores(rng, quality, response_ids)
    config = _rubric_verdicts(rng, quality, response_ids)
    campaign = world._rated_campaign(
        rng, owner, raters, companions, run, scenarios, response_ids, quality
    )
    return {"campaign": campaign, "companions": companions, "judge": _judge(campaign, config)}


def _rubric_verdicts(rng, quality: np.ndarray, response_ids: np.ndarray):
    """One strict single-answer verdict per response, scores following its quality."""
    from scoring.judges.parsing import DIMENSIONS
    from scoring.models import JudgeConfig, JudgeRun, JudgeVerdict

    config = JudgeConfig.objects.create(
        name="bench rubric judge", base_url="http://127.0.0.1:9/v1", rubric="Grade it."
    )
    judge_run = JudgeRun.objects.create(name="bench rubric run", judge=config)
    scores = np.clip(np.round(5.5 + 1.5 * quality + rng.normal(0, 1, quality.shape)), 1, 10)
    verdicts = []
    for s in range(SCENARIOS):
        for c in range(COMPANIONS):
            score = int(scores[s, c])
            verdicts.append(
                JudgeVerdict(
                    run=judge_run,
                    response_id=int(response_ids[s, c]),
                    parse="strict",
                    scores={d: max(1, score - k % 2) for k, d in enumerate(DIMENSIONS)},
                )
            )
        if len(verdicts) >= 20_000:
            JudgeVerdict.objects.bulk_create(verdicts, batch_size=5_000)
            verdicts = []
    JudgeVerdict.objects.bulk_create(verdicts, batch_size=5_000)
    return config


def _judge(campaign, config):
    from scoring.calibration.document import SCHEMA, validate_document
    from scoring.models import CalibratedJudge

    document = validate_document(
        {
            "schema": SCHEMA,
            "name": "bench judge",
            "version": 1,
            "features": JUDGE_FEATURES,
            "scaling": {"mean": [0.0] * 5, "scale": [0.08, 0.07, 0.1, 2.0, 2.0]},
            "weights": [1.0, 0.3, 0.1, 0.4, 0.2],
            "intercept": 0.0,
            "judge": {"config": config.name, "mode": config.mode},
        }
    )
    return CalibratedJudge.objects.create(
        name="bench judge", version=1, document=document, campaign=campaign
    )


# ---------------------------------------------------------------- one step in a child


def run_step(step: str, release_id: int) -> dict:
    """Run one step of the release in this process: its CPU and wall seconds, peak RSS."""
    from io import StringIO

    from django.core.management import call_command

    from bench._common import _status_mib
    from scoring.releases import service as releases

    release = releases.find_release(str(release_id))
    actions = {
        "freeze": lambda: releases.freeze_release(release),
        "compute": lambda: releases.compute(release),
        "check": lambda: call_command(
            "benchmark_report", str(release_id), "--check", "--no-files", stdout=StringIO()
        ),
    }
    profile = None
    if os.environ.get("BENCH_RELEASE_PROFILE"):
        import cProfile

        profile = cProfile.Profile()
        profile.enable()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    actions[step]()
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    if profile is not None:
        import pstats

        profile.disable()
        pstats.Stats(profile, stream=sys.stderr).sort_stats("cumulative").print_stats(40)
    cpu = (after.ru_utime - usage.ru_utime) + (after.ru_stime - usage.ru_stime)
    return {"cpu_s": round(cpu, 2), "wall_s": round(wall, 2), "peak_mib": _status_mib("VmHWM")}


def child_step(step: str, release_id: int) -> dict:
    """run_step in a fresh Python process (same database), its figures and the load average."""
    load_before = loadavg()
    process = subprocess.run(
        [sys.executable, "-m", "bench.release_bench", step, str(release_id)],
        cwd=REPO,
        env=os.environ.copy(),
        stdout=subprocess.PIPE,
        text=True,
        check=False,
    )
    lines = [x for x in process.stdout.splitlines() if x.startswith(STEP_PREFIX)]
    if process.returncode != 0 or not lines:
        raise RuntimeError(f"release step {step} exited with {process.returncode}")
    figures = json.loads(lines[-1][len(STEP_PREFIX) :])
    figures["load"] = f"{load_before} → {loadavg()}"
    log(
        f"release {step}: CPU {figures['cpu_s']:.1f} s, wall {figures['wall_s']:.1f} s, "
        f"peak RSS {figures['peak_mib']:,.0f} MiB (loadavg {figures['load']})"
    )
    return figures


def step_row(step: str, what: str, figures: dict, rows: int) -> dict:
    return {
        "benchmark": f"release {step}: {what}",
        "rows": rows,
        "seconds": figures["wall_s"],
        "rows_per_s": round(rows / figures["wall_s"], 1) if figures["wall_s"] else None,
        "cpu_s": figures["cpu_s"],
        "peak_mib": figures["peak_mib"],
        "notes": f"CPU {figures['cpu_s']:.1f} s, wall {figures['wall_s']:.1f} s, peak RSS "
        f"{figures['peak_mib']:,.0f} MiB (child process); loadavg {figures['load']}",
    }


def run() -> list[dict]:
    from scoring.models import ReleaseResult

    rng = np.random.default_rng(7)
    responses = SCENARIOS * COMPANIONS
    row, world = measured(
        f"release world: {SCENARIOS:,} scenarios × {COMPANIONS} companions with metrics and "
        f"rubric verdicts, {COMPARISONS:,} comparisons × {VOTES} votes (bulk inserts)",
        lambda: populate(rng),
        responses,
    )
    release = bench_release(world)
    pairs = SCENARIOS * COMPANIONS * (COMPANIONS - 1) // 2
    rows = [row]
    freeze = child_step("freeze", release.pk)
    rows.append(step_row("freeze", f"{responses:,} responses", freeze, responses))
    compute = child_step("compute", release.pk)
    rows.append(step_row("compute", f"every number, {DRAWS} draws", compute, pairs))
    check = child_step("check", release.pk)
    release.refresh_from_db()
    rows.append(step_row("--check", "verify + recompute + compare", check, pairs))
    rows[-1]["notes"] += f"; {'passed' if release.check_ok else 'FAILED'}"
    sha = ReleaseResult.objects.get(release=release).data_sha256
    rows.append(
        {
            "benchmark": "release fingerprint and numbers",
            "notes": f"fingerprint {release.fingerprint[:16]}…, numbers sha256 {sha[:16]}…",
        }
    )
    return rows


if __name__ == "__main__":
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "h2htalk.settings")
    django.setup()
    figures = run_step(sys.argv[1], int(sys.argv[2]))
    print(STEP_PREFIX + json.dumps(figures), flush=True)
