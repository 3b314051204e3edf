"""The interface language: the switch on every page, remembered by a cookie and on the user
(applied at their next login, in another browser too), else the browser's Accept-Language."""

import re

import pytest
from django.conf import settings
from django.test import Client

from h2htalk.models import Profile
from tests.conftest import PASSWORD

COOKIE = settings.LANGUAGE_COOKIE_NAME


def page_language(response) -> str:
    return re.search(r'<html lang="([^"]+)"', response.content.decode()).group(1)


def log_in(client: Client, user):
    return client.post("/login/", {"username": user.username, "password": PASSWORD})


@pytest.mark.django_db
def test_accept_language_picks_the_language_of_an_anonymous_visitor(client):
    assert page_language(client.get("/login/")) == "en"
    assert page_language(client.get("/login/", HTTP_ACCEPT_LANGUAGE="zh-CN,zh;q=0.9")) == "zh-hans"
    assert page_language(client.get("/login/", HTTP_ACCEPT_LANGUAGE="zh")) == "zh-hans"
    assert page_language(client.get("/login/", HTTP_ACCEPT_LANGUAGE="fr, en;q=0.5")) == "en"
    chinese = client.get("/login/", HTTP_ACCEPT_LANGUAGE="zh-CN").content.decode()
    assert "登录" in chinese and "Log in</h1>" not in chinese


@pytest.mark.django_db
def test_every_page_has_the_switch_and_it_is_remembered_by_a_cookie(client):
    page = client.get("/login/").content.decode()
    assert 'action="/language/"' in page and 'name="language" value="zh-hans"' in page
    answer = client.post("/language/", {"language": "zh-hans", "next": "/login/"})
    assert answer.status_code == 302 and answer["Location"] == "/login/"
    assert client.cookies[COOKIE].value == "zh-hans"
    # The cookie wins over the browser's own language.
    assert page_language(client.get("/login/", HTTP_ACCEPT_LANGUAGE="en")) == "zh-hans"
    client.post("/language/", {"language": "en", "next": "/login/"})
    assert page_language(client.get("/login/", HTTP_ACCEPT_LANGUAGE="zh")) == "en"


@pytest.mark.django_db
def test_the_switch_refuses_get_an_unknown_language_and_a_missing_token(client, annotator):
    assert client.get("/language/", {"language": "zh-hans"}).status_code == 405
    client.post("/language/", {"language": "xx", "next": "/login/"})
    assert COOKIE not in client.cookies
    guarded = Client(enforce_csrf_checks=True)
    assert guarded.post("/language/", {"language": "zh-hans"}).status_code == 403
    log_in(client, annotator)
    client.post("/language/", {"language": "fr", "next": "/rate/"})
    assert not Profile.objects.filter(user=annotator).exists()


@pytest.mark.django_db
def test_a_logged_in_choice_is_stored_and_applied_at_the_next_login_elsewhere(client, annotator):
    log_in(client, annotator)
    client.post("/language/", {"language": "zh-hans", "next": "/rate/"})
    assert Profile.objects.get(user=annotator).language == "zh-hans"
    other_browser = Client()
    answer = log_in(other_browser, annotator)
    assert answer.status_code == 302
    assert answer.cookies[COOKIE].value == "zh-hans"
    home = other_browser.get("/rate/", HTTP_ACCEPT_LANGUAGE="en")
    assert page_language(home) == "zh-hans"
    # Switching back is stored too.
    other_browser.post("/language/", {"language": "en", "next": "/rate/"})
    assert Profile.objects.get(user=annotator).language == "en"
    assert log_in(Client(), annotator).cookies[COOKIE].value == "en"


@pytest.mark.django_db
def test_a_choice_made_before_logging_in_becomes_the_users(client, annotator):
    client.post("/language/", {"language": "zh-hans", "next": "/login/"})
    answer = log_in(client, annotator)
    assert answer.status_code == 302
    assert Profile.objects.get(user=annotator).language == "zh-hans"
    assert page_language(client.get("/rate/")) == "zh-hans"


@pytest.mark.django_db
def test_a_user_without_a_choice_keeps_the_browsers_language(client, annotator):
    answer = log_in(client, annotator)
    assert COOKIE not in answer.cookies
    assert not Profile.objects.filter(user=annotator).exists()
    assert page_language(client.get("/rate/", HTTP_ACCEPT_LANGUAGE="zh-CN")) == "zh-hans"
