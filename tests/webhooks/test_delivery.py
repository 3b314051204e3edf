"""Deliveries to a real receiver on 127.0.0.1: signed, retried after a 500 with back-off until
a success, never sent to a refused address; and where events come from."""

import json

import pytest

from annotation import exclusions, queue
from h2htalk import jobs
from h2htalk.models import Job, State
from tests.annotation import factories as campaign_factories
from tests.webhooks.receiver import Receiver
from webhooks import delivery, events, signing
from webhooks.models import Delivery, Endpoint, FilledComparison
from webhooks.subscriptions import wants_batched

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def quick_retries(settings):
    settings.WEBHOOK_RETRY_BASE_SECONDS = 0.01
    settings.WEBHOOK_MAX_ATTEMPTS = 4


def endpoint(owner, url, *names, campaign=None) -> Endpoint:
    return Endpoint.objects.create(owner=owner, url=url, events=list(names), campaign=campaign)


def fail_job(user) -> Job:
    job = Job.objects.create(kind="campaign_build", created_by=user, state=State.RUNNING)
    jobs.finish(job.pk, State.FAILED, "the build broke")
    return job


def verified(request: dict, secret: str) -> dict:
    header = request["headers"][signing.HEADER]
    signing.verify(secret, header, request["body"])
    return json.loads(request["body"])


def test_signature_checks_body_secret_and_replay_window():
    body = b'{"a": 1}'
    header = signing.header_value("s3cret", body, timestamp=1_700_000_000)
    assert signing.verify("s3cret", header, body, now=1_700_000_100) == 1_700_000_000
    for secret, data, now in [
        ("other", body, 1_700_000_100),  # wrong secret
        ("s3cret", b'{"a": 2}', 1_700_000_100),  # body changed
        ("s3cret", body, 1_700_000_000 + signing.TOLERANCE_SECONDS + 1),  # replayed late
    ]:
        with pytest.raises(signing.SignatureError):
            signing.verify(secret, header, data, now=now)
    with pytest.raises(signing.SignatureError):
        signing.verify("s3cret", "v1=abc", body)


def test_a_failed_job_is_posted_signed(researcher, django_capture_on_commit_callbacks):
    with Receiver() as receiver:
        hook = endpoint(researcher, receiver.url, events.JOB_FAILED)
        with django_capture_on_commit_callbacks(execute=True):
            job = fail_job(researcher)
    (request,) = receiver.requests
    payload = verified(request, hook.secret)
    assert payload["type"] == "job.failed"
    assert payload["data"]["job"]["id"] == job.pk
    assert payload["data"]["job"]["message"] == "the build broke"
    assert request["headers"]["X-H2HTalk-Event"] == "job.failed"
    assert request["headers"]["X-H2HTalk-Delivery"] == payload["id"]
    row = Delivery.objects.get()
    assert row.state == Delivery.State.SUCCEEDED
    assert row.attempt_log.get().status_code == 200


def test_a_500_is_tried_again_until_it_succeeds(researcher, django_capture_on_commit_callbacks):
    with Receiver(500, 500) as receiver:
        hook = endpoint(researcher, receiver.url, events.JOB_FAILED)
        with django_capture_on_commit_callbacks(execute=True):
            fail_job(researcher)
    assert len(receiver.requests) == 3
    ids = {verified(r, hook.secret)["id"] for r in receiver.requests}
    assert len(ids) == 1  # the same event each time
    row = Delivery.objects.get()
    assert row.state == Delivery.State.SUCCEEDED and row.attempts == 3
    log = sorted(row.attempt_log.all(), key=lambda a: a.number)
    assert [a.status_code for a in log] == [500, 500, 200]
    assert log[0].response_excerpt == "receiver trouble"
    assert log[-1].response_excerpt == '{"received": true}'
    assert delivery.backoff_seconds(3) == 4 * delivery.backoff_seconds(1)


def test_attempts_run_out_and_a_delivery_can_be_sent_again_by_hand(
    researcher, django_capture_on_commit_callbacks
):
    with Receiver(500, 500, 500, 500) as receiver:
        endpoint(researcher, receiver.url, events.JOB_FAILED)
        with django_capture_on_commit_callbacks(execute=True):
            fail_job(researcher)
        row = Delivery.objects.get()
        assert row.state == Delivery.State.FAILED and row.attempts == 4
        with django_capture_on_commit_callbacks(execute=True):
            from webhooks.services import resend

            resend(row)
    assert len(receiver.requests) == 5
    row.refresh_from_db()
    assert row.state == Delivery.State.SUCCEEDED
    assert row.attempt_log.filter(by_hand=True, status_code=200).count() == 1


