"""An annotator rates in a real Chromium, by keyboard only, without a page reload."""

import re

import pytest
from playwright.sync_api import expect

from annotation.models import Assignment, Campaign, Judgment
from scenarios.models import Scenario
from tests.annotation import factories
from tests.browser.conftest import rating_keys_ready
from tests.scenarios import factories as scenario_factories

# Key -> (label of the radio, screen preference stored).
KEYS = {
    "1": ("A much better", -2),
    "2": ("A better", -1),
    "3": ("Tie", 0),
    "4": ("B better", 1),
    "5": ("B much better", 2),
}
KEY_RE = re.compile(r"/rate/a/([0-9a-f-]{36})/submit/$")


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
        name="Warmth study",
        guidelines="Prefer the **warmer** reply that still respects boundaries.",
    )
    persona = scenario_factories.persona("Lin", summary="A calm friend from university")
    Scenario.objects.filter(tags__name="campaign").update(
        persona=persona,
        history=[
            {"role": "user", "content": "I could not sleep again."},
            {"role": "assistant", "content": "That sounds draining. What kept you up?"},
        ],
        memory=[{"content": "Works night shifts", "category": "work", "importance": 1}],
        schedule=[{"time": "09:00", "activity": "Team meeting"}],
    )
    return made


def mark_page(page):
    page.evaluate("window.__marker = 1")


def assert_same_document(page):
    assert page.evaluate("window.__marker") == 1, "the page was reloaded instead of swapped"


def item_key(page) -> str:
    action = page.locator("#rating-form").get_attribute("action")
    return KEY_RE.search(action).group(1)


def progress(page) -> dict:
    return {
        name: page.locator(f'[data-progress="{name}"]').inner_text().strip()
        for name in ("today", "left", "campaign")
    }


def wait_for_new_item(page, old_key):
    expect(page.locator("#rating-form")).not_to_have_attribute(
        "action", re.compile(re.escape(old_key))
    )


