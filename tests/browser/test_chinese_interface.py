"""Every annotator page in Simplified Chinese, in a real Chromium: the browser asks for Chinese
(Accept-Language), and no page, dialog, alert or panel an annotator meets shows English words
outside the allow-list (tests/browser/visible_text.py). The switch on every page changes the
language, by keyboard, and the choice is kept on the user."""

import re
from urllib.parse import urlsplit

import pytest
from django.contrib.auth.models import Group
from django.urls import resolve
from playwright.sync_api import expect

from annotation.models import Assignment, Campaign, PracticeItem
from h2htalk.accounts.links import password_path
from h2htalk.models import Profile
from scenarios.models import Response, Scenario
from tests.annotation import factories
from tests.annotation.qualification_setup import (
    expected_screen,
    qualification_campaign,
    wrong_screen,
)
from tests.browser.researcher_pages import ANNOTATOR_PAGES
from tests.browser.test_qualification import keys_ready, practice_key
from tests.browser.test_study import STUDY_PAGES
from tests.browser.visible_text import assert_no_english, latin_words
from tests.conftest import PASSWORD
from tests.scenarios import factories as scenario_factories

ZH_GUIDELINES = "选择**更温暖**、同时尊重边界的回复。"
EN_GUIDELINES = "Prefer the **warmer** reply that still respects boundaries."
# The annotator pages each test below renders (tests/browser/researcher_pages.py lists them;
# together with test_study.py's participant pages they must be all of its ANNOTATOR_PAGES).
RATING_PAGES = {"login", "password_set", "annotation:home", "annotation:rate"}
CARE_PAGES = {"annotation:support", "annotation:care"}
QUALIFICATION_PAGES = {"annotation:qualify", "annotation:practice_feedback"}


@pytest.fixture
def rater(roles, django_user_model):
    return factories.annotators(django_user_model, 1)[0]


@pytest.fixture
def campaign(researcher, rater):
    """One Chinese scenario, three companions: three items for the rater, then all done."""
    made = factories.campaign(
        researcher,
        [rater],
        n_scenarios=1,
        name="温暖度研究",
        description="比较两个陪伴者的回复，哪一个更温暖。",
        guidelines=EN_GUIDELINES,
        guidelines_zh_hans=ZH_GUIDELINES,
        support_text="Helpline: 12356",
        support_text_zh_hans="心理援助热线：12356",
    )
    persona = scenario_factories.persona("小林", summary="大学时的朋友，性格温和")
    Scenario.objects.filter(tags__name="campaign").update(
        persona=persona,
        language="zh",
        user_message="今天工作又被批评了，好难受。",
        history=[
            {"role": "user", "content": "最近总是睡不着。"},
            {"role": "assistant", "content": "听起来你很累。是什么让你睡不着呢？"},
            {"role": "user", "content": "工作压力太大了。"},
        ],
        memory=[{"content": "上夜班", "category": "工作", "importance": 1}],
        schedule=[{"time": "09:00", "activity": "团队例会"}],
    )
    Response.objects.filter(run__campaigns=made).update(
        text="抱抱你。被批评真的很难受，想说说发生了什么吗？"
    )
    return made


def chinese(page, allow=(), label="") -> str:
    """Check the page is in Chinese; the name of its route."""
    assert page.locator("html").get_attribute("lang") == "zh-hans", label or page.url
    assert_no_english(page, allow, label)
    return resolve(urlsplit(page.url).path).view_name


def log_in_zh(page, user) -> None:
    page.context.clear_cookies()
    page.goto("/login/")
    page.get_by_label("用户名").fill(user.username)
    page.get_by_label("密码").fill(PASSWORD)
    page.get_by_role("button", name="登录").click()
    page.wait_for_url(lambda url: "/login/" not in url)


def test_the_annotator_tests_render_every_annotator_page():
    assert set(ANNOTATOR_PAGES) == RATING_PAGES | CARE_PAGES | QUALIFICATION_PAGES | STUDY_PAGES


