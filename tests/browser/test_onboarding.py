"""An admin onboards annotators in a real Chromium: uploads the CSV on /manage/, takes the
one-time link, and the new annotator sets a password with it and logs in."""

import csv
import io
import re
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import expect

from annotation.models import Campaign
from tests.annotation import factories

NEW_PASSWORD = "a long and unusual passphrase 7"


@pytest.fixture
def pilot(researcher, annotator):
    return factories.campaign(researcher, [annotator], n_scenarios=1, name="Pilot")


def test_upload_link_set_password_and_log_in(page, log_in, admin_user, pilot):
    log_in(admin_user)
    expect(page).to_have_url(re.compile(r"/manage/$"))
    content = (
        b"username,email,role,campaigns\n"
        b"newann,newann@example.org,annotator,Pilot\n"
        b"newres,newres@example.org,researcher,\n"
    )
    page.get_by_label("Users CSV").set_input_files(
        {"name": "users.csv", "mimeType": "text/csv", "buffer": content}
    )
    page.get_by_role("button", name="Create users").click()
    expect(page.get_by_role("heading", name="Users added")).to_be_visible()
    expect(page.locator("#summary")).to_contain_text("2 created")

    listed = page.locator("#links-text").input_value()
    links = dict(line.split("\t") for line in listed.splitlines() if line)
    assert set(links) == {"newann", "newres"}
    with page.expect_download() as download_info:
        page.locator("#links-download").click()
    download = download_info.value
    assert download.suggested_filename == "user-links.csv"
    text = Path(download.path()).read_text(encoding="utf-8")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert {row["username"]: row["link"] for row in rows} == links
    assert Campaign.objects.get(name="Pilot").annotators.filter(username="newann").exists()

    # The new annotator, in a browser without the admin's session.
    page.context.clear_cookies()
    link_path = urlsplit(links["newann"]).path
    page.goto(link_path)
    expect(page.get_by_role("heading", name="Set your password")).to_be_visible()
    expect(page.get_by_text("Account newann")).to_be_visible()
    page.get_by_label("New password").fill("12345")
    page.get_by_label("Repeat the password").fill("12345")
    page.get_by_role("button", name="Set password").click()
    expect(page.get_by_text("This password is too common.")).to_be_visible()
    page.get_by_label("New password").fill(NEW_PASSWORD)
    page.get_by_label("Repeat the password").fill(NEW_PASSWORD)
    page.get_by_role("button", name="Set password").click()
    expect(page).to_have_url(re.compile(r"/login/$"))
    expect(page.get_by_text("Your password is set: log in with it.")).to_be_visible()

    log_in(SimpleNamespace(username="newann"), password=NEW_PASSWORD)
    expect(page).to_have_url(re.compile(r"/rate/$"))
    expect(page.locator(".topbar .who")).to_have_text("newann")

    # The link worked once.
    page.context.clear_cookies()
    page.goto(link_path)
    expect(page.get_by_text("This link does not work")).to_be_visible()
