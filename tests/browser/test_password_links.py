"""Issue 23 point 5: an admin issues a fresh set-password link from a user's row, and the
password rules' errors stand under the password field."""

from django.contrib.auth import authenticate
from playwright.sync_api import expect

from tests.conftest import PASSWORD

GOOD = "a-much-longer-passphrase-42"


def test_a_fresh_link_from_the_users_row_and_rule_errors_under_the_password(
    page, browser, live_server, log_in, admin_user, annotator
):
    log_in(admin_user)
    page.goto("/manage/")
    page.once("dialog", lambda dialog: dialog.accept())  # they have a password: asked first
    page.locator(f"#new-link-{annotator.pk}").click()
    link = page.locator("#link-text").input_value().strip()
    assert "/password/set/" in link
    assert authenticate(username=annotator.username, password=PASSWORD) is None  # old one gone

    person = browser.new_context(base_url=live_server.url).new_page()
    person.goto(link)
    first, second = person.locator("#id_new_password1"), person.locator("#id_new_password2")
    first.fill("abc")
    second.fill("abc")
    person.get_by_role("button", name="Set password").click()
    error = person.get_by_role("alert").first
    expect(error).to_contain_text("too short")
    top, below, repeat = first.bounding_box(), error.bounding_box(), second.bounding_box()
    assert top["y"] + top["height"] <= below["y"] < repeat["y"], (top, below, repeat)
    first.fill(GOOD)
    second.fill(GOOD)
    person.get_by_role("button", name="Set password").click()
    expect(person.get_by_text("Your password is set")).to_be_visible()
    assert authenticate(username=annotator.username, password=GOOD) is not None
    person.context.close()
