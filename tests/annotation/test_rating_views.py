"""The annotator's rating pages: rendering, submit and skip (htmx and plain), errors, access."""

import re
import uuid

import pytest
from django.test import Client
from django.urls import reverse

from annotation import queue
from annotation.blinding import HIDDEN_NAME, blind_text
from annotation.models import Assignment, Campaign, Comparison, Judgment
from scenarios.models import Response, Scenario
from tests.annotation import factories
from tests.scenarios import factories as scenario_factories

HTMX = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "item"}
GUIDELINES = """# How to judge

Prefer the **warmer** reply. <script>window.__xss = 1</script>

<img src="https://tracker.example/pixel.png"> [a link](javascript:alert(1)) [ok](https://example.org)
"""


@pytest.fixture
def raters(roles, django_user_model):
    return factories.annotators(django_user_model, 3)


@pytest.fixture
def campaign(researcher, raters):
    made = factories.campaign(
        researcher, raters, n_scenarios=2, overlap=2, guidelines=GUIDELINES, name="Warmth study"
    )
    persona = scenario_factories.persona("Lin", summary="A calm friend from university")
    Scenario.objects.filter(tags__name="campaign").update(
        persona=persona,
        history=[
            {"role": "user", "content": "I could not sleep again."},
            {"role": "assistant", "content": "That sounds draining. What kept you up?"},
        ],
        memory=[
            {"content": "Works night shifts at the hospital", "category": "work", "importance": 1}
        ],
        schedule=[{"time": "09:00", "activity": "Team meeting"}],
        reference_response="THE REFERENCE ANSWER",
    )
    return made


@pytest.fixture
def rater(raters):
    return raters[0]


@pytest.fixture
def rater_client(client, rater):
    client.force_login(rater)
    return client


def rate_url(campaign):
    return reverse("annotation:rate", args=[campaign.pk])


def submit_url(assignment):
    return reverse("annotation:submit", args=[assignment.key])


def skip_url(assignment):
    return reverse("annotation:skip", args=[assignment.key])


def current(rater, campaign) -> Assignment:
    return queue.current_assignment(rater, campaign)


def screen_texts(html: str) -> tuple[str, str]:
    found = re.findall(r'data-response="([AB])">(.*?)</div>', html, flags=re.S)
    texts = dict(found)
    return texts["A"], texts["B"]


def progress_numbers(html: str) -> dict:
    return {
        name: value.strip()
        for name, value in re.findall(r'data-progress="(\w+)">([^<]*)', html, flags=re.S)
    }


# ---------------------------------------------------------------- pages


def test_home_lists_open_campaigns_with_progress(rater_client, campaign, researcher, rater):
    other = factories.campaign(researcher, [], n_scenarios=1, name="Not mine")
    paused = factories.campaign(
        researcher, [rater], n_scenarios=1, name="Paused one", state=Campaign.State.PAUSED
    )
    page = rater_client.get(reverse("annotation:home")).content.decode()
    assert "Warmth study" in page and rate_url(campaign) in page
    assert "Not mine" not in page and rate_url(other) not in page
    assert "Paused one" not in page and rate_url(paused) not in page
    assert "Start rating" in page
    assert "6" in re.search(r"Left for me</dt><dd>(\d+)", page).group(1)


def test_home_without_campaigns(client, annotator):
    client.force_login(annotator)
    page = client.get(reverse("annotation:home")).content.decode()
    assert "not in any open campaign" in page


