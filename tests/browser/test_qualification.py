"""Qualification in a real Chromium, by keyboard (1–5 then Enter, as on the rating page): one
annotator fails and is kept out (sees why, retries when allowed), one passes and rates, one
drifts on gold items, is sent to the refresher and comes back after passing it; the
researcher sees each phase and its history on the campaign page."""

import re

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from annotation.models import Assignment, Judgment, PracticeAnswer, PracticeItem
from annotation.qualification import phase
from scenarios.models import Response, Scenario
from tests.annotation import factories
from tests.annotation.qualification_setup import (
    EXPLANATION,
    expected_screen,
    qualification_campaign,
    wrong_screen,
)
from tests.browser.conftest import rating_keys_ready
from tests.browser.visible_text import assert_no_english
from tests.conftest import PASSWORD

COMPANIONS = ("Zephyr-Alpha-77", "Quokka-Beta-13", "Marlin-Gamma-42")
# What the practice page shows after "Continue": an item, or the attempt's result.
NEXT_SCREEN = "#practice-form, [data-not-passed], [data-not-admitted], [data-passed]"
ANSWER_RE = re.compile(r"/rate/q/([0-9a-f-]{36})/answer/$")


@pytest.fixture
def raters(roles, django_user_model):
    return factories.annotators(django_user_model, 3)


def practice_key(page) -> str:
    return ANSWER_RE.search(page.locator("#practice-form").get_attribute("action")).group(1)


def keys_ready(page) -> None:
    expect(page.locator('[data-practice-page][data-keys="on"]')).to_have_count(1)


def answer_by_keyboard(page, right: bool) -> None:
    """Answer the practice item on screen with keys 1–5 then Enter; check the feedback."""
    keys_ready(page)
    key = practice_key(page)
    html = page.content()
    assert EXPLANATION not in html, "the explanation reached the page before the answer"
    assert not any(name in html for name in COMPANIONS)
    screen = expected_screen(key) if right else wrong_screen(key)
    page.keyboard.press(str(screen + 3))
    page.keyboard.press("Enter")
    expect(page.locator("[data-feedback]")).to_be_visible()
    verdict = page.locator("[data-verdict]").get_attribute("data-verdict")
    assert verdict == ("right" if right else "wrong")
    expect(page.locator("[data-explanation]")).to_contain_text(EXPLANATION)
    keys_ready(page)
    page.keyboard.press("Enter")  # Continue
    page.wait_for_selector(NEXT_SCREEN)


def work_through(page, right) -> None:
    n = 0
    while page.locator("#practice-form").count():
        answer_by_keyboard(page, right[n] if isinstance(right, list) else right)
        n += 1


def start(page, log_in, user, campaign) -> None:
    log_in(user)
    expect(page.locator('[data-phase="qualifying"]')).to_be_visible()
    page.goto(reverse("annotation:rate", args=[campaign.pk]))  # the rating page sends them on
    expect(page).to_have_url(re.compile(rf"/rate/{campaign.pk}/qualify/$"))


def test_one_fails_and_is_kept_out_one_passes_and_rates(page, log_in, researcher, raters):
    campaign = qualification_campaign(researcher, raters, min_accuracy=1.0, attempts=2)
    failing, passing = raters[0], raters[1]

    start(page, log_in, failing, campaign)
    work_through(page, right=[True, False, True])
    expect(page.locator("[data-not-passed] [data-why]")).to_contain_text("2 of 3")
    keys_ready(page)
    page.keyboard.press("Enter")  # Try again (focused)
    expect(page.locator("#practice-form")).to_be_visible()
    expect(page.locator("#practice-title")).to_contain_text("1 of 3")
    work_through(page, right=False)
    expect(page.locator("[data-not-admitted]")).to_be_visible()
    expect(page.locator("[data-not-admitted] [data-why]")).to_contain_text("0 of 3")
    page.goto(reverse("annotation:rate", args=[campaign.pk]))
    expect(page.locator("[data-not-admitted]")).to_be_visible()  # kept out of rating
    assert phase(campaign, failing) == "failed" and not Judgment.objects.exists()

    page.context.clear_cookies()
    start(page, log_in, passing, campaign)
    layouts = []
    while page.locator("#practice-form").count():
        layouts.append(PracticeAnswer.objects.get(key=practice_key(page)).left_is_a)
        answer_by_keyboard(page, right=True)
    expect(page.locator("[data-passed]")).to_be_visible()
    keys_ready(page)
    page.keyboard.press("Enter")  # Start rating
    rating_keys_ready(page)
    page.keyboard.press("4")
    page.keyboard.press("Enter")
    expect(page.locator(".rate-notice")).to_be_visible()
    assert Judgment.objects.filter(annotator=passing).count() == 1


