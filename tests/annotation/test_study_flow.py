"""A participant's way through a study: consent, rating up to the quota or the time limit or
until nothing is left, the codes, the items given back, and the payment export (issue 22
point 3)."""

import csv
import io
import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotation import queue
from annotation.models import Assignment, Judgment
from annotation.qualification import practice
from annotation.study import export
from annotation.study.models import Participant
from tests.annotation.qualification_setup import (
    expected_screen,
    qualification_campaign,
    wrong_screen,
)
from tests.annotation.study_factories import (
    empty_throttle,  # noqa: F401 (autouse)
    join_url,
    link_for,
    study,
)

KEY = re.compile(r"/rate/a/([0-9a-f-]{36})/submit/")
HTMX = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "item"}


@pytest.fixture
def link(researcher):
    return study(researcher, n_scenarios=3, quota=2)


def joined(link, pid="PID-1", session="SESSION-1") -> Client:
    client = Client()
    assert client.get(join_url(link, pid=pid, session=session)).status_code == 302
    assert client.post(reverse("study:consent"), {"decision": "agree"}).status_code == 302
    return client


def rate_page(client, link):
    return client.get(reverse("annotation:rate", args=[link.campaign_id]))


def rate_one(client, link, htmx=False):
    page = rate_page(client, link).content.decode()
    key = KEY.search(page).group(1)
    extra = HTMX if htmx else {}
    return client.post(reverse("annotation:submit", args=[key]), {"preference": "-1"}, **extra)


def test_consent_comes_first(link):
    client = Client()
    client.get(join_url(link))
    response = rate_page(client, link)
    assert response.status_code == 302 and response["Location"] == reverse("study:step")
    assert client.post(reverse("study:consent"), {"decision": "agree"})["Location"] == reverse(
        "study:step"
    )
    step = client.get(reverse("study:step"))
    assert step["Location"] == reverse("annotation:rate", args=[link.campaign_id])
    assert rate_page(client, link).status_code == 200


def test_quota_reached_gives_the_completion_code_and_redirect(link):
    client = joined(link)
    rate_one(client, link)
    last = rate_one(client, link, htmx=True)
    assert last["HX-Redirect"] == reverse("study:step")  # the rating page leaves by itself
    assert rate_page(client, link)["Location"] == reverse("study:step")
    participant = Participant.objects.get()
    assert participant.finish_reason == "quota" and participant.finished_at
    assert Judgment.objects.filter(annotator=participant.user).count() == 2
    page = client.get(reverse("study:step")).content.decode()
    assert 'id="study-code">C0MPL3TE<' in page
    assert 'http-equiv="refresh" content="5; url=http://127.0.0.1:9/complete?cc=C0MPL3TE"' in page
    assert "SCR33N" not in page
    # No further item through the API either.
    api = client.post(reverse("rate-campaign-next", args=[link.campaign_id]))
    assert api.status_code == 204
    assert not Assignment.objects.filter(annotator=participant.user, state="open").exists()


def test_nothing_left_finishes_with_the_completion_code(researcher):
    link = study(researcher, n_scenarios=1, quota=5)  # one comparison, k = 1
    first = joined(link, pid="A")
    rate_one(first, link)
    assert rate_page(first, link)["Location"] == reverse("study:step")
    assert Participant.objects.get(participant_id="A").finish_reason == "no_items"
    second = joined(link, pid="B", session="S-B")
    assert rate_page(second, link)["Location"] == reverse("study:step")
    assert "C0MPL3TE" in second.get(reverse("study:step")).content.decode()


def test_time_limit_ends_rating_and_gives_the_item_back(link):
    client = joined(link)
    rate_page(client, link)  # holds an item
    participant = Participant.objects.get()
    held = Assignment.objects.get(annotator=participant.user, state="open")
    Participant.objects.filter(pk=participant.pk).update(
        joined_at=timezone.now() - timedelta(minutes=31)
    )
    assert rate_page(client, link)["Location"] == reverse("study:step")
    participant.refresh_from_db()
    assert participant.finish_reason == "time_limit"
    held.refresh_from_db()
    assert held.lease_expires_at <= timezone.now()  # back in the pool at once
    other = joined(link, pid="P2", session="S2")
    assert rate_page(other, link).status_code == 200


def test_a_participant_who_leaves_gives_their_item_back_when_the_lease_ends(researcher):
    link = study(researcher, n_scenarios=1, quota=5)  # one comparison, k = 1
    leaver = joined(link, pid="LEAVER")
    assert rate_page(leaver, link).status_code == 200  # takes the only item, then leaves
    stayer_client = joined(link, pid="STAYER", session="S-2")
    stayer = Participant.objects.get(participant_id="STAYER").user
    assert queue.next_assignment(stayer, link.campaign) is None  # leased to the leaver
    Assignment.objects.filter(annotator__study_participant__participant_id="LEAVER").update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    response = rate_page(stayer_client, link)
    assert response.status_code == 200 and KEY.search(response.content.decode())
    assert Assignment.objects.filter(annotator=stayer, state="open").count() == 1


