"""A real Celery worker process over Redis, on the test database, for the tests about jobs."""

import os
import signal
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager

import pytest
from django.conf import settings
from django.db import connection

from h2htalk.celery import app


def require_broker():
    broker = os.environ.get("CELERY_BROKER_URL", "")
    if not broker.startswith("redis"):
        if os.environ.get("CI"):
            pytest.fail("CI must set CELERY_BROKER_URL to Redis for the worker tests")
        pytest.skip("needs CELERY_BROKER_URL=redis://… (runs in CI against a real worker)")
    if connection.vendor == "sqlite" and connection.settings_dict["NAME"].startswith(
        "file:memorydb"
    ):
        pytest.skip("a worker process cannot share an in-memory SQLite database")
    return broker


def database_url() -> str:
    db = settings.DATABASES["default"]
    if connection.vendor == "postgresql":
        auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
        return f"postgres://{auth}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    return f"sqlite:///{db['NAME']}"


class WorkerProcess:
    def __init__(self, queue: str, concurrency: int = 2, env: dict | None = None):
        self.queue = queue
        self.concurrency = concurrency
        self.extra_env = env or {}
        self.process: subprocess.Popen | None = None

    def start(self):
        env = {**os.environ, "DATABASE_URL": database_url(), "SECRET_KEY": settings.SECRET_KEY}
        env["MEDIA_ROOT"] = str(settings.MEDIA_ROOT)
        env["CELERY_TASK_DEFAULT_QUEUE"] = self.queue  # tasks the worker itself sends
        env.update(self.extra_env)
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "h2htalk.celery",
                "worker",
                "-Q",
                self.queue,
                "-c",
                str(self.concurrency),
                "--pool",
                "prefork",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "-n",
                f"{self.queue}@%h",
                "--loglevel",
                "WARNING",
            ],
            env=env,
            start_new_session=True,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            replies = app.control.ping(
                destination=[f"{self.queue}@{os.uname().nodename}"], timeout=0.5
            )
            if replies:
                return self
            if self.process.poll() is not None:
                raise RuntimeError("the Celery worker exited at start")
        raise RuntimeError("the Celery worker did not answer a ping within 30 s")

    def kill(self):
        """SIGKILL the whole worker (main process and pool children): a crash, not a shutdown."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def stop(self):
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()


@contextmanager
def celery_worker(concurrency: int = 2, env: dict | None = None):
    """Route this test's tasks to a fresh queue served by a real worker process."""
    require_broker()
    queue = f"h2htalk-test-{uuid.uuid4().hex[:8]}"
    previous = app.conf.task_default_queue
    app.conf.task_default_queue = queue
    worker = WorkerProcess(queue, concurrency, env).start()
    try:
        yield worker
    finally:
        worker.stop()
        app.conf.task_default_queue = previous


def wait_for(predicate, timeout: float = 60, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout} s")
