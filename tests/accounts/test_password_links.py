"""The one-time link: it sets a password once, expires after PASSWORD_RESET_TIMEOUT, refuses
deactivated users, shows the password validators' errors, and the page lives in the layout."""

from datetime import timedelta
from urllib.parse import urlsplit

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.tokens import default_token_generator
from django.test import Client
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from h2htalk.accounts import links, onboarding, users

NEW_PASSWORD = "a long and unusual passphrase 7"


@pytest.fixture
def newcomer(roles):
    row = onboarding.make_row("item 0", "ann1", "ann1@example.org", "annotator", [])
    (outcome,) = onboarding.create_users([row], "http://testserver/")
    return outcome


def set_password(client, link, password=NEW_PASSWORD, again=None):
    """Open the link, follow it to the form, post the password; the final response."""
    opened = client.get(urlsplit(link).path)
    assert opened.status_code == 302  # the token goes into the session, out of the URL
    form_url = opened["Location"]
    assert form_url.endswith("/set-password/")
    page = client.get(form_url)
    assert page.status_code == 200 and page.context["validlink"]
    return client.post(form_url, {"new_password1": password, "new_password2": again or password})


def test_the_link_sets_the_password_once(newcomer):
    client = Client()
    response = set_password(client, newcomer.link)
    assert response.status_code == 302 and response["Location"] == "/login/"
    user = get_user_model().objects.get(username="ann1")
    assert user.check_password(NEW_PASSWORD)
    assert Client().login(username="ann1", password=NEW_PASSWORD)

    for fresh in (client, Client()):  # used: refused, in the same browser or another
        again = fresh.get(urlsplit(newcomer.link).path)
        assert again.status_code == 200 and not again.context["validlink"]
        assert "This link does not work" in again.content.decode()
    assert not links.needs_link(user)


def test_the_page_is_in_the_site_layout_and_shows_validation_errors(newcomer):
    client = Client()
    response = set_password(client, newcomer.link, password="12345")  # common and short
    assert response.status_code == 200
    text = response.content.decode()
    assert [t.name for t in response.templates][:2] == ["accounts/set_password.html", "base.html"]
    assert "This password is too common." in text and "too short" in text
    response = client.post(
        response.request["PATH_INFO"],
        {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD + "x"},
    )
    assert "didn’t match" in response.content.decode()
    user = get_user_model().objects.get(username="ann1")
    assert not user.has_usable_password()  # nothing set yet, the link still works
    assert set_password(Client(), newcomer.link).status_code == 302


def _token_made_ago(user, seconds: int) -> str:
    """The token the generator would have made `seconds` ago (its own timestamp arithmetic)."""
    generator = default_token_generator
    now = generator._num_seconds(generator._now())
    return generator._make_token_with_timestamp(user, now - seconds, generator.secret)


@pytest.mark.parametrize(("age", "works"), [(60, True), (3600 - 60, True), (3600 + 60, False)])
def test_the_link_expires_after_the_timeout(newcomer, settings, age, works):
    settings.PASSWORD_RESET_TIMEOUT = 3600
    user = get_user_model().objects.get(username="ann1")
    uidb64 = urlsafe_base64_encode(force_bytes(user.pk))
    response = Client().get(f"/password/set/{uidb64}/{_token_made_ago(user, age)}/")
    if works:
        assert response.status_code == 302
    else:
        assert response.status_code == 200 and not response.context["validlink"]


def test_the_default_timeout_is_seven_days_and_links_made_now_say_so(settings, newcomer):
    assert settings.PASSWORD_RESET_TIMEOUT == 7 * 24 * 3600
    user = get_user_model().objects.get(username="ann1")
    assert default_token_generator.check_token(user, _token_made_ago(user, 6 * 24 * 3600))
    assert not default_token_generator.check_token(user, _token_made_ago(user, 8 * 24 * 3600))
    remaining = links.expiry() - user.date_joined
    assert timedelta(days=7) <= remaining < timedelta(days=7, minutes=5)


def test_a_deactivated_users_link_does_not_work(newcomer, admin_user):
    user = get_user_model().objects.get(username="ann1")
    users.set_active(user, False, by=admin_user)
    response = Client().get(urlsplit(newcomer.link).path)
    assert response.status_code == 200 and not response.context["validlink"]


def test_a_tampered_link_does_not_work(newcomer, annotator):
    path = urlsplit(newcomer.link).path
    other = urlsafe_base64_encode(force_bytes(annotator.pk))
    uid = path.split("/")[3]
    for bad in (path.replace(uid, other), path[:-3] + "xx/", "/password/set/!!/nope/"):
        response = Client().get(bad)
        assert response.status_code == 200 and not response.context["validlink"], bad