def practise(participant, right: bool) -> None:
    """Answer every practice item of the participant's attempt, all right or all wrong."""
    campaign, user = participant.campaign, participant.user
    while (turn := practice.turn(campaign, user)).answer is not None:
        key = turn.answer.key
        screen = expected_screen(key) if right else wrong_screen(key)
        practice.answer(campaign, user, key, screen)


@pytest.mark.parametrize("right", [True, False])
def test_the_qualification_comes_between_consent_and_rating(researcher, right):
    campaign = qualification_campaign(researcher, [], min_accuracy=1.0, attempts=1)
    link = link_for(campaign)
    client = joined(link)
    qualify = reverse("annotation:qualify", args=[campaign.pk])
    assert rate_page(client, link)["Location"] == reverse("study:step")
    assert client.get(reverse("study:step"))["Location"] == qualify
    assert client.get(qualify).status_code == 200
    participant = Participant.objects.select_related("campaign", "user").get()
    practise(participant, right)
    if right:  # admitted: rating, then the completion code
        rating = reverse("annotation:rate", args=[campaign.pk])
        assert client.get(reverse("study:step"))["Location"] == rating
        assert rate_page(client, link).status_code == 200
        rate_one(client, link)
        rate_one(client, link)
        assert rate_page(client, link)["Location"] == reverse("study:step")
        page = client.get(reverse("study:step")).content.decode()
        assert "C0MPL3TE" in page and "SCR33N" not in page
    else:  # failed: the practice page and the rating page send them to the screen-out code
        assert client.get(qualify)["Location"] == reverse("study:step")
        assert rate_page(client, link)["Location"] == reverse("study:step")
        page = client.get(reverse("study:step")).content.decode()
        assert "SCR33N" in page and "C0MPL3TE" not in page
        assert 'url=http://127.0.0.1:9/screened"' in page
        assert not Judgment.objects.filter(annotator=participant.user).exists()
    participant.refresh_from_db()
    assert participant.finish_reason == ("quota" if right else "screened_out")
    [row] = export.participant_rows(link)
    assert row["qualification"] == ("admitted" if right else "failed")


def test_an_ordinary_annotator_is_not_gated(annotator_client, annotator, link):
    link.campaign.annotators.add(annotator)
    for _ in range(3):  # beyond the participants' quota
        page = rate_page(annotator_client, link).content.decode()
        key = KEY.search(page).group(1)
        annotator_client.post(reverse("annotation:submit", args=[key]), {"preference": "1"})
    assert Judgment.objects.filter(annotator=annotator).count() == 3


def test_the_export_has_what_payment_needs(link, researcher_client):
    done = joined(link, pid="PAY-ME")
    rate_one(done, link)
    rate_one(done, link)
    rate_page(done, link)
    joined(link, pid="=HYPERLINK(1)", session="S2")
    response = researcher_client.get(reverse("campaigns:study_export", args=[link.campaign_id]))
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [row["participant_id"] for row in rows] == ["PAY-ME", "'=HYPERLINK(1)"]
    paid = rows[0]
    assert paid["items"] == "2" and paid["finish_reason"] == "quota"
    assert paid["study_id"] == "STUDY-1" and paid["session_id"] == "SESSION-1"
    assert float(paid["time_on_task_seconds"]) >= 0 and float(paid["elapsed_seconds"]) >= 0
    assert paid["qualification"] == "not_required"
    assert rows[1]["items"] == "0" and rows[1]["finish_reason"] == ""
    api = researcher_client.get(reverse("campaign-study-participants", args=[link.campaign_id]))
    assert [row["items"] for row in api.json()] == [2, 0]
    page = researcher_client.get(reverse("campaigns:study", args=[link.campaign_id]))
    assert "PAY-ME" in page.content.decode()


def test_participant_ids_never_reach_other_raters(link, annotator_client, annotator):
    link.campaign.annotators.add(annotator)
    client = joined(link, pid="SECRET-PID-77")
    rate_one(client, link)
    pages = [
        rate_page(annotator_client, link),
        annotator_client.get(reverse("annotation:home")),
        annotator_client.post(reverse("rate-campaign-next", args=[link.campaign_id])),
        rate_page(client, link),
        client.get(reverse("annotation:home")),
    ]
    for response in pages:
        assert b"SECRET-PID-77" not in response.content
