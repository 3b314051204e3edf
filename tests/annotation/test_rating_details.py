"""Issue 22 point 5: "both unacceptable" as its own outcome, reasons and confidence, through the
queue, the rating API, the rating page's form, the campaign settings and the judgments CSV."""

import csv
import io

import pytest
from django.urls import reverse

from annotation import queue
from annotation.models import Assignment, Campaign, Judgment
from annotation.rating_details import DetailError, clean_details, parse_reasons
from tests.annotation import factories
from tests.annotation.test_rating_api import next_url, post, submit_url, token_client

REASONS = ["More empathetic", "Safer", "Remembers better", "Better plan"]
KEYS = ["more-empathetic", "safer", "remembers-better", "better-plan"]
HTMX = {"HX-Request": "true"}


@pytest.fixture
def raters(roles, django_user_model):
    return factories.annotators(django_user_model, 2)


@pytest.fixture
def campaign(researcher, raters):
    return factories.campaign(
        researcher,
        raters,
        n_scenarios=2,
        overlap=2,
        reason_choices=parse_reasons(REASONS),
        ask_confidence=True,
    )


@pytest.fixture
def api(raters):
    return token_client(raters[0])


def take(api, campaign) -> str:
    return post(api, next_url(campaign.pk)).json()["key"]


# ---------------------------------------------------------------- the rules, plain


def test_reason_keys_are_made_from_labels_in_any_script_and_must_differ():
    assert [c["key"] for c in parse_reasons("\n".join(REASONS) + "\n\n")] == KEYS
    assert parse_reasons(["更有同理心"]) == [{"key": "更有同理心", "label": "更有同理心"}]
    assert parse_reasons([{"key": "warm", "label": "Warmer"}]) == [
        {"key": "warm", "label": "Warmer"}
    ]
    with pytest.raises(DetailError):
        parse_reasons(["Safer", "safer!"])
    with pytest.raises(DetailError):
        parse_reasons([f"reason {n}" for n in range(10)])
    for wrong in (True, 3, {"key": "a"}, None):
        with pytest.raises(DetailError):
            parse_reasons(wrong)


def test_clean_details_one_outcome_reasons_of_the_preferred_and_confidence(campaign):
    assert clean_details(campaign, None, True, [], None) == (0, [], None)
    assert clean_details(campaign, 0, True, [], 2) == (0, [], 2)
    # Reasons come back in the campaign's order, whatever order they were ticked in.
    assert clean_details(campaign, -1, False, ["safer", "more-empathetic"], 3) == (
        -1,
        ["more-empathetic", "safer"],
        3,
    )
    refused = [
        (2, True, [], None),  # a preference and "both unacceptable" at once
        (None, False, [], None),  # neither
        (0, False, ["safer"], None),  # reasons with a tie: no response is preferred
        (None, True, ["safer"], None),  # reasons with both unacceptable
        (1, False, ["kinder"], None),  # not one of the campaign's
        (1, False, [], 4),
        (1, False, [], True),
    ]
    for preference, unacceptable, reasons, confidence in refused:
        with pytest.raises(DetailError):
            clean_details(campaign, preference, unacceptable, reasons, confidence)
    Campaign.objects.filter(pk=campaign.pk).update(ask_confidence=False)
    campaign.refresh_from_db()
    with pytest.raises(DetailError):
        clean_details(campaign, 1, False, [], 2)


# ---------------------------------------------------------------- the rating API


def test_api_both_unacceptable_without_a_preference_is_its_own_outcome(campaign, api):
    key = take(api, campaign)
    answer = post(api, submit_url(key), {"both_unacceptable": True, "confidence": 3})
    assert answer.status_code == 200, answer.content
    assert answer.json()["preference"] is None and answer.json()["both_unacceptable"] is True
    assert answer.json()["reasons"] == [] and answer.json()["confidence"] == 3
    stored = Judgment.objects.get()
    assert (stored.screen_preference, stored.preference, stored.both_unacceptable) == (0, 0, True)
    assert stored.confidence == 3


def test_api_refuses_a_preference_with_both_unacceptable_and_keeps_the_item(campaign, api):
    key = take(api, campaign)
    refused = post(api, submit_url(key), {"preference": 2, "both_unacceptable": True})
    assert refused.status_code == 400 and "instead of a preference" in refused.json()["detail"]
    missing = post(api, submit_url(key), {"rationale": "no choice"})
    assert missing.status_code == 400 and "preference" in missing.json()
    assert Judgment.objects.count() == 0
    assert Assignment.objects.get(key=key).state == Assignment.State.OPEN
    assert post(api, submit_url(key), {"preference": 2}).status_code == 200


@pytest.mark.parametrize("left_is_a", [True, False])
def test_api_reasons_are_stored_of_the_preferred_response_whatever_the_layout(
    campaign, api, left_is_a
):
    key = take(api, campaign)
    Assignment.objects.filter(key=key).update(left_is_a=left_is_a)
    body = {"preference": -2, "reasons": ["remembers-better", "safer"], "confidence": 1}
    answer = post(api, submit_url(key), body)
    assert answer.status_code == 200, answer.content
    assert answer.json()["reasons"] == ["safer", "remembers-better"]  # the campaign's order
    stored = Judgment.objects.get()
    # The same keys whichever side the preferred response was on: no side is stored with them.
    assert stored.reasons == ["safer", "remembers-better"] and stored.confidence == 1
    assert stored.preference == (-2 if left_is_a else 2)


