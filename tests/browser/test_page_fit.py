"""Issue 23 point 5 in Chromium: pages fit 1440 px (long flags, many tags and skip reasons
wrap or scroll in their own box), the scenario list reads before its filters on a phone,
paging has numbers, first and last, multiple choices are ticked, the agreement page leads back
to its campaign, and no code or raw framework text shows."""

import re

import numpy as np
import pytest
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import expect

from annotation.models import Assignment
from scenarios.models import Persona, Scenario
from tests.annotation import factories
from tests.scenarios import factories as scenario_factories
from tests.simulators import save_votes, submitted_vote

DESKTOP = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}
TAGS = [f"release-tag-{n:02d}" for n in range(14)]


@pytest.fixture
def crowded(researcher, django_user_model):
    """A campaign with a rater flagged at 0.4 s per item and skips of every reason, and
    scenarios with many tags, every flag and a long persona name."""
    raters = factories.annotators(django_user_model, 4, prefix="careful-rater-with-a-long-name-")
    speedy = factories.annotators(django_user_model, 1, prefix="speedy")[0]
    campaign = factories.campaign(researcher, [*raters, speedy], n_scenarios=8, overlap=5)
    rng, now, votes = np.random.default_rng(2), timezone.now(), []
    for comparison in campaign.comparisons.order_by("pk"):
        for rater in [*raters, speedy]:
            ms = 400 if rater == speedy else int(rng.integers(20_000, 60_000))
            votes.append(
                submitted_vote(
                    comparison,
                    rater,
                    1 if rng.random() < 0.85 else -1,
                    now,
                    left_is_a=bool(rng.random() < 0.5),
                    client_time_ms=ms,
                    time_on_task_ms=ms + 250,
                )
            )
    save_votes(votes)
    extra = factories.campaign(researcher, [speedy], n_scenarios=5, overlap=1, name="skips")
    for comparison, code in zip(
        extra.comparisons.all()[:5],
        ["cannot_judge", "language", "offensive", "broken", "other"],
        strict=True,
    ):
        Assignment.objects.create(
            comparison=comparison,
            annotator=speedy,
            left_is_a=True,
            state="skipped",
            lease_expires_at=now,
            skip_reason=f"{code}: a note",
        )
    persona = Persona.objects.create(name="Wen " * 12, summary="A long-named persona")
    for n in range(60):
        scenario_factories.scenario(
            researcher,
            tags=TAGS,
            persona=persona,
            implicit_need=True,
            evolving_need=True,
            risk_level="high",
            state="draft",
            user_message=f"Message {n} " + "word " * 40,
        )
    campaign.with_skips = extra
    return campaign


def width(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth")


def test_pages_fit_1440_px(page, log_in, researcher, crowded):
    page.set_viewport_size(DESKTOP)
    log_in(researcher)
    for path in (
        reverse("scenarios:list") + "?state=draft",
        reverse("campaigns:detail", args=[crowded.pk]),
        reverse("scoring:agreement", args=[crowded.pk]),
    ):
        page.goto(path)
        assert width(page) <= DESKTOP["width"], f"{path}: {width(page)} px wide"
    page.goto(reverse("scenarios:list") + "?state=draft")
    message = page.locator("table.scenarios td.text").first.bounding_box()
    assert message["width"] >= 300, f"the message column is {message['width']} px"
    page.goto(reverse("campaigns:detail", args=[crowded.pk]))
    flag = page.locator("#annotators .flag.risk").first
    expect(flag).to_contain_text("fast")
    page.goto(reverse("campaigns:detail", args=[crowded.with_skips.pk]))
    skips = page.locator("#annotators tr", has_text="speedy").locator(".skips")
    expect(skips).to_contain_text("cannot judge")
    expect(skips).not_to_contain_text("cannot_judge")


def test_the_scenario_list_comes_before_its_filters_on_a_phone(page, log_in, researcher, crowded):
    page.set_viewport_size(PHONE)
    log_in(researcher)
    page.goto(reverse("scenarios:list") + "?state=draft")
    table = page.locator("table.scenarios").bounding_box()
    filters = page.locator("#filters").bounding_box()
    assert table["y"] + table["height"] <= filters["y"], (table, filters)
    assert width(page) <= PHONE["width"]
    page.get_by_role("link", name="Filters ↓").click()
    expect(page.locator("#filters")).to_be_in_viewport()


def test_paging_has_numbers_first_and_last(page, log_in, researcher, crowded):
    log_in(researcher)
    page.goto(reverse("scenarios:list") + "?state=draft&size=25")
    pager = page.locator("nav.pager")
    expect(pager.locator("[aria-current=page]")).to_have_text("1")
    expect(pager.get_by_role("link", name="2", exact=True)).to_be_visible()
    pager.get_by_role("link", name="Last »").click()
    expect(pager.locator("[aria-current=page]")).to_have_text("3")
    expect(page).to_have_url(re.compile(r"page=3"))
    pager.get_by_role("link", name="« First").click()
    expect(pager.locator("[aria-current=page]")).to_have_text("1")


def test_tags_are_ticked_not_ctrl_clicked(page, log_in, researcher, crowded):
    Scenario.objects.filter(state="draft").first().tags.add(
        *scenario_factories.scenario(researcher, tags=["rare-a"], state="draft").tags.all()
    )
    log_in(researcher)
    page.goto(reverse("scenarios:list") + "?state=draft")
    assert page.locator("#filters select[multiple]").count() == 0
    page.locator("#filters").get_by_label("rare-a").check()
    expect(page.locator("#result-count")).to_contain_text("2")
    page.goto(reverse("companions:responses"))
    assert page.locator("select[multiple]").count() == 0
    assert page.locator("#response-filters input[type=checkbox][name=companion]").count() >= 3


def test_the_agreement_page_leads_back_to_its_campaign(page, log_in, researcher, crowded):
    log_in(researcher)
    page.goto(reverse("scoring:agreement", args=[crowded.pk]))
    page.locator("#back-to-campaign").click()
    expect(page).to_have_url(
        re.compile(re.escape(reverse("campaigns:detail", args=[crowded.pk])) + "$")
    )
