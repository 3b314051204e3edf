"""Hostile values in every page's query parameters and every form's fields: no 500.

Schemathesis (test_schemathesis.py) covers what the OpenAPI schema declares; pages and
hand-read parameters are not in it. This walks every URL pattern of the project (the resolver,
as tests/test_permissions.py does; path ids are the `world` fixture's objects) and, logged in
as an admin (who passes every role check) and as a researcher:

- GET: every page and API endpoint with hostile values in each parameter it may read. The
  parameter names come from (1) the view's module source (`request.GET.get("x")`,
  `params.getlist("x")`, `int_param(request.GET, "x")`, ...), (2) the page itself (the fields
  of its forms and the query names of its links) and (3) a fixed list of common names. One
  request sets all of them at once per value; then each name the view or page reads alone
  for the values that broke pages before (`²` and a NUL).
- POST: every form on every page (its action, its fields; hidden and select fields too) with
  a hostile value in all fields at once and in each field alone, plus the POST-only views with
  the names their source reads.

Every URL pattern is requested; the API's `.json` twins (the router's format suffixes: the
same view and action as the URL without one) only once each, their parameters being fuzzed on
the URL without the suffix.

A response of 500, or a streamed body that raises while it is read, fails the test with the
URL, parameter and value. `make test` runs the researcher's walk; the admin's, every page with
every value, is in the slow tier (`make test-slow`); `HOSTILE_PAGE_FUZZ=full` sends every value
to every parameter alone (slower). On PostgreSQL (DATABASE_URL) a NUL reaching a query would
also show up here.
"""

import html.parser
import inspect
import os
import re
import sys
from urllib.parse import parse_qsl, urlsplit

import pytest
from django.test import Client
from django.urls import resolve

from tests import test_permissions
from tests.test_permissions import (
    ADMIN,
    EXPECTED,
    POST_ONLY,
    RESEARCHER,
    resolver_urls,
    urls_for,
)

world = test_permissions.world  # the fixture: one object of every kind
module_world = test_permissions.module_world  # (made once for the module)

# Sent to every parameter: in rotation (request k gives parameter i value (i + k) mod n, so
# each parameter meets each value once in n requests, next to different neighbours).
VALUES = [
    "²",  # passes str.isdigit(), fails int()
    "\x00",
    "99999999999999999999",  # past 64-bit integers
    "-1",
    "x" * 3000,
    "' OR 1=1 --",
    "[",
    "日本語😀",
]
MORE_VALUES = ["", "0", "1.5", "{}", "../../etc/passwd", "%00", "=1+1", "true", "\r\n"]
# Sent to each parameter the view itself reads, alone (so no other parameter's 400 hides it).
SINGLE_VALUES = ["²", "\x00"]
FULL = os.environ.get("HOSTILE_PAGE_FUZZ") == "full"  # every value, alone, to every name
if FULL:
    VALUES = VALUES + MORE_VALUES
    SINGLE_VALUES = VALUES
# The researcher's walk (`make test`): its own code paths, with the values that broke pages. The
# admin's walk, every page with every value, is in the slow tier (`make test-slow`, CI runs it).
RESEARCHER_VALUES = VALUES[:2]
COMMON = [
    "page",
    "size",
    "page_size",
    "format",
    "q",
    "search",
    "ordering",
    "campaign",
    "judge",
    "run",
    "companion",
    "scenario",
    "subtask",
    "status",
    "state",
    "table",
    "copy",
    "next",
    "id",
    "ids",
    "limit",
    "offset",
]
# Views not fuzzed by POST: logging out ends the session the fuzzer runs in.
NO_POST = {"logout"}
# Pages read without parameters (the OpenAPI document: slow to build, reads none).
NO_PARAMETERS = {"api_schema"}
SOURCE_NAME = re.compile(
    r"""(?:GET|POST|query_params|params|data|query)\s*(?:\.get|\.getlist|\.pop)?\s*[\[(]\s*["']([A-Za-z_][\w-]*)["']"""
    r"""|(?:int_param|int_list)\(\s*[\w.]+,\s*["']([A-Za-z_][\w-]*)["']"""
)


