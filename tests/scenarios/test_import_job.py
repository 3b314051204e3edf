"""The import job on a real Celery worker over Redis (CI), with live progress in the cache."""

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction

from h2htalk import jobs
from h2htalk.models import Job
from scenarios.models import Scenario
from scenarios.tasks import run_scenario_import
from tests.worker import celery_worker, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def queue_import(path: str, filename: str, dry_run: bool) -> Job:
    job = Job.objects.create(
        kind="scenario_import",
        params={"path": path, "filename": filename, "format": "auto", "dry_run": dry_run},
    )
    transaction.on_commit(lambda: run_scenario_import.delay(job.pk))
    return job


def test_release_import_runs_on_a_real_worker(release_file):
    path = default_storage.save(
        "imports/job/dialogue_base.jsonl", ContentFile(release_file.read_bytes())
    )
    with celery_worker():
        preview = queue_import(path, "dialogue_base.jsonl", dry_run=True)
        wait_for(lambda: Job.objects.get(pk=preview.pk).is_finished)
        preview.refresh_from_db()
        assert preview.state == Job.State.COMPLETED, preview.message
        assert preview.result["created"] == 1882
        assert Scenario.objects.count() == 0

        job = queue_import(path, "dialogue_base.jsonl", dry_run=False)
        wait_for(lambda: Job.objects.get(pk=job.pk).is_finished)
    job.refresh_from_db()
    assert job.state == Job.State.COMPLETED, job.message
    assert job.done == job.total == 1882
    assert Scenario.objects.count() == 1882
    assert jobs.live_progress(job)["percent"] == 100
