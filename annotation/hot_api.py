"""The two hot rating endpoints (API next and submit) answered beneath Django's and DRF's
request handling, for the requests a rating client sends on every cycle.

Django's middleware and DRF's dispatch cost about a fifth of a rating cycle's server CPU
(py-spy), work that an API client with a token does not use: no session, no CSRF, no content
negotiation, no browsable page. `HotRatingApi` (WSGI, in `h2htalk/wsgi.py`) answers

    POST /api/rate/campaigns/<id>/next/            200 (the item) or 204
    POST /api/rate/assignments/<key>/submit/       200 (the stored judgment)

itself when the request has `Authorization: Token <key>`, no session cookie, no query string,
an Accept header the JSON renderer answers as is (none, `*/*`, `application/json`) and, to
submit, an `application/json` body. It checks the host against ALLOWED_HOSTS and keeps the
HTTPS rules (DJANGO_SECURE: plain http goes to the application's redirect, https answers carry
HSTS) as Django's middleware does, then runs the views' own steps (`annotation.api`): the same
role check, reads, queue calls, serializers, JSON renderer and headers, in one transaction,
with the token read beside the campaign (next) or the item (submit) in one statement
(`rating_reads.beside_token`) rather than before it. Every other request, and every answer
other than these (401, 403, 404, 409, 400, a database error), goes to the whole application
after the attempt was rolled back, so those answers are the application's own.
`tests/annotation/test_hot_api.py` checks that the answers match the whole application's,
byte for byte and header for header.
"""

import io
import re

from django.conf import settings
from django.core import signals
from django.core.exceptions import DisallowedHost
from django.db import connection, transaction
from django.http import HttpRequest
from django.http.cookie import parse_cookie
from django.utils import translation
from rest_framework.renderers import JSONRenderer

UUID = r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}"
_NEXT = re.compile(r"/api/rate/campaigns/(\d+)/next/")
_SUBMIT = re.compile(rf"/api/rate/assignments/({UUID})/submit/")
_ACCEPTED = frozenset({"", "*/*", "application/json"})
_RENDERER = JSONRenderer()


class _Fallback(Exception):
    """The whole application answers this request."""


class _Request(HttpRequest):
    """What the host check, the HTTPS rules and the language choice read of a request (its
    environ and cookies; Django's request would also build the query and the body)."""

    def __init__(self, environ):  # not HttpRequest's: only these are read
        self.META = environ
        self.COOKIES = parse_cookie(environ.get("HTTP_COOKIE", ""))
        self.path = self.path_info = environ.get("PATH_INFO", "")

    def _get_scheme(self):
        return self.META.get("wsgi.url_scheme", "http")


class HotRatingApi:
    """WSGI middleware around Django's application: see the module's docstring."""

    def __init__(self, application):
        self.application = application

    def __call__(self, environ, start_response):
        route = _route(environ)
        if route is None:
            return self.application(environ, start_response)
        signals.request_started.send(sender=self.__class__, environ=environ)
        try:
            answer = _answer(route, environ)
        except Exception:  # the application answers it, errors and all
            answer = None
        finally:
            signals.request_finished.send(sender=self.__class__)
        if answer is None:
            return self.application(environ, start_response)
        status, headers, body = answer
        start_response(status, headers)
        return [body]


def _route(environ):
    """(view, its URL argument) when this request may take the hot path, else None."""
    if environ.get("REQUEST_METHOD") != "POST" or environ.get("QUERY_STRING"):
        return None
    authorization = environ.get("HTTP_AUTHORIZATION", "")
    if not authorization.startswith("Token ") or environ.get("HTTP_ACCEPT", "") not in _ACCEPTED:
        return None
    if settings.SESSION_COOKIE_NAME in environ.get("HTTP_COOKIE", ""):
        return None  # a browser's session: the study gate and session auth apply
    path = environ.get("PATH_INFO", "")
    if match := _NEXT.fullmatch(path):
        return _next, match[1]
    if (match := _SUBMIT.fullmatch(path)) and environ.get("CONTENT_TYPE") == "application/json":
        return _submit, match[1]
    return None


def _answer(route, environ):
    """(status, headers, body), or None for the whole application (nothing kept)."""
    view, argument = route
    parts = environ["HTTP_AUTHORIZATION"].encode("iso-8859-1").split()  # as DRF reads it
    if len(parts) != 2 or parts[0].lower() != b"token":
        return None
    try:
        key = parts[1].decode()
    except UnicodeError:
        return None
    request = _Request(environ)
    try:
        request.get_host()  # ALLOWED_HOSTS, as CommonMiddleware checks it (else 400)
    except DisallowedHost:
        return None
    secure = request.is_secure()
    if settings.SECURE_SSL_REDIRECT and not secure:
        return None  # SecurityMiddleware's redirect to https
    body = None
    if view is _submit:
        body = _body(environ)
        if body is None:
            return None
    language = translation.get_language_from_request(request)
    translation.activate(language)
    try:
        with transaction.atomic():
            status, data = view(key, argument, body)
        return _response(view.__name__.strip("_"), status, data, language, secure)
    except _Fallback:
        return None
    finally:
        translation.deactivate()


