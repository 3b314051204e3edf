"""Faults: a background Job whose Celery worker is killed resumes cleanly, counted row by row.

The worker tests (marked `worker`: PostgreSQL and Redis, see tests/worker.py) SIGKILL a real
worker in the middle of a write, start a new one and check that the stale-job sweeper
(h2htalk.sweeper) re-ran the job: it ends completed on attempt 2, every row of the input
exists exactly once, and no other process ever saw a half-written import (the counts polled
while it runs are 0 until the final commit). Killed generation and judge runs are covered by
tests/scenarios/test_generation_worker.py and tests/scoring/test_judge_worker.py.

The other tests check the sweeper's decisions without a worker (any database, eager Celery).
The tests that kill a real worker are in the slow tier (`make test-slow`, which CI runs): each
waits out a stale threshold and a restart, two and a half minutes of `make test` between them.
"""

import json
import threading
import time
from datetime import timedelta

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import connection, connections, transaction
from django.db.models import Count
from django.urls import reverse
from django.utils import timezone

from annotation.models import Campaign, Comparison
from annotation.tasks import BUILD_KIND, queue_build
from h2htalk import heartbeat, jobs, sweeper
from h2htalk.models import Job
from scenarios.models import CompanionModel, GenerationRun, Response, Revision, Scenario
from scenarios.tasks import run_response_import, run_scenario_import
from tests.simulators import bulk_scenarios
from tests.worker import celery_worker, require_broker, wait_for

# A small stale threshold so a lost worker is noticed within seconds; the sweeps every second.
FAST = {"JOB_STALE_SECONDS": "3", "JOB_SWEEP_SECONDS": "1"}
ROWS = 20_000


def require_postgres():
    require_broker()
    if connection.vendor != "postgresql":
        pytest.skip("the kill tests need PostgreSQL (DATABASE_URL=postgres://…)")


def _live(job_id: int) -> dict:
    job = Job.objects.get(pk=job_id)
    return {"state": job.state, **jobs.live_progress(job)}


def kill_while_writing(worker, job_id: int, message: str = "writing") -> dict:
    """SIGKILL the worker once the job's live progress says it is a quarter or more through
    `message` (and not done)."""

    def writing():
        live = _live(job_id)
        if live["state"] != Job.State.RUNNING:
            assert live["state"] == Job.State.QUEUED, live  # finished before we could kill it
            return None
        part_way = live["total"] // 4 <= live["done"] < live["total"]
        return live if live["message"] == message and part_way else None

    live = wait_for(writing, timeout=180, interval=0.05)
    worker.kill()
    return live


def watch(job_id: int, count, timeout: float = 180) -> tuple[Job, set[int], list[str]]:
    """Poll the job and `count()` until the job is finished: (job, counts seen, messages
    shown, live ones included)."""
    counts, messages = set(), []
    deadline = time.monotonic() + timeout
    while True:
        job = Job.objects.get(pk=job_id)
        counts.add(count())
        for message in (job.message, jobs.live_progress(job)["message"]):
            if message not in messages:
                messages.append(message)
        if job.is_finished:
            counts.add(count())
            return job, counts, messages
        assert time.monotonic() < deadline, f"job not finished in {timeout} s: {messages}"
        time.sleep(0.05)


def assert_rerun(job: Job, messages: list[str]) -> None:
    assert job.state == Job.State.COMPLETED, job.message
    assert job.attempts == 2, (job.attempts, messages)
    assert job.message.endswith("(attempt 2: restarted after the worker was lost)"), job.message
    # While attempt 2 ran, its live progress said so.
    assert any("(attempt 2, after the worker was lost)" in m for m in messages), messages


def _store(name: str, lines) -> str:
    body = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
    return default_storage.save(f"imports/faults/{name}", ContentFile(body.encode()))