@pytest.mark.parametrize(
    "body",
    [
        {"preference": 0, "reasons": ["safer"]},
        {"preference": 1, "reasons": ["kinder"]},
        {"preference": 1, "confidence": 0},
    ],
)
def test_api_refuses_reasons_and_confidence_the_campaign_does_not_take(campaign, api, body):
    key = take(api, campaign)
    refused = post(api, submit_url(key), body)
    assert refused.status_code == 400
    assert Judgment.objects.count() == 0
    assert Assignment.objects.get(key=key).state == Assignment.State.OPEN


def test_api_campaign_lists_its_reasons_and_whether_it_asks_for_confidence(campaign, api):
    Campaign.objects.filter(pk=campaign.pk).update(
        reason_choices=parse_reasons(["Warmer than Zephyr-Alpha-77", "Safer"])
    )
    listed = api.get("/api/rate/campaigns/").json()["results"][0]
    assert listed["asks_confidence"] is True
    # A companion's name in a reason label is hidden, as in every campaign text.
    assert listed["reasons"][0]["label"] == "Warmer than [name hidden]"
    assert [r["key"] for r in listed["reasons"]] == ["warmer-than-zephyr-alpha-77", "safer"]


# ---------------------------------------------------------------- the rating page's form


def test_page_submit_both_unacceptable_without_a_preference(campaign, raters, client):
    client.force_login(raters[0])
    page = client.get(reverse("annotation:rate", args=[campaign.pk])).content.decode()
    for key, label in zip(KEYS, REASONS, strict=True):
        assert f'value="{key}"' in page and label in page
    assert 'name="confidence"' in page
    item = Assignment.objects.get(annotator=raters[0], state=Assignment.State.OPEN)
    answer = client.post(
        reverse("annotation:submit", args=[item.key]), {"both_unacceptable": "on"}, headers=HTMX
    )
    assert answer.status_code == 200 and b"Saved." in answer.content
    stored = Judgment.objects.get()
    assert (stored.preference, stored.both_unacceptable, stored.reasons) == (0, True, [])


def test_page_submit_reasons_and_confidence_or_why_they_are_refused(campaign, raters, client):
    client.force_login(raters[0])
    client.get(reverse("annotation:rate", args=[campaign.pk]))
    item = Assignment.objects.get(annotator=raters[0], state=Assignment.State.OPEN)
    url = reverse("annotation:submit", args=[item.key])
    refused = client.post(url, {"preference": "0", "reasons": ["safer"]}, headers=HTMX)
    assert "Reasons say why the preferred response is better" in refused.content.decode()
    assert Judgment.objects.count() == 0
    data = {"preference": "2", "reasons": ["better-plan", "safer"], "confidence": "2"}
    assert b"Saved." in client.post(url, data, headers=HTMX).content
    stored = Judgment.objects.get()
    assert (stored.reasons, stored.confidence) == (["safer", "better-plan"], 2)


# ---------------------------------------------------------------- campaign settings and CSV


def test_campaign_api_sets_the_reasons_and_confidence(campaign, researcher):
    client = token_client(researcher)
    url = f"/api/campaigns/{campaign.pk}/"
    changed = client.patch(
        url,
        {
            "reason_choices": ["Kinder", {"key": "plan", "label": "Better plan"}],
            "ask_confidence": False,
        },
        content_type="application/json",
    )
    assert changed.status_code == 200, changed.content
    assert changed.json()["reason_choices"] == [
        {"key": "kinder", "label": "Kinder"},
        {"key": "plan", "label": "Better plan"},
    ]
    assert changed.json()["ask_confidence"] is False
    refused = client.patch(
        url, {"reason_choices": ["Same", "same"]}, content_type="application/json"
    )
    assert refused.status_code == 400 and "reason_choices" in refused.json()


def test_judgments_csv_exports_reasons_and_confidence(campaign, raters, researcher, client):
    first = queue.next_assignment(raters[0], campaign)
    queue.submit(
        raters[0],
        first.key,
        queue.Submission(1, reasons=["remembers-better", "more-empathetic"], confidence=2),
    )
    second = queue.next_assignment(raters[1], campaign)
    queue.submit(raters[1], second.key, queue.Submission(None, both_unacceptable=True))
    client.force_login(researcher)
    response = client.get(reverse("campaigns:export", args=[campaign.pk]))
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    by_rater = {row["annotator"]: row for row in rows}
    mine = by_rater[raters[0].username]
    assert (mine["reasons"], mine["confidence"]) == ("more-empathetic;remembers-better", "2")
    theirs = by_rater[raters[1].username]
    assert (theirs["both_unacceptable"], theirs["preference"], theirs["reasons"]) == ("1", "0", "")
    assert theirs["confidence"] == ""
