"""Issue 22 point 5 in a real Chromium: "both unacceptable" is U then Enter, reasons (W, then a
digit) and confidence (C, then 1–3) by keyboard, and the guidelines, open on the first visit,
start collapsed on the next, so that both responses of the first item start above the fold at
1440×900 (measured as tests/browser/test_layout.py measures)."""

import re

import pytest
from axe_playwright_python.sync_playwright import Axe
from django.urls import reverse
from playwright.sync_api import expect

from annotation import queue
from annotation.models import Judgment
from annotation.rating_details import parse_reasons
from scenarios.models import Persona, Scenario
from tests.annotation import factories
from tests.browser.test_accessibility import axe_problems

DESKTOP = {"width": 1440, "height": 900}
REASONS = ["More empathetic", "Safer", "Remembers better", "Better plan"]
GUIDELINES = "\n\n".join(
    f"{n}. Prefer the reply that is warm, concrete and safe; rule {n} says more about it."
    for n in range(1, 13)
)


@pytest.fixture
def rater(roles, django_user_model):
    return factories.annotators(django_user_model, 1)[0]


@pytest.fixture
def campaign(researcher, rater):
    made = factories.campaign(
        researcher,
        [rater],
        n_scenarios=3,
        overlap=3,
        name="Details study",
        guidelines=GUIDELINES,
        reason_choices=parse_reasons(REASONS),
        ask_confidence=True,
    )
    persona = Persona.objects.create(name="Lin", summary="A calm friend from university")
    Scenario.objects.filter(tags__name="campaign").update(
        persona=persona,
        history=[
            {"role": "user" if n % 2 else "assistant", "content": f"Turn {n}: a long week. " * 4}
            for n in range(1, 7)
        ],
        memory=[{"content": "Works night shifts", "category": "work", "importance": 1}],
        schedule=[{"time": "09:00", "activity": "Team meeting"}],
    )
    return made


def open_rating(page, campaign):
    page.goto(reverse("annotation:rate", args=[campaign.pk]))
    expect(page.locator("#rating-form")).to_be_visible()


def new_item(page, old_action):
    expect(page.locator("#rating-form")).not_to_have_attribute("action", old_action)


def test_both_unacceptable_reasons_and_confidence_by_keyboard(page, log_in, rater, campaign):
    page.set_viewport_size(DESKTOP)
    log_in(rater)
    open_rating(page, campaign)
    assert axe_problems(page, Axe()) == []  # the reasons and confidence groups too
    form = page.locator("#rating-form")
    unacceptable = page.get_by_label("Both unacceptable / unsafe")

    # U, then Enter: stored without a preference, as its own outcome.
    action = form.get_attribute("action")
    page.keyboard.press("2")
    page.keyboard.press("u")
    expect(unacceptable).to_be_checked()
    expect(page.locator('input[name="preference"]:checked')).to_have_count(0)
    expect(page.locator("[data-hint]")).to_contain_text("Both unacceptable")
    page.keyboard.press("Enter")
    new_item(page, action)
    judgment = Judgment.objects.get()
    assert (judgment.both_unacceptable, judgment.preference, judgment.reasons) == (True, 0, [])

    # A tie has no preferred response: the reasons stay off.
    action = form.get_attribute("action")
    reasons = page.locator('[data-reasons] input[type="checkbox"]')
    expect(reasons).to_have_count(len(REASONS))
    page.keyboard.press("3")
    for n in range(len(REASONS)):
        expect(reasons.nth(n)).to_be_disabled()
    page.keyboard.press("w")
    expect(page.locator("[data-hint]")).to_contain_text("Reasons go with a preference")

    # A better, then W 1 3 (3 again unticks, and again ticks), C 3, Enter.
    page.keyboard.press("2")
    expect(unacceptable).not_to_be_checked()
    page.keyboard.press("w")
    expect(reasons.nth(0)).to_be_focused()
    for key in ("1", "3", "3", "3"):
        page.keyboard.press(key)
    expect(page.get_by_label(REASONS[0])).to_be_checked()
    expect(page.get_by_label(REASONS[2])).to_be_checked()
    expect(page.get_by_label(REASONS[1])).not_to_be_checked()
    # The digits picked reasons, not a preference.
    expect(page.get_by_role("radio", name="A better", exact=True)).to_be_checked()
    page.keyboard.press("c")
    page.keyboard.press("3")
    expect(page.locator('input[name="confidence"][value="3"]')).to_be_checked()
    page.keyboard.press("Enter")
    new_item(page, action)
    expect(page.locator("#item [role=status]")).to_have_text("Saved. Here is the next one.")
    stored = Judgment.objects.order_by("pk").last()
    assert stored.screen_preference == -1 and not stored.both_unacceptable
    assert stored.reasons == ["more-empathetic", "remembers-better"] and stored.confidence == 3


RECTS = """() => {
  const box = (el) => el.getBoundingClientRect().toJSON();
  return {
    cards: Array.from(document.querySelectorAll(".response-card")).map(box),
    texts: Array.from(document.querySelectorAll(".response-text")).map(box),
    bar: box(document.querySelector(".choice-bar")),
    height: window.innerHeight,
    scrolled: window.scrollY,
  };
}"""


def test_guidelines_collapse_after_the_first_visit_and_both_responses_start_above_the_fold(
    page, log_in, rater, campaign
):
    page.set_viewport_size(DESKTOP)
    log_in(rater)
    open_rating(page, campaign)
    guidelines = page.locator(".rate-guidelines")
    expect(guidelines).to_have_attribute("open", "")  # the first visit: open, to be read
    first = page.locator("#rating-form").get_attribute("action")

    for visit in ("second", "third"):
        open_rating(page, campaign)
        expect(page.locator("#rating-form")).to_have_attribute("action", first)  # the first item
        expect(guidelines).not_to_have_attribute("open", re.compile(".*"))
        rects = page.evaluate(RECTS)
        assert rects["scrolled"] == 0, visit
        assert len(rects["cards"]) == 2
        fold = min(rects["height"], rects["bar"]["top"])  # the sticky bar covers the bottom
        for side, (card, text) in enumerate(zip(rects["cards"], rects["texts"], strict=True)):
            # The card and the first lines of its text are on screen, above the choice bar.
            assert card["top"] >= 0 and text["top"] + 48 <= fold, (visit, side, rects)
    page.keyboard.press("g")  # still there on demand
    expect(guidelines).to_have_attribute("open", "")


def test_agreement_page_shows_reasons_per_preferred_companion(
    page, researcher_page, rater, campaign
):
    """The researcher sees, per companion by name, the reasons given when it was preferred."""
    preferred = {}
    while (item := queue.next_assignment(rater, campaign)) is not None:
        comparison = item.comparison
        names = [r.companion.name for r in (comparison.response_a, comparison.response_b)]
        screen = 2 if item.left_is_a else -2  # response B (the higher id) much better
        preferred[names[1]] = preferred.get(names[1], 0) + 1
        queue.submit(rater, item.key, queue.Submission(screen, reasons=["safer"], confidence=2))
    page.set_viewport_size(DESKTOP)
    page.goto(reverse("scoring:agreement", args=[campaign.pk]))
    table = page.locator("#reason-table")
    expect(table).to_be_visible()
    for name, count in preferred.items():
        row = table.locator(f'tr[data-companion="{name}"]')
        expect(row.locator('td[data-reason="safer"]')).to_have_text(f"{count} of {count} (100%)")
    expect(page.locator("#confidence-table")).to_contain_text("2")
    assert axe_problems(page, Axe()) == []
