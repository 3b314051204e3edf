"""The campaign of `python -m bench two_hosts` (bench/two_hosts.py): its plan, read from the
environment, and the world built before the run: the release files imported, the companions'
responses bulk-inserted, the campaign built on a host's Celery worker, the earlier votes."""

import os
import random
import time
from dataclasses import dataclass, field
from datetime import timedelta
from io import BytesIO
from pathlib import Path

from bench._common import SHARED_DATA, env_int, loadavg, log
from bench._hosts import Lab

RELEASE_FILES = Path(os.environ.get("H2HTALK_SHARED_DATA") or SHARED_DATA)
EARLIER_RATERS = 30


@dataclass
class Plan:
    seconds: float = 600
    annotators: int = 100
    companions: int = 50
    pairs_per_scenario: int = 10
    scenarios_per_file: int | None = None  # None: every line of every release file
    pace: tuple[float, float] = (4.0, 8.0)
    arrival: float = 8.0
    lease_minutes: int = 1
    gunicorn_workers: int = 3
    seed_share: float = 0.5  # comparisons voted by earlier raters before the run
    release_draws: int = 1000
    release: bool = True

    @property
    def down_seconds(self) -> float:
        return self.lease_minutes * 60 + 30

    @property
    def kill_at(self) -> float:
        return (self.seconds - self.down_seconds) / 2

    @classmethod
    def from_env(cls) -> "Plan":
        pace = os.environ.get("BENCH_TWO_HOSTS_PACE", "4,8").split(",")
        return cls(
            seconds=env_int("BENCH_TWO_HOSTS_SECONDS", 600),
            annotators=env_int("BENCH_TWO_HOSTS_ANNOTATORS", 100),
            companions=env_int("BENCH_TWO_HOSTS_COMPANIONS", 50),
            pairs_per_scenario=env_int("BENCH_TWO_HOSTS_PAIRS", 10),
            scenarios_per_file=env_int("BENCH_TWO_HOSTS_SCENARIOS_PER_FILE", 0) or None,
            pace=(float(pace[0]), float(pace[1])),
            gunicorn_workers=env_int("BENCH_TWO_HOSTS_WORKERS", 3),
            release_draws=env_int("BENCH_LEADERBOARD_DRAWS", 1000),
            seed_share=float(os.environ.get("BENCH_TWO_HOSTS_SEED_SHARE", "0.5")),
            release=os.environ.get("BENCH_TWO_HOSTS_RELEASE", "1") != "0",
        )


# ---------------------------------------------------------------- the world


@dataclass
class World:
    campaign: object
    companions: list
    tokens: list[str]
    scenarios: int
    responses: int
    comparisons: int
    seeded_votes: int
    build_seconds: dict = field(default_factory=dict)


def import_release(plan: Plan) -> int:
    """The release files through the scenario importer (approved: a campaign takes them)."""
    from scenarios.importers import import_file
    from scenarios.models import Scenario

    files = sorted(RELEASE_FILES.glob("*.jsonl"))
    if len(files) != 11:
        raise RuntimeError(
            f"expected the 11 H2HTalk release files in {RELEASE_FILES} (H2HTALK_SHARED_DATA)"
        )
    for path in files:
        source = str(path)
        if plan.scenarios_per_file:
            lines = path.read_bytes().splitlines(keepends=True)[: plan.scenarios_per_file]
            source = BytesIO(b"".join(lines))
        import_file(source, path.name, initial_state=Scenario.State.APPROVED)
    return Scenario.objects.count()


def bulk_responses(plan: Plan, rng: random.Random):
    """plan.companions imported companions, one response each to every scenario (bulk
    inserts), and stored reference metrics for each (release freeze would compute them)."""
    from scenarios.models import CompanionModel, GenerationRun, Response, Scenario
    from scoring.models import MetricScore

    companions = CompanionModel.objects.bulk_create(
        [
            CompanionModel(name=f"companion-{k:02d}", provider="imported")
            for k in range(plan.companions)
        ]
    )
    run = GenerationRun.objects.create(name="two hosts: imported", kind=GenerationRun.Kind.IMPORT)
    run.companions.set(companions)
    scenarios = list(Scenario.objects.order_by("pk").values_list("pk", "reference_response"))
    total = 0
    for start in range(0, len(scenarios), 200):
        batch = []
        for scenario_id, reference in scenarios[start : start + 200]:
            for k, companion in enumerate(companions):
                cut = 20 + (k * 7 + scenario_id) % max(1, len(reference))
                batch.append(
                    Response(
                        run=run,
                        scenario_id=scenario_id,
                        companion=companion,
                        text=f"{reference[:cut]}（{k}）",
                    )
                )
        created = Response.objects.bulk_create(batch, batch_size=5_000)
        MetricScore.objects.bulk_create(
            [MetricScore(response_id=r.pk, values=_metrics(rng)) for r in created],
            batch_size=5_000,
        )
        total += len(created)
    return companions, run, total


def _metrics(rng: random.Random) -> dict:
    base = rng.uniform(0.1, 0.6)
    return {
        "rouge1": base,
        "rouge2": base * 0.6,
        "rougeL": base * 0.9,
        "bleu1": base * 0.8,
        "bleu2": base * 0.5,
        "bleu3": base * 0.3,
        "bleu4": base * 0.2,
        "length_tokens": 20,
        "length_chars": 60,
        "reference_tokens": 12,
        "reference_chars": 50,
        "length_ratio": 1.5,
    }