@pytest.mark.parametrize("url_host", ["127.0.0.1", "localhost"])
def test_nothing_is_sent_to_a_refused_address(
    researcher, settings, django_capture_on_commit_callbacks, url_host
):
    """Allowed when saved; refused when delivering (the allow-list changed, or the name now
    resolves to a refused address: the DNS rebinding case)."""
    with Receiver() as receiver:
        url = receiver.url.replace("127.0.0.1", url_host)
        endpoint(researcher, url, events.JOB_FAILED)
        settings.LLM_ALLOWED_ENDPOINTS = ["public"]  # loopback no longer allowed
        with django_capture_on_commit_callbacks(execute=True):
            fail_job(researcher)
    assert receiver.requests == []
    row = Delivery.objects.get()
    assert row.state == Delivery.State.FAILED and row.attempts == 1  # not tried again
    assert "refused" in row.attempt_log.get().error
    assert "loopback" in row.attempt_log.get().error


@pytest.fixture
def small_campaign(researcher, django_user_model):
    raters = campaign_factories.annotators(django_user_model, 2, prefix="hookrater")
    campaign = campaign_factories.campaign(researcher, raters, n_scenarios=1, overlap=2)
    return campaign, raters


def rate_everything(campaign, raters):
    for rater in raters:
        while (item := queue.next_assignment(rater, campaign)) is not None:
            queue.submit(rater, item.key, queue.Submission(1))


def test_filled_comparisons_and_completion_are_announced(
    small_campaign, researcher, django_capture_on_commit_callbacks
):
    campaign, raters = small_campaign
    n = campaign.comparisons.filter(is_gold=False).count()
    with Receiver() as receiver:
        hook = endpoint(
            researcher,
            receiver.url,
            events.COMPARISONS_FILLED,
            events.CAMPAIGN_COMPLETED,
            campaign=campaign,
        )
        with django_capture_on_commit_callbacks(execute=True):
            rate_everything(campaign, raters)
    payloads = [verified(r, hook.secret) for r in receiver.requests]
    filled = [p for p in payloads if p["type"] == "comparisons.filled"]
    completed = [p for p in payloads if p["type"] == "campaign.completed"]
    ids = sorted(i for p in filled for i in p["data"]["comparisons"])
    assert ids == sorted(campaign.comparisons.values_list("pk", flat=True))
    assert len(ids) == n
    assert filled[-1]["data"]["remaining"] == 0
    assert len(completed) == 1 and completed[0]["data"]["comparisons"] == n
    assert not FilledComparison.objects.exists()  # the outbox is emptied by the batch


def test_without_a_subscription_the_rating_path_stores_nothing_and_asks_the_cache(
    small_campaign, django_assert_num_queries
):
    campaign, raters = small_campaign
    rate_everything(campaign, raters)
    assert not FilledComparison.objects.exists()
    assert wants_batched(campaign.pk) is False
    with django_assert_num_queries(0):
        assert wants_batched(campaign.pk) is False  # cached


def test_an_exclusion_announces_the_annotator_once(
    small_campaign, researcher, django_capture_on_commit_callbacks
):
    campaign, raters = small_campaign
    with Receiver() as receiver:
        hook = endpoint(researcher, receiver.url, events.ANNOTATOR_FLAGGED)
        with django_capture_on_commit_callbacks(execute=True):
            exclusions.exclude(campaign, [raters[0]], "clicks at random")
            exclusions.exclude(campaign, [raters[0]], "still at random")
    (request,) = receiver.requests
    data = verified(request, hook.secret)["data"]
    assert data == {**data, "annotator": raters[0].username, "reason": "clicks at random"}
    assert data["source"] == "exclusion"


def test_other_researchers_endpoints_hear_nothing(
    small_campaign, django_user_model, roles, django_capture_on_commit_callbacks
):
    from tests.conftest import make_user

    campaign, raters = small_campaign
    stranger = make_user(django_user_model, "stranger", "researcher")
    with Receiver() as receiver:
        endpoint(stranger, receiver.url, events.ANNOTATOR_FLAGGED)  # all *their* campaigns
        with django_capture_on_commit_callbacks(execute=True):
            exclusions.exclude(campaign, [raters[0]], "clicks at random")
    assert receiver.requests == []