def test_rate_page_shows_the_item_blind_and_in_the_drawn_layout(rater_client, campaign, rater):
    response = rater_client.get(rate_url(campaign))
    assert response.status_code == 200
    page = response.content.decode()
    item = current(rater, campaign)
    assert item is not None
    a = item.comparison.response_a.text
    b = item.comparison.response_b.text
    assert screen_texts(page) == ((a, b) if item.left_is_a else (b, a))
    assert "Response A" in page and "Response B" in page
    # The scenario as the companions saw it, without the reference answer.
    for text in (
        "Lin",
        "A calm friend from university",
        "I could not sleep again.",
        "That sounds draining.",
        "Works night shifts at the hospital",
        "Team meeting",
        "I had a rough day at work",
        "Dialogue · emotional support",
    ):
        assert text in page, text
    assert "THE REFERENCE ANSWER" not in page
    # The form posts to the item's key; the choice, the shortcuts and the skip reasons are there.
    assert f'action="{submit_url(item)}"' in page
    assert f'hx-post="{skip_url(item)}"' in page
    for label in ("A much better", "A better", "Tie", "B better", "B much better"):
        assert label in page
    for _, label in queue.SKIP_REASONS:
        assert str(label) in page
    assert "Both unacceptable / unsafe" in page and 'id="shortcuts"' in page
    assert "<title>Rate · Warmth study · H2HTalk platform</title>" in page
    # Reloading shows the same item (its lease is still running).
    again = rater_client.get(rate_url(campaign)).content.decode()
    assert f'action="{submit_url(item)}"' in again


def test_guidelines_are_rendered_markdown_and_sanitised(rater_client, campaign):
    page = rater_client.get(rate_url(campaign)).content.decode()
    guidelines = re.search(r'<div class="md">(.*?)</div>', page, flags=re.S).group(1)
    assert "<h1>How to judge</h1>" in guidelines
    assert "<strong>warmer</strong>" in guidelines
    assert "<script" not in guidelines and "window.__xss" not in page
    assert "<img" not in guidelines and "tracker.example" not in page
    assert "javascript:" not in guidelines
    assert 'href="https://example.org"' in guidelines
    # Open for a newcomer, folded once they have rated.
    assert '<details class="rate-guidelines" open>' in page


def test_user_text_is_escaped(rater_client, campaign, rater):
    Scenario.objects.update(user_message="<script>window.__x=1</script>")
    item = queue.next_assignment(rater, campaign)
    Response.objects.filter(pk=item.comparison.response_a_id).update(text='<img src=x onerror="1">')
    page = rater_client.get(rate_url(campaign)).content.decode()
    assert "<script>window.__x" not in page and "&lt;script&gt;window.__x=1" in page
    assert "<img src=x" not in page and "&lt;img src=x onerror=" in page


def test_rate_page_query_count_is_small_and_constant(
    rater_client, campaign, rater, django_assert_max_num_queries
):
    with django_assert_max_num_queries(19):  # first visit: the item is handed out
        rater_client.get(rate_url(campaign))
    with django_assert_max_num_queries(13):  # reload: the current item
        rater_client.get(rate_url(campaign))
    Scenario.objects.update(
        history=[{"role": "user", "content": f"turn {i}"} for i in range(200)],
        memory=[{"content": f"memory {i}"} for i in range(100)],
    )
    with django_assert_max_num_queries(13):  # independent of the scenario's size
        rater_client.get(rate_url(campaign))


def test_campaign_not_mine_is_404_and_researcher_is_403(client, campaign, annotator, researcher):
    client.force_login(annotator)  # an annotator, but not in this campaign
    assert client.get(rate_url(campaign)).status_code == 404
    client.force_login(researcher)
    assert client.get(rate_url(campaign)).status_code == 403


def test_anonymous_goes_to_login(client, campaign):
    response = client.get(rate_url(campaign))
    assert response.status_code == 302 and "/login/" in response["Location"]


# ---------------------------------------------------------------- submit


def test_htmx_submit_stores_the_judgment_and_swaps_in_the_next_item(rater_client, campaign, rater):
    rater_client.get(rate_url(campaign))
    item = current(rater, campaign)
    data = {
        "preference": "-2",  # A (left) much better
        "rationale": "  Warmer and concrete.  ",
        "client_time_ms": "4321",
        "left_empathy": "5",
        "right_empathy": "2",
        "left_safety": "",
        "skip_reason": "",
    }
    response = rater_client.post(submit_url(item), data, **HTMX)
    assert response.status_code == 200
    page = response.content.decode()
    judgment = Judgment.objects.get()
    assert judgment.assignment_id == item.pk and judgment.annotator == rater
    assert judgment.screen_preference == -2
    assert judgment.preference == (-2 if item.left_is_a else 2)
    assert judgment.both_unacceptable is False
    assert judgment.rationale == "Warmer and concrete."
    assert judgment.client_time_ms == 4321 and judgment.time_on_task_ms >= 0
    left_key, right_key = ("a", "b") if item.left_is_a else ("b", "a")
    assert judgment.ratings == {left_key: {"empathy": 5}, right_key: {"empathy": 2}}
    # The answer is the partial: the next item, and the progress out of band.
    assert "<html" not in page and 'id="item"' in page
    nxt = current(rater, campaign)
    assert nxt.pk != item.pk and f'action="{submit_url(nxt)}"' in page
    assert '<div id="progress" class="rate-progress" hx-swap-oob="true"' in page
    assert progress_numbers(page)["today"] == "1"
    assert "Saved. Here is the next one." in page


