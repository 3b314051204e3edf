"""What a job's page calls it (h2htalk.jobs.outcome): an upload's preview with errors is a
preview with N errors where nothing was imported, never "Failed"; a job that broke is."""

import pytest
from django.utils import translation

from h2htalk import jobs
from h2htalk.models import Job

pytestmark = pytest.mark.django_db


def job(kind="scenario_import", state=Job.State.FAILED, dry_run=True, **result):
    return Job.objects.create(kind=kind, state=state, params={"dry_run": dry_run}, result=result)


def test_a_preview_with_errors_is_a_preview_not_a_failure():
    said = jobs.outcome(job(rows=3, error_count=5, errors=[{}] * 5))
    assert said["heading"] == "Preview: 3 rows, 5 errors — nothing was imported"
    assert (said["badge"], said["tone"]) == ("Preview · 5 errors", "preview-errors")


def test_singulars_and_the_other_upload_kinds():
    said = jobs.outcome(job("response_import", rows=1, error_count=1))
    assert said["heading"] == "Preview: 1 response, 1 error — nothing was imported"
    said = jobs.outcome(job("judge_import", Job.State.COMPLETED, rows=2, error_count=0))
    assert (said["heading"], said["badge"]) == (
        "Preview: 2 verdicts, no errors — ready to import",
        "Preview · ready",
    )


def test_a_refused_write_and_a_written_import():
    said = jobs.outcome(job(dry_run=False, rows=4, error_count=2))
    assert said["heading"] == "Not imported: 4 rows, 2 errors — nothing was written"
    assert said["badge"] == "Not imported · 2 errors"
    said = jobs.outcome(job(state=Job.State.COMPLETED, dry_run=False, rows=4, written=True))
    assert (said["heading"], said["badge"]) == ("Imported: 4 rows", "Imported")


def test_a_report_of_older_code_counts_its_error_list():
    said = jobs.outcome(job(rows=2, errors=[{"line": 1}, {"line": 2}]))
    assert said["badge"] == "Preview · 2 errors"


def test_a_job_that_broke_or_runs_is_named_by_its_state():
    broken = job(rows=None)  # a crash leaves no report
    broken.result = {}
    broken.save()
    with translation.override("en"):
        said = jobs.outcome(broken)
    assert (said["badge"], said["tone"]) == ("Failed", "failed")
    assert said["heading"] == f"Scenario import · #{broken.pk}"  # never the code (issue 23)
    with translation.override("zh-hans"):
        assert jobs.outcome(broken)["heading"] == f"场景导入 · #{broken.pk}"
    running = job(state=Job.State.RUNNING, rows=3, error_count=1)
    assert jobs.outcome(running)["badge"] == "Running"
    build = job("campaign_build", Job.State.COMPLETED, rows=3)
    assert jobs.outcome(build)["badge"] == "Completed"
