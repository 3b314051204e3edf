"""Leaderboards: `python -m bench leaderboard_bench` (or `make bench`).

1. Bradley–Terry with 1,000 bootstrap draws for 50 companions and 1,000,000 simulated human
   comparisons (h2htalk.stats.leaderboard.vote_strengths: aggregation into cells, the fit, the
   multinomial bootstrap and the significance matrix).
2. The judge's Bradley–Terry over every pair of 50 companions on 4,650 scenarios (5,696,250
   fractional outcomes) with 1,000 scenario-bootstrap draws.
3. A full benchmark release of 4,650 scenarios × 50 companions (232,500 responses), 10,000
   judged comparisons with 3 votes each and a calibrated judge on reference-metric features:
   freezing (ids + content hashes + fingerprint), computing every number (the judge scores
   every pair on every scenario), the bit-for-bit check, and the files. Reference metrics are
   stored up front (synthetic values): their cost is metrics_bench's.

Wall time and peak memory per step. Peak memory is the process's resident high-water mark
(VmHWM) during the step, reset before it through /proc/self/clear_refs where Linux allows, else
the process's peak so far (ru_maxrss). Sizes: BENCH_BT_COMPARISONS, BENCH_RELEASE_SCENARIOS,
BENCH_RELEASE_COMPANIONS, BENCH_RELEASE_COMPARISONS, BENCH_LEADERBOARD_DRAWS.
"""

import math
import tempfile
from pathlib import Path

import numpy as np

from bench._common import env_int, measured
from bench._world import imported_companions, imported_responses

COMPANIONS = env_int("BENCH_RELEASE_COMPANIONS", 50)
SCENARIOS = env_int("BENCH_RELEASE_SCENARIOS", 4_650)
COMPARISONS = env_int("BENCH_RELEASE_COMPARISONS", 10_000)
BT_COMPARISONS = env_int("BENCH_BT_COMPARISONS", 1_000_000)
DRAWS = env_int("BENCH_LEADERBOARD_DRAWS", 1_000)
VOTES = 3


# ---------------------------------------------------------------- measuring


# ---------------------------------------------------------------- statistics only


def bt_rows() -> list[dict]:
    from h2htalk.stats import leaderboard as lb
    from tests import simulators

    rng = np.random.default_rng(20250612)
    truth = rng.normal(0, 0.6, COMPANIONS)
    a, b, outcome = simulators.simulate_ties_exact(truth, BT_COMPARISONS, rng)
    row, strengths = measured(
        f"Bradley–Terry: {COMPANIONS} companions, {BT_COMPARISONS:,} comparisons, "
        f"{DRAWS} bootstrap draws",
        lambda: lb.vote_strengths(a, b, outcome, COMPANIONS, n_boot=DRAWS, seed=1),
        BT_COMPARISONS,
    )
    rho = float(
        np.corrcoef(np.argsort(np.argsort(strengths.elo)), np.argsort(np.argsort(truth)))[0, 1]
    )
    row["notes"] += f"; Spearman with the truth {rho:.4f}"
    rows = [row]
    # The judge: every pair on every scenario, fractional outcomes, scenario bootstrap.
    quality = truth[None, :] + rng.normal(0, 1.0, (SCENARIOS, COMPANIONS))
    i, j = np.triu_indices(COMPANIONS, 1)
    scenario = np.repeat(np.arange(SCENARIOS, dtype=np.int32), len(i))
    pa, pb = np.tile(i, SCENARIOS), np.tile(j, SCENARIOS)
    p = 1 / (1 + np.exp(-(quality[scenario, pa] - quality[scenario, pb])))
    row, _ = measured(
        f"Judge Bradley–Terry: {COMPANIONS} companions × {SCENARIOS:,} scenarios "
        f"({len(p):,} pairs), {DRAWS} scenario-bootstrap draws",
        lambda: lb.scenario_strengths(scenario, pa, pb, p, COMPANIONS, n_boot=DRAWS, seed=1),
        len(p),
    )
    rows.append(row)
    return rows


# ---------------------------------------------------------------- a full release


