"""A real Celery worker over Redis delivers a webhook: a 500 first, then the retry (sent with
its back-off countdown) succeeds."""

import pytest

from h2htalk import jobs
from h2htalk.models import Job, State
from tests.webhooks.receiver import Receiver
from tests.worker import celery_worker, wait_for
from webhooks import events, signing
from webhooks.models import Delivery, Endpoint

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_a_worker_retries_a_500_and_delivers(researcher):
    env = {"WEBHOOK_RETRY_BASE_SECONDS": "0.5", "WEBHOOK_MAX_ATTEMPTS": "3"}
    with Receiver(500) as receiver, celery_worker(env=env):
        hook = Endpoint.objects.create(
            owner=researcher, url=receiver.url, events=[events.JOB_FAILED]
        )
        job = Job.objects.create(kind="campaign_build", created_by=researcher)
        jobs.finish(job.pk, State.FAILED, "broke")  # no transaction: sent at once
        wait_for(lambda: Delivery.objects.filter(state=Delivery.State.SUCCEEDED).exists())
    row = Delivery.objects.get()
    assert row.attempts == 2
    assert sorted(a.status_code for a in row.attempt_log.all()) == [200, 500]
    for request in receiver.requests:
        signing.verify(hook.secret, request["headers"][signing.HEADER], request["body"])