class FormParser(html.parser.HTMLParser):
    """The forms of a page (action, method, field names) and the query names of its links."""

    def __init__(self):
        super().__init__()
        self.forms: list[dict] = []
        self.link_names: set[str] = set()
        self._form = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form":
            self._form = {
                "action": attrs.get("action") or "",
                "method": (attrs.get("method") or "get").lower(),
                "fields": {},
            }
            self.forms.append(self._form)
        elif tag in ("input", "select", "textarea", "button") and attrs.get("name"):
            target = self._form if self._form is not None else {"fields": {}}
            if attrs.get("type") == "file":
                return
            target["fields"].setdefault(attrs["name"], attrs.get("value") or "")
            if attrs.get("form"):  # a field tied to a form elsewhere on the page
                self.link_names.add(attrs["name"])
        elif tag == "a" and attrs.get("href") and "?" in attrs["href"]:
            self.link_names.update(name for name, _ in parse_qsl(urlsplit(attrs["href"]).query))

    def handle_endtag(self, tag):
        if tag == "form":
            self._form = None


def page_of(response) -> FormParser:
    parser = FormParser()
    if (
        response is not None
        and response.status_code == 200
        and "html" in response.get("Content-Type", "")
    ):
        parser.feed(response.content.decode("utf-8", "replace"))
    return parser


def _names_in(text: str) -> set[str]:
    return {a or b for a, b in SOURCE_NAME.findall(text)}


def _view(url: str):
    func = resolve(urlsplit(url).path).func
    func = getattr(func, "cls", None) or getattr(func, "view_class", None) or func
    return inspect.unwrap(func)


def format_suffixed(url: str) -> bool:
    """The API's `.json` twin of a URL (the router's format suffix): the same view and action,
    whose only difference, the renderer the suffix names, is the one a request without it gets
    (JSON, the first renderer). Its parameters are fuzzed on the URL without the suffix."""
    return "format" in resolve(urlsplit(url).path).kwargs


def source_names(url: str) -> tuple[set[str], set[str]]:
    """(names the view itself reads, names its whole module reads), from the source."""
    view = _view(url)
    module = sys.modules.get(getattr(view, "__module__", ""), None)
    try:
        own = _names_in(inspect.getsource(view))
        everywhere = _names_in(inspect.getsource(module)) if module else set()
    except (OSError, TypeError):
        own, everywhere = set(), set()
    filterset = getattr(view, "filterset_class", None)
    if filterset is not None:
        own |= set(filterset.base_filters)
    return own, everywhere | own


class Fuzzer:
    def __init__(self, client: Client, user):
        self.client, self.user = client, user
        self.failures: list[str] = []
        self.requests = 0
        self.names: set[str] = set()  # URL names walked
        self.urls: set[str] = set()  # and the URL of each of their patterns

    def send(self, method: str, url: str, data: dict, label: str):
        self.requests += 1
        try:
            if method == "get":
                response = self.client.get(url, data)
            else:
                response = self.client.post(url, data)
            if getattr(response, "streaming", False):
                b"".join(response.streaming_content)
        except Exception as error:  # a streamed body that raises while it is read
            self.failures.append(f"{label}: {type(error).__name__}: {error}"[:300])
            return None
        if response.status_code >= 500:
            self.failures.append(f"{label}: {response.status_code}")
        if response.status_code == 302 and "/login/" in response.get("Location", ""):
            self.client.force_login(self.user)  # the session went (a role change, say)
        return response

    def rotate(self, method: str, url: str, names: list[str], values: list[str], base=None):
        for k in range(len(values)):
            data = dict(base or {})
            data.update({n: values[(i + k) % len(values)] for i, n in enumerate(names)})
            self.send(method, url, data, f"{method.upper()} {url} {_short(data)}")

    def singles(self, method: str, url: str, names, values, base=None):
        for name in sorted(names):
            for value in values:
                data = {**(base or {}), name: value}
                self.send(method, url, data, f"{method.upper()} {url} {name}={value!r:.30}")


