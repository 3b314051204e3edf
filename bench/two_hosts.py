"""Two app hosts on one PostgreSQL and one Redis, at H2HTalk scale: `python -m bench two_hosts`.

Not run through the bench's per-backend worker: it makes its own world (bench/_hosts.py, needs
root): two network namespaces joined to this machine by veth pairs, a PostgreSQL cluster and a
redis-server of its own listening on loopback and the host side of the veths, and in each
namespace gunicorn (h2htalk.wsgi, BENCH_TWO_HOSTS_WORKERS sync workers, 3) and a Celery worker.

The campaign: the 11 files of the H2HTalk release (4,589 scenarios, imported with the scenario
importer) × BENCH_TWO_HOSTS_COMPANIONS companions (50: 229,450 responses, bulk-inserted with
stored reference metrics, as release_bench), random pairing with BENCH_TWO_HOSTS_PAIRS pairs per
scenario (10: 45,890 comparisons), overlap 3, a lease of 1 minute, built by the campaign build
job on a host's Celery worker. Half of the comparisons (the first half of every scenario's)
already carry 3 votes of 30 earlier raters, counted as the queue counts them (tallies, rater
pairs), so that the release after the run has votes enough for every slice.

The run: BENCH_TWO_HOSTS_ANNOTATORS annotators (100), half on each host, each taking 4–8 s per
item (BENCH_TWO_HOSTS_PACE="4,8"), arriving over the first 8 s, for BENCH_TWO_HOSTS_SECONDS
(600). Midway host B's gunicorn and worker are killed (SIGKILL). B's annotators with an even
number move to host A at once (a submit that did not get through is sent there again, with
the same key); those with an odd number wait for B, and the item they were shown is left (a
page that died); B comes back after the lease plus 30 s. A submit whose answer was lost in the
kill is always sent again (submits are idempotent), so every accepted answer is known.

Figures (each with /proc/loadavg beside it): p95 of next and submit per host and phase (before
the kill, host A while B is down, both after); CPU-ms per cycle (utime + stime from /proc of the
gunicorn workers and of the PostgreSQL client backends, sampled every 2 s); accepted = stored;
comparisons over k (the judgment rows, not the counter); the items the waiting annotators held
when B died: lease expired and slot free again (judgments + live leases < k) before B returns,
and how many were handed to someone else afterwards; then a release of all companions frozen
and computed in a child process (release_bench.child_step), with its slices computed or skipped.
"""

import http.client
import json
import os
import random
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from io import BytesIO
from pathlib import Path

from bench._common import REPO, SHARED_DATA, cpu_ms, env_int, loadavg, log, percentile
from bench._hosts import HTTP_PORT, Lab

OUT_DIR = Path(__file__).resolve().parent / "out"
RELEASE_FILES = Path(os.environ.get("H2HTALK_SHARED_DATA") or SHARED_DATA)
EARLIER_RATERS = 30
RESULT_PREFIX = "TWO-HOSTS-RESULT "  # one line of JSON for tests/test_two_hosts.py


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


# ---------------------------------------------------------------- annotators


class Unreachable(Exception):
    """The host did not answer; `sent`: the request may have reached it."""

    def __init__(self, sent: bool):
        super().__init__("sent" if sent else "not sent")
        self.sent = sent


def call(host, path: str, token: str, body: dict) -> tuple[int, bytes, float]:
    """One POST on a new connection (gunicorn's sync workers close each one), timed from
    the connect."""
    started = time.perf_counter()
    connection = http.client.HTTPConnection(host.inner, HTTP_PORT, timeout=30)
    try:
        try:
            connection.connect()
        except OSError:
            raise Unreachable(sent=False) from None
        headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
        try:
            connection.request("POST", path, body=json.dumps(body), headers=headers)
            response = connection.getresponse()
            payload = response.read()
        except (OSError, http.client.HTTPException):
            raise Unreachable(sent=True) from None
    finally:
        connection.close()
    return response.status, payload, (time.perf_counter() - started) * 1000


