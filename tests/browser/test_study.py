"""A crowd participant in a real Chromium (issue 22 point 3): the study link, consent, the
qualification (passed, or failed: the screen-out code), rating by keyboard up to the quota,
then the completion code and the way back to the platform, here a real HTTP server on
127.0.0.1 standing in for Prolific."""

import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest
from django.core.cache import cache
from django.urls import resolve
from playwright.sync_api import expect

from annotation.models import Judgment
from annotation.qualification import phase
from annotation.study.models import Participant
from tests.annotation.qualification_setup import (
    expected_screen,
    qualification_campaign,
    wrong_screen,
)
from tests.annotation.study_factories import join_url, link_for, study
from tests.browser.conftest import rating_keys_ready
from tests.browser.test_qualification import (
    NEXT_SCREEN,
    keys_ready,
    practice_key,
)
from tests.browser.visible_text import WORD, assert_no_english
from tests.conftest import PASSWORD

# The participant's routes test_the_participants_pages_in_chinese renders (listed in
# tests/browser/researcher_pages.py's ANNOTATOR_PAGES).
STUDY_PAGES = {"study:join", "study:step", "study:consent"}


def shown_in_chinese(page, allow, label, seen: set) -> None:
    """No English on the page; its route noted in `seen`."""
    assert page.locator("html").get_attribute("lang") == "zh-hans", label
    assert_no_english(page, allow, label)
    seen.add(resolve(urlsplit(page.url).path).view_name)


class _Platform(BaseHTTPRequestHandler):
    """Answers every GET with a page naming the address it was asked for."""

    def do_GET(self):
        body = f"<!doctype html><title>Platform</title><p id=back>{self.path}</p>".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def platform():
    """The platform's completion address: a real HTTP server on 127.0.0.1."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Platform)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def quick_redirect(settings):
    settings.STUDY_REDIRECT_SECONDS = 1
    cache.clear()  # the join throttle's slots


def test_join_consent_rate_to_quota_then_code_and_redirect(page, researcher, platform):
    link = study(
        researcher,
        n_scenarios=3,
        quota=2,
        completion_url=f"{platform}/submissions/complete?cc=C0MPL3TE",
    )
    page.goto(join_url(link, pid="60a1b2c3d4e5f6"))
    expect(page.get_by_role("heading", name="Before you start")).to_be_visible()
    expect(page.locator(".study-consent strong")).to_have_text("rate")
    expect(page.locator("#study-limits")).to_contain_text("up to 2 items")
    expect(page.locator("body")).not_to_contain_text("60a1b2c3d4e5f6")
    page.get_by_role("button", name="I agree — start").click()

    expect(page).to_have_url(re.compile(rf"/rate/{link.campaign_id}/$"))
    expect(page.locator("body")).not_to_contain_text("60a1b2c3d4e5f6")
    for key in ("2", "4"):
        expect(page.locator("#rating-form")).to_be_visible()
        rating_keys_ready(page)  # the keys work once the page's script has run
        page.keyboard.press(key)
        page.keyboard.press("Enter")
        if key == "2":
            expect(page.locator("#item [role=status]")).to_have_text("Saved. Here is the next one.")

    # The second answer reached the quota: the page leaves for the code by itself.
    expect(page.locator("#study-code")).to_have_text("C0MPL3TE")
    expect(page.get_by_role("heading", name="Study complete — thank you!")).to_be_visible()
    page.wait_for_url(f"{platform}/submissions/complete?cc=C0MPL3TE")
    expect(page.locator("#back")).to_have_text("/submissions/complete?cc=C0MPL3TE")

    participant = Participant.objects.get()
    assert participant.participant_id == "60a1b2c3d4e5f6"
    assert participant.finish_reason == "quota" and participant.consented_at
    assert Judgment.objects.filter(annotator=participant.user).count() == 2

    # Coming back through the link shows the code again, and hands out nothing more.
    page.goto(join_url(link, pid="60a1b2c3d4e5f6"))
    expect(page.locator("#study-code")).to_have_text("C0MPL3TE")
    page.wait_for_url(re.compile(re.escape(platform)))
    assert Judgment.objects.filter(annotator=participant.user).count() == 2


def test_closed_link_is_404_in_the_browser(page, researcher, expected_errors):
    link = study(researcher)
    link.is_open = False
    link.save()
    url = join_url(link)
    expected_errors.add((404, url.split("?")[0]))
    response = page.goto(url)
    assert response.status == 404
    expect(page.locator("body")).to_contain_text("does not exist or is closed")


def test_the_participants_pages_in_chinese(zh_page, researcher, platform, expected_errors):
    page = zh_page
    link = study(researcher, n_scenarios=1, quota=1, completion_url=f"{platform}/done")
    allow = {"C0MPL3TE", "PROLIFIC_PID"}
    seen = set()
    refused = join_url(link).split("?")[0]
    expected_errors.add((400, refused))
    page.goto(refused + "?STUDY_ID=x")  # no participant id: refused, naming the parameter
    expect(page.locator("#study-refused")).to_contain_text("PROLIFIC_PID")
    shown_in_chinese(page, allow, "refused join", seen)
    page.goto(join_url(link, pid="zh-1"))
    expect(page.locator(".study-consent")).to_contain_text("您同意为对话")
    allow.add(Participant.objects.get().user.username)  # their own random account name
    shown_in_chinese(page, allow, "consent", seen)
    page.locator("#consent-agree").click()
    expect(page.locator("#rating-form")).to_be_visible()
    rating_keys_ready(page)
    page.keyboard.press("3")
    page.keyboard.press("Enter")
    expect(page.locator("#study-code")).to_have_text("C0MPL3TE")
    shown_in_chinese(page, allow, "completion code", seen)
    page.wait_for_url(f"{platform}/done")

    page.context.clear_cookies()
    page.goto(join_url(link, pid="zh-2"))
    allow.add(Participant.objects.get(participant_id="zh-2").user.username)
    page.locator("#consent-decline").click()
    page.wait_for_url(re.compile(r"/study/consent/$"))
    shown_in_chinese(page, allow, "declined", seen)
    assert seen >= STUDY_PAGES


def test_the_study_link_page_in_chinese(zh_page, researcher):
    link = study(researcher)
    zh_page.goto("/login/")
    zh_page.locator("input[name=username]").fill(researcher.username)
    zh_page.locator("input[name=password]").fill(PASSWORD)
    zh_page.locator("form button[type=submit]").last.click()
    zh_page.wait_for_url(lambda url: "/login/" not in url)
    zh_page.goto(f"/campaigns/{link.campaign_id}/study/")
    expect(zh_page.locator("#study-url")).to_contain_text(link.token)
    names = "Prolific Amazon Mechanical Turk MTurk URL CSV Markdown Webhook"  # names, formats
    typed = f"{link.campaign.name} {link.consent} {link.instructions}"  # typed by researchers
    url = WORD.findall(
        zh_page.locator("#study-url").inner_text()
    )  # an address, split as the checker splits
    allow = {researcher.username, link.token, *names.split(), *WORD.findall(typed), *url}
    assert_no_english(zh_page, allow, "study link page")


@pytest.fixture
def qualified_study(researcher, platform):
    """A campaign requiring a qualification (3 practice items, all to be right, one attempt)
    with a study link whose completion and screen-out addresses are the local platform."""
    campaign = qualification_campaign(researcher, [], min_accuracy=1.0, attempts=1)
    return link_for(
        campaign,
        completion_url=f"{platform}/complete?cc=C0MPL3TE",
        screenout_url=f"{platform}/screened?cc=SCR33N",
    )


def practise(page, rights: list[bool]) -> None:
    """Answer the practice items by keyboard, right or wrong, and Continue after each: to the
    next item, the result, or (a participant who failed) the study's code page."""
    for right in rights:
        keys_ready(page)
        key = practice_key(page)
        screen = expected_screen(key) if right else wrong_screen(key)
        page.keyboard.press(str(screen + 3))
        page.keyboard.press("Enter")
        expect(page.locator("[data-feedback]")).to_be_visible()
        keys_ready(page)
        page.keyboard.press("Enter")  # Continue
        page.wait_for_selector(f"{NEXT_SCREEN}, [data-study-finished]")