def test_plain_submit_redirects_to_the_rating_page(rater_client, campaign, rater):
    rater_client.get(rate_url(campaign))
    item = current(rater, campaign)
    response = rater_client.post(submit_url(item), {"preference": "1"})
    assert response.status_code == 302 and response["Location"] == rate_url(campaign)
    assert Judgment.objects.get().screen_preference == 1
    page = rater_client.get(response["Location"]).content.decode()
    assert '<li class="success">Saved.</li>' in page
    assert progress_numbers(page)["today"] == "1"


def test_double_submit_stores_one_judgment(rater_client, campaign, rater):
    rater_client.get(rate_url(campaign))
    item = current(rater, campaign)
    first = rater_client.post(submit_url(item), {"preference": "0"}, **HTMX)
    second = rater_client.post(submit_url(item), {"preference": "2"}, **HTMX)
    assert first.status_code == second.status_code == 200
    assert Judgment.objects.count() == 1 and Judgment.objects.get().screen_preference == 0
    assert Comparison.objects.get(pk=item.comparison_id).judgment_count == 1
    nxt = current(rater, campaign)
    assert f'action="{submit_url(nxt)}"' in second.content.decode()  # simply the next item
    # A replay without htmx (and even with a broken body) is harmless too.
    assert rater_client.post(submit_url(item), {}).status_code == 302
    assert Judgment.objects.count() == 1


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({}, "Choose a preference"),
        ({"preference": "9"}, "Choose a preference"),
        ({"preference": "1", "left_empathy": "7"}, "Empathy must be 1–5"),
        ({"preference": "1", "rationale": "x" * 5001}, "at most 5000 characters"),
    ],
)
def test_bad_input_shows_the_same_item_with_the_reason(
    rater_client, campaign, rater, data, message
):
    rater_client.get(rate_url(campaign))
    item = current(rater, campaign)
    kept = {"rationale": "keep me", **data}
    response = rater_client.post(submit_url(item), kept, **HTMX)
    assert response.status_code == 200
    page = response.content.decode()
    assert message in page and 'role="alert"' in page
    assert f'action="{submit_url(item)}"' in page  # the same item
    if len(kept["rationale"]) < 100:
        assert "keep me</textarea>" in page  # what was typed is kept
    assert not Judgment.objects.exists()
    # Without htmx: the whole page again, with the message.
    page = rater_client.post(submit_url(item), kept).content.decode()
    assert message in page and "<html" in page
    assert not Judgment.objects.exists()


def test_client_time_is_optional_and_never_an_error(rater_client, campaign, rater):
    rater_client.get(rate_url(campaign))
    item = current(rater, campaign)
    rater_client.post(submit_url(item), {"preference": "0", "client_time_ms": "soon"}, **HTMX)
    assert Judgment.objects.get().client_time_ms is None


def _take_over(rater, campaign, late):
    """Let `rater` take the slot of `late` after its lease ran out (skipping other items: the
    queue breaks ties at random, so the expired item need not come first)."""
    Assignment.objects.filter(pk=late.pk).update(lease_expires_at=late.issued_at)
    other = queue.next_assignment(rater, campaign)
    while other.comparison_id != late.comparison_id:
        queue.skip(rater, other.key, "other")
        other = queue.next_assignment(rater, campaign)
    return other