def test_one_drifts_goes_to_the_refresher_and_comes_back(page, log_in, researcher, raters):
    campaign = qualification_campaign(
        researcher,
        raters,
        n_gold=5,
        gold_share=1.0,
        min_gold_accuracy=0.7,
        min_in_window=2,
        window=5,
    )
    drifting = raters[2]
    start(page, log_in, drifting, campaign)
    work_through(page, right=True)
    keys_ready(page)
    page.keyboard.press("Enter")  # Start rating
    for _ in range(2):  # two gold items answered against the known answer
        form = page.locator("#rating-form")
        rating_keys_ready(page)
        key = re.search(r"/rate/a/([0-9a-f-]{36})/submit/", form.get_attribute("action")).group(1)
        assignment = Assignment.objects.select_related("comparison").get(key=key)
        shown = assignment.comparison.gold_preference * (1 if assignment.left_is_a else -1)
        page.keyboard.press(str(-shown * 2 + 3))
        page.keyboard.press("Enter")
        if _ == 0:
            expect(page.locator("#rating-form")).not_to_have_attribute(
                "action", re.compile(re.escape(key))
            )
    expect(page).to_have_url(re.compile(rf"/rate/{campaign.pk}/qualify/$"))
    expect(page.locator("[data-paused]")).to_contain_text("0%")
    expect(page.locator("#practice-title")).to_contain_text("Refresher")
    work_through(page, right=True)
    expect(page.locator("[data-passed]")).to_be_visible()
    keys_ready(page)
    page.keyboard.press("Enter")
    expect(page.locator("#rating-form")).to_be_visible()
    assert phase(campaign, drifting) == "admitted"

    page.context.clear_cookies()
    log_in(researcher)
    page.goto(reverse("campaigns:detail", args=[campaign.pk]))
    row = page.locator(f"#phase-{drifting.username}")
    expect(row).to_have_attribute("data-phase", "admitted")
    events = row.locator("[data-event]")
    expect(events).to_have_count(5)
    kinds = [events.nth(i).get_attribute("data-event") for i in range(5)]
    assert kinds == ["started", "passed", "paused", "started", "passed"]
    expect(row.locator('[data-event="paused"]')).to_contain_text("gold accuracy 0%")
    expect(page.locator(f"#phase-{raters[0].username}")).to_have_attribute(
        "data-phase", "qualifying"
    )


def test_the_practice_pages_in_chinese(zh_page, researcher, raters):
    """Home, practice item, feedback, the retry and the refusal, with no English on screen."""
    campaign = qualification_campaign(
        researcher, raters[:1], min_accuracy=1.0, attempts=2, name="温暖度练习"
    )
    Scenario.objects.filter(tags__name="campaign").update(
        language="zh", user_message="今天工作又被批评了，好难受。"
    )
    Response.objects.filter(run__campaigns=campaign).update(text="抱抱你，想说说发生了什么吗？")
    PracticeItem.objects.filter(campaign=campaign).update(explanation="先回应感受，再给建议。")
    page, rater = zh_page, raters[0]
    page.goto("/login/")
    page.get_by_label("用户名").fill(rater.username)
    page.get_by_label("密码").fill(PASSWORD)
    page.get_by_role("button", name="登录").click()
    expect(page.locator('[data-phase="qualifying"]')).to_be_visible()
    allow = {rater.username}
    assert_no_english(page, allow, "home")
    page.get_by_role("link", name="开始练习").click()
    for attempt in range(2):
        for _ in range(3):
            keys_ready(page)
            assert_no_english(page, allow, "practice item")
            page.keyboard.press(str(wrong_screen(practice_key(page)) + 3))
            page.keyboard.press("Enter")
            expect(page.locator("[data-explanation]")).to_contain_text("先回应感受")
            assert_no_english(page, allow, "feedback")
            keys_ready(page)
            page.keyboard.press("Enter")
            page.wait_for_selector(NEXT_SCREEN)
        if attempt == 0:
            expect(page.locator("[data-not-passed]")).to_be_visible()
            assert_no_english(page, allow, "not passed, retry")
            keys_ready(page)
            page.keyboard.press("Enter")
    expect(page.locator("[data-not-admitted]")).to_be_visible()
    assert_no_english(page, allow, "not admitted")
