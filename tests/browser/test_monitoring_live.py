"""Issue 23 point 4 in Chromium: the campaign page refreshes its numbers while people rate
(htmx polling of its live part, only while the tab is visible), and after an exclusion it shows
the judgments that count, the excluded ones apart."""

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from annotation import campaign_views, exclusions, queue
from tests.annotation import factories

LIVE = "/live/"


@pytest.fixture
def raters(roles, django_user_model):
    return factories.annotators(django_user_model, 3)


@pytest.fixture
def campaign(researcher, raters, monkeypatch):
    monkeypatch.setattr(campaign_views, "POLL_SECONDS", 1)
    return factories.campaign(researcher, raters, n_scenarios=2, overlap=2, name="Live study")


def rate(user, campaign, n):
    for _ in range(n):
        item = queue.next_assignment(user, campaign)
        queue.submit(user, item.key, queue.Submission(1))


def test_the_page_follows_the_rating_and_the_exclusion(page, log_in, researcher, raters, campaign):
    bad, good, _ = raters
    log_in(researcher)
    page.goto(reverse("campaigns:detail", args=[campaign.pk]))
    text = page.locator("#progress-text")
    expect(text).to_have_text("0 / 12 judgments (0.0%)")
    rate(bad, campaign, 6)
    rate(good, campaign, 3)
    # No reload: the live part is fetched again within a few seconds.
    expect(text).to_have_text("9 / 12 judgments (75.0%)", timeout=5_000)
    expect(page.locator("#n-complete")).to_have_text("3")
    expect(page.locator("#annotator-rater0 .judgments")).to_have_text("6")

    exclusions.exclude(campaign, [bad], "always the same answer", by=researcher)
    expect(text).to_have_text("3 / 12 judgments (25.0%)", timeout=5_000)
    expect(page.locator("#n-complete")).to_have_text("0")
    expect(page.locator("#n-excluded")).to_have_text("6")
    expect(page.locator("#annotator-rater0")).to_contain_text("excluded")
    expect(page.locator("#annotator-all td").first).to_have_text("3")  # the counted ones


def test_polling_stops_while_the_tab_is_hidden(page, log_in, researcher, raters, campaign):
    log_in(researcher)
    polls = []
    page.on("request", lambda request: polls.append(request.url) if LIVE in request.url else None)
    page.goto(reverse("campaigns:detail", args=[campaign.pk]))
    live = page.locator("#live")
    expect(live).to_have_attribute(
        "hx-trigger", "every 1s [document.visibilityState === 'visible']"
    )
    page.wait_for_timeout(2_500)
    assert len(polls) >= 2, polls  # visible: polled every second
    page.evaluate(
        """() => {
        Object.defineProperty(document, "visibilityState", {value: "hidden", configurable: true});
        document.dispatchEvent(new Event("visibilitychange"));
    }"""
    )
    page.wait_for_timeout(300)  # a request already on its way may still arrive
    hidden_from = len(polls)
    rate(raters[0], campaign, 2)
    page.wait_for_timeout(3_000)
    assert len(polls) == hidden_from, "polled while the tab was hidden"
    expect(page.locator("#progress-text")).to_have_text("0 / 12 judgments (0.0%)")
    page.evaluate(
        """() => {
        Object.defineProperty(document, "visibilityState", {value: "visible", configurable: true});
        document.dispatchEvent(new Event("visibilitychange"));
    }"""
    )
    expect(page.locator("#progress-text")).to_have_text("2 / 12 judgments (16.7%)", timeout=5_000)


def test_a_closed_campaign_is_not_polled(page, log_in, researcher, campaign):
    campaign.state = "closed"
    campaign.save()
    log_in(researcher)
    page.goto(reverse("campaigns:detail", args=[campaign.pk]))
    expect(page.locator("#live")).not_to_have_attribute(
        "hx-trigger", "every 1s [document.visibilityState === 'visible']"
    )
    assert page.locator("#live").get_attribute("hx-get") is None
