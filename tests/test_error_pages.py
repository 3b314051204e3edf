"""403, 404, 500 and 503 are pages in the site's layout that say why and link back; the API
keeps DRF's JSON errors; a 403 is logged as one line, without a traceback (issue 15, point 4);
/favicon.ico is served. The 500 and 503 pages of a failing view: tests/test_db_unavailable.py.

pytest-django runs without DEBUG, so these are the pages users get."""

import logging

from django.db import OperationalError
from django.test import Client, RequestFactory
from django.urls import reverse

from h2htalk import errors
from h2htalk.middleware import DatabaseUnavailableMiddleware

HOME_LINK = '<a href="/">Go to your home page</a>'


def assert_in_layout(html: str):
    assert '<header class="topbar">' in html
    assert '<a class="brand" href="/">H2HTalk</a>' in html
    assert "/static/css/app.css" in html
    assert HOME_LINK in html


def test_403_says_which_role_the_page_needs_and_links_home(annotator, client):
    client.force_login(annotator)
    response = client.get(reverse("scenarios:list"))
    assert response.status_code == 403
    html = response.content.decode()
    assert_in_layout(html)
    assert "This page needs the role: researcher" in html
    assert f'<a href="{reverse("annotation:home")}">Rate</a>' in html  # the user's navigation
    assert "Back to the previous page" not in html  # the browser came from nowhere


def test_403_links_back_to_the_page_the_user_came_from(annotator, client):
    client.force_login(annotator)
    came_from = "http://testserver/rate/"
    response = client.get(reverse("scenarios:list"), HTTP_REFERER=came_from)
    assert f'<a href="{came_from}">Back to the previous page</a>' in response.content.decode()
    # Never back to another site.
    response = client.get(reverse("scenarios:list"), HTTP_REFERER="https://elsewhere.example/")
    assert "Back to the previous page" not in response.content.decode()


def test_a_403_is_logged_as_one_line_without_traceback(annotator, client, caplog):
    client.force_login(annotator)
    with caplog.at_level(logging.INFO, logger="django.request"):
        response = client.get(reverse("scenarios:list"))
    assert response.status_code == 403
    records = [record for record in caplog.records if record.name == "django.request"]
    assert [record.getMessage() for record in records] == ["Forbidden: /scenarios/"]
    assert records[0].exc_info is None


def test_the_api_keeps_its_json_403(annotator):
    client = Client()
    client.force_login(annotator)
    response = client.get("/api/scenarios/")
    assert response.status_code == 403
    assert response["Content-Type"] == "application/json"
    assert "detail" in response.json()


def test_a_form_refused_for_its_csrf_token_gets_the_403_page_with_what_to_do(annotator):
    client = Client(enforce_csrf_checks=True)
    client.force_login(annotator)
    came_from = "http://testserver/rate/"
    response = client.post(reverse("logout"), HTTP_REFERER=came_from)
    assert response.status_code == 403
    html = response.content.decode()
    assert_in_layout(html)
    assert "security token is missing or out of date" in html
    assert f'<a href="{came_from}">Back to the previous page</a>' in html
    assert "CSRF verification failed" not in html  # not Django's bare page


def test_404_says_what_was_not_found(annotator, client):
    client.force_login(annotator)
    response = client.get(reverse("annotation:rate", args=[987654]))
    assert response.status_code == 404
    html = response.content.decode()
    assert_in_layout(html)
    assert "No such campaign." in html


def test_404_of_an_unknown_address(annotator, client):
    client.force_login(annotator)
    response = client.get("/no/such/page/")
    assert response.status_code == 404
    html = response.content.decode()
    assert_in_layout(html)
    assert "There is no page at this address." in html


def test_500_and_503_pages_need_no_database():
    """They may be answering because the database is away. This test has no database (any
    query raises) and its request no user or session (asking for them would raise)."""
    request = RequestFactory().get("/somewhere/", HTTP_REFERER="http://testserver/before/")
    server_error = errors.server_error(request)
    middleware = DatabaseUnavailableMiddleware(lambda request: None)
    unavailable = middleware.process_exception(request, OperationalError("gone"))
    assert server_error.status_code == 500 and unavailable.status_code == 503
    for response in (server_error, unavailable):
        html = response.content.decode()
        assert_in_layout(html)
        assert '<a href="http://testserver/before/">Back to the previous page</a>' in html


def test_favicon_is_served_at_the_root(client):
    """Browsers ask for /favicon.ico on every site (WhiteNoise serves public/)."""
    response = client.get("/favicon.ico")
    assert response.status_code == 200
    assert response["Content-Type"] == "image/x-icon"
    assert b"".join(response.streaming_content)[:4] == b"\x00\x00\x01\x00"  # an ICO header
