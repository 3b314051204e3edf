"""The study link through the API and the researcher page: set up, validation, rotate, close,
open, and only for the campaign's researchers (issue 22 point 3)."""

import pytest
from django.test import Client
from django.urls import reverse

from annotation.study.models import StudyLink
from tests.annotation import factories
from tests.annotation.study_factories import study
from tests.conftest import make_user

SETTINGS = {
    "platform": "prolific",
    "participant_param": "PROLIFIC_PID",
    "study_param": "STUDY_ID",
    "session_param": "SESSION_ID",
    "completion_code": "CODE1",
    "completion_url": "https://app.prolific.com/submissions/complete?cc=CODE1",
    "quota": 10,
    "time_limit_minutes": 45,
    "consent": "I agree.",
}


@pytest.fixture
def campaign(researcher):
    return factories.campaign(researcher, [], n_scenarios=1)


def test_put_sets_up_the_link_and_get_reads_it(researcher_client, campaign):
    url = reverse("campaign-study", args=[campaign.pk])
    assert researcher_client.get(url).status_code == 404
    response = researcher_client.put(url, SETTINGS, content_type="application/json")
    assert response.status_code == 200, response.json()
    link = StudyLink.objects.get(campaign=campaign)
    body = researcher_client.get(url).json()
    assert body["token"] == link.token and body["is_open"] and body["quota"] == 10
    assert body["url"] == (
        f"http://testserver/join/{link.token}/?PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}"
        "&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
    )
    patched = researcher_client.patch(url, {"quota": 3}, content_type="application/json")
    assert patched.json()["quota"] == 3 and patched.json()["completion_code"] == "CODE1"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"participant_param": "bad name!"}, "participant_param"),
        ({"session_param": "PROLIFIC_PID"}, "session_param"),
        ({"completion_url": "javascript:alert(1)"}, "completion_url"),
        ({"quota": 0}, "quota"),
        ({"completion_code": ""}, "completion_code"),
    ],
)
def test_bad_settings_are_refused_naming_the_field(researcher_client, campaign, change, field):
    url = reverse("campaign-study", args=[campaign.pk])
    response = researcher_client.put(url, {**SETTINGS, **change}, content_type="application/json")
    assert response.status_code == 400 and field in response.json()
    assert not StudyLink.objects.exists()


def test_a_platform_preset_fills_the_parameter_names(researcher_client, campaign):
    url = reverse("campaign-study", args=[campaign.pk])
    body = researcher_client.put(
        url, {**SETTINGS, "platform": "mturk"}, content_type="application/json"
    ).json()
    assert (body["participant_param"], body["study_param"], body["session_param"]) == (
        "workerId",
        "hitId",
        "assignmentId",
    )
    assert body["url"].endswith(f"/join/{body['token']}/")  # MTurk appends its own parameters


def test_rotate_close_open_through_the_api(researcher_client, researcher):
    client = Client()  # a participant's browser (researcher_client is the `client` fixture)
    link = study(researcher)
    old = link.token
    rotated = researcher_client.post(reverse("campaign-study-rotate", args=[link.campaign_id]))
    assert rotated.status_code == 200 and rotated.json()["token"] != old
    url = reverse("campaign-study", args=[link.campaign_id])
    closed = researcher_client.patch(url, {"is_open": False}, content_type="application/json")
    assert closed.json()["is_open"] is False
    join = reverse("study:join", args=[closed.json()["token"]]) + "?PROLIFIC_PID=x"
    assert client.get(join).status_code == 404
    opened = researcher_client.patch(url, {"is_open": True}, content_type="application/json")
    assert opened.json()["is_open"] is True
    assert client.get(join).status_code == 302


def test_the_page_rotates_and_closes(researcher_client, researcher):
    link = study(researcher)
    url = reverse("campaigns:study_action", args=[link.campaign_id])
    page = researcher_client.get(reverse("campaigns:study", args=[link.campaign_id]))
    assert link.token in page.content.decode()
    researcher_client.post(url, {"action": "rotate"})
    researcher_client.post(url, {"action": "close"})
    link.refresh_from_db()
    assert link.token not in page.content.decode() and not link.is_open


def test_the_page_saves_the_settings(researcher_client, campaign):
    url = reverse("campaigns:study", args=[campaign.pk])
    response = researcher_client.post(url, {**SETTINGS, "completion_code": "PAGE-CODE"})
    assert response.status_code == 302
    assert StudyLink.objects.get(campaign=campaign).completion_code == "PAGE-CODE"


def test_other_researchers_get_404(client, researcher, django_user_model):
    link = study(researcher)
    stranger = make_user(django_user_model, "stranger1", "researcher")
    client.force_login(stranger)
    pk = link.campaign_id
    for url in (
        reverse("campaigns:study", args=[pk]),
        reverse("campaigns:study_export", args=[pk]),
        reverse("campaign-study", args=[pk]),
        reverse("campaign-study-participants", args=[pk]),
    ):
        assert client.get(url).status_code == 404, url
    assert client.post(reverse("campaign-study-rotate", args=[pk])).status_code == 404
    assert (
        client.post(reverse("campaigns:study_action", args=[pk]), {"action": "close"}).status_code
        == 404
    )
    assert StudyLink.objects.get().is_open and StudyLink.objects.get().token == link.token


@pytest.mark.parametrize("body", [[], "settings", {"quota": {"a": 1}}, {"consent": "a\x00b"}])
@pytest.mark.parametrize("method", ["put", "patch"])
def test_a_malformed_body_is_a_400(researcher_client, researcher, body, method):
    link = study(researcher)
    url = reverse("campaign-study", args=[link.campaign_id])
    response = getattr(researcher_client, method)(url, body, content_type="application/json")
    assert response.status_code == 400
    assert StudyLink.objects.get().quota == link.quota
