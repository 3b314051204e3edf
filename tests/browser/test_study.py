"""A crowd participant in a real Chromium (issue 22 point 3): the study link, consent, rating
by keyboard up to the quota, then the completion code and the way back to the platform, here a
real HTTP server on 127.0.0.1 standing in for Prolific."""

import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core.cache import cache
from playwright.sync_api import expect

from annotation.models import Judgment
from annotation.study.models import Participant
from tests.annotation.study_factories import join_url, study


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
