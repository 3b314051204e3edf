"""Issue 23 point 6: the researcher's whole path in one test, in Chromium at 1440×900.

From an empty database (only the three accounts exist: an admin who does the research work and
two annotators), using only links and forms — `page.goto` opens nothing but the login page —
the admin imports scenarios (a few lines of a released file plus a platform JSONL with inputs),
approves them through the bulk review path, imports the responses of three companions, builds
and opens a campaign; both annotators rate by keyboard; the admin excludes one, reads the
agreement, makes a release and opens its leaderboard.
"""

import json
import re

import pytest
from playwright.sync_api import expect

from annotation.models import Judgment
from h2htalk.roles import ADMIN, ANNOTATOR
from scenarios.models import Scenario
from scoring.models import Release
from tests.browser.conftest import rating_keys_ready
from tests.conftest import PASSWORD, SHARED_DATA, make_user, require_shared

DESKTOP = {"width": 1440, "height": 900}
COMPANIONS = ("Aster", "Birch", "Cedar")
N_SCENARIOS = 4
OPENERS = ("我最近总是睡不着。", "今天被老板批评了。", "我想换个工作。", "朋友忘了我的生日。")


@pytest.fixture
def people(roles, django_user_model):
    return (
        make_user(django_user_model, "ada", ADMIN),
        make_user(django_user_model, "rater.one", ANNOTATOR),
        make_user(django_user_model, "rater.two", ANNOTATOR),
    )


@pytest.fixture
def files(tmp_path):
    """Three lines of a released file (reference answers only) and a platform JSONL whose
    scenarios have inputs, plus the three companions' responses to those."""
    released = require_shared(SHARED_DATA / "dialogue_emotion.jsonl")
    head = released.read_text(encoding="utf-8").splitlines()[:3]
    release_file = tmp_path / "dialogue_emotion.jsonl"
    release_file.write_text("\n".join(head) + "\n", encoding="utf-8")
    platform = tmp_path / "study.jsonl"
    platform.write_text(
        "".join(
            json.dumps(
                {
                    "subtask": "dialogue_base",
                    "external_id": f"path-{i}",
                    "language": "zh",
                    "user_message": opener,
                    "reference_response": "我在这里，愿意听你说。",
                    "implicit_need": i % 2 == 0,
                },
                ensure_ascii=False,
            )
            + "\n"
            for i, opener in enumerate(OPENERS, start=1)
        ),
        encoding="utf-8",
    )
    responses = tmp_path / "responses.jsonl"
    responses.write_text(
        "".join(
            json.dumps(
                {
                    "subtask": "dialogue_base",
                    "external_id": f"path-{i}",
                    "companion": name,
                    "text": f"{name}: 听起来很辛苦，{i}。",
                },
                ensure_ascii=False,
            )
            + "\n"
            for i in range(1, N_SCENARIOS + 1)
            for name in COMPANIONS
        ),
        encoding="utf-8",
    )
    return [release_file, platform], responses


