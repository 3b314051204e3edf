"""Joining through a study link: participants created and resumed, the trust model, refusals,
the throttle, and a participant's reach (issue 22 point 3)."""

import pytest
from django.test import Client
from django.urls import reverse

from annotation.study import links
from annotation.study.models import Participant
from tests.annotation.study_factories import (
    empty_throttle,  # noqa: F401 (autouse)
    join_url,
    study,
)


@pytest.fixture
def link(researcher):
    return study(researcher)


def test_join_creates_a_participant_without_password_and_logs_them_in(client, link):
    response = client.get(join_url(link, pid="5f1e9a"))
    assert response.status_code == 302 and response["Location"] == reverse("study:step")
    participant = Participant.objects.get()
    assert (participant.participant_id, participant.study_id, participant.session_id) == (
        "5f1e9a",
        "STUDY-1",
        "SESSION-1",
    )
    user = participant.user
    assert not user.has_usable_password() and user.username.startswith("p-")
    assert "5f1e9a" not in user.username
    assert list(user.groups.values_list("name", flat=True)) == ["annotator"]
    assert list(user.rating_campaigns.all()) == [link.campaign]
    page = client.get(reverse("study:step"))
    assert page.status_code == 200
    assert "<strong>rate</strong>" in page.content.decode()  # the consent, as Markdown
    assert "5f1e9a" not in page.content.decode()  # the id is never on a participant's page


def test_ids_are_stored_as_given(client, link):
    pid = "Ünï cödé-ID_42 with spaces"
    assert client.get(join_url(link, pid=pid.replace(" ", "%20"))).status_code == 302
    assert Participant.objects.get().participant_id == pid


def test_resume_in_the_same_browser(client, link, settings):
    settings.STUDY_JOIN_ADDRESS_LIMIT = 1  # a resume spends no slot of the throttle
    client.get(join_url(link))
    for _ in range(3):
        assert client.get(join_url(link)).status_code == 302
    assert Participant.objects.count() == 1


def test_resume_from_another_browser_needs_the_same_parameters(client, link):
    client.get(join_url(link))
    first = Participant.objects.get()
    other = Client()
    assert other.get(join_url(link)).status_code == 302  # same PID, study and session
    assert other.session["_auth_user_id"] == str(first.user_id)
    forged = Client()
    response = forged.get(join_url(link, session="SESSION-FORGED"))
    assert response.status_code == 403
    assert "_auth_user_id" not in forged.session
    assert "another session" in response.content.decode()
    assert Participant.objects.count() == 1


def test_same_participant_id_in_two_studies_is_two_accounts(client, link, researcher):
    other_link = study(researcher)
    client.get(join_url(link, pid="SAME"))
    first = Participant.objects.get(link=link)
    client.get(join_url(other_link, pid="SAME"))
    second = Participant.objects.get(link=other_link)
    assert first.user_id != second.user_id
    assert client.session["_auth_user_id"] == str(second.user_id)  # the first one logged out
    assert list(second.user.rating_campaigns.all()) == [other_link.campaign]
    # The first study's page is not reachable with the second study's account.
    assert client.get(reverse("annotation:rate", args=[link.campaign_id])).status_code == 404
    # Back in the first study with its parameters: its own account again.
    client.get(join_url(link, pid="SAME"))
    assert client.session["_auth_user_id"] == str(first.user_id)


def test_unknown_closed_and_rotated_tokens_are_404(client, link):
    assert client.get(join_url(link).replace(link.token, "nope")).status_code == 404
    links.set_open(link, False)
    assert client.get(join_url(link)).status_code == 404
    links.set_open(link, True)
    old = join_url(link)
    links.rotate(link)
    assert client.get(old).status_code == 404
    assert client.get(join_url(link)).status_code == 302
    assert Participant.objects.filter(participant_id="PID-1").count() == 1