def _import_job(kind: str, path: str, filename: str, task, **params) -> Job:
    job = Job.objects.create(
        kind=kind, params={"path": path, "filename": filename, "dry_run": False, **params}
    )
    transaction.on_commit(lambda: task.delay(job.pk))
    return job


def scenario_rows(n: int, prefix: str = "fault"):
    for i in range(n):
        yield {
            "subtask": "dialogue_emotion",
            "external_id": f"{prefix}-{i:05d}",
            "language": "en",
            "history": [
                {"role": "user", "content": f"Earlier today something happened ({i})."},
                {"role": "assistant", "content": "I'm here. What happened?"},
            ],
            "user_message": f"I had a long day ({i}) and I can't stop thinking about it.",
            "reference_response": "That sounds heavy. Do you want to tell me about it?",
            "tags": ["fault", f"batch-{i % 7}"],
        }


# ---------------------------------------------------------------- killed worker: imports, builds


@pytest.mark.slow
@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_scenario_import_killed_while_writing_is_rerun_whole():
    require_postgres()
    path = _store("faults.jsonl", scenario_rows(ROWS))

    with celery_worker(env=FAST) as worker:
        job = _import_job("scenario_import", path, "faults.jsonl", run_scenario_import)
        killed = kill_while_writing(worker, job.pk)
    assert 0 < killed["done"] < killed["total"] == ROWS
    assert Job.objects.get(pk=job.pk).state == Job.State.RUNNING  # nobody noticed yet
    assert Scenario.objects.count() == 0  # the open transaction died with the worker

    with celery_worker(env=FAST):  # the sweeper restarts the job: attempt 2
        job, counts, messages = watch(job.pk, Scenario.objects.count)

    assert_rerun(job, messages)
    assert counts <= {0, ROWS}, counts  # never half-written
    assert Scenario.objects.count() == ROWS
    assert Scenario.objects.values("external_id").distinct().count() == ROWS
    assert Revision.objects.count() == ROWS  # one "imported" revision each, none twice
    assert job.result["created"] == ROWS and job.result["written"] is True
    assert job.done == job.total == ROWS


@pytest.mark.slow
@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_response_import_killed_while_writing_is_rerun_whole():
    require_postgres()
    n = ROWS // 2
    bulk_scenarios(n, "resp")
    names = ("fault-companion-a", "fault-companion-b")
    lines = (
        {
            "subtask": "dialogue_emotion",
            "external_id": f"resp-{i:05d}",
            "companion": name,
            "text": f"{name} answers {i}: that sounds hard, I'm listening.",
        }
        for i in range(n)
        for name in names
    )
    path = _store("answers.jsonl", lines)

    def stored():
        return Response.objects.count()

    with celery_worker(env=FAST) as worker:
        job = _import_job(
            "response_import", path, "answers.jsonl", run_response_import, run_name="fault run"
        )
        killed = kill_while_writing(worker, job.pk)
    assert 0 < killed["done"] < killed["total"]
    assert stored() == 0
    assert not GenerationRun.objects.exists()  # the import run was created in the same transaction
    assert not CompanionModel.objects.exists()

    with celery_worker(env=FAST):
        job, counts, messages = watch(job.pk, stored)

    assert_rerun(job, messages)
    assert counts <= {0, 2 * n}, counts
    run = GenerationRun.objects.get()
    assert run.name == "fault run"
    assert CompanionModel.objects.filter(name__in=names).count() == 2
    responses = Response.objects.filter(run=run)
    assert responses.count() == 2 * n
    per_item = responses.values("scenario", "companion").annotate(k=Count("pk"))
    assert {row["k"] for row in per_item} == {1}
    assert job.result["created"] == 2 * n


def _active_insert(table: str) -> bool:
    """Is a transaction of another session on this database inserting into `table`?"""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND state IN ('active', 'idle in transaction') "
            "AND query ILIKE %s",
            [f'INSERT INTO "{table}"%'],
        )
        return cursor.fetchone()[0] > 0