def test_rate_five_and_skip_one_by_keyboard(page, log_in, rater, campaign):
    log_in(rater)
    expect(page).to_have_url(re.compile(r"/rate/$"))
    page.get_by_role("link", name="Start rating").click()
    expect(page).to_have_url(re.compile(rf"/rate/{campaign.pk}/$"))
    expect(page).to_have_title("Rate · Warmth study · H2HTalk platform")
    expect(page.locator(".rate-guidelines")).to_contain_text("warmer")
    expect(page.get_by_role("heading", name="Response A")).to_be_visible()
    expect(page.get_by_role("heading", name="Response B")).to_be_visible()
    assert progress(page) == {"today": "0", "left": "9", "campaign": "0 of 27 (0%)"}
    mark_page(page)

    submit = page.locator("[data-submit]")
    expect(submit).to_be_disabled()  # nothing chosen yet
    rating_keys_ready(page)
    page.keyboard.press("Enter")
    expect(page.locator("[data-hint]")).to_have_text("Choose a preference first (keys 1–5).")
    assert not Judgment.objects.exists()

    # Typing in the rationale does not trigger shortcuts.
    page.keyboard.press("r")
    expect(page.locator("textarea[name=rationale]")).to_be_focused()
    page.keyboard.type("1 s u 5")
    expect(page.locator("textarea[name=rationale]")).to_have_value("1 s u 5")
    expect(page.locator('input[name="preference"]:checked')).to_have_count(0)
    expect(page.locator("[data-skip-panel]")).not_to_have_attribute("open", "")
    for _ in range(7):
        page.keyboard.press("Backspace")  # the submission stays without a rationale
    expect(page.locator("textarea[name=rationale]")).to_have_value("")
    page.keyboard.press("Escape")  # leaves the text box: shortcuts work again
    expect(page.locator("#item")).to_be_focused()

    shown = []  # (key, left text, right text, screen preference, both unacceptable)
    plan = ["1", "2", "skip", "3", "4", "5", "u"]
    done = 0
    left = 9
    for step in plan:
        key = item_key(page)
        left_text = page.locator('[data-response="A"]').inner_text()
        right_text = page.locator('[data-response="B"]').inner_text()
        assert progress(page)["today"] == str(done) and progress(page)["left"] == str(left)
        if step == "skip":
            page.keyboard.press("s")
            expect(page.locator("[data-skip-panel]")).to_have_attribute("open", "")
            page.keyboard.press("2")
            expect(page.get_by_label("I do not read this language well enough")).to_be_checked()
            expect(page.locator('input[name="preference"]:checked')).to_have_count(0)
            page.keyboard.press("Enter")
            wait_for_new_item(page, key)
            expect(page.locator("#item [role=status]")).to_have_text(
                "Skipped. Here is the next one."
            )
            skipped_key = key
        elif step == "u":  # both unacceptable: its own outcome, instead of a preference
            page.keyboard.press("4")
            page.keyboard.press("u")
            expect(page.get_by_label("Both unacceptable / unsafe")).to_be_checked()
            expect(page.locator('input[name="preference"]:checked')).to_have_count(0)
            expect(submit).to_be_enabled()
            screen, unacceptable = 0, True
            page.keyboard.press("Enter")
        else:
            label, screen = KEYS[step]
            page.keyboard.press(step)
            expect(page.get_by_role("radio", name=label, exact=True)).to_be_checked()
            expect(submit).to_be_enabled()
            unacceptable = False
            page.keyboard.press("Enter")
            wait_for_new_item(page, key)
            expect(page.locator("#item [role=status]")).to_have_text("Saved. Here is the next one.")
            shown.append((key, left_text, right_text, screen, unacceptable))
            done += 1
        left -= 1
        expect(page.locator('[data-progress="today"]')).to_have_text(str(done))
        expect(page.locator('[data-progress="left"]')).to_have_text(str(left))
        expect(page.locator('input[name="preference"]:checked')).to_have_count(0)
        expect(page.locator("#item")).to_be_focused()  # keys go on from here
        assert_same_document(page)

    expect(page.locator('[data-progress="campaign"]')).to_contain_text("6 of 27")

    # The database holds exactly those six judgments and the one skip.
    assert Judgment.objects.count() == 6
    skipped = Assignment.objects.get(state=Assignment.State.SKIPPED)
    assert str(skipped.key) == skipped_key and skipped.skip_reason == "language"
    for key, left_text, right_text, screen, unacceptable in shown:
        assignment = Assignment.objects.select_related(
            "comparison__response_a", "comparison__response_b", "judgment"
        ).get(key=key)
        a = assignment.comparison.response_a.text
        b = assignment.comparison.response_b.text
        assert {left_text, right_text} == {a, b}
        left_is_a = left_text == a
        assert assignment.left_is_a == left_is_a  # what was on screen is what was stored
        judgment = assignment.judgment
        assert judgment.screen_preference == screen
        assert judgment.preference == (screen if left_is_a else -screen)
        assert judgment.both_unacceptable is unacceptable
        assert judgment.rationale == ""
        assert judgment.client_time_ms is not None and judgment.client_time_ms > 0
    assert {j.screen_preference for j in Judgment.objects.all()} == {-2, -1, 0, 1, 2}


def test_shortcuts_overlay_and_skip_escape(page, log_in, rater, campaign):
    log_in(rater)
    page.goto(f"/rate/{campaign.pk}/")
    dialog = page.get_by_role("dialog", name="Keyboard shortcuts")
    expect(dialog).to_be_hidden()
    page.keyboard.press("?")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("A much better")
    page.keyboard.press("3")  # keys do nothing while the overlay is open
    expect(page.locator('input[name="preference"]:checked')).to_have_count(0)
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    page.get_by_role("button", name="Keyboard shortcuts").click()
    expect(dialog).to_be_visible()
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()

    # S opens the skip reasons, Esc closes them again, and nothing was skipped.
    page.keyboard.press("s")
    panel = page.locator("[data-skip-panel]")
    expect(panel).to_have_attribute("open", "")
    page.keyboard.press("Enter")  # no reason yet: refused with a hint
    expect(page.locator("[data-hint]")).to_have_text("Choose a reason first (1–5).")
    page.keyboard.press("Escape")
    expect(panel).not_to_have_attribute("open", "")
    assert not Assignment.objects.filter(state=Assignment.State.SKIPPED).exists()

    # D opens the detailed ratings; digits then set the focused row.
    page.keyboard.press("d")
    expect(page.locator("[data-ratings]")).to_have_attribute("open", "")
    page.keyboard.press("4")
    empathy_a = page.get_by_role("group", name="Empathy, Response A")
    expect(empathy_a.get_by_role("radio", name="4", exact=True)).to_be_checked()
    page.keyboard.press("Escape")
    page.keyboard.press("2")
    expect(page.get_by_role("radio", name="A better", exact=True)).to_be_checked()
    page.keyboard.press("Enter")
    expect(page.locator("#item [role=status]")).to_have_text("Saved. Here is the next one.")
    judgment = Judgment.objects.get()
    side = "a" if judgment.assignment.left_is_a else "b"
    assert judgment.ratings == {side: {"empathy": 4}}