def _short(data: dict) -> str:
    return " ".join(f"{k}={v!r:.12}" for k, v in sorted(data.items()))[:200]


def role_names(role: str, shard: int = 0, shards: int = 1) -> list[str]:
    """The URL names `role` may reach, every `shards`-th of them from `shard` on."""
    return [name for name in sorted(EXPECTED) if role in EXPECTED[name]][shard::shards]


def run_fuzz(
    world, role: str, values: list[str], single_values: list[str], names: list[str]
) -> Fuzzer:
    user = world.users[role]
    client = Client(raise_request_exception=False)
    client.force_login(user)
    fuzzer = Fuzzer(client, user)
    forms: dict[str, dict[str, str]] = {}
    post_only: dict[str, set[str]] = {}
    for name in names:
        fuzzer.names.add(name)
        for url in urls_for(name, world, role):
            fuzzer.urls.add(url)
            if format_suffixed(url):  # the same view as the URL without it: answers, no more
                method = "post" if name in POST_ONLY else "get"
                fuzzer.send(method, url, {}, f"{method.upper()} {url}")
                continue
            own, module = source_names(url)
            if name in POST_ONLY:
                if name not in NO_POST:
                    post_only[url] = own
                continue
            page = page_of(fuzzer.send("get", url, {}, f"GET {url}"))
            if name in NO_PARAMETERS:
                continue
            mine = own | page.link_names
            for form in page.forms:
                action = urlsplit(form["action"]).path or urlsplit(url).path
                if form["method"] == "get" and action == urlsplit(url).path:
                    mine |= set(form["fields"])
                elif form["method"] == "post" and resolve(action).url_name not in NO_POST:
                    forms.setdefault(action, {}).update(form["fields"])
            mine.discard("csrfmiddlewaretoken")
            fuzzer.rotate("get", url, sorted(mine | module | set(COMMON)), values)
            fuzzer.singles("get", url, mine, single_values)
    for url in forms:
        post_only.pop(url, None)
    for url, fields in sorted(forms.items()) + sorted(
        (url, dict.fromkeys(names, "")) for url, names in post_only.items()
    ):
        fields = {k: v for k, v in fields.items() if k != "csrfmiddlewaretoken"}
        fuzzer.rotate("post", url, sorted(fields), values)
        fuzzer.singles("post", url, fields, single_values, base=fields)
    return fuzzer


# The admin's walk in shards (its URL names dealt in turn), so that parallel test workers
# (`make test-slow`) share it: whole, it was the suite's longest test.
SHARDS = {ADMIN: 3, RESEARCHER: 1}


def test_no_researcher_page_answers_500_to_hostile_parameters(world):
    walked(world, RESEARCHER, 0, RESEARCHER_VALUES, [])


@pytest.mark.slow
@pytest.mark.parametrize("shard", range(SHARDS[ADMIN]))
def test_no_admin_page_answers_500_to_any_hostile_value(world, shard):
    walked(world, ADMIN, shard, VALUES, SINGLE_VALUES)


def walked(world, role: str, shard: int, values: list[str], single_values: list[str]) -> None:
    names = role_names(role, shard, SHARDS[role])
    fuzzer = run_fuzz(world, role, values, single_values, names)
    assert fuzzer.names == set(names)
    assert len(fuzzer.urls) == sum(len(resolver_urls()[name]) for name in names)
    assert fuzzer.requests > 150
    print(f"{role} ({shard}): {fuzzer.requests} requests, {len(fuzzer.names)} URL names")
    assert fuzzer.failures == [], "\n".join(fuzzer.failures[:50])


def test_the_shards_walk_every_url_name_once():
    for role, shards in SHARDS.items():
        dealt = [name for shard in range(shards) for name in role_names(role, shard, shards)]
        assert sorted(dealt) == role_names(role)
