"""A large release is frozen and computed by a real Celery worker over Redis (the job's task is
registered in the worker), and the job's "compute" of a computed release verifies it."""

import pytest

from h2htalk.models import Job
from scoring import tasks
from scoring.models import Release
from scoring.releases import service as releases
from tests.annotation import factories as campaign_factories
from tests.scoring.test_release_pipeline import make_release, rated_world
from tests.worker import celery_worker, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_a_worker_freezes_computes_and_verifies_a_large_release(
    researcher, django_user_model, monkeypatch
):
    raters = campaign_factories.annotators(django_user_model, 3, prefix="workrater")
    world = rated_world(researcher, raters, n_scenarios=12, prefix="work")
    monkeypatch.setattr(releases, "INLINE_RESPONSES", 10)  # "large": a job does it
    with celery_worker():
        release = make_release(world, name="Worker release", n_boot=100)
        assert release.state == Release.State.PENDING
        wait_for(
            lambda: Release.objects.get(pk=release.pk).state == Release.State.READY, timeout=90
        )
        release.refresh_from_db()
        job = Job.objects.get(pk=release.job_id)
        assert job.kind == releases.KIND
        wait_for(lambda: Job.objects.get(pk=job.pk).state == Job.State.COMPLETED, timeout=30)
        assert release.result.data["counts"]["votes"] == 108
        tasks.queue_release_job(release, researcher)
        wait_for(lambda: Release.objects.get(pk=release.pk).check_ok is not None, timeout=90)
    release.refresh_from_db()
    assert release.check_ok is True, release.check_message
