"""A generation run on a real Celery worker over Redis: killed mid-run, restarted, complete."""

import pytest
from django.db.models import Count

from scenarios.models import CompanionModel, GenerationRun, Response
from scenarios.tasks import queue_run
from tests.llm_server import ChatServer
from tests.scenarios import factories
from tests.worker import celery_worker, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_killed_worker_run_resumes_and_every_response_exists_once():
    server = ChatServer().start()
    server.script.extend(["slow:0.15"] * 1000)
    try:
        scenarios = [factories.scenario() for _ in range(40)]
        companions = [
            CompanionModel.objects.create(
                name=name,
                base_url=server.base_url,
                model_id=name,
                max_concurrency=2,
                timeout_seconds=3,  # slots held by the killed worker free up after 3 + 5 s
            )
            for name in ("alpha", "beta")
        ]
        run = GenerationRun.objects.create(name="crash test")
        run.scenarios.set(scenarios)
        run.companions.set(companions)
        stale = {"JOB_STALE_SECONDS": "2"}

        with celery_worker(env=stale) as worker:
            queue_run(run)
            wait_for(lambda: Response.objects.filter(run=run).count() >= 20)
            worker.kill()
        killed_at = Response.objects.filter(run=run).count()
        assert killed_at < 80
        assert GenerationRun.objects.get(pk=run.pk).state == GenerationRun.State.RUNNING

        with celery_worker(env=stale):  # its start hook resumes runs with a stale heartbeat
            wait_for(
                lambda: GenerationRun.objects.get(pk=run.pk).state == GenerationRun.State.COMPLETED,
                timeout=90,
            )
    finally:
        server.stop()

    responses = Response.objects.filter(run=run)
    assert responses.count() == 80
    assert responses.filter(status=Response.Status.OK).count() == 80
    per_item = responses.values("scenario", "companion").annotate(n=Count("pk"))
    assert {row["n"] for row in per_item} == {1}
    # Only what was in flight at the kill was asked twice.
    assert 80 <= len(server.requests) <= 80 + 8