def _body(environ):
    """The request's JSON object, read by the API's own parser; None (after putting the body
    back for the application) when it is not one."""
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return None
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    if length <= 0 or (limit is not None and length > limit):
        return None  # none, or too large: Django's answer, without reading it here
    from rest_framework.exceptions import ParseError

    from h2htalk.parsers import JSONParser

    raw = environ["wsgi.input"].read(length)
    environ["wsgi.input"] = io.BytesIO(raw)
    try:
        data = JSONParser().parse(io.BytesIO(raw), "application/json", {})
    except ParseError:
        return None
    return data if isinstance(data, dict) else None


def _read_beside_token(key: str, statement, argument):
    """The token's user (an active annotator, else _Fallback) and the rest of the row of
    `statement` read beside the token (`rating_reads.beside_token`: one statement, not two)."""
    from h2htalk.roles import token_columns, token_statement, token_user
    from h2htalk.rows import bound_cursor

    from .rating_reads import beside_token

    with bound_cursor() as cursor:
        if connection.vendor != "postgresql":  # no LATERAL: the token first, as DRF reads it
            cursor.execute(*token_statement(key))
            user = _annotator(token_user(cursor.fetchone()))
            cursor.execute(*statement(user, argument))
            return user, cursor.fetchone()
        cursor.execute(*beside_token(key, statement, argument))
        row = cursor.fetchone()
    split = token_columns()
    return _annotator(token_user(row and row[:split])), row[split:]


def _annotator(user):
    """The token's user when they are an active annotator; else _Fallback (DRF's 401 or 403)."""
    from h2htalk.roles import ANNOTATOR, has_role

    if user is None or not user.is_active or not has_role(user, ANNOTATOR):
        raise _Fallback
    return user


def _next(key, campaign_id, body):
    from . import api, queue
    from .rating_reads import campaign_from_row, campaign_statement

    user, row = _read_beside_token(key, campaign_statement, campaign_id)
    campaign = campaign_from_row(row)
    if campaign is None:
        raise _Fallback
    try:
        assignment = queue.next_assignment(user, campaign)
    except queue.QueueError:
        raise _Fallback from None
    if assignment is None:
        return 204, None
    return 200, api._item(user, campaign, assignment)


def _submit(key, item_key, body):
    from django.core.exceptions import ValidationError as NotAKey
    from rest_framework.exceptions import ValidationError

    from . import api, queue
    from .rating_reads import answer_statement, assignment_from_row

    try:
        user, row = _read_beside_token(key, answer_statement, item_key)
    except NotAKey:
        raise _Fallback from None
    try:
        assignment, campaign = queue.still_rated(user, assignment_from_row(row))
        queue.check_open(assignment, campaign, "submit")
        submission = api._read(api.RatingSubmitSerializer, body).submission()
        judgment = queue.submit(user, item_key, submission, item=assignment)
    except (queue.QueueError, ValidationError):
        raise _Fallback from None
    return 200, api._judgment(user, assignment, judgment)


# The headers the whole application sends with these answers, in its order (DRF's, then the
# middleware's); next's study gate reads the session, so it varies by cookie too.
_VARY = {"next": "Accept, Accept-Language, Cookie", "submit": "Accept, Accept-Language"}
_STATUS = {200: "200 OK", 204: "204 No Content"}


def _response(view: str, status: int, data, language: str, secure: bool):
    body = b"" if data is None else _RENDERER.render(data, "application/json", {})
    headers = [("Content-Type", "application/json")] if data is not None else []
    headers += [
        ("Vary", _VARY[view]),
        ("Allow", "POST, OPTIONS"),
        ("X-Frame-Options", settings.X_FRAME_OPTIONS),
        ("Content-Length", str(len(body))),
        ("Content-Language", language),
        *_security_headers(secure),
    ]
    return _STATUS[status], headers, body


def _security_headers(secure: bool) -> list[tuple[str, str]]:
    """SecurityMiddleware's headers, as it sets them from the settings."""
    headers = []
    if settings.SECURE_HSTS_SECONDS and secure:
        hsts = f"max-age={settings.SECURE_HSTS_SECONDS}"
        hsts += "; includeSubDomains" if settings.SECURE_HSTS_INCLUDE_SUBDOMAINS else ""
        hsts += "; preload" if settings.SECURE_HSTS_PRELOAD else ""
        headers.append(("Strict-Transport-Security", hsts))
    if settings.SECURE_CONTENT_TYPE_NOSNIFF:
        headers.append(("X-Content-Type-Options", "nosniff"))
    policy = settings.SECURE_REFERRER_POLICY
    if policy:
        values = [v.strip() for v in policy.split(",")] if isinstance(policy, str) else policy
        headers.append(("Referrer-Policy", ",".join(values)))
    if settings.SECURE_CROSS_ORIGIN_OPENER_POLICY:
        headers.append(("Cross-Origin-Opener-Policy", settings.SECURE_CROSS_ORIGIN_OPENER_POLICY))
    return headers