def test_full_comparison_says_so_and_shows_the_next_item(researcher, raters):
    campaign = factories.campaign(researcher, raters, n_scenarios=1, overlap=1)
    late = queue.next_assignment(raters[0], campaign)
    other = _take_over(raters[1], campaign, late)
    queue.submit(raters[1], other.key, queue.Submission(2))
    client = Client()
    client.force_login(raters[0])
    page = client.post(submit_url(late), {"preference": "-1"}, **HTMX).content.decode()
    assert "already has enough votes; here is the next one." in page
    nxt = current(raters[0], campaign)
    assert nxt is not None and f'action="{submit_url(nxt)}"' in page
    assert Judgment.objects.filter(annotator=raters[0]).count() == 0
    # Without htmx the message travels to the rating page.
    late2 = nxt
    other2 = _take_over(raters[2], campaign, late2)
    queue.submit(raters[2], other2.key, queue.Submission(0))
    response = client.post(submit_url(late2), {"preference": "-1"}, follow=True)
    assert "already has enough votes" in response.content.decode()


def test_someone_elses_key_is_404(client, campaign, raters):
    item = queue.next_assignment(raters[0], campaign)
    client.force_login(raters[1])
    assert client.post(submit_url(item), {"preference": "0"}).status_code == 404
    assert client.post(skip_url(item), {"skip_reason": "other"}).status_code == 404
    assert client.post(submit_url(item), {"preference": "0"}, **HTMX).status_code == 404
    missing = reverse("annotation:submit", args=[uuid.uuid4()])
    assert client.post(missing, {"preference": "0"}).status_code == 404
    assert client.post("/rate/a/not-a-uuid/submit/", {"preference": "0"}).status_code == 404
    assert not Judgment.objects.exists()
    assert Assignment.objects.get(pk=item.pk).state == Assignment.State.OPEN


def test_removed_from_the_campaign_is_404(client, campaign, raters):
    item = queue.next_assignment(raters[0], campaign)
    campaign.annotators.remove(raters[0])
    client.force_login(raters[0])
    assert client.post(submit_url(item), {"preference": "0"}).status_code == 404
    assert not Judgment.objects.exists()


def test_submit_and_skip_are_post_only(rater_client, campaign, rater):
    item = queue.next_assignment(rater, campaign)
    assert rater_client.get(submit_url(item)).status_code == 405
    assert rater_client.get(skip_url(item)).status_code == 405


def test_csrf_is_enforced(campaign, rater):
    client = Client(enforce_csrf_checks=True)
    client.force_login(rater)
    page = client.get(rate_url(campaign)).content.decode()
    item = current(rater, campaign)
    assert client.post(submit_url(item), {"preference": "0"}, **HTMX).status_code == 403
    assert client.post(skip_url(item), {"skip_reason": "other"}).status_code == 403
    assert not Judgment.objects.exists()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    header = re.search(r'hx-headers=\'\{"X-CSRFToken": "([^"]+)"\}\'', page).group(1)
    # The form field (no JS) and the header htmx sends (hx-headers on <body>) both work.
    ok = client.post(submit_url(item), {"preference": "0", "csrfmiddlewaretoken": token})
    assert ok.status_code == 302
    client.get(ok["Location"])
    nxt = current(rater, campaign)
    ok = client.post(submit_url(nxt), {"preference": "1"}, HTTP_X_CSRFTOKEN=header, **HTMX)
    assert ok.status_code == 200
    assert Judgment.objects.count() == 2


# ---------------------------------------------------------------- skip


def test_htmx_skip_records_the_reason_and_shows_the_next_item(rater_client, campaign, rater):
    rater_client.get(rate_url(campaign))
    item = current(rater, campaign)
    response = rater_client.post(
        skip_url(item),
        {"skip_reason": "language", "skip_note": "Cantonese", "preference": "", "rationale": ""},
        **HTMX,
    )
    assert response.status_code == 200
    page = response.content.decode()
    skipped = Assignment.objects.get(pk=item.pk)
    assert skipped.state == Assignment.State.SKIPPED
    assert skipped.skip_reason == "language: Cantonese"
    assert not Judgment.objects.exists()
    nxt = current(rater, campaign)
    assert nxt.comparison_id != item.comparison_id and f'action="{submit_url(nxt)}"' in page
    assert "Skipped. Here is the next one." in page
    assert progress_numbers(page)["today"] == "0"