def test_double_click_stores_one_judgment_and_disables_the_button(page, log_in, rater, campaign):
    log_in(rater)
    page.goto(f"/rate/{campaign.pk}/")
    posts = []
    page.on(
        "request",
        lambda request: posts.append(request.url) if request.method == "POST" else None,
    )
    page.locator("label.pref", has_text="Tie").click()
    key = item_key(page)
    page.locator("[data-submit]").dblclick()
    wait_for_new_item(page, key)
    expect(page.locator('[data-progress="today"]')).to_have_text("1")
    assert len([url for url in posts if "/submit/" in url]) == 1
    assert Judgment.objects.count() == 1


def test_works_without_javascript(browser, live_server, rater, campaign):
    context = browser.new_context(base_url=live_server.url, java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto("/login/")
        page.get_by_label("Username").fill(rater.username)
        page.get_by_label("Password").fill("correct horse battery staple")
        page.get_by_role("button", name="Log in").click()
        page.goto(f"/rate/{campaign.pk}/")
        page.locator("label.pref", has_text="B better").first.click()
        page.get_by_role("button", name="Submit").click()
        expect(page).to_have_url(re.compile(rf"/rate/{campaign.pk}/$"))
        expect(page.locator(".messages")).to_contain_text("Saved.")
        expect(page.locator('[data-progress="today"]')).to_have_text("1")
        assert Judgment.objects.get().screen_preference == 1
        page.locator(".skip-panel summary").click()
        page.get_by_label("Something is broken or missing").check()
        page.get_by_role("button", name="Skip this item").click()
        expect(page.locator(".messages")).to_contain_text("Skipped.")
        assert Assignment.objects.get(state=Assignment.State.SKIPPED).skip_reason == "broken"
    finally:
        context.close()


def test_logged_out_meanwhile_goes_to_the_login_page(page, log_in, rater, campaign):
    log_in(rater)
    page.goto(f"/rate/{campaign.pk}/")
    page.keyboard.press("3")
    page.context.clear_cookies(name="sessionid")  # the session ran out; the CSRF cookie did not
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(rf"/login/\?next=%2Frate%2F{campaign.pk}%2F$"))
    assert not Judgment.objects.exists()
    page.get_by_label("Username").fill(rater.username)
    page.get_by_label("Password").fill("correct horse battery staple")
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(re.compile(rf"/rate/{campaign.pk}/$"))
    expect(page.locator("#rating-form")).to_be_visible()  # the same item, still open


def test_a_campaign_closed_meanwhile_refuses_the_answer_and_says_so(
    page, log_in, rater, campaign, request
):
    """Issue 11.4: submitting after the researcher closed the campaign stores nothing; the 409
    answer replaces the item with the panel that says the campaign is not open."""
    log_in(rater)
    page.goto(f"/rate/{campaign.pk}/")
    mark_page(page)
    key = item_key(page)
    Campaign.objects.filter(pk=campaign.pk).update(state=Campaign.State.CLOSED)
    page.keyboard.press("3")
    page.keyboard.press("Enter")
    panel = page.locator("[data-closed]")
    expect(panel).to_be_visible()
    expect(panel).to_contain_text("This campaign is not open")
    expect(panel).to_contain_text("(it is closed), so your answer was not saved.")
    expect(page.locator("#rating-form")).to_have_count(0)
    assert_same_document(page)  # swapped by htmx, not reloaded
    assert not Judgment.objects.exists()
    assert Assignment.objects.get(key=key).state == Assignment.State.OPEN
    # The 409 is the expected answer here (the browser also logs it as a failed load).
    problems = request.node._browser_problems
    expected = [p for p in problems if "409" in p]
    assert any("HTTP 409: POST" in p and f"/rate/a/{key}/submit/" in p for p in expected)
    problems[:] = [p for p in problems if "409" not in p]