def consent(page, link, pid):
    page.goto(join_url(link, pid=pid, session=f"S-{pid}"))
    page.get_by_role("button", name="I agree — start").click()


def test_join_consent_qualification_rating_code(page, qualified_study, platform):
    link = qualified_study
    consent(page, link, "QUALIFIES")
    expect(page).to_have_url(re.compile(rf"/rate/{link.campaign_id}/qualify/$"))
    practise(page, [True, True, True])
    expect(page.locator("[data-passed]")).to_be_visible()
    participant = Participant.objects.get()
    assert phase(link.campaign, participant.user) == "admitted"
    page.keyboard.press("Enter")  # Start rating
    expect(page).to_have_url(re.compile(rf"/rate/{link.campaign_id}/$"))
    for key in ("1", "5"):
        expect(page.locator("[data-submit]")).to_have_attribute("aria-disabled", "true")
        page.keyboard.press(key)
        page.keyboard.press("Enter")
    expect(page.locator("#study-code")).to_have_text("C0MPL3TE")
    page.wait_for_url(f"{platform}/complete?cc=C0MPL3TE")
    participant.refresh_from_db()
    assert participant.finish_reason == "quota"
    assert Judgment.objects.filter(annotator=participant.user).count() == 2


def test_failing_the_qualification_gives_the_screen_out_code(page, qualified_study, platform):
    link = qualified_study
    consent(page, link, "FAILS")
    expect(page).to_have_url(re.compile(rf"/rate/{link.campaign_id}/qualify/$"))
    practise(page, [True, False, True])
    # Continue after the last answer: the practice page sends the participant to their code.
    expect(page.locator("#study-code")).to_have_text("SCR33N")
    expect(page.get_by_role("heading", name="Thank you for your time")).to_be_visible()
    expect(page.locator("body")).not_to_contain_text("C0MPL3TE")
    page.wait_for_url(f"{platform}/screened?cc=SCR33N")
    participant = Participant.objects.get()
    assert participant.finish_reason == "screened_out"
    assert not Judgment.objects.filter(annotator=participant.user).exists()
    # Back through the link: the screen-out code again, never the rating page.
    page.goto(join_url(link, pid="FAILS", session="S-FAILS"))
    expect(page.locator("#study-code")).to_have_text("SCR33N")
    page.wait_for_url(re.compile(re.escape(platform)))
    assert not Judgment.objects.filter(annotator=participant.user).exists()
