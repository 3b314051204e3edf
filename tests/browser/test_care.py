"""Care for raters in a real Chromium: the content note before a risk item and "I'd rather not",
opting out from the rating page, the daily cap on high-risk items, the break prompt, and the
support text one click (or one key) away."""

import re

import pytest
from playwright.sync_api import expect

from annotation.models import Assignment, Campaign, Judgment
from tests.annotation import factories
from tests.annotation.test_care import with_levels
from tests.browser.test_chinese_interface import chinese
from tests.conftest import PASSWORD


@pytest.fixture
def rater(roles, django_user_model):
    return factories.annotators(django_user_model, 1)[0]


def risky_campaign(researcher, rater, levels, **fields) -> Campaign:
    """One scenario per level (three comparisons each), k = 1."""
    made = factories.campaign(
        researcher, [rater], n_scenarios=len(levels), overlap=1, name="Care study", **fields
    )
    made.by_level = with_levels(made, levels)
    return made


def open_rating(page, log_in, rater, campaign):
    log_in(rater)
    page.goto(f"/rate/{campaign.pk}/")
    expect(page.locator("#item")).to_be_visible()


def note(page):
    return page.locator("[data-content-note]")


def rate_by_keyboard(page) -> bool:
    """Answer the item on screen by keyboard (continuing past a content note); whether a note
    was shown. Waits for the next item (or the end)."""
    form = page.locator("#rating-form")
    noted = note(page).count() > 0
    if noted:
        expect(page.locator("[data-note-continue]")).to_be_focused()
        page.keyboard.press("Enter")
        expect(form).to_be_visible()
    key = form.get_attribute("action")
    page.keyboard.press("3")
    page.keyboard.press("Enter")
    expect(page.locator(f'#rating-form[action="{key}"]')).to_have_count(0)
    return noted


def rate_all(page) -> int:
    """Rate until all is done; the number of content notes shown."""
    notes = 0
    for _ in range(30):
        if page.locator("[data-all-done]").count():
            return notes
        notes += rate_by_keyboard(page)
    raise AssertionError("the queue never ran dry")


def test_content_note_comes_first_and_rather_not_passes_the_item_on(
    page, log_in, researcher, rater
):
    campaign = risky_campaign(researcher, rater, ["high"])
    open_rating(page, log_in, rater, campaign)
    expect(note(page)).to_be_visible()
    expect(note(page)).to_contain_text("self-harm")
    expect(page.locator("#rating-form")).to_be_hidden()
    page.keyboard.press("Escape")  # keys do nothing to an item behind its note
    page.locator("body").press("1")
    expect(page.locator('input[name="preference"]:checked')).to_have_count(0)
    first_key = re.search(
        r"/a/([0-9a-f-]{36})/", page.locator("#rating-form").get_attribute("action")
    ).group(1)
    # Continue: the item is shown, and can be rated by keyboard.
    page.locator("[data-note-continue]").click()
    expect(note(page)).to_have_count(0)
    expect(page.locator(".response-text").first).to_be_visible()
    page.keyboard.press("2")
    page.keyboard.press("Enter")
    expect(page.locator(".rate-notice")).to_contain_text("Saved")
    # The next one: "I'd rather not" from the note, without reading it.
    expect(note(page)).to_be_visible()
    second = page.locator("#rating-form").get_attribute("action")
    page.get_by_role("button", name="I'd rather not").click()
    expect(page.locator(".rate-notice")).to_contain_text("no questions asked")
    passed_on = Assignment.objects.get(key=re.search(r"/a/([0-9a-f-]{36})/", second).group(1))
    assert (passed_on.state, passed_on.skip_reason) == ("skipped", "rather_not")
    assert Judgment.objects.get(annotator=rater).assignment.key.hex == first_key.replace("-", "")
    # After continuing, "I'd rather not" is still in the skip panel.
    page.locator("[data-note-continue]").click()
    page.keyboard.press("s")
    page.locator("[data-skip-panel] [data-rather-not]").click()
    expect(page.locator("[data-all-done]")).to_be_visible()
    assert Assignment.objects.filter(annotator=rater, skip_reason="rather_not").count() == 2


def test_opting_out_from_the_rating_page_means_no_such_item_comes_again(
    page, log_in, researcher, rater
):
    campaign = risky_campaign(researcher, rater, ["none", "high", "medium"])
    open_rating(page, log_in, rater, campaign)
    page.get_by_role("link", name="Content settings").click()
    expect(page).to_have_url(re.compile(r"/rate/care/"))
    page.get_by_label(re.compile("High risk")).check()
    page.get_by_role("button", name="Save").click()
    expect(page).to_have_url(re.compile(rf"/rate/{campaign.pk}/"))
    expect(page.locator(".messages, [role=status], .message").first).to_contain_text("Saved")
    notes = rate_all(page)
    assert notes == 3  # the medium ones only
    judged = set(Judgment.objects.filter(annotator=rater).values_list("comparison_id", flat=True))
    assert not judged & campaign.by_level["high"]
    assert judged == campaign.by_level["none"] | campaign.by_level["medium"]
    # The settings page shows the choice again.
    page.goto("/rate/care/")
    expect(page.get_by_label(re.compile("High risk"))).to_be_checked()