class Board:
    """What the annotators share: the run's clock, which hosts are up, the samples."""

    def __init__(self, lab: Lab, deadline: float):
        self.lab, self.deadline = lab, deadline
        self.t0 = time.monotonic()
        self.up = {host.index: threading.Event() for host in lab.hosts}
        for event in self.up.values():
            event.set()
        self.lock = threading.Lock()
        self.samples: list[tuple] = []  # (t, host index, kind, ms)
        self.unreachable: list[tuple] = []  # (t, host index, kind, sent)
        self.moved = set()

    def now(self) -> float:
        return time.monotonic() - self.t0

    def sample(self, host, kind: str, ms: float) -> None:
        with self.lock:
            self.samples.append((self.now(), host.index, kind, ms))


@dataclass
class Rater:
    number: int
    token: str
    home: int  # host index
    accepted: set = field(default_factory=set)
    refused: int = 0
    errors: dict = field(default_factory=dict)
    dropped: list = field(default_factory=list)  # keys shown on a page that died


def moves(rater: "Rater") -> bool:
    """On a dead host, every other annotator of it moves to another host; the rest wait."""
    return (rater.number // 2) % 2 == 0


def annotate(board: Board, rater: Rater, campaign_id: int, plan: Plan) -> None:
    """Next, think, submit, until the deadline; on an unreachable host, move to another one
    or wait for it to come back (`moves`)."""
    rng = random.Random(rater.token)
    hosts = board.lab.hosts
    host = hosts[rater.home]
    pending = None  # a key whose submit must be sent (again)
    time.sleep(rng.uniform(0, plan.arrival))

    def submit(key):
        body = {"preference": rng.choice([-2, -1, 0, 1, 2])}
        status, _, ms = call(host, f"/api/rate/assignments/{key}/submit/", rater.token, body)
        board.sample(host, "submit", ms)
        if status == 200:
            rater.accepted.add(key)
        elif status == 409:
            rater.refused += 1
        else:
            rater.errors[f"submit {status}"] = rater.errors.get(f"submit {status}", 0) + 1

    def other_host():
        nonlocal host
        if moves(rater):
            alive = [h for h in hosts if board.up[h.index].is_set()]
            host = alive[0] if alive else host
            board.moved.add(rater.number)
        else:
            board.up[host.index].wait(max(0.0, board.deadline - time.monotonic()) + 60)

    while time.monotonic() < board.deadline or pending:
        if time.monotonic() > board.deadline + 120:
            rater.errors["unresolved submit"] = 1  # its host never came back
            break
        try:
            if pending:
                submit(pending)
                pending = None
                continue
            status, payload, ms = call(
                host, f"/api/rate/campaigns/{campaign_id}/next/", rater.token, {}
            )
            board.sample(host, "next", ms)
            if status == 204:
                time.sleep(1)
                continue
            if status != 200:
                rater.errors[f"next {status}"] = rater.errors.get(f"next {status}", 0) + 1
                time.sleep(1)
                continue
            key = json.loads(payload)["key"]
            time.sleep(rng.uniform(*plan.pace))
            pending = key
            submit(key)
            pending = None
        except Unreachable as lost:
            with board.lock:
                board.unreachable.append((board.now(), host.index, lost.sent))
            if pending and not lost.sent and not moves(rater):
                rater.dropped.append(pending)  # the page died with the host: not sent again
                pending = None
            other_host()
            time.sleep(0.2)


# ---------------------------------------------------------------- CPU


class CpuSampler(threading.Thread):
    """utime + stime of the hosts' gunicorn workers and of the PostgreSQL client backends,
    every `every` seconds: a process counts from its first sample (a backend from 0: it
    started after the last one), its last sample stays when it dies."""

    def __init__(self, lab: Lab, every: float = 2.0):
        super().__init__(daemon=True)
        self.lab, self.every = lab, every
        self.stop_event = threading.Event()
        self.first: dict[tuple, float] = {}
        self.last: dict[tuple, float] = {}
        self.started_once = False

    def _backends(self, connection) -> list[int]:
        rows = connection.execute(
            "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' "
            "AND pid <> pg_backend_pid()"
        ).fetchall()
        return [pid for (pid,) in rows]

    def snapshot(self, connection) -> None:
        workers = [p for h in self.lab.hosts for p in self.lab.gunicorn_workers_of(h)]
        for kind, pids in (("gunicorn", workers), ("postgres", self._backends(connection))):
            for pid in pids:
                value = cpu_ms(pid)
                if value <= 0 and (kind, pid) not in self.last:
                    continue
                key = (kind, pid)
                if key not in self.first:
                    new = kind == "postgres" and self.started_once
                    self.first[key] = 0.0 if new else value
                self.last[key] = max(value, self.last.get(key, 0.0))
        self.started_once = True

    def totals(self) -> dict[str, float]:
        out = {"gunicorn": 0.0, "postgres": 0.0}
        for key, value in self.last.items():
            out[key[0]] += value - self.first[key]
        return out

    def run(self) -> None:
        import psycopg

        with psycopg.connect(self.lab.database_url(), autocommit=True) as connection:
            while not self.stop_event.is_set():
                self.snapshot(connection)
                self.stop_event.wait(self.every)
            self.snapshot(connection)


# ---------------------------------------------------------------- the run


def held_items(campaign, tokens: list[str]) -> list[tuple[int, int, datetime]]:
    """(assignment, comparison, lease end) of the live open items of these annotators."""
    from django.utils import timezone

    from annotation.models import Assignment

    return list(
        Assignment.objects.filter(
            comparison__campaign=campaign,
            annotator__auth_token__key__in=tokens,
            state=Assignment.State.OPEN,
            lease_expires_at__gt=timezone.now(),
        ).values_list("pk", "comparison_id", "lease_expires_at")
    )


def pool_check(campaign, held) -> dict:
    """Of the held items (their annotators gone, none answered): leases expired, and what
    their comparisons look like without them: a slot free (others' judgments + live leases
    < k) or filled to k by others, which the dead lease's slot would have prevented."""
    from django.db.models import Count, Q
    from django.utils import timezone

    from annotation.models import Assignment, Comparison

    now = timezone.now()
    expired = Assignment.objects.filter(
        pk__in=[pk for pk, _, _ in held], state=Assignment.State.OPEN, lease_expires_at__lte=now
    ).count()
    live = Count(
        "assignments",
        filter=Q(assignments__state=Assignment.State.OPEN, assignments__lease_expires_at__gt=now),
    )
    comparisons = Comparison.objects.filter(pk__in=[c for _, c, _ in held]).annotate(live=live)
    k = campaign.overlap
    full = sum(c.judgment_count >= k for c in comparisons)
    free = sum(c.judgment_count + c.live < k for c in comparisons)
    return {
        "held": len(held),
        "expired": expired,
        "free": free,
        "filled_by_others": full,
        # judgments + others' live leases = k: the held slot went to someone who holds it now
        "leased_to_others": len(comparisons) - full - free,
    }


def handed_again(held, overlap: int) -> dict:
    """Held comparisons handed to another annotator after the held lease ended, and those
    filled to k by others' judgments (the held item unanswered)."""
    from annotation.models import Assignment, Judgment

    again = filled = 0
    for pk, comparison, lease_end in held:
        again += (
            Assignment.objects.filter(comparison_id=comparison, issued_at__gte=lease_end)
            .exclude(pk=pk)
            .exists()
        )
        others = Judgment.objects.filter(comparison_id=comparison).exclude(assignment_id=pk)
        filled += others.count() >= overlap
    return {"handed_again": again, "filled_by_others": filled}


def integrity(campaign, accepted: int, stored_before: int) -> dict:
    from django.db.models import Count

    from annotation.models import Judgment

    judgments = Judgment.objects.filter(comparison__campaign=campaign)
    stored = judgments.count() - stored_before
    over_k = (
        judgments.values("comparison").annotate(n=Count("pk")).filter(n__gt=campaign.overlap)
    ).count()
    counter_over_k = campaign.comparisons.filter(judgment_count__gt=campaign.overlap).count()
    return {
        "accepted": accepted,
        "stored": stored,
        "over_k": over_k,
        "counter_over_k": counter_over_k,
    }


def drive(plan: Plan, lab: Lab, world: World, kill: bool = True) -> dict:
    """The annotators for plan.seconds; host B killed at plan.kill_at, back down_seconds
    later. Returns the samples, phases and figures."""
    from annotation.models import Judgment

    campaign = world.campaign
    stored_before = Judgment.objects.filter(comparison__campaign=campaign).count()
    board = Board(lab, time.monotonic() + plan.seconds)
    raters = [Rater(n, token, n % len(lab.hosts)) for n, token in enumerate(world.tokens)]
    threads = [
        threading.Thread(target=annotate, args=(board, r, campaign.pk, plan), daemon=True)
        for r in raters
    ]
    sampler = CpuSampler(lab)
    sampler.start()
    loads = {"start": loadavg()}
    for thread in threads:
        thread.start()
    events = {}
    pool = held = None
    if kill:
        victim = lab.hosts[1]
        waiting = [r.token for r in raters if r.home == victim.index and not moves(r)]
        _sleep_until(board, plan.kill_at)
        board.up[victim.index].clear()
        lab.kill_host(victim)
        events["kill"] = board.now()
        loads["kill"] = loadavg()
        held = held_items(campaign, waiting)
        log(
            f"t={events['kill']:.0f} s: host {victim.name} killed; its waiting annotators "
            f"hold {len(held)} items (loadavg {loads['kill']})"
        )
        _sleep_until(board, plan.kill_at + plan.lease_minutes * 60 + 15)
        pool = pool_check(campaign, held)
        loads["pool"] = loadavg()
        log(f"t={board.now():.0f} s: held items {pool} (loadavg {loads['pool']})")
        _sleep_until(board, plan.kill_at + plan.down_seconds)
        lab.start_host(victim)
        board.up[victim.index].set()
        events["revive"] = board.now()
        loads["revive"] = loadavg()
        log(f"t={events['revive']:.0f} s: host {victim.name} back (loadavg {loads['revive']})")
    for thread in threads:
        thread.join(plan.seconds + 180)
    elapsed = board.now()
    sampler.stop_event.set()
    sampler.join(30)
    loads["end"] = loadavg()
    accepted = sum(len(r.accepted) for r in raters)
    checks = integrity(campaign, accepted, stored_before)
    return {
        "board": board,
        "raters": raters,
        "events": events,
        "loads": loads,
        "elapsed": elapsed,
        "cpu": sampler.totals(),
        "integrity": checks,
        "pool": pool,
        "held": held,
        "handed_again": handed_again(held, campaign.overlap) if held else None,
        "still_running": sum(t.is_alive() for t in threads),
    }


def _sleep_until(board: Board, t: float) -> None:
    time.sleep(max(0.0, t - board.now()))


# ---------------------------------------------------------------- figures


def phases(result: dict) -> list[tuple[str, float, float]]:
    events, end = result["events"], result["elapsed"]
    if not events:
        return [("whole run", 0.0, end)]
    return [
        ("before the kill", 0.0, events["kill"]),
        ("host B down", events["kill"], events["revive"]),
        ("after B's return", events["revive"], end),
    ]


def latency_table(result: dict, lab: Lab) -> list[dict]:
    rows = []
    samples = result["board"].samples
    for name, start, end in phases(result):
        for host in lab.hosts:
            for kind in ("next", "submit"):
                ms = [
                    m
                    for t, h, k, m in samples
                    if start <= t < end and h == host.index and k == kind
                ]
                if ms:
                    rows.append(
                        {
                            "phase": name,
                            "host": host.name,
                            "kind": kind,
                            "requests": len(ms),
                            "median_ms": round(percentile(ms, 50), 1),
                            "p95_ms": round(percentile(ms, 95), 1),
                        }
                    )
    return rows


def release_after(world: World, plan: Plan) -> dict:
    """A release of every companion (anchor the first), frozen and computed in child
    processes as the release job runs them; its slices computed and skipped."""
    from bench.release_bench import child_step
    from scoring.models import Release, ReleaseResult

    release = Release.objects.create(
        name="two hosts release",
        campaign=world.campaign,
        anchor=world.companions[0],
        seed=0,
        n_boot=plan.release_draws,
    )
    release.companions.set(world.companions)
    freeze = child_step("freeze", release.pk)
    compute = child_step("compute", release.pk)
    data = ReleaseResult.objects.get(release=release).data
    computed, skipped = [], []
    for name, block in _blocks(data):
        if "skipped" in block:
            skipped.append(f"{name}: {block['skipped']}")
        else:
            computed.append(name)
    return {"freeze": freeze, "compute": compute, "computed": computed, "skipped": skipped}


def _blocks(data: dict, path: str = ""):
    """Every fitted part of a release's numbers: dicts with a "votes" or "skipped" key."""
    if isinstance(data, dict):
        if "skipped" in data or ("votes" in data and "scenarios" in data):
            yield path, data
            return
        for key, value in data.items():
            yield from _blocks(value, f"{path}/{key}")


def report(plan: Plan, world: World, result: dict, release: dict | None, lab: Lab) -> str:
    loads = result["loads"]
    board = result["board"]
    lines = [
        f"two hosts: {world.scenarios:,} scenarios × {len(world.companions)} companions = "
        f"{world.responses:,} responses, {world.comparisons:,} comparisons (overlap 3, "
        f"{world.seeded_votes:,} earlier votes), {plan.annotators} annotators at "
        f"{plan.pace[0]:g}–{plan.pace[1]:g} s per item for {result['elapsed']:.0f} s, "
        f"{plan.gunicorn_workers} sync gunicorn workers + 1 Celery worker per host",
        "world built: " + ", ".join(f"{k} {v:.0f} s" for k, v in world.build_seconds.items()),
    ]
    lines.append("loadavg: " + ", ".join(f"{k} {v}" for k, v in loads.items()))
    lines.append("latency (ms, from connect to the last byte):")
    for row in latency_table(result, lab):
        lines.append(
            f"  {row['phase']:<17} host {row['host']} {row['kind']:<6} n={row['requests']:>5} "
            f"median {row['median_ms']:>6.1f}  p95 {row['p95_ms']:>6.1f}"
        )
    survivor = [
        r for r in latency_table(result, lab) if r["phase"] == "host B down" and r["host"] == "A"
    ]
    if survivor:
        p95 = {r["kind"]: r["p95_ms"] for r in survivor}
        lines.append(
            f"surviving host while B was down: p95 next {p95.get('next')} ms, submit "
            f"{p95.get('submit')} ms (target ≤ 50); loadavg at the kill {loads.get('kill')}, "
            f"at B's return {loads.get('revive')}"
        )
    cycles = sum(1 for _, _, kind, _ in board.samples if kind == "submit")
    cpu = result["cpu"]
    total = cpu["gunicorn"] + cpu["postgres"]
    lines.append(
        f"CPU-ms per cycle: gunicorn {cpu['gunicorn'] / max(cycles, 1):.1f} + PostgreSQL "
        f"{cpu['postgres'] / max(cycles, 1):.1f} = {total / max(cycles, 1):.1f} over {cycles:,} "
        f"cycles ({cycles / result['elapsed']:.1f}/s; loadavg {loads['start']} → {loads['end']})"
    )
    checks = result["integrity"]
    refused = sum(r.refused for r in result["raters"])
    errors: dict = {}
    for rater in result["raters"]:
        for key, n in rater.errors.items():
            errors[key] = errors.get(key, 0) + n
    lost = len(board.unreachable)
    lines.append(
        f"accepted {checks['accepted']:,} = stored {checks['stored']:,}: "
        f"{'yes' if checks['accepted'] == checks['stored'] else 'NO'}; over k: "
        f"{checks['over_k']} (judgment rows), {checks['counter_over_k']} (counter); refused "
        f"{refused}, errors {errors or 0}, requests to a dead host {lost}, annotators moved "
        f"{len(board.moved)}, items dropped with a dead page "
        f"{sum(len(r.dropped) for r in result['raters'])}; loadavg {loads['end']}"
    )
    if result["pool"] is not None:
        pool = result["pool"]
        end = result["handed_again"]
        lines.append(
            f"items held by B's waiting annotators at the kill: {pool['held']}; after the "
            f"{plan.lease_minutes}-minute lease (B still down): {pool['expired']} leases "
            f"expired, {pool['free']} with a slot free again, {pool['filled_by_others']} "
            f"filled to k by others, {pool['leased_to_others']} with the slot leased to "
            f"another annotator (loadavg {loads.get('pool')}); by the end "
            f"{end['handed_again']} handed to another annotator after the lease, "
            f"{end['filled_by_others']} filled to k without the held answer"
        )
    if result["still_running"]:
        lines.append(f"WARNING: {result['still_running']} annotator threads did not finish")
    if release:
        compute = release["compute"]
        lines.append(
            f"release: freeze {release['freeze']['wall_s']:.1f} s wall / "
            f"{release['freeze']['cpu_s']:.1f} CPU-s; compute {compute['wall_s']:.1f} s wall / "
            f"{compute['cpu_s']:.1f} CPU-s (target ≤ 30 s), peak RSS "
            f"{compute['peak_mib']:,.0f} MiB; slices computed {len(release['computed'])}, "
            f"skipped {len(release['skipped'])}"
            + (f" ({'; '.join(release['skipped'])})" if release["skipped"] else "")
            + f"; loadavg {compute['load']}"
        )
    return "\n".join(lines)


def summarize(world: World, result: dict) -> dict:
    """The guarantees' figures, read from the database after the run."""
    from annotation.models import Judgment

    campaign = world.campaign
    errors: dict = {}
    for rater in result["raters"]:
        for key, n in rater.errors.items():
            errors[key] = errors.get(key, 0) + n
    return {
        **result["integrity"],
        "comparisons": world.comparisons,
        "full": campaign.comparisons.filter(judgment_count__gte=campaign.overlap).count(),
        "judgments": Judgment.objects.filter(comparison__campaign=campaign).count(),
        "seeded_votes": world.seeded_votes,
        "pool": result["pool"],
        "end": result["handed_again"],
        "moved": len(result["board"].moved),
        "dropped": sum(len(r.dropped) for r in result["raters"]),
        "unreachable": len(result["board"].unreachable),
        "errors": errors,
        "still_running": result["still_running"],
    }


def main(argv: list[str] | None = None) -> int:
    if argv:  # settings come from the environment (the docstring's BENCH_TWO_HOSTS_*)
        print(__doc__)
        return 0 if argv[0] in ("-h", "--help") else 2
    plan = Plan.from_env()
    if plan.seconds < plan.down_seconds + 60:
        print(f"BENCH_TWO_HOSTS_SECONDS must be at least {plan.down_seconds + 60:.0f}")
        return 2
    started = datetime.now(UTC)
    with Lab(hosts=2, gunicorn_workers=plan.gunicorn_workers) as lab:
        os.environ.update(lab.host_env(None))  # this process: one more host, on loopback
        os.environ.pop("DJANGO_DEBUG", None)
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0, interactive=False)
        for host in lab.hosts:
            lab.start_host(host)
        log(f"hosts up: {', '.join(f'{h.name} {h.inner}:{HTTP_PORT}' for h in lab.hosts)}")
        world = build_world(plan, lab)
        log(f"driving {plan.annotators} annotators for {plan.seconds:.0f} s")
        result = drive(plan, lab, world)
        from django.db import connections

        connections.close_all()
        release = release_after(world, plan) if plan.release else None
        text = report(plan, world, result, release, lab)
        summary = summarize(world, result)
    print(text)
    print(RESULT_PREFIX + json.dumps(summary), flush=True)
    OUT_DIR.mkdir(exist_ok=True)
    path = OUT_DIR / f"two-hosts-{started:%Y%m%d-%H%M%S}.txt"
    path.write_text(text + "\n", encoding="utf-8")
    print(f"\n(also in {path.relative_to(REPO)})")
    checks = result["integrity"]
    return 0 if checks["accepted"] == checks["stored"] and checks["over_k"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