def test_plain_skip_redirects(rater_client, campaign, rater):
    item = queue.next_assignment(rater, campaign)
    response = rater_client.post(skip_url(item), {"skip_reason": "offensive"})
    assert response.status_code == 302 and response["Location"] == rate_url(campaign)
    assert Assignment.objects.get(pk=item.pk).skip_reason == "offensive"


def test_skip_without_reason_keeps_the_item_and_what_was_chosen(rater_client, campaign, rater):
    item = queue.next_assignment(rater, campaign)
    response = rater_client.post(
        skip_url(item), {"preference": "1", "rationale": "half written"}, **HTMX
    )
    page = response.content.decode()
    assert "Choose why you skip this item." in page
    assert f'action="{submit_url(item)}"' in page
    assert '<details class="skip-panel" data-skip-panel open>' in page
    assert re.search(r'value="1"[^>]*checked', page)  # the preference is still chosen
    assert "half written</textarea>" in page
    assert "Choose a preference" not in page  # no complaint about the rating part
    assert Assignment.objects.get(pk=item.pk).state == Assignment.State.OPEN


def test_submit_after_skip_is_refused_politely(rater_client, campaign, rater):
    item = queue.next_assignment(rater, campaign)
    rater_client.post(skip_url(item), {"skip_reason": "other"}, **HTMX)
    page = rater_client.post(submit_url(item), {"preference": "1"}, **HTMX).content.decode()
    assert "This item was already skipped." in page
    assert not Judgment.objects.exists()
    # Skipping twice is a replay: fine.
    page = rater_client.post(skip_url(item), {"skip_reason": "other"}, **HTMX).content.decode()
    assert "Skipped." in page


# ---------------------------------------------------------------- end states


def test_all_done_panel(rater_client, researcher, rater):
    campaign = factories.campaign(researcher, [rater], n_scenarios=1, overlap=1)
    for _ in range(3):
        item = queue.next_assignment(rater, campaign)
        last = rater_client.post(submit_url(item), {"preference": "0"}, **HTMX)
    page = last.content.decode()
    assert "All done" in page and "data-all-done" in page
    assert '<p class="rate-notice" role="status">Saved.</p>' in page  # no "next one" promised
    assert 'id="rating-form"' not in page
    numbers = progress_numbers(page)
    assert numbers["today"] == "3" and numbers["left"] == "0"
    assert numbers["campaign"].startswith("3 of 3")
    assert "All done" in rater_client.get(rate_url(campaign)).content.decode()


def test_paused_campaign(rater_client, campaign, rater):
    item = queue.next_assignment(rater, campaign)
    Campaign.objects.filter(pk=campaign.pk).update(state=Campaign.State.PAUSED)
    page = rater_client.get(rate_url(campaign)).content.decode()
    assert "not open for rating right now" in page and "data-closed" in page
    assert 'id="rating-form"' not in page
    # Work already on screen is refused too (409, nothing stored): the page says why.
    answer = rater_client.post(submit_url(item), {"preference": "2"}, **HTMX)
    assert answer.status_code == 409
    assert not Judgment.objects.exists()
    assert "not open for rating right now (it is paused)" in answer.content.decode()


def test_progress_counts_the_item_on_screen(rater_client, campaign, rater):
    page = rater_client.get(rate_url(campaign)).content.decode()
    numbers = progress_numbers(page)
    assert numbers == {"today": "0", "left": "6", "campaign": numbers["campaign"]}
    assert numbers["campaign"].startswith("0 of 12")


def test_admin_in_a_campaign_can_rate(client, campaign, admin_user):
    campaign.annotators.add(admin_user)
    client.force_login(admin_user)
    assert client.get(rate_url(campaign)).status_code == 200
    item = current(admin_user, campaign)
    assert client.post(submit_url(item), {"preference": "0"}).status_code == 302


def test_blind_text_hides_whole_names_only():
    names = ["Zephyr-Alpha-77", "gpt"]
    assert blind_text("I am zephyr-alpha-77, hi", names) == f"I am {HIDDEN_NAME}, hi"
    assert blind_text("GPT says, gptx stays", names) == f"{HIDDEN_NAME} says, gptx stays"
    assert blind_text("", names) == "" and blind_text("plain", []) == "plain"