def populate(rng) -> dict:
    """Scenarios, companions, responses with stored metrics, a rated campaign, a judge."""
    from django.contrib.auth import get_user_model

    from scenarios.models import GenerationRun

    User = get_user_model()
    owner = User.objects.create(username="bench-owner")
    raters = User.objects.bulk_create([User(username=f"bench-rater-{k}") for k in range(30)])
    companions = imported_companions(COMPANIONS)
    strength = rng.normal(0, 0.6, COMPANIONS)
    scenarios = _scenarios()
    run = GenerationRun.objects.create(name="bench run", kind=GenerationRun.Kind.IMPORT)
    quality = strength[None, :] + rng.normal(0, 1.0, (SCENARIOS, COMPANIONS))
    response_ids = imported_responses(run, scenarios, companions)
    _metric_scores(rng, quality, response_ids)
    campaign = _rated_campaign(
        rng, owner, raters, companions, run, scenarios, response_ids, quality
    )
    return {
        "owner": owner,
        "campaign": campaign,
        "companions": companions,
        "judge": _judge(campaign),
    }


def _scenarios() -> list:
    from scenarios.models import Scenario
    from scenarios.taxonomy import Subtask

    subtasks = Subtask.values  # the 11 subtasks in turn
    risks = ["low", "medium", "high"]

    scenarios = []
    for k in range(SCENARIOS):
        # Flags as a release slices them: a fifth implicit, a tenth evolving, one in eight at risk.
        scenario = Scenario(
            external_id=f"b{k:05d}",
            subtask=subtasks[k % len(subtasks)],
            implicit_need=k % 5 == 1,
            evolving_need=k % 10 == 3,
            risk_level=risks[(k // 8) % 3] if k % 8 == 5 else "none",
            user_message=f"Bench message {k}: a long week, and tomorrow looks no better.",
            reference_response=f"Reference answer {k}: that sounds exhausting, tell me more.",
            language="en",
            state=Scenario.State.APPROVED,
        )
        scenario.refresh_derived()
        scenarios.append(scenario)
    return Scenario.objects.bulk_create(scenarios, batch_size=2_000)


def _metric_scores(rng, quality: np.ndarray, response_ids: np.ndarray) -> None:
    """Synthetic reference metrics that follow each response's quality (their cost is
    metrics_bench's), inserted 20,000 at a time."""
    from scoring.models import MetricScore

    scores = []
    for s in range(SCENARIOS):
        for c in range(COMPANIONS):
            base = float(np.clip(0.35 + 0.06 * quality[s, c] + rng.normal(0, 0.03), 0.01, 0.99))
            values = {
                "rouge1": base,
                "rouge2": base * 0.6,
                "rougeL": base * 0.9,
                "bleu1": base * 0.8,
                "bleu2": base * 0.5,
                "bleu3": base * 0.3,
                "bleu4": base * 0.2,
                "length_tokens": 20 + c % 7,
                "length_chars": 60 + 3 * (c % 7),
                "reference_tokens": 12,
                "reference_chars": 50,
                "length_ratio": 1.5,
            }
            scores.append(MetricScore(response_id=int(response_ids[s, c]), values=values))
        if len(scores) >= 20_000:
            MetricScore.objects.bulk_create(scores, batch_size=5_000)
            scores = []
    MetricScore.objects.bulk_create(scores, batch_size=5_000)


def _rated_campaign(rng, owner, raters, companions, run, scenarios, response_ids, quality):
    """COMPARISONS distinct comparisons, each voted by VOTES raters from the qualities."""
    from django.utils import timezone

    from annotation.models import Campaign, Comparison
    from tests.simulators import save_votes, submitted_vote

    campaign = Campaign.objects.create(
        name="bench campaign", owner=owner, overlap=VOTES, state=Campaign.State.OPEN
    )
    campaign.companions.set(companions)
    campaign.runs.set([run])
    campaign.annotators.set(raters)
    chosen = set()
    while len(chosen) < COMPARISONS:
        s = int(rng.integers(SCENARIOS))
        a, b = sorted(rng.choice(COMPANIONS, 2, replace=False).tolist())
        chosen.add((s, a, b))
    chosen = sorted(chosen)
    comparisons = Comparison.objects.bulk_create(
        [
            Comparison(
                campaign=campaign,
                scenario=scenarios[s],
                response_a_id=int(response_ids[s, a]),
                response_b_id=int(response_ids[s, b]),
                judgment_count=VOTES,
            )
            for s, a, b in chosen
        ],
        batch_size=5_000,
    )
    now = timezone.now()
    votes = []
    for comparison, (s, a, b) in zip(comparisons, chosen, strict=True):
        p = 1 / (1 + math.exp(-(quality[s, a] - quality[s, b])))
        for rater in rng.choice(len(raters), VOTES, replace=False):
            u = rng.random()
            preference = -1 if u < p - 0.05 else 0 if u < p + 0.05 else 1
            votes.append(submitted_vote(comparison, raters[int(rater)], preference, now))
    save_votes(votes)
    return campaign


def _judge(campaign):
    """A calibrated judge on reference-metric features, stored for the campaign."""
    from scoring.calibration.document import SCHEMA, validate_document
    from scoring.models import CalibratedJudge

    document = validate_document(
        {
            "schema": SCHEMA,
            "name": "bench judge",
            "version": 1,
            "features": ["rouge1", "rougeL", "log_length"],
            "scaling": {"mean": [0.0, 0.0, 0.0], "scale": [0.08, 0.07, 0.1]},
            "weights": [1.0, 0.3, 0.1],
            "intercept": 0.0,
            "judge": None,
        }
    )
    return CalibratedJudge.objects.create(
        name="bench judge", version=1, document=document, campaign=campaign
    )


def release_rows() -> list[dict]:
    from scoring.models import Release

    rng = np.random.default_rng(7)
    responses = SCENARIOS * COMPANIONS
    row, world = measured(
        f"release setup: {SCENARIOS:,} scenarios × {COMPANIONS} companions, "
        f"{COMPARISONS:,} comparisons × {VOTES} votes (bulk inserts)",
        lambda: populate(rng),
        responses,
    )
    release = bench_release(world)
    release = Release.objects.select_related("campaign", "anchor", "judge").get(pk=release.pk)
    return [row, *_pipeline_rows(release, responses)]


def bench_release(world: dict):
    """The release of a bench world: every companion, the first as anchor, its judge, seed 0."""
    from scoring.models import Release

    release = Release.objects.create(
        name="bench release",
        campaign=world["campaign"],
        anchor=world["companions"][0],
        judge=world["judge"],
        seed=0,
        n_boot=DRAWS,
    )
    release.companions.set(world["companions"])
    return release


def _pipeline_rows(release, responses: int) -> list[dict]:
    """Freeze, compute, check and write the files of the release, each measured."""
    from h2htalk import provenance
    from scoring.releases import formats
    from scoring.releases import service as releases

    rows = []
    row, _ = measured(
        f"release freeze: {responses:,} responses (ids, text sha256, fingerprint)",
        lambda: releases.freeze_release(release),
        responses,
        notes="reference metrics already stored",
    )
    rows.append(row)
    pairs = SCENARIOS * COMPANIONS * (COMPANIONS - 1) // 2
    row, result = measured(
        f"release compute: every number, {DRAWS} draws ({pairs:,} judge pairs)",
        lambda: releases.compute(release),
        pairs,
        notes="verify inputs, judge over all pairs, 15 human + 15 judge Bradley–Terry fits "
        "with bootstrap, PPI, composite",
    )
    rows.append(row)
    row, outcome = measured(
        "release check: verify + recompute + compare bit for bit",
        lambda: releases.check(release),
        pairs,
    )
    row["notes"] += f"; {'passed' if outcome.ok else 'FAILED: ' + outcome.message[:200]}"
    rows.append(row)
    release = releases.find_release(str(release.pk))
    with tempfile.TemporaryDirectory() as folder:
        row, paths = measured(
            "release files: CSV + JSON + Markdown",
            lambda: formats.write_files(release, Path(folder)),
            3,
        )
        sizes = ", ".join(f"{p.suffix[1:]} {p.stat().st_size / 1024:,.0f} KiB" for p in paths)
    row["notes"] += f"; {sizes}"
    rows.append(row)
    inputs_mib = len(provenance.canonical(release.inputs).encode()) / 2**20
    data_mib = len(provenance.canonical(result.data).encode()) / 2**20
    rows.append(
        {
            "benchmark": "release stored JSON",
            "notes": f"frozen inputs {inputs_mib:,.1f} MiB, numbers {data_mib:,.2f} MiB; "
            f"fingerprint {release.fingerprint[:12]}…",
        }
    )
    return rows


def run() -> list[dict]:
    return bt_rows() + release_rows()


if __name__ == "__main__":
    import os

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "h2htalk.settings")
    django.setup()
    for line in bt_rows():
        print(line)