@pytest.mark.slow
@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_campaign_build_killed_mid_way_is_rebuilt(researcher):
    require_postgres()
    n, companions = 6_000, 5
    scenarios = bulk_scenarios(n, "build")
    models = [
        CompanionModel.objects.create(name=f"build-model-{i}", provider="imported")
        for i in range(companions)
    ]
    run = GenerationRun.objects.create(name="build responses", kind="import")
    Response.objects.bulk_create(
        [
            Response(run=run, scenario=s, companion=m, text=f"{m.name} on {s.external_id}")
            for s in scenarios
            for m in models
        ],
        batch_size=5000,
    )
    campaign = Campaign.objects.create(
        name="fault build", owner=researcher, scenario_query="q=build-", state="open"
    )
    campaign.companions.set(models)
    campaign.runs.set([run])
    expected = n * companions * (companions - 1) // 2  # all pairs

    def built():
        return Comparison.objects.filter(campaign=campaign).count()

    with celery_worker(env=FAST) as worker:
        job = queue_build(campaign, researcher)
        wait_for(lambda: _active_insert(Comparison._meta.db_table), timeout=120, interval=0.02)
        worker.kill()
    assert Job.objects.get(pk=job.pk).state == Job.State.RUNNING
    assert built() == 0  # killed mid-way: the bulk insert was one transaction

    with celery_worker(env=FAST):
        job, counts, messages = watch(job.pk, built)

    assert job.kind == BUILD_KIND
    assert_rerun(job, messages)
    assert counts <= {0, expected}, counts
    assert built() == expected
    pairs = Comparison.objects.filter(campaign=campaign).values(
        "scenario", "response_a", "response_b"
    )
    assert pairs.annotate(k=Count("pk")).filter(k__gt=1).count() == 0
    assert job.result == {
        "campaign_id": campaign.pk,
        "created": expected,
        "removed": 0,
        "total": expected,
    }


@pytest.mark.slow
@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_job_that_keeps_losing_its_worker_fails_clearly():
    """With JOB_MAX_ATTEMPTS=1 the first lost worker is the last: failed, nothing written."""
    require_postgres()
    path = _store("once.jsonl", scenario_rows(ROWS, prefix="once"))
    env = {**FAST, "JOB_MAX_ATTEMPTS": "1"}

    with celery_worker(env=env) as worker:
        job = _import_job("scenario_import", path, "once.jsonl", run_scenario_import)
        kill_while_writing(worker, job.pk)
    with celery_worker(env=env):
        job, counts, _ = watch(job.pk, Scenario.objects.count, timeout=60)

    assert job.state == Job.State.FAILED
    assert job.message == sweeper.given_up_message(1)
    assert job.attempts == 1
    assert counts == {0} and Scenario.objects.count() == 0


# ---------------------------------------------------------------- the sweeper's decisions


@pytest.mark.django_db
def test_duplicate_message_for_a_finished_job_is_ignored():
    """Redis redelivers a killed worker's message after the visibility timeout: by then the
    sweeper's re-run finished the job, and the late message must not run it a third time."""
    job = Job.objects.create(
        kind="scenario_import", state=Job.State.COMPLETED, attempts=2, message="done"
    )
    result = run_scenario_import.apply(args=[job.pk])
    assert result.state == "IGNORED"
    job.refresh_from_db()
    assert (job.state, job.message, job.attempts) == (Job.State.COMPLETED, "done", 2)


class _StubTask:
    def __init__(self):
        self.sent = []

    def delay(self, job_id):
        self.sent.append(job_id)


@pytest.fixture
def stub_kind():
    task = _StubTask()
    jobs.register("fault_stub", task)
    yield task
    jobs._restartable.pop("fault_stub", None)


def last_beat(job_id: int) -> float | None:
    name = jobs.heartbeat_of(job_id)
    return heartbeat.last_beats([name]).get(name)


