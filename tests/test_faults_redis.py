"""Issue 25, point 10: a job queued while its broker message is lost still runs.

A real Celery worker on a Redis this test starts on its own port (tests/redis_server.py, never
the machine's shared one): the worker is paused (SIGSTOP), an import is queued (its message
goes to Redis), Redis is killed and started again empty (the message is gone), the worker
resumes (SIGCONT). The periodic sweep re-sends jobs queued for longer than JOB_STALE_SECONDS
(h2htalk.sweeper.resend_queued), so the import completes, once, without restarting the worker.
"""

import os
import signal
import uuid
from contextlib import contextmanager

import pytest
from django.db import connection
from django.test import override_settings

from h2htalk.celery import app
from h2htalk.models import Job
from scenarios.models import Scenario
from scenarios.tasks import run_scenario_import
from tests.redis_server import redis_server
from tests.test_faults import _import_job, _store, scenario_rows
from tests.worker import WorkerProcess, wait_for

FAST = {"JOB_STALE_SECONDS": "2", "JOB_SWEEP_SECONDS": "1"}
ROWS = 50


def require_shared_database():
    if connection.vendor == "sqlite" and connection.settings_dict["NAME"].startswith(
        "file:memorydb"
    ):
        if os.environ.get("CI"):
            pytest.fail("CI runs this on PostgreSQL (DATABASE_URL)")
        pytest.skip("a worker process cannot share an in-memory SQLite database")


def _reset_connections():
    """Forget the pooled broker connections (the next send connects to the current URL)."""
    app._pool = None
    app.amqp._producer_pool = None


@contextmanager
def broker(url: str):
    """This process's Celery and cache on the test's own Redis, for the test's duration."""
    previous = app.conf.broker_url, app.conf.task_always_eager
    environ = os.environ.get("CELERY_BROKER_URL")  # Celery reads it before its own setting
    cache = {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url}
    with override_settings(CACHES={"default": cache}, CELERY_BROKER_URL=url, REDIS_URL=url):
        os.environ["CELERY_BROKER_URL"] = url
        app.conf.broker_url, app.conf.task_always_eager = url, False
        _reset_connections()
        try:
            yield
        finally:
            if environ is None:
                os.environ.pop("CELERY_BROKER_URL", None)
            else:
                os.environ["CELERY_BROKER_URL"] = environ
            app.conf.broker_url, app.conf.task_always_eager = previous
            _reset_connections()


def _queued_messages(url: str, queue: str) -> int:
    import redis

    client = redis.Redis.from_url(url)
    try:
        return client.llen(queue)
    finally:
        client.close()


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_job_whose_message_redis_lost_is_resent_and_completes():
    require_shared_database()
    path = _store("lost.jsonl", scenario_rows(ROWS, prefix="lost"))
    queue = f"h2htalk-test-{uuid.uuid4().hex[:8]}"
    with redis_server() as redis, broker(redis.url):
        env = {"CELERY_BROKER_URL": redis.url, "REDIS_URL": redis.url, **FAST}
        previous_queue = app.conf.task_default_queue
        app.conf.task_default_queue = queue
        worker = WorkerProcess(queue, concurrency=1, env=env)
        try:
            worker.start()
            os.killpg(worker.process.pid, signal.SIGSTOP)
            # A paused worker's open BRPOP would still take the message into its socket: its
            # connection is cut first, so the message waits in Redis, then is lost with it.
            redis.restart_empty()
            _reset_connections()
            job = _import_job("scenario_import", path, "lost.jsonl", run_scenario_import)
            assert _queued_messages(redis.url, queue) == 1
            redis.restart_empty()  # the message is gone
            assert _queued_messages(redis.url, queue) == 0
            os.killpg(worker.process.pid, signal.SIGCONT)
            wait_for(lambda: Job.objects.get(pk=job.pk).is_finished, timeout=90, interval=0.5)
        finally:
            if worker.process is not None:
                os.killpg(worker.process.pid, signal.SIGCONT)
                worker.kill()  # the test is over: no need for a clean shutdown
            app.conf.task_default_queue = previous_queue
    job.refresh_from_db()
    assert job.state == Job.State.COMPLETED, job.message
    assert job.attempts == 1  # run once: the copies sent meanwhile were ignored
    assert Scenario.objects.count() == ROWS