def test_the_daily_cap_stops_high_risk_items(page, log_in, researcher, rater):
    campaign = risky_campaign(researcher, rater, ["high", "none", "high"], high_risk_daily_cap=2)
    open_rating(page, log_in, rater, campaign)
    assert rate_all(page) == 2  # of six high-risk comparisons
    assert Judgment.objects.filter(annotator=rater).count() == 3 + 2
    expect(page.locator("[data-all-done]")).to_be_visible()


def test_break_prompt_after_minutes_of_continuous_rating(page, log_in, researcher, rater):
    campaign = risky_campaign(researcher, rater, ["none", "none"], break_after_minutes=1)
    open_rating(page, log_in, rater, campaign)
    prompt = page.locator("[data-break-prompt]")
    streak = "() => JSON.parse(localStorage.getItem('h2htalk-rating-streak') || 'null')"
    page.wait_for_function(f"({streak})() !== null")
    last = page.evaluate(f"({streak})().last")
    rate_by_keyboard(page)
    # The next item's set-up has counted it (else it could overwrite the offset below).
    page.wait_for_function(f"({streak})().last > {last}")
    expect(prompt).to_be_hidden()  # under a minute so far
    # Two minutes ago, this browser's streak began (a time offset, no waiting).
    page.evaluate(
        """() => {
        const now = Date.now();
        localStorage.setItem("h2htalk-rating-streak", JSON.stringify({start: now - 120000, last: now}));
    }"""
    )
    rate_by_keyboard(page)
    expect(prompt).to_be_visible()
    expect(prompt).to_contain_text("over 1 minute")
    expect(prompt.get_by_role("link", name="Take a break")).to_be_visible()
    page.keyboard.press("3")  # keys do not rate behind the prompt
    expect(page.locator('input[name="preference"]:checked')).to_have_count(0)
    prompt.get_by_role("button", name="Continue rating").click()
    expect(prompt).to_be_hidden()
    rate_by_keyboard(page)  # goes on, and the streak starts again: no prompt
    expect(prompt).to_be_hidden()
    assert Judgment.objects.filter(annotator=rater).count() == 3


def test_support_text_is_one_click_or_key_away(page, log_in, researcher, rater):
    campaign = risky_campaign(researcher, rater, ["high"])
    Campaign.objects.filter(pk=campaign.pk).update(
        support_text="Crisis line: **400-161-9995**, or write to care@example.org"
    )
    open_rating(page, log_in, rater, campaign)
    dialog = page.locator("dialog#support")
    page.get_by_role("link", name=re.compile("^Support")).first.click()
    expect(dialog).to_be_visible()
    expect(dialog.locator("strong")).to_have_text("400-161-9995")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    page.keyboard.press("h")  # the shortcut
    expect(dialog).to_be_visible()
    page.keyboard.press("Escape")
    # From the content note, and by Tab alone.
    note(page).get_by_role("link", name="Support and helplines").click()
    expect(dialog).to_be_visible()
    page.keyboard.press("Escape")
    page.locator("body").focus()
    for _ in range(40):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.hasAttribute('data-support-open')"):
            break
    page.keyboard.press("Enter")
    expect(dialog).to_be_visible()
    page.keyboard.press("Escape")
    # Still there when nothing is left to rate.
    for _ in range(3):  # the three comparisons of the scenario
        key = page.locator("#rating-form").get_attribute("action")
        note(page).get_by_role("button", name="I'd rather not").click()
        expect(page.locator(f'#rating-form[action="{key}"]')).to_have_count(0)
    expect(page.locator("[data-all-done]")).to_be_visible()
    page.get_by_role("link", name=re.compile("^Support")).first.click()
    expect(dialog).to_contain_text("care@example.org")


def test_care_pages_in_chinese(zh_page, researcher, rater):
    """The content note, the support dialog and page, the break prompt and the content
    settings show no English to a rater reading Simplified Chinese."""
    page = zh_page
    campaign = risky_campaign(researcher, rater, ["high", "none"], break_after_minutes=1)
    Campaign.objects.filter(pk=campaign.pk).update(
        name="关怀研究", support_text="Helpline", support_text_zh_hans="心理援助热线：12356"
    )
    page.goto("/login/")
    page.get_by_label("用户名").fill(rater.username)
    page.get_by_label("密码").fill(PASSWORD)
    page.get_by_role("button", name="登录").click()
    expect(page).to_have_url(re.compile(r"/rate/$"))
    allow = {rater.username}
    page.goto(f"/rate/{campaign.pk}/")
    while not note(page).count():  # a high-risk item shows its note first
        rate_by_keyboard(page)
    expect(note(page)).to_contain_text("自伤")
    chinese(page, allow, "content note")
    page.keyboard.press("h")
    expect(page.locator("dialog#support")).to_contain_text("心理援助热线")
    chinese(page, allow, "support dialog")
    page.keyboard.press("Escape")
    page.evaluate(
        """() => localStorage.setItem("h2htalk-rating-streak",
            JSON.stringify({start: Date.now() - 120000, last: Date.now()}))"""
    )
    page.get_by_role("button", name="我不想看这条").click()
    expect(page.locator("[data-break-prompt]")).to_be_visible()
    chinese(page, allow, "break prompt")
    page.goto(f"/rate/{campaign.pk}/support/")
    chinese(page, allow, "support page")
    page.goto("/rate/care/")
    chinese(page, allow, "content settings")
    page.get_by_label(re.compile("高风险")).check()
    page.get_by_role("button", name="保存").click()
    expect(page.locator(".messages")).to_contain_text("已保存")
    chinese(page, allow, "content settings saved")