def test_a_participant_already_in_carries_on_after_the_link_closes(client, link):
    client.get(join_url(link))
    client.post(reverse("study:consent"), {"decision": "agree"})
    links.set_open(link, False)
    response = client.get(reverse("annotation:rate", args=[link.campaign_id]))
    assert response.status_code == 200 and 'id="rating-form"' in response.content.decode()


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("STUDY_ID=s&SESSION_ID=x", "PROLIFIC_PID"),
        ("PROLIFIC_PID=&STUDY_ID=s", "PROLIFIC_PID"),
        ("PROLIFIC_PID=a&PROLIFIC_PID=b", "PROLIFIC_PID"),
        ("PROLIFIC_PID=a%00b", "PROLIFIC_PID"),
        ("PROLIFIC_PID=a&SESSION_ID=" + "x" * 101, "SESSION_ID"),
    ],
)
def test_bad_parameters_are_a_400_naming_the_parameter(client, link, query, named):
    url = f"{reverse('study:join', args=[link.token])}?{query}"
    response = client.get(url)
    assert response.status_code == 400
    assert named in response.content.decode()
    assert not Participant.objects.exists()


def test_parameter_names_follow_the_platform(client, researcher):
    link = study(
        researcher,
        participant_param="workerId",
        study_param="hitId",
        session_param="assignmentId",
        platform="mturk",
    )
    url = f"{reverse('study:join', args=[link.token])}?workerId=W1&hitId=H1&assignmentId=A1"
    assert client.get(url).status_code == 302
    assert Participant.objects.values_list("participant_id", "study_id", "session_id").get() == (
        "W1",
        "H1",
        "A1",
    )


def test_joining_is_throttled_per_address(link, settings):
    settings.STUDY_JOIN_ADDRESS_LIMIT = 2
    for n in range(2):
        assert Client(REMOTE_ADDR="10.1.1.1").get(join_url(link, pid=f"P{n}")).status_code == 302
    refused = Client(REMOTE_ADDR="10.1.1.1").get(join_url(link, pid="P9"))
    assert refused.status_code == 429
    assert "Too many" in refused.content.decode()
    assert Client(REMOTE_ADDR="10.1.1.2").get(join_url(link, pid="P9")).status_code == 302
    assert Participant.objects.count() == 3


def test_someone_logged_in_with_another_role_is_not_switched(researcher_client, link):
    response = researcher_client.get(join_url(link))
    assert response.status_code == 409
    assert "researcher1" in response.content.decode()
    assert not Participant.objects.exists()


def test_a_participant_reaches_no_researcher_page(client, link):
    client.get(join_url(link))
    campaign = link.campaign
    for url in (
        reverse("campaigns:list"),
        reverse("campaigns:detail", args=[campaign.pk]),
        reverse("campaigns:study", args=[campaign.pk]),
        reverse("campaigns:study_export", args=[campaign.pk]),
        reverse("scoring:agreement", args=[campaign.pk]),
    ):
        assert client.get(url).status_code == 403, url
    assert client.get(reverse("campaign-study", args=[campaign.pk])).status_code == 403
    assert client.get(reverse("campaign-study-participants", args=[campaign.pk])).status_code == 403
    assert client.post(reverse("campaign-study-rotate", args=[campaign.pk])).status_code == 403


def test_the_study_pages_are_for_participants_only(annotator_client):
    assert annotator_client.get(reverse("study:step")).status_code == 403
    assert annotator_client.post(reverse("study:consent"), {"decision": "agree"}).status_code == 403


def test_declining_consent_logs_out(client, link):
    client.get(join_url(link))
    response = client.post(reverse("study:consent"), {"decision": "decline"})
    assert response.status_code == 200 and "did not agree" in response.content.decode()
    assert "_auth_user_id" not in client.session
    assert Participant.objects.get().consented_at is None


def test_consent_in_the_participants_language(client, link):
    client.get(join_url(link))
    page = client.get(reverse("study:step"), HTTP_ACCEPT_LANGUAGE="zh-CN").content.decode()
    assert "您同意为对话" in page and "You agree" not in page