def _running(kind: str, attempts: int = 1, beat_age: float | None = None, started_age=3600):
    job = Job.objects.create(
        kind=kind,
        state=Job.State.RUNNING,
        attempts=attempts,
        started_at=timezone.now() - timedelta(seconds=started_age),
    )
    if beat_age is not None:
        from django.core.cache import cache

        cache.set(heartbeat.key(jobs.heartbeat_of(job.pk)), time.time() - beat_age, 600)
    return job


@pytest.mark.django_db
def test_every_background_job_kind_is_restartable():
    sweeper._load_registry()
    assert {
        "scenario_import",
        "response_import",
        "judge_import",
        "campaign_build",
        "agreement",
        "compute_metrics",
        "calibration_fit",
    } <= set(jobs.restartable_kinds())


@pytest.mark.django_db
def test_stale_job_is_requeued_with_its_attempt_recorded(stub_kind):
    stale = _running("fault_stub", attempts=1, beat_age=heartbeat.stale_seconds() + 5)
    fresh = _running("fault_stub", attempts=1, beat_age=1)

    outcome = sweeper.sweep()

    assert outcome == {"restarted": [stale.pk], "failed": []}
    assert stub_kind.sent == [stale.pk]
    stale.refresh_from_db()
    assert stale.state == Job.State.QUEUED
    assert stale.message == "worker lost; restarted (attempt 2)"
    assert jobs.live_progress(stale)["message"] == "worker lost; restarted (attempt 2)"
    assert Job.objects.get(pk=fresh.pk).state == Job.State.RUNNING
    assert sweeper.sweep() == {"restarted": [], "failed": []}  # queued now: not swept twice


@pytest.mark.django_db
def test_job_without_heartbeat_counts_from_its_start(stub_kind):
    old = _running("fault_stub", started_age=heartbeat.stale_seconds() + 5)
    young = _running("fault_stub", started_age=0)
    foreign = _running("not_registered_kind", started_age=3600)  # no beat: not ours to judge

    assert sweeper.sweep()["restarted"] == [old.pk]
    assert Job.objects.get(pk=young.pk).state == Job.State.RUNNING
    assert Job.objects.get(pk=foreign.pk).state == Job.State.RUNNING


@pytest.mark.django_db
def test_job_fails_clearly_after_the_last_attempt(stub_kind):
    job = _running("fault_stub", attempts=jobs.max_attempts(), beat_age=3600)

    assert sweeper.sweep() == {"restarted": [], "failed": [job.pk]}
    job.refresh_from_db()
    assert job.state == Job.State.FAILED and job.finished_at is not None
    assert job.message == sweeper.given_up_message(jobs.max_attempts())
    assert stub_kind.sent == []


@pytest.mark.django_db
def test_unrestartable_kind_with_a_stale_heartbeat_fails_clearly():
    job = _running("not_registered_kind", beat_age=3600)

    assert sweeper.sweep()["failed"] == [job.pk]
    job.refresh_from_db()
    assert job.state == Job.State.FAILED
    assert "not restarted automatically" in job.message


@pytest.mark.django_db
def test_start_claims_only_a_queued_job_and_beats_until_finish():
    job = Job.objects.create(kind="fault_stub")
    started = jobs.start(job.pk)
    try:
        assert started.state == Job.State.RUNNING and started.attempts == 1
        assert last_beat(job.pk) is not None
        with pytest.raises(jobs.NotClaimed):  # a duplicate message while it runs
            jobs.start(job.pk)
    finally:
        jobs.finish(job.pk, Job.State.COMPLETED, "done")
    job.refresh_from_db()
    assert (job.state, job.message, job.attempts) == (Job.State.COMPLETED, "done", 1)
    assert last_beat(job.pk) is None
    with pytest.raises(jobs.NotClaimed):  # redelivered after it finished
        jobs.start(job.pk)


