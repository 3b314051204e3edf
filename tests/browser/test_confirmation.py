"""Destructive campaign actions ask first and look dangerous (issue 15 point 7): with scripts
the browser's own dialog asks (no extra page); without them the server's confirmation page."""

import re

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from annotation.models import Campaign
from tests.annotation import factories
from tests.browser.conftest import TIMEOUT_MS
from tests.conftest import PASSWORD

DANGER = "rgb(179, 38, 30)"  # var(--bad)


@pytest.fixture
def campaign(researcher, roles, django_user_model):
    raters = factories.annotators(django_user_model, 2)
    return factories.campaign(researcher, raters, n_scenarios=1)


def _state(campaign) -> str:
    campaign.refresh_from_db()
    return campaign.state


def test_close_asks_in_a_dialog_and_looks_dangerous(researcher_page, campaign):
    page = researcher_page
    detail = reverse("campaigns:detail", args=[campaign.pk])
    page.goto(detail)
    close = page.locator("#state-close")
    assert close.evaluate("b => getComputedStyle(b).backgroundColor") == DANGER
    export = page.get_by_role("link", name="Export CSV")
    assert export.evaluate("a => getComputedStyle(a).backgroundColor") != DANGER
    rebuild = page.locator("#rebuild")
    assert rebuild.evaluate("b => getComputedStyle(b).color") == DANGER

    asked = []

    def dismiss(dialog):
        asked.append((dialog.type, dialog.message))
        dialog.dismiss()

    page.once("dialog", dismiss)
    close.click()
    page.wait_for_timeout(300)  # a submit would navigate; nothing must happen
    assert asked and asked[0][0] == "confirm"
    assert asked[0][1].startswith(f"Close the campaign {campaign.name}?")
    assert "refused and not saved" in asked[0][1]
    assert page.url.endswith(detail) and _state(campaign) == Campaign.State.OPEN

    page.once("dialog", lambda dialog: dialog.accept())
    with page.expect_navigation():
        close.click()
    page.wait_for_url(re.compile(re.escape(detail) + "$"))  # no confirmation page between
    expect(page.locator("#campaign-state")).to_have_text("Closed")
    assert _state(campaign) == Campaign.State.CLOSED


def test_without_scripts_the_server_asks_on_its_own_page(
    browser, live_server, researcher, campaign
):
    context = browser.new_context(base_url=live_server.url, java_script_enabled=False)
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    try:
        page.goto("/login/")
        page.get_by_label("Username").fill(researcher.username)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Log in").click()
        page.goto(reverse("campaigns:detail", args=[campaign.pk]))
        page.locator("#state-close").click()
        expect(page.get_by_role("heading", level=1)).to_contain_text("Are you sure?")
        assert _state(campaign) == Campaign.State.OPEN
        confirm = page.get_by_role("button", name="Close the campaign")
        assert confirm.evaluate("b => getComputedStyle(b).backgroundColor") == DANGER
        page.get_by_role("link", name="Cancel").click()
        assert _state(campaign) == Campaign.State.OPEN
        page.locator("#state-close").click()
        page.get_by_role("button", name="Close the campaign").click()
        expect(page.locator("#campaign-state")).to_have_text("Closed")
        assert _state(campaign) == Campaign.State.CLOSED
    finally:
        context.close()
