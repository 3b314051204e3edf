"""An import job whose uploaded file is not in this worker's MEDIA_ROOT (saved by a web host on
another machine, the media folder not shared) fails with a message that says so, not with a
bare FileNotFoundError (README, *Deploying on several hosts*)."""

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from h2htalk.models import Job
from scenarios.tasks import run_scenario_import

pytestmark = pytest.mark.django_db


def _job(path: str) -> Job:
    return Job.objects.create(
        kind="scenario_import",
        params={"path": path, "filename": "x.jsonl", "format": "auto", "dry_run": True},
    )


def test_an_upload_missing_from_media_root_names_the_shared_folder(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "this-host"
    path = "imports/elsewhere/upload.jsonl"  # what the other host saved: not here
    job = _job(path)
    run_scenario_import.apply(args=[job.pk])
    job.refresh_from_db()
    assert job.state == Job.State.FAILED
    assert job.message == (
        f"the uploaded file {path} is not in MEDIA_ROOT where this job ran: with several "
        "hosts, MEDIA_ROOT must be one folder shared by every web host and worker"
    )
    assert str(tmp_path) not in job.message  # no server path in what researchers read


def test_an_upload_in_media_root_is_read(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "shared"
    line = '{"external_id": "s1", "subtask": "dialogue_base", "user_message": "hi"}\n'
    path = default_storage.save("imports/here/upload.jsonl", ContentFile(line.encode()))
    job = _job(path)
    run_scenario_import.apply(args=[job.pk])
    job.refresh_from_db()
    assert job.state == Job.State.COMPLETED, job.message
