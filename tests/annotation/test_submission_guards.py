"""What a judgment may be stored on: an open campaign (issue 11.4), and the scenario text the
annotator was shown, recorded with the judgment (issue 11.5).

Submit and skip on a paused or closed campaign answer 409 with a readable message (API and
pages) and store nothing; an item whose scenario was edited after it was handed out is refused
the same way, and every stored judgment names the scenario revision and content hash it was
made on.
"""

import json

import pytest
from django.urls import reverse
from rest_framework.authtoken.models import Token

from annotation import queue
from annotation.models import Assignment, Campaign, Judgment
from scenarios import services
from scenarios.models import Revision, Scenario
from tests.annotation import factories

HTMX = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "item"}


@pytest.fixture
def raters(roles, django_user_model):
    return factories.annotators(django_user_model, 2)


@pytest.fixture
def rater(raters):
    return raters[0]


@pytest.fixture
def campaign(researcher, raters):
    return factories.campaign(researcher, raters, n_scenarios=2, overlap=2)


@pytest.fixture
def api(rater):
    from django.test import Client

    token, _ = Token.objects.get_or_create(user=rater)
    return Client(headers={"Authorization": f"Token {token.key}"})


@pytest.fixture
def page(client, rater):
    client.force_login(rater)
    return client


def api_post(client, name, key, data):
    url = reverse(name, kwargs={"key": key})
    return client.post(url, json.dumps(data), content_type="application/json")


def set_state(campaign, state):
    Campaign.objects.filter(pk=campaign.pk).update(state=state)


def nothing_stored(assignment):
    assignment.refresh_from_db()
    return not Judgment.objects.exists() and assignment.state == Assignment.State.OPEN


# ---------------------------------------------------------------- campaign state (11.4)


@pytest.mark.parametrize("state", [Campaign.State.PAUSED, Campaign.State.CLOSED])
def test_api_submit_and_skip_on_a_campaign_that_is_not_open_are_409(campaign, rater, api, state):
    item = queue.next_assignment(rater, campaign)
    set_state(campaign, state)
    answer = api_post(api, "rate-assignment-submit", item.key, {"preference": 1})
    assert answer.status_code == 409, answer.content
    assert answer.json() == {
        "detail": f"This campaign is not open for rating right now (it is {state}), so your "
        "answer was not saved."
    }
    # A bad body does not get further either: the campaign's state is the first answer.
    assert api_post(api, "rate-assignment-submit", item.key, {}).status_code == 409
    skipped = api_post(api, "rate-assignment-skip", item.key, {"reason": "other"})
    assert skipped.status_code == 409
    assert "not open for rating right now" in skipped.json()["detail"]
    assert "the skip was not saved" in skipped.json()["detail"]
    assert nothing_stored(item)
    # Open again: the same item (its lease still runs) is accepted.
    set_state(campaign, Campaign.State.OPEN)
    assert api_post(api, "rate-assignment-submit", item.key, {"preference": 1}).status_code == 200
    assert Judgment.objects.count() == 1


def test_queue_refuses_even_when_called_directly(campaign, rater):
    item = queue.next_assignment(rater, campaign)
    set_state(campaign, Campaign.State.CLOSED)
    with pytest.raises(queue.CampaignNotOpen, match="not open"):
        queue.submit(rater, item.key, queue.Submission(screen_preference=0))
    with pytest.raises(queue.CampaignNotOpen, match="not open"):
        queue.skip(rater, item.key, "other")
    assert nothing_stored(item)


def test_a_replay_of_a_stored_judgment_still_answers_with_it(campaign, rater, api):
    """Idempotency: a judgment stored while the campaign was open is returned, not refused."""
    item = queue.next_assignment(rater, campaign)
    first = api_post(api, "rate-assignment-submit", item.key, {"preference": -1})
    assert first.status_code == 200
    set_state(campaign, Campaign.State.CLOSED)
    again = api_post(api, "rate-assignment-submit", item.key, {"preference": -1})
    assert again.status_code == 200 and again.json()["created_at"] == first.json()["created_at"]
    assert Judgment.objects.count() == 1


