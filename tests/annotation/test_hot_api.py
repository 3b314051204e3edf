"""The rating API's hot path (annotation/hot_api.py) answers as the whole application does.

Every request goes through the deployed WSGI application (`h2htalk.wsgi.application`, as
gunicorn runs it) and the same request through Django's own (`django_application`): status,
headers and body must match byte for byte. The whole application is watched, so each test also
says which path answered: the hot path for a token client's next and submit, the whole
application for everything else (after the hot attempt kept nothing).
"""

import io
import json
from contextlib import contextmanager

import pytest
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections, connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.authtoken.models import Token

from annotation.hot_api import HotRatingApi
from annotation.models import Assignment, Campaign, Judgment
from h2htalk import wsgi
from scenarios.models import Scenario
from tests.annotation import factories

POSTGRES = connection.vendor == "postgresql"


class Watched:
    """Django's application (the deployed one unless given), counting the requests that
    reach it."""

    def __init__(self, application=None):
        self.application = application or wsgi.django_application
        self.calls = 0

    def __call__(self, environ, start_response):
        self.calls += 1
        return self.application(environ, start_response)


@pytest.fixture
def full():
    return Watched()


@pytest.fixture
def hot(full):
    return HotRatingApi(full)


@contextmanager
def transaction_kept():
    """As Django's test client does: a request's start and end must not close the test's
    connection (it sits in the test's transaction)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def call(app, path, token=None, body=None, **headers) -> tuple[str, list, bytes]:
    raw = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    environ = {
        "REQUEST_METHOD": headers.pop("method", "POST"),
        "PATH_INFO": path,
        "SCRIPT_NAME": "",
        "QUERY_STRING": headers.pop("query", ""),
        "SERVER_NAME": "testserver",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.input": io.BytesIO(raw),
        "wsgi.url_scheme": "http",
        "wsgi.errors": io.StringIO(),
        "wsgi.multithread": False,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }
    if token:
        environ["HTTP_AUTHORIZATION"] = f"Token {token}"
    if body is not None:
        environ["CONTENT_TYPE"] = headers.pop("content_type", "application/json")
        environ["CONTENT_LENGTH"] = str(len(raw))
    environ.update({f"HTTP_{k.upper()}": v for k, v in headers.items()})
    answer = {}

    def start_response(status, response_headers, exc_info=None):
        answer["status"], answer["headers"] = status, list(response_headers)

    with transaction_kept():
        chunks = app(environ, start_response)
        content = b"".join(chunks)
        getattr(chunks, "close", lambda: None)()
    return answer["status"], answer["headers"], content


def next_path(campaign_id) -> str:
    return reverse("rate-campaign-next", kwargs={"pk": campaign_id})


def submit_path(key) -> str:
    return reverse("rate-assignment-submit", kwargs={"key": key})


@pytest.fixture
def raters(roles, django_user_model):
    return factories.annotators(django_user_model, 3)


@pytest.fixture
def campaign(researcher, raters):
    return factories.campaign(researcher, raters, n_scenarios=2, overlap=3)


def token_of(user) -> str:
    return Token.objects.get_or_create(user=user)[0].key


def same_answer(hot, full, path, status_only=False, **request):
    """The hot wrapper's answer, checked against the whole application's for the same
    request (sent after it); `status_only` where the application's page has a fresh CSRF
    token each time."""
    ours = call(hot, path, **request)
    theirs = call(full, path, **request)
    assert ours[0] == theirs[0] if status_only else ours == theirs
    return ours


def test_next_and_submit_take_the_hot_path_and_answer_as_the_application(
    hot, full, campaign, raters
):
    token = token_of(raters[0])
    status, headers, body = same_answer(hot, full, next_path(campaign.pk), token=token, body={})
    assert status == "200 OK" and full.calls == 1  # only the comparison's own request
    assert ("Content-Type", "application/json") in headers
    key = json.loads(body)["key"]

    choice = {"preference": -1, "reasons": [], "rationale": "Warmer, <b>kinder</b>."}
    status, _, body = same_answer(hot, full, submit_path(key), token=token, body=choice)
    assert status == "200 OK" and full.calls == 2
    assert json.loads(body)["preference"] == -1
    assert Judgment.objects.filter(assignment__key=key).count() == 1  # the replay stored nothing


def test_nothing_left_is_a_204_from_the_hot_path(hot, full, campaign, raters):
    token = token_of(raters[0])
    for _ in range(campaign.comparisons.count()):
        _, _, body = call(hot, next_path(campaign.pk), token=token, body={})
        key = json.loads(body)["key"]
        call(hot, submit_path(key), token=token, body={"preference": 0})
    assert full.calls == 0
    status, _, body = same_answer(hot, full, next_path(campaign.pk), token=token)
    assert status == "204 No Content" and body == b"" and full.calls == 1


def test_the_request_language_and_a_content_note_match(hot, full, campaign, raters):
    scenarios = campaign.comparisons.values("scenario")
    Scenario.objects.filter(pk__in=scenarios).update(risk_level="high")
    token = token_of(raters[0])
    for language in ("zh-hans", "en", "fr"):
        _, headers, body = same_answer(
            hot, full, next_path(campaign.pk), token=token, accept_language=language
        )
        note = json.loads(body)["content_note"]
        assert note["level"] == "high"
        assert ("Content-Language", "en" if language == "fr" else language) in headers
    _, _, body = same_answer(
        hot, full, next_path(campaign.pk), token=token, cookie="django_language=zh-hans"
    )
    assert json.loads(body)["content_note"]["label"] != "High risk"
    assert full.calls == 4


@pytest.mark.parametrize(
    ("request_change", "items"),
    [
        ({"token": "0" * 40}, 0),  # no such token: 401
        ({"token": None}, 0),  # none: 401
        ({"accept": "text/html", "status_only": True}, 1),  # DRF's browsable page
        ({"accept": "application/xml"}, 0),  # 406
        ({"query": "format=json"}, 1),
        ({"method": "GET"}, 0),  # 405
        ({"cookie": "sessionid=abc"}, 1),  # a browser's session: the study gate applies
    ],
)
def test_other_requests_for_next_go_to_the_application(
    hot, full, campaign, raters, request_change, items
):
    request = {"token": token_of(raters[0]), "body": {}, **request_change}
    same_answer(hot, full, next_path(campaign.pk), **request)
    assert full.calls == 2
    assert Assignment.objects.filter(annotator=raters[0]).count() == items


def test_refused_next_requests_are_the_applications_own(
    hot, full, campaign, raters, researcher, django_user_model
):
    outsider = factories.annotators(django_user_model, 1, prefix="outsider")[0]
    same_answer(hot, full, next_path(campaign.pk), token=token_of(outsider))  # 404
    same_answer(hot, full, next_path(campaign.pk), token=token_of(researcher))  # 403
    raters[0].is_active = False
    raters[0].save()
    same_answer(hot, full, next_path(campaign.pk), token=token_of(raters[0]))  # 401
    Campaign.objects.filter(pk=campaign.pk).update(state=Campaign.State.PAUSED)
    status, _, _ = same_answer(hot, full, next_path(campaign.pk), token=token_of(raters[1]))
    assert status.startswith("409") and full.calls == 8
    assert not Assignment.objects.exists()


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        ({"preference": 7}, "application/json"),  # 400 from the serializer
        ({"preference": 1, "confidence": 2}, "application/json"),  # not asked for: 400
        (b"{not json", "application/json"),  # 400 from the parser
        (b'{"preference": NaN}', "application/json"),  # strict JSON: 400
        (b"[1, 2]", "application/json"),
        ({"preference": 1}, "application/json; charset=utf-8"),  # DRF reads the charset
        (b"preference=1", "application/x-www-form-urlencoded"),
    ],
)
def test_other_submissions_are_the_applications_own_and_keep_nothing(
    hot, full, campaign, raters, body, content_type
):
    token = token_of(raters[0])
    _, _, item = call(hot, next_path(campaign.pk), token=token)
    key = json.loads(item)["key"]
    same_answer(hot, full, submit_path(key), token=token, body=body, content_type=content_type)
    assert full.calls == 2
    stored = Judgment.objects.filter(assignment__key=key).count()
    assert stored == (1 if body in ({"preference": 1}, b"preference=1") else 0)


def test_a_host_not_allowed_is_refused_by_the_application(hot, full, campaign, raters):
    status, _, _ = same_answer(
        hot, full, next_path(campaign.pk), token=token_of(raters[0]), host="evil.example"
    )
    assert status.startswith("400") and full.calls == 2
    assert not Assignment.objects.exists()


@pytest.fixture
def https_only(settings):
    """DJANGO_SECURE's rules (h2htalk/settings.py), and a Django application built with them
    (its middleware reads them when it is built)."""
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_HSTS_SECONDS = 31536000
    settings.SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    settings.SECURE_HSTS_PRELOAD = True
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    return get_wsgi_application()


def test_behind_https_only_plain_http_is_redirected_and_https_gets_hsts(
    https_only, campaign, raters
):
    full = Watched(https_only)
    hot = HotRatingApi(full)
    token = token_of(raters[0])
    status, _, _ = same_answer(hot, full, next_path(campaign.pk), token=token)
    assert status.startswith("301") and full.calls == 2
    status, headers, _ = same_answer(
        hot, full, next_path(campaign.pk), token=token, x_forwarded_proto="https"
    )
    assert status == "200 OK" and full.calls == 3  # the hot path answered the first
    assert ("Strict-Transport-Security", "max-age=31536000; includeSubDomains; preload") in headers


def test_a_body_over_the_upload_limit_is_left_to_the_application(
    hot, full, campaign, raters, settings
):
    token = token_of(raters[0])
    _, _, item = call(hot, next_path(campaign.pk), token=token)
    key = json.loads(item)["key"]
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100
    body = {"preference": 1, "rationale": "x" * 200}
    status, _, _ = same_answer(hot, full, submit_path(key), token=token, body=body)
    assert status.startswith("400") and full.calls == 2
    assert not Judgment.objects.exists()


def test_another_raters_item_and_a_closed_campaign_are_refused_as_by_the_application(
    hot, full, campaign, raters
):
    _, _, item = call(hot, next_path(campaign.pk), token=token_of(raters[0]))
    key = json.loads(item)["key"]
    status, _, _ = same_answer(
        hot, full, submit_path(key), token=token_of(raters[1]), body={"preference": 1}
    )
    assert status.startswith("404")
    Campaign.objects.filter(pk=campaign.pk).update(state=Campaign.State.CLOSED)
    status, _, _ = same_answer(
        hot, full, submit_path(key), token=token_of(raters[0]), body={"preference": 1}
    )
    assert status.startswith("409") and full.calls == 4
    assert not Judgment.objects.exists()


def test_a_fault_in_the_hot_path_is_answered_by_the_application(
    hot, full, campaign, raters, monkeypatch
):
    def broken(*args, **kwargs):
        raise RuntimeError("a fault inside the hot path")

    monkeypatch.setattr("annotation.hot_api._next", broken)
    status, _, _ = call(hot, next_path(campaign.pk), token=token_of(raters[0]))
    assert status == "200 OK" and full.calls == 1  # the application answered it
    assert Assignment.objects.filter(annotator=raters[0]).count() == 1


@pytest.mark.skipif(not POSTGRES, reason="SQLite has no LATERAL: the token is read first there")
def test_the_hot_path_reads_the_token_with_the_campaign_or_the_item(hot, full, campaign, raters):
    """One statement fewer than the application, which authenticates first: the token is
    read beside the campaign (next) or the item (submit)."""
    token = token_of(raters[0])
    counts = {}
    for name, app in (("first", full), ("hot", hot), ("full", full)):  # first: counts progress
        with CaptureQueriesContext(connection) as queries:
            _, _, item = call(app, next_path(campaign.pk), token=token)
            key = json.loads(item)["key"]
            call(app, submit_path(key), token=token, body={"preference": 1})
        counts[name] = [q["sql"] for q in queries]
    assert full.calls == 4
    assert len(counts["hot"]) == len(counts["full"]) - 2
    token_reads = [sql for sql in counts["hot"] if "authtoken_token" in sql]
    assert len(token_reads) == 2 and all("LATERAL" in sql for sql in token_reads)


def test_the_routes_are_the_api_routes():
    from annotation.hot_api import _NEXT, _SUBMIT

    assert _NEXT.fullmatch(next_path(12))
    assert _SUBMIT.fullmatch(submit_path("8c1f0f4e-55f0-4d3b-9a0e-6a4a3c0a9b1d"))
