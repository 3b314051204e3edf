"""Issue 23 point 5: a release's "Recompute and verify" runs as a background job served by a
real Celery worker over Redis, and the release page shows its progress (htmx-polled) and then
the verdict, in Chromium at 1440×900."""

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from h2htalk.models import Job
from scoring.models import Release
from scoring.releases import service as releases
from tests.annotation import factories as campaign_factories
from tests.scoring.test_release_pipeline import make_release, rated_world
from tests.worker import celery_worker, wait_for

pytestmark = [pytest.mark.worker]


def test_recompute_and_verify_runs_as_a_job_with_progress(
    page, log_in, researcher, django_user_model
):
    raters = campaign_factories.annotators(django_user_model, 3, prefix="jobrater")
    world = rated_world(researcher, raters, n_scenarios=12, prefix="job")
    release = make_release(world, name="Job release", n_boot=1000, compute_now=True)
    assert release.state == Release.State.READY, release.message
    page.set_viewport_size({"width": 1440, "height": 900})
    log_in(researcher)
    with celery_worker():
        page.goto(reverse("releases:detail", args=[release.pk]))
        expect(page.locator("#release-state")).to_contain_text("not run yet")
        page.get_by_role("button", name="Recompute and verify").click()
        # The request only queues the job: the page shows it and polls its progress.
        expect(page.locator(".messages")).to_contain_text(
            "Computing and verifying in the background"
        )
        expect(page.locator("#release-job #job-progress")).to_be_visible()
        expect(page.locator("#release-job")).to_contain_text("Computing this release")
        job = Job.objects.get(pk=Release.objects.get(pk=release.pk).job_id)
        assert job.kind == releases.KIND
        # The job's progress polls, then the page reloads with the verdict.
        expect(page.locator("#release-state")).to_contain_text("passed", timeout=90_000)
        expect(page.locator("#check-status")).to_contain_text("bit for bit")
        expect(page.locator("#release-job")).to_have_count(0)
        expect(page.get_by_role("button", name="Recompute and verify")).to_be_visible()
    wait_for(lambda: Job.objects.get(pk=job.pk).state == Job.State.COMPLETED, timeout=10)
    job.refresh_from_db()
    assert job.attempts == 1 and job.message.startswith("Verified:")
    assert Release.objects.get(pk=release.pk).check_ok is True