@pytest.mark.parametrize("state", [Campaign.State.PAUSED, Campaign.State.CLOSED])
@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "plain"])
def test_page_submit_on_a_campaign_that_is_not_open_is_409_and_says_so(
    campaign, rater, page, state, htmx
):
    item = queue.next_assignment(rater, campaign)
    set_state(campaign, state)
    url = reverse("annotation:submit", args=[item.key])
    answer = page.post(url, {"preference": "2"}, **(HTMX if htmx else {}))
    assert answer.status_code == 409
    html = answer.content.decode()
    assert "This campaign is not open" in html and "data-closed" in html
    assert f"(it is {state}), so your answer was not saved." in html
    assert 'id="rating-form"' not in html
    assert nothing_stored(item)


@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "plain"])
def test_page_skip_on_a_closed_campaign_is_409(campaign, rater, page, htmx):
    item = queue.next_assignment(rater, campaign)
    set_state(campaign, Campaign.State.CLOSED)
    url = reverse("annotation:skip", args=[item.key])
    answer = page.post(url, {"skip_reason": "other"}, **(HTMX if htmx else {}))
    assert answer.status_code == 409
    html = answer.content.decode()
    assert "data-closed" in html and "so the skip was not saved" in html
    assert nothing_stored(item)


# ---------------------------------------------------------------- scenario text (11.5)


def test_a_judgment_records_the_revision_and_text_it_was_made_on(campaign, rater, researcher):
    item = queue.next_assignment(rater, campaign)
    scenario = item.comparison.scenario
    newest = scenario.revisions.order_by("-number").first()
    judgment = queue.submit(rater, item.key, queue.Submission(screen_preference=1))
    judgment.refresh_from_db()
    assert judgment.scenario_revision == newest.number
    assert judgment.scenario_hash == scenario.content_hash
    assert len(judgment.scenario_hash) == 64


def test_a_state_only_revision_after_hand_out_does_not_move_the_recorded_revision(
    campaign, rater, researcher
):
    item = queue.next_assignment(rater, campaign)
    scenario = Scenario.objects.get(pk=item.comparison.scenario_id)
    shown = scenario.revisions.order_by("-number").first().number
    services.transition(scenario, researcher, "request_changes", "tone")  # draft, same text
    services.transition(scenario, researcher, "submit")
    services.transition(scenario, researcher, "approve")
    judgment = queue.submit(rater, item.key, queue.Submission(screen_preference=1))
    assert judgment.scenario_revision == shown  # the text shown, unchanged since
    assert judgment.scenario_hash == scenario.content_hash


def edit(scenario, author, **changes):
    scenario = Scenario.objects.get(pk=scenario.pk)
    before = services.snapshot(scenario)
    for name, value in changes.items():
        setattr(scenario, name, value)
    return services.update_scenario(scenario, author, before)


@pytest.mark.parametrize("reapprove", [False, True], ids=["in-review", "re-approved"])
def test_an_item_whose_scenario_was_edited_after_hand_out_is_refused(
    campaign, rater, api, researcher, reapprove
):
    item = queue.next_assignment(rater, campaign)
    edit(item.comparison.scenario, researcher, user_message="A different message altogether")
    if reapprove:  # even approved again: the annotator may have read the earlier text
        services.transition(item.comparison.scenario, researcher, "approve")
    answer = api_post(api, "rate-assignment-submit", item.key, {"preference": 1})
    assert answer.status_code == 409
    assert "changed or withdrawn for review" in answer.json()["detail"]
    assert not Judgment.objects.exists()
    item.refresh_from_db()
    assert item.state == Assignment.State.REJECTED


def test_an_open_item_whose_scenario_changed_is_not_shown_again(campaign, rater, researcher):
    item = queue.next_assignment(rater, campaign)
    edited = item.comparison.scenario
    edit(edited, researcher, user_message="Rewritten while the item was open")
    following = queue.next_assignment(rater, campaign)
    assert following is not None and following.pk != item.pk
    assert following.comparison.scenario_id != edited.pk  # in review: not handed out
    item.refresh_from_db()
    assert item.state == Assignment.State.REJECTED
    # The page shows the next item, not the edited text.
    assert Revision.objects.filter(scenario=edited, note=services.BACK_TO_REVIEW_NOTE).exists()