def log_in_as(page, user):
    """The only typed address: the login page (after logging out of the previous account)."""
    if page.locator("form.logout button").count():
        page.locator("form.logout button").click()
    page.goto("/login/")
    page.get_by_label("Username").fill(user.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(lambda url: "/login/" not in url)


def nav(page, name):
    page.locator("header nav, nav").first.get_by_role("link", name=name, exact=True).click()


def rate_everything(page):
    """Rate by keyboard until the campaign has nothing left for this annotator."""
    page.get_by_role("link", name="Start rating").click()
    expect(page.locator("#rating-form").or_(page.locator("[data-all-done]"))).to_be_visible()
    rated = 0
    while page.locator("#rating-form").count():
        rating_keys_ready(page)
        key = page.locator("#rating-form").get_attribute("action")
        page.keyboard.press("12345"[rated % 5])
        page.keyboard.press("Enter")
        rated += 1
        done = page.locator("[data-all-done]")
        moved = page.locator("#rating-form").and_(
            page.locator(f'#rating-form:not([action="{key}"])')
        )
        expect(done.or_(moved)).to_be_visible()
    return rated


def test_whole_path_from_an_empty_database(page, people, files):
    admin, one, two = people
    scenario_files, response_file = files
    page.set_viewport_size(DESKTOP)

    # 1. Import scenarios: a released file and a platform file in one upload.
    log_in_as(page, admin)
    nav(page, "Import")
    page.get_by_label("Files").set_input_files([str(f) for f in scenario_files])
    page.get_by_role("button", name="Preview").click()
    expect(page.locator("#job-badge")).to_have_text("Preview · ready")
    page.locator("#confirm-import").click()
    expect(page.locator("#job-badge")).to_have_text("Imported")
    assert Scenario.objects.count() == 3 + N_SCENARIOS

    # 2. Approve them: submit for review, then approve, in bulk.
    nav(page, "Scenarios")
    for action in ("submit", "approve"):
        page.locator("select[name=scope]").select_option("all")
        page.locator("select[name=action]").select_option(action)
        page.get_by_role("button", name="Apply").click()
        expect(page.locator(".messages li.success")).to_contain_text("7 scenarios changed.")
    assert set(Scenario.objects.values_list("state", flat=True)) == {"approved"}

    # 3. Import the companions' responses.
    nav(page, "Runs")
    page.get_by_role("link", name="Import responses").click()
    page.get_by_label("File").set_input_files(str(response_file))
    page.get_by_label("Run name").fill("Pilot answers")
    page.get_by_role("button", name="Preview").click()
    page.locator("#confirm-import").click()
    expect(page.locator("#job-badge")).to_have_text("Imported")

    # 4. Build a campaign with the picker and land on its page.
    nav(page, "Campaigns")
    page.get_by_role("link", name="New campaign").click()
    page.locator("#id_name").fill("Path study")
    for name in COMPANIONS:
        page.get_by_label(name, exact=True).check()
    page.get_by_label("Pilot answers").check()
    page.get_by_label("Annotators per comparison (k)").fill("2")
    page.get_by_label(one.username, exact=True).check()
    page.get_by_label(two.username, exact=True).check()
    expect(page.locator("#set-comparisons")).to_have_text(str(3 * N_SCENARIOS))
    with page.expect_navigation(timeout=30_000):
        page.locator("#save-campaign").click(no_wait_after=True)
    expect(page.locator("#build-badge")).to_have_text("Built")
    expect(page.locator("#campaign-state")).to_be_visible()
    page.locator("#state-open").click()

    # 5. Both annotators rate by keyboard.
    for annotator in (one, two):
        log_in_as(page, annotator)
        assert rate_everything(page) == 3 * N_SCENARIOS
    assert Judgment.objects.count() == 2 * 3 * N_SCENARIOS

    # 6. Exclude one annotator and read the agreement.
    log_in_as(page, admin)
    nav(page, "Campaigns")
    page.get_by_role("link", name="Path study").click()
    page.locator("#agreement-link").click()
    page.get_by_label(f"choose {two.username}").check()
    page.locator("#exclude-form textarea, #exclude-form input[name=reason]").first.fill("rushed")
    page.locator("#exclude-chosen").click()
    expect(page.locator("#exclusion-table")).to_contain_text(two.username)
    expect(page.locator("#excluded-summary")).to_contain_text("12 judgments")

    # 7. Make a release from the campaign's page and open its leaderboard.
    page.get_by_role("link", name="Path study").first.click()
    page.locator("#release-link").click()
    page.locator("#id_name").fill("Path release")
    page.locator("#id_anchor").select_option(label="Aster")
    page.locator("#id_n_boot").fill("200")
    with page.expect_navigation(timeout=60_000):
        page.get_by_role("button", name="Freeze and compute").click(no_wait_after=True)
    expect(page.locator(".errorlist")).to_have_count(0)
    release = Release.objects.get(name="Path release")
    expect(page.locator("#leaderboard")).to_be_visible(timeout=30_000)
    expect(page.locator("#release-exclusions")).to_contain_text("12 human judgments")
    page.get_by_role("link", name="Leaderboard", exact=True).click()
    page.get_by_role("link", name="Path release").click()
    expect(page).to_have_url(re.compile(rf"/releases/{release.pk}/$"))
    for name in COMPANIONS:
        expect(page.locator("#leaderboard")).to_contain_text(name)
