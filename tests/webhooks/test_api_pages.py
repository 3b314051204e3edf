"""Webhook endpoints through the API and the pages: role and object checks, the secret shown
at creation and then only to its owner, refused URLs at registration, the deliveries log."""

import pytest
from django.test import Client
from django.urls import reverse

from h2htalk.models import Job, State
from tests.annotation import factories as campaign_factories
from tests.conftest import PASSWORD, make_user
from tests.webhooks.receiver import Receiver
from webhooks.models import Delivery, Endpoint

pytestmark = pytest.mark.django_db


def login(user) -> Client:
    client = Client()
    client.login(username=user.username, password=PASSWORD)
    return client


@pytest.fixture
def campaign(researcher, django_user_model):
    raters = campaign_factories.annotators(django_user_model, 1, prefix="apirater")
    return campaign_factories.campaign(researcher, raters, n_scenarios=1)


def create(client, url, campaign=None, events=("job.failed",)):
    body = {"url": url, "events": list(events), "campaign": campaign.pk if campaign else None}
    return client.post("/api/webhooks/endpoints/", body, content_type="application/json")


def test_the_secret_is_shown_at_creation_then_only_to_its_owner(
    researcher, campaign, django_user_model
):
    owner = login(researcher)
    answer = create(owner, "http://127.0.0.1:9/hooks", campaign)
    assert answer.status_code == 201, answer.content
    secret = answer.json()["secret"]
    assert secret.startswith("whsec_")
    pk = answer.json()["id"]
    listed = owner.get("/api/webhooks/endpoints/").json()
    assert secret not in str(listed) and secret not in str(
        owner.get(f"/api/webhooks/endpoints/{pk}/").json()
    )
    assert owner.get(f"/api/webhooks/endpoints/{pk}/?include=secret").json()["secret"] == secret
    assert secret in owner.get(reverse("webhooks:detail", args=[pk]) + "?secret=1").content.decode()
    member = make_user(django_user_model, "member", "researcher")
    campaign.members.add(member)
    as_member = login(member)
    assert as_member.get(f"/api/webhooks/endpoints/{pk}/").status_code == 200
    assert as_member.get(f"/api/webhooks/endpoints/{pk}/?include=secret").status_code == 403
    page = as_member.get(reverse("webhooks:detail", args=[pk]) + "?secret=1")
    assert secret not in page.content.decode()


def test_annotators_and_outsiders_get_nothing(researcher, annotator, campaign, django_user_model):
    pk = create(login(researcher), "http://127.0.0.1:9/hooks", campaign).json()["id"]
    as_annotator = login(annotator)
    assert as_annotator.get("/api/webhooks/endpoints/").status_code == 403
    assert as_annotator.get(reverse("webhooks:list")).status_code == 403
    outsider = login(make_user(django_user_model, "outsider", "researcher"))
    assert outsider.get(f"/api/webhooks/endpoints/{pk}/").status_code == 404
    assert outsider.get(reverse("webhooks:detail", args=[pk])).status_code == 404
    assert create(outsider, "http://127.0.0.1:9/hooks", campaign).status_code == 400


@pytest.mark.parametrize(
    "url", ["http://169.254.169.254/latest", "http://10.0.0.8/hook", "ftp://127.0.0.1/x"]
)
def test_refused_urls_are_refused_at_registration(researcher, url):
    answer = create(login(researcher), url)
    assert answer.status_code == 400
    assert "url" in answer.json()
    assert not Endpoint.objects.exists()


def test_unknown_events_are_refused(researcher):
    answer = create(login(researcher), "http://127.0.0.1:9/x", events=["campaign.exploded"])
    assert answer.status_code == 400 and "events" in answer.json()


def test_pages_register_an_endpoint_and_show_its_deliveries(
    researcher, campaign, django_capture_on_commit_callbacks
):
    client = login(researcher)
    with Receiver(500) as receiver:
        page = client.post(
            reverse("webhooks:create"),
            {
                "url": receiver.url,
                "events": ["job.failed"],
                "campaign": campaign.pk,
                "active": "on",
            },
        )
        assert page.status_code == 200
        hook = Endpoint.objects.get()
        assert hook.secret in page.content.decode()  # shown once, at creation
        job = Job.objects.create(kind="campaign_build", params={"campaign_id": campaign.pk})
        with django_capture_on_commit_callbacks(execute=True):
            from h2htalk import jobs

            jobs.finish(job.pk, State.FAILED, "broke")
    delivery = Delivery.objects.get()
    detail = client.get(reverse("webhooks:detail", args=[hook.pk])).content.decode()
    assert "job.failed" in detail and hook.secret not in detail
    log = client.get(reverse("webhooks:delivery", args=[delivery.pk])).content.decode()
    assert "500" in log and "200" in log and "receiver trouble" in log
    api = client.get(f"/api/webhooks/endpoints/{hook.pk}/deliveries/").json()
    assert [a["status_code"] for a in api[0]["attempt_log"]] == [200, 500]
    assert client.get(reverse("webhooks:list")).status_code == 200
    answer = client.post(reverse("webhooks:delete", args=[hook.pk]), {"confirmed": "1"})
    assert answer.status_code == 302 and not Endpoint.objects.exists()
