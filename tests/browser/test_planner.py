"""The planner on the campaign page (tracker issue 21, point 5): the panel and the status line
arrive by htmx, the form plans in place, and the answer stays on the page."""

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from annotation.models import Campaign
from tests.annotation import factories


@pytest.fixture
def draft(researcher, roles, django_user_model):
    return factories.campaign(researcher, [], n_scenarios=1, state=Campaign.State.DRAFT)


def test_a_draft_campaign_plans_in_place(researcher_page, draft):
    page = researcher_page
    page.goto(reverse("campaigns:detail", args=[draft.pk]))
    expect(page.locator("#plan-status-line")).to_contain_text("not yet (no votes yet)")
    form = page.locator("#plan-form")
    expect(form).to_be_visible()  # open while a draft
    assert form.locator("#id_n_companions").input_value() == "3"
    page.get_by_label("Smallest Elo difference that matters (δ)").fill("80")
    page.get_by_label("Expected agreement: Krippendorff's α (A / tie / B)").fill("0.4")
    page.locator("#plan-submit").click()
    expect(page.locator("#plan-result")).to_contain_text("Latest plan:")
    assert page.url.endswith(reverse("campaigns:detail", args=[draft.pk]))  # no navigation
    page.reload()
    expect(page.locator("#plan-result")).to_contain_text("annotator-hours")
