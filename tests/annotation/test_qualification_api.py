"""The qualification through the API: researchers define the rule and the practice items
(role-checked), annotators practise blind, and the rating API sends them there until admitted."""

import io
import json

import pytest
from django.urls import reverse

from annotation.models import PracticeItem, QualificationRule
from annotation.qualification import phase
from tests.annotation import factories
from tests.annotation.qualification_setup import (
    EXPLANATION,
    expected_screen,
    qualification_campaign,
)
from tests.annotation.test_rating_api import next_url, submit_url, token_client
from tests.conftest import make_user

pytestmark = pytest.mark.django_db

COMPANIONS = ("Zephyr-Alpha-77", "Quokka-Beta-13", "Marlin-Gamma-42")


@pytest.fixture
def raters(roles, django_user_model):
    return factories.annotators(django_user_model, 2)


@pytest.fixture
def campaign(researcher, raters):
    return qualification_campaign(researcher, raters, min_accuracy=1.0, attempts=2)


def url(name, campaign, **kwargs):
    return reverse(name, kwargs={"campaign_id": campaign.pk, **kwargs})


def send(client, path, data, method="post"):
    return getattr(client, method)(path, json.dumps(data), content_type="application/json")


def test_researchers_set_the_rule_and_see_phases_others_cannot(
    campaign, researcher, raters, roles, django_user_model
):
    api = token_client(researcher)
    changed = send(
        api, url("qualification", campaign), {"min_direction": 0.5, "attempts": 3}, "patch"
    )
    assert changed.status_code == 200, changed.content
    assert changed.json()["min_direction"] == 0.5 and changed.json()["attempts"] == 3
    assert changed.json()["min_accuracy"] == 1.0 and changed.json()["requires_qualification"]
    assert QualificationRule.objects.get(campaign=campaign).attempts == 3
    bad = send(api, url("qualification", campaign), {"min_accuracy": 1.5}, "patch")
    assert bad.status_code == 400 and "min_accuracy" in bad.json()

    phases = api.get(url("qualification-annotators", campaign)).json()
    assert {row["annotator"]: row["phase"] for row in phases} == {
        "rater0": "qualifying",
        "rater1": "qualifying",
    }
    other = make_user(django_user_model, "researcher2", "researcher")
    for path in (url("qualification", campaign), url("qualification-items", campaign)):
        assert token_client(other).get(path).status_code == 404
        assert token_client(raters[0]).get(path).status_code == 403


def test_practice_items_are_added_imported_and_removed_with_errors_by_field(campaign, researcher):
    api = token_client(researcher)
    comparison = campaign.comparisons.order_by("-pk").first()
    added = send(
        api,
        url("qualification-items", campaign),
        {
            "practice_set": "refresher",
            "comparison": comparison.pk,
            "known_preference": -1,
            "explanation": "Safer: it gives the helpline.",
        },
    )
    assert added.status_code == 201, added.content
    assert added.json()["companion_a"] in COMPANIONS
    refused = send(
        api,
        url("qualification-items", campaign),
        {"comparison": 999999, "known_preference": 5, "explanation": " "},
    )
    assert refused.status_code == 400
    assert set(refused.json()) == {"comparison", "known_preference", "explanation"}

    a, b = comparison.response_a, comparison.response_b
    lines = [
        {"response_a": b.pk, "response_b": a.pk, "known_preference": 2, "explanation": "x"},
        {"comparison": comparison.pk, "known_preference": "many", "explanation": "y"},
    ]
    body = "\n".join(json.dumps(line) for line in lines).encode()
    before = PracticeItem.objects.count()
    bad = api.post(url("qualification-import", campaign), {"file": io.BytesIO(body)})
    assert bad.status_code == 400
    assert bad.json()["problems"] == ["line 2, known_preference: must be a whole number"]
    assert PracticeItem.objects.count() == before  # all or nothing
    good = api.post(
        url("qualification-import", campaign), {"file": io.BytesIO(json.dumps(lines[0]).encode())}
    )
    assert good.status_code == 201 and good.json() == {"imported": 1}
    imported = PracticeItem.objects.get(explanation="x")
    # given as (b, a) with "B much better": stored in the canonical order, answer flipped
    assert (imported.response_a, imported.response_b, imported.known_preference) == (a, b, -2)
    removed = api.delete(
        reverse("qualification-item", kwargs={"campaign_id": campaign.pk, "item_id": imported.pk})
    )
    assert removed.status_code == 204 and not PracticeItem.objects.filter(pk=imported.pk).exists()


def test_an_annotator_practises_blind_then_rates(campaign, raters):
    api = token_client(raters[0])
    refused = api.post(next_url(campaign.pk))
    assert refused.status_code == 403 and refused.json()["phase"] == "qualifying"
    state = api.post(url("practice-next", campaign)).json()
    assert state["phase"] == "qualifying" and state["total"] == 3
    while state["item"]:
        text = json.dumps(state)
        assert EXPLANATION not in text and "known" not in text
        assert not any(name in text for name in COMPANIONS)
        key = state["item"]["key"]
        answer = send(
            api, reverse("practice-answer", kwargs={"practice_key": key}), {"preference": 2}
        )
        assert answer.status_code == 200
        feedback = answer.json()
        assert EXPLANATION in feedback["explanation"] and feedback["given"] == 2
        assert feedback["correct"] == (feedback["expected"] == 2)
        again = send(
            api, reverse("practice-answer", kwargs={"practice_key": key}), {"preference": -2}
        )
        assert again.json()["given"] == 2  # stored once
        state = api.post(url("practice-next", campaign)).json()
    if state["phase"] != "admitted":  # not all "B much better": retry, answering right
        assert state["can_retry"] and state["why"]
        state = api.post(url("practice-retry", campaign)).json()
        while state["item"]:
            key = state["item"]["key"]
            send(
                api,
                reverse("practice-answer", kwargs={"practice_key": key}),
                {"preference": expected_screen(key)},
            )
            state = api.post(url("practice-next", campaign)).json()
    assert state["phase"] == "admitted" == phase(campaign, raters[0])
    item = api.post(next_url(campaign.pk))
    assert item.status_code == 200
    stored = send(api, submit_url(item.json()["key"]), {"preference": 1})
    assert stored.status_code == 200
    other = token_client(raters[1])
    assert (
        send(
            other, reverse("practice-answer", kwargs={"practice_key": key}), {"preference": 1}
        ).status_code
        == 404
    )


def test_a_rule_that_is_not_one_json_object_is_a_400(campaign, researcher):
    api = token_client(researcher)
    before = api.get(url("qualification", campaign)).json()
    response = send(api, url("qualification", campaign), [1, 2], "patch")
    assert response.status_code == 400 and "JSON object" in response.json()["detail"]
    assert api.get(url("qualification", campaign)).json() == before