def test_every_annotator_page_in_chinese(zh_page, rater, campaign, expected_errors):
    page = zh_page
    allow = {rater.username, "newbie"}
    seen = set()

    # Login, and its refusal.
    page.goto("/login/")
    seen.add(chinese(page, allow, "login"))
    page.get_by_label("用户名").fill(rater.username)
    page.get_by_label("密码").fill("wrong password")
    page.get_by_role("button", name="登录").click()
    expect(page.get_by_role("alert")).to_contain_text("用户名或密码不正确")
    seen.add(chinese(page, allow, "login refused"))

    # Set-password, through a real one-time link, and Django's own refusals of a weak password.
    newbie = Group.objects.get(name="annotator").user_set.create(username="newbie")
    newbie.set_unusable_password()
    newbie.save()
    page.goto(password_path(newbie))
    expect(page.get_by_role("heading", name="设置密码")).to_be_visible()
    seen.add(chinese(page, allow, "set password"))
    page.get_by_label("新密码").fill("12345")
    page.get_by_label("再次输入密码").fill("12345")
    page.get_by_role("button", name="设置密码").click()
    expect(page.get_by_role("alert").first).to_be_visible()
    seen.add(chinese(page, allow, "set password refused"))

    # The rating home.
    page.goto("/login/")
    page.get_by_label("用户名").fill(rater.username)
    page.get_by_label("密码").fill(PASSWORD)
    page.get_by_role("button", name="登录").click()
    expect(page).to_have_url(re.compile(r"/rate/$"))
    expect(page.get_by_role("heading", name="我的评分任务")).to_be_visible()
    seen.add(chinese(page, allow, "rating home"))

    # The rating page: item, progress, the guidelines in Chinese (open before the first vote).
    page.goto(f"/rate/{campaign.pk}/")
    expect(page.locator(".rate-guidelines")).to_contain_text("更温暖")
    expect(page.locator(".rate-guidelines")).not_to_contain_text("warmer")
    expect(page.get_by_role("heading", name="回复 A")).to_be_visible()
    page.locator("details.earlier-turns summary").click()
    seen.add(chinese(page, allow, "rating page"))

    page.keyboard.press("?")
    dialog = page.get_by_role("dialog", name="快捷键")
    expect(dialog).to_be_visible()
    seen.add(chinese(page, allow, "shortcuts help"))
    page.keyboard.press("Escape")

    page.keyboard.press("d")
    expect(page.locator("[data-ratings]")).to_have_attribute("open", "")
    seen.add(chinese(page, allow, "detailed ratings"))
    page.keyboard.press("Escape")

    page.get_by_role("button", name="提交").click(force=True)  # no preference: the alert says so
    expect(page.locator("[data-hint]")).to_have_text("请先选择偏好（按键 1–5）。")
    seen.add(chinese(page, allow, "alert: no preference"))

    page.keyboard.press("s")
    expect(page.locator("[data-skip-panel]")).to_have_attribute("open", "")
    page.keyboard.press("Enter")
    expect(page.locator("[data-hint]")).to_have_text("请先选择原因（1–5）。")
    seen.add(chinese(page, allow, "skip dialog"))
    page.keyboard.press("Escape")

    # The campaign paused meanwhile: the answer is refused (409) and the panel says why.
    action = page.locator("#rating-form").get_attribute("action")
    expected_errors.add((409, action))
    Campaign.objects.filter(pk=campaign.pk).update(state=Campaign.State.PAUSED)
    page.keyboard.press("2")
    page.keyboard.press("Enter")
    expect(page.locator("[data-closed]")).to_contain_text("已暂停")
    seen.add(chinese(page, allow, "campaign not open"))
    Campaign.objects.filter(pk=campaign.pk).update(state=Campaign.State.OPEN)
    page.reload()

    # Rate every item: the notice after each, then "all done".
    for left in (2, 1, 0):
        page.keyboard.press("2")
        page.keyboard.press("Enter")
        expect(page.locator("[data-progress=today]")).to_have_text(str(3 - left))
        expect(page.locator("#item [role=status]")).to_contain_text("已保存")
        seen.add(chinese(page, allow, "after a vote"))
    expect(page.locator("[data-all-done]")).to_contain_text("全部完成")
    assert Assignment.objects.filter(state="submitted").count() == 3
    page.reload()
    seen.add(chinese(page, allow, "all done"))

    # Care: the campaign's support page and the content settings, saved.
    page.goto(f"/rate/{campaign.pk}/support/")
    expect(page.locator("main")).to_contain_text("心理援助热线")
    seen.add(chinese(page, allow, "support page"))
    page.goto("/rate/care/")
    seen.add(chinese(page, allow, "content settings"))
    page.locator("form button[type=submit]").last.click()
    page.wait_for_load_state()
    seen.add(chinese(page, allow, "content settings saved"))

    # The error pages an annotator can meet.
    expected_errors.update({(404, "/rate/999999/"), (403, "/scenarios/")})
    page.goto("/rate/999999/")
    expect(page.get_by_role("heading", name="未找到")).to_be_visible()
    seen.add(chinese(page, allow, "404"))
    page.goto("/scenarios/")
    expect(page.get_by_role("heading", name="无权访问")).to_be_visible()
    seen.add(chinese(page, allow, "403"))
    assert seen >= RATING_PAGES | CARE_PAGES