@pytest.mark.django_db
def test_heartbeat_thread_keeps_beating_while_the_job_runs(settings):
    settings.JOB_STALE_SECONDS = 1  # a beat every 0.25 s
    job = Job.objects.create(kind="fault_stub")
    jobs.start(job.pk)
    try:
        first = last_beat(job.pk)
        wait_for(lambda: (last_beat(job.pk) or 0) > first, timeout=5)
        beating = [
            t for t in threading.enumerate() if t.name == f"{jobs.heartbeat_of(job.pk)}-heartbeat"
        ]
        assert len(beating) == 1
    finally:
        jobs.finish(job.pk, Job.State.COMPLETED, "done")
    beating[0].join(2)
    assert not beating[0].is_alive()


@pytest.mark.django_db(transaction=True)
def test_a_heartbeat_on_the_database_cache_closes_its_connection_when_it_stops(
    settings, monkeypatch
):
    """Without Redis (or while it is away) beats go to the database cache, through a connection
    of the beating thread's own: it is closed when the beating stops, not left open for good
    (one per job a process ever ran, and a test database that cannot be dropped)."""
    settings.CACHES = {"default": settings.DATABASE_CACHE}
    settings.JOB_STALE_SECONDS = 1  # a beat every 0.25 s
    used = []
    writes = heartbeat.beat

    def beat_noting_the_connection(name):
        writes(name)
        used.append(connections["default"])

    monkeypatch.setattr(heartbeat, "beat", beat_noting_the_connection)
    mine = connections["default"]
    heartbeat.start("test:heartbeat-connection")  # beats here, then in its thread
    wait_for(lambda: any(c is not mine for c in used), timeout=5)
    heartbeat.stop("test:heartbeat-connection")
    beating = [t for t in threading.enumerate() if t.name == "test:heartbeat-connection-heartbeat"]
    for thread in beating:
        thread.join(2)
    theirs = [c for c in used if c is not mine]
    # (Django never closes SQLite's in-memory test database: there only PostgreSQL tells.)
    assert all(
        c.connection is None or (c.vendor == "sqlite" and c.is_in_memory_db()) for c in theirs
    )


@pytest.mark.django_db
def test_finish_of_an_attempt_that_was_taken_over_changes_nothing():
    job = Job.objects.create(kind="fault_stub")
    jobs.start(job.pk)  # attempt 1 in this thread
    # Meanwhile the sweeper decided it was lost and attempt 2 claimed it elsewhere.
    Job.objects.filter(pk=job.pk).update(attempts=2, message="attempt 2 running")
    jobs.finish(job.pk, Job.State.FAILED, "late outcome of attempt 1")
    job.refresh_from_db()
    assert (job.state, job.message) == (Job.State.RUNNING, "attempt 2 running")


@pytest.mark.django_db
def test_resend_queued_sends_long_waiting_jobs_again(stub_kind):
    waiting = Job.objects.create(kind="fault_stub")
    Job.objects.filter(pk=waiting.pk).update(created_at=timezone.now() - timedelta(hours=1))
    Job.objects.create(kind="fault_stub")  # just queued: its message is on its way

    assert sweeper.resend_queued() == [waiting.pk]
    assert stub_kind.sent == [waiting.pk]
    assert sweeper.resend_queued() == []  # at most once per JOB_STALE_SECONDS
    assert waiting.pk in sweeper.resend_queued(older_than=0)  # (no mark when 0)


# ---------------------------------------------------------------- dead or overdue jobs end failed