def make_campaign(plan: Plan, companions, run):
    from django.contrib.auth import get_user_model

    from annotation.models import Campaign
    from h2htalk.roles import ensure_role_groups

    ensure_role_groups()
    owner = get_user_model().objects.create(username="two-hosts-owner")
    campaign = Campaign.objects.create(
        name="two hosts at H2HTalk scale",
        owner=owner,
        overlap=3,
        state=Campaign.State.OPEN,
        pairing=Campaign.Pairing.RANDOM_PAIRS,
        pairs_per_scenario=plan.pairs_per_scenario,
        lease_minutes=plan.lease_minutes,
    )
    campaign.companions.set(companions)
    campaign.runs.set([run])
    return campaign


def build_on_worker(campaign, lab: Lab, timeout: float = 900) -> float:
    """The campaign build job (annotation.tasks.queue_build), run by a host's Celery worker;
    fails at once when every worker has exited (their logs' ends in the error)."""
    from django.db import transaction

    from annotation.tasks import queue_build
    from h2htalk.models import Job

    started = time.perf_counter()
    with transaction.atomic():
        job = queue_build(campaign, campaign.owner)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job.refresh_from_db()
        if job.state == Job.State.COMPLETED:
            log(f"campaign build job: {job.message}")
            return time.perf_counter() - started
        if job.state == Job.State.FAILED:
            raise RuntimeError(f"campaign build failed: {job.message}")
        if all(h.worker is None or h.worker.poll() is not None for h in lab.hosts):
            logs = "\n".join(lab.log_tail(h) for h in lab.hosts)
            raise RuntimeError(f"every Celery worker exited before the build ran:\n{logs}")
        time.sleep(1)
    raise RuntimeError(f"campaign build not done after {timeout:.0f} s ({job.state})")


def seed_earlier_votes(plan: Plan, campaign, rng: random.Random) -> int:
    """3 votes of earlier raters on the first seed_share of every scenario's comparisons,
    counted as recording.store counts them (judgment counts, tallies, rater pairs)."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.utils import timezone

    from annotation.models import Comparison
    from annotation.progress import recount_later
    from tests.simulators import save_votes, submitted_vote

    raters = get_user_model().objects.bulk_create(
        [get_user_model()(username=f"earlier-rater-{k}") for k in range(EARLIER_RATERS)]
    )
    campaign.annotators.add(*raters)
    by_scenario: dict[int, list] = {}
    for comparison in Comparison.objects.filter(campaign=campaign).order_by("pk"):
        by_scenario.setdefault(comparison.scenario_id, []).append(comparison)
    chosen = [
        c for items in by_scenario.values() for c in items[: round(len(items) * plan.seed_share)]
    ]
    now = timezone.now() - timedelta(days=1)
    votes = []
    for comparison in chosen:
        for rater in rng.sample(raters, campaign.overlap):
            votes.append(submitted_vote(comparison, rater, rng.choice([-2, -1, 0, 1, 2]), now=now))
    save_votes(votes)
    for start in range(0, len(chosen), 5_000):
        ids = [c.pk for c in chosen[start : start + 5_000]]
        Comparison.objects.filter(pk__in=ids).update(judgment_count=campaign.overlap)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
        cursor.execute(
            """INSERT INTO annotation_annotatortally
                (campaign_id, annotator_id, judged, filled, day, today)
            SELECT %s, annotator_id, count(*), count(*) FILTER (WHERE latest = 1), NULL, 0
            FROM (SELECT j.annotator_id, row_number() OVER (
                    PARTITION BY j.comparison_id ORDER BY j.id DESC) AS latest
                FROM annotation_judgment j
                JOIN annotation_comparison c ON c.id = j.comparison_id
                WHERE c.campaign_id = %s) AS votes
            GROUP BY annotator_id""",
            [campaign.pk, campaign.pk],
        )
        cursor.execute(
            """INSERT INTO annotation_raterpair (campaign_id, low_id, high_id, shared)
            SELECT %s, a.annotator_id, b.annotator_id, count(*)
            FROM annotation_judgment a
            JOIN annotation_judgment b
                ON b.comparison_id = a.comparison_id AND a.annotator_id < b.annotator_id
            JOIN annotation_comparison c ON c.id = a.comparison_id
            WHERE c.campaign_id = %s AND NOT c.is_gold GROUP BY a.annotator_id, b.annotator_id""",
            [campaign.pk, campaign.pk],
        )
        cursor.execute("ANALYZE")
    recount_later(campaign)
    return len(votes)


def build_world(plan: Plan, lab: Lab) -> World:
    """Everything before the run; the hosts must be up (the build runs on their workers)."""
    from bench.rating_load import _annotator_tokens

    rng = random.Random(24)
    seconds = {}
    started = time.perf_counter()
    scenarios = import_release(plan)
    seconds["import"] = time.perf_counter() - started
    log(f"imported {scenarios:,} scenarios in {seconds['import']:.0f} s (loadavg {loadavg()})")
    started = time.perf_counter()
    companions, run, responses = bulk_responses(plan, rng)
    seconds["responses"] = time.perf_counter() - started
    log(
        f"{responses:,} responses with stored metrics in {seconds['responses']:.0f} s "
        f"(loadavg {loadavg()})"
    )
    campaign = make_campaign(plan, companions, run)
    seconds["build"] = build_on_worker(campaign, lab)
    comparisons = campaign.comparisons.count()
    started = time.perf_counter()
    seeded = seed_earlier_votes(plan, campaign, rng) if plan.seed_share else 0
    seconds["seed"] = time.perf_counter() - started
    log(f"{seeded:,} earlier votes in {seconds['seed']:.0f} s (loadavg {loadavg()})")
    tokens = _annotator_tokens(campaign, plan.annotators, "two-hosts")
    campaign.refresh_from_db()
    return World(campaign, companions, tokens, scenarios, responses, comparisons, seeded, seconds)