def test_the_qualification_in_chinese(zh_page, researcher, rater):
    """A campaign requiring qualification: a practice item, its feedback with the researcher's
    explanation, the result of a failed attempt and, after a retry, of a passed one."""
    page = zh_page
    campaign = qualification_campaign(
        researcher, [rater], n_items=2, name="资格练习", min_accuracy=1.0, attempts=2
    )
    scenarios = campaign.comparisons.values("scenario_id")
    Scenario.objects.filter(pk__in=scenarios).update(
        language="zh", user_message="最近总是睡不着，工作压力太大了。"
    )
    Response.objects.filter(run__campaigns=campaign).update(text="听起来你很累。想聊聊吗？")
    PracticeItem.objects.filter(campaign=campaign).update(
        explanation="更温暖的回复先说出对方的感受，再给建议。"
    )
    allow = {rater.username}
    seen = set()
    log_in_zh(page, rater)
    seen.add(chinese(page, allow, "rating home: qualification first"))
    page.goto(f"/rate/{campaign.pk}/qualify/")
    for right in (False, True, True, True):
        keys_ready(page)
        expect(page.locator("#practice-form")).to_be_visible()
        seen.add(chinese(page, allow, "practice item"))
        key = practice_key(page)
        screen = expected_screen(key) if right else wrong_screen(key)
        page.keyboard.press(str(screen + 3))
        page.keyboard.press("Enter")
        expect(page.locator("[data-explanation]")).to_contain_text("先说出对方的感受")
        seen.add(chinese(page, allow, "practice feedback"))
        keys_ready(page)
        page.keyboard.press("Enter")  # Continue
        page.wait_for_selector("#practice-form, [data-not-passed], [data-passed]")
        if page.locator("[data-not-passed]").count():
            seen.add(chinese(page, allow, "not passed"))
            keys_ready(page)
            page.keyboard.press("Enter")  # Try again
    expect(page.locator("[data-passed]")).to_be_visible()
    seen.add(chinese(page, allow, "passed"))
    assert seen >= QUALIFICATION_PAGES


def test_the_checker_finds_english(page, log_in, rater, campaign):
    """The checker can fail: an English page is full of words it reports."""
    log_in(rater)
    page.goto(f"/rate/{campaign.pk}/")
    found = " ".join(latin_words(page, {rater.username}))
    for word in ("Keyboard", "Submit", "Skip", "Campaign"):
        assert repr(word) in found


def test_the_switch_changes_the_language_by_keyboard_and_keeps_it(zh_page, rater, campaign):
    page = zh_page
    page.goto("/login/")
    page.get_by_label("用户名").fill(rater.username)
    page.get_by_label("密码").fill(PASSWORD)
    page.get_by_role("button", name="登录").click()
    page.goto(f"/rate/{campaign.pk}/")
    expect(page.locator("html")).to_have_attribute("lang", "zh-hans")

    english = page.locator(".language-switch button[value=en]")
    english.focus()
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(rf"/rate/{campaign.pk}/$"))
    expect(page.locator("html")).to_have_attribute("lang", "en")
    expect(page.get_by_role("heading", name="Response A")).to_be_visible()
    expect(page.locator(".rate-guidelines")).to_contain_text("warmer")  # the default guidelines
    assert Profile.objects.get(user=rater).language == "en"
    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    assert cookies["django_language"] == "en"

    page.locator(".language-switch button[value=zh-hans]").click()
    expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
    assert Profile.objects.get(user=rater).language == "zh-hans"
    assert Campaign.objects.get(pk=campaign.pk).guidelines_zh_hans == ZH_GUIDELINES