@pytest.mark.django_db
def test_the_job_page_fails_a_job_whose_web_process_died(researcher_client, researcher):
    """Eager mode (no worker): the job ran inside a web request whose process was killed
    (gunicorn's timeout). Nothing sweeps in the background, so the job page settles it: failed,
    with a message, never "running" for ever; not re-run inside the page's request."""
    job = _running("scenario_import", started_age=heartbeat.stale_seconds() + 5)
    Job.objects.filter(pk=job.pk).update(created_by=researcher)

    page = researcher_client.get(reverse("job_progress", args=[job.pk]))

    assert page.status_code == 200
    job.refresh_from_db()
    assert job.state == Job.State.FAILED and job.finished_at is not None
    assert job.message == sweeper.lost_in_web_process_message()
    assert job.attempts == 1  # not restarted
    assert page["HX-Refresh"] == "true"


@pytest.mark.django_db
def test_the_job_page_leaves_a_beating_job_alone(researcher_client, researcher):
    job = _running("scenario_import", beat_age=1)
    Job.objects.filter(pk=job.pk).update(created_by=researcher)
    researcher_client.get(reverse("job_detail", args=[job.pk]))
    assert Job.objects.get(pk=job.pk).state == Job.State.RUNNING


@pytest.mark.django_db
def test_a_job_past_its_time_limit_is_failed_not_restarted(stub_kind):
    """Killed at Celery's hard time limit (or its worker died after): re-running it would
    only hit the limit again."""
    stub_kind.soft_time_limit = 60
    overdue = _running("fault_stub", beat_age=3600, started_age=60 + heartbeat.stale_seconds() + 5)
    young = _running("fault_stub", beat_age=3600, started_age=30)

    outcome = sweeper.sweep()

    assert outcome == {"restarted": [young.pk], "failed": [overdue.pk]}
    overdue.refresh_from_db()
    assert overdue.state == Job.State.FAILED
    assert overdue.message == jobs.timed_out_message(60)
    assert "60 s (JOB_TIME_LIMIT_SECONDS)" in overdue.message
    assert stub_kind.sent == [young.pk]


@pytest.mark.django_db
def test_the_soft_time_limit_ends_an_import_as_failed_with_a_message(monkeypatch):
    from celery.exceptions import SoftTimeLimitExceeded

    from scenarios import tasks

    assert run_scenario_import.soft_time_limit == jobs.time_limit_seconds()
    assert run_scenario_import.time_limit > run_scenario_import.soft_time_limit

    def too_slow(*args, **kwargs):
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr(tasks, "import_upload", too_slow)
    path = _store("slow.jsonl", scenario_rows(3))
    job = Job.objects.create(
        kind="scenario_import", params={"path": path, "filename": "slow.jsonl", "dry_run": True}
    )
    run_scenario_import.apply(args=[job.pk])

    job.refresh_from_db()
    assert job.state == Job.State.FAILED
    assert job.message == jobs.timed_out_message()
    assert not default_storage.exists(path)  # its upload went with it


@pytest.mark.slow
@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_an_import_over_its_time_limit_on_a_real_worker_ends_failed():
    """JOB_TIME_LIMIT_SECONDS=1 for the worker: Celery's soft limit stops the import mid-way,
    the job ends failed with the limit named, and nothing was written."""
    require_postgres()
    # Three times the usual file: the import must outlast the limit by more than the pool's
    # coarse check of it (a 20,000-row import now finishes in about 2 s).
    path = _store("limit.jsonl", scenario_rows(3 * ROWS, prefix="limit"))

    with celery_worker(env={**FAST, "JOB_TIME_LIMIT_SECONDS": "1"}):
        job = _import_job("scenario_import", path, "limit.jsonl", run_scenario_import)
        job, counts, _ = watch(job.pk, Scenario.objects.count, timeout=60)
        # The upload is released just after the outcome is recorded: wait for it while the
        # worker still runs (on a loaded machine the test can read the outcome in between).
        deadline = time.monotonic() + 30
        while default_storage.exists(path) and time.monotonic() < deadline:
            time.sleep(0.05)

    assert job.state == Job.State.FAILED, job.message
    assert job.message == jobs.timed_out_message(1)
    assert counts == {0} and Scenario.objects.count() == 0
    assert not default_storage.exists(path)
