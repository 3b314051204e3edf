"""Browser tests: Debian's Chromium driven by Playwright (sync API) against pytest-django's live_server.

Every test here is marked `browser`. Without /usr/bin/chromium they are skipped, unless the `CI`
environment variable is set: there a missing browser is a failure. `playwright install` is never
needed: the Debian build is launched through `executable_path`.

The live server runs without DEBUG. pytest-django wraps it in staticfiles' StaticFilesHandler
(finders, `insecure=True`), so htmx and the css are served from static/ without collectstatic;
`assert_static_loaded` checks that they really arrived in the page.

A test fails if the page logs a console error, throws an uncaught exception or gets an HTTP
error response, unless it expects that response (`expected_errors`: an error page it opens on
purpose).
"""

import io
import os
import re
from collections import defaultdict
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.apps import apps
from django.contrib.auth.models import Group
from django.core import serializers
from django.core.management import call_command
from django.db import connection, connections, transaction
from django.urls import reverse

from annotation.models import Campaign
from h2htalk.models import Job
from scenarios.models import Scenario
from scoring.models import CalibratedJudge, JudgeConfig, JudgeRun, Release
from tests.conftest import PASSWORD

# Playwright's sync API runs an asyncio loop in this thread; Django refuses ORM calls from a
# thread with a running loop unless told that this is fine (it is: nothing else runs here).
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
MISSING = f"Chromium not found at {CHROMIUM}: browser tests skipped; install Debian's chromium"
HERE = Path(__file__).resolve().parent
TIMEOUT_MS = 5_000


def _in_browser_dir(item) -> bool:
    return HERE in Path(str(item.path)).resolve().parents


def pytest_collection_modifyitems(config, items):
    missing = not CHROMIUM.exists()
    for item in items:
        if not _in_browser_dir(item):
            continue
        item.add_marker(pytest.mark.browser)
        if missing and not os.environ.get("CI"):
            item.add_marker(pytest.mark.skip(reason=MISSING))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """Turn what the browser reported during the test into a failure of the test itself."""
    result = yield
    problems = getattr(item, "_browser_problems", None)
    if problems:
        pytest.fail("The browser reported errors:\n  " + "\n  ".join(problems), pytrace=False)
    return result


@pytest.fixture(scope="session")
def browser():
    if not CHROMIUM.exists():
        pytest.fail(
            f"Chromium not found at {CHROMIUM}: CI is set, so a missing browser is a failure; "
            "install Debian's chromium",
            pytrace=False,
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        yield chromium
        chromium.close()
        # Django keeps its connections per context, and the tests ran in the context Playwright
        # set up: the connection of that context stayed open once Playwright stopped, and
        # dropping the test database at the end waited 5 s for it, then failed with a warning.
        connections.close_all()


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """Users are created (and log in) in every test: skip the deliberately slow hasher."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def expected_errors(request) -> set[tuple[int, str]]:
    """Add (status, path) for an error response the test provokes on purpose: it is then no
    failure, nor is the console error Chromium logs for it."""
    expected: set[tuple[int, str]] = set()
    request.node._browser_expected = expected
    return expected


def _expected(request, status: int, url: str) -> bool:
    return (status, urlsplit(url).path) in getattr(request.node, "_browser_expected", ())


@pytest.fixture
def page(browser, live_server, request):
    """A fresh browser context (no cookies) per test, pointed at the live server."""
    yield from _page(browser, live_server, request, "en-US")


@pytest.fixture
def zh_page(browser, live_server, request):
    """`page` in a browser whose language is Simplified Chinese (Accept-Language zh-CN)."""
    yield from _page(browser, live_server, request, "zh-CN")


def _page(browser, live_server, request, locale: str):
    context = browser.new_context(base_url=live_server.url, locale=locale)
    context.set_default_timeout(TIMEOUT_MS)
    context.set_default_navigation_timeout(2 * TIMEOUT_MS)
    tab = context.new_page()
    problems: list[str] = []

    def on_console(message):
        url = (message.location or {}).get("url", "")
        status = re.search(r"status of (\d{3})", message.text)
        if status and _expected(request, int(status.group(1)), url):
            return
        if message.type != "error":
            return
        if message.text.startswith("htmx:sendAbort"):
            # A poll in flight when the test follows a link: the browser aborts it as it leaves
            # the page, and htmx logs the abort (after its afterRequest) as errors. Not a fault
            # of the page; any other htmx error still fails the test.
            if problems and problems[-1].startswith("console error: htmx:afterRequest"):
                problems.pop()
            return
        problems.append(f"console error: {message.text} ({url})")

    def on_response(response):
        if response.status >= 400 and not _expected(request, response.status, response.url):
            problems.append(f"HTTP {response.status}: {response.request.method} {response.url}")

    tab.on("console", on_console)
    tab.on("pageerror", lambda error: problems.append(f"uncaught exception: {error}"))
    tab.on("response", on_response)
    request.node._browser_problems = problems
    yield tab
    context.close()


def assert_static_loaded(page):
    """htmx and the stylesheet really reached the page (not just a tag pointing at a 404)."""
    assert page.evaluate("typeof window.htmx") == "object", "htmx did not load"
    assert page.evaluate("typeof window.htmx.ajax") == "function"
    background = page.evaluate("getComputedStyle(document.documentElement).backgroundColor")
    assert background == "rgb(247, 248, 250)", f"app.css did not apply (background {background})"


def rating_keys_ready(page) -> None:
    """Wait until the rating page's script has run (it marks the submit button): a key pressed
    before that would be lost."""
    from playwright.sync_api import expect

    expect(page.locator("[data-submit]")).to_have_attribute("aria-disabled", "true")


@pytest.fixture
def log_in(page):
    """Log in through the real login form; returns the page on the user's landing page."""

    def log_in(user, password=PASSWORD):
        page.goto("/login/")
        page.get_by_label("Username").fill(user.username)
        page.get_by_label("Password").fill(password)
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url(lambda url: "/login/" not in url)
        assert_static_loaded(page)
        return page

    return log_in


@pytest.fixture
def researcher_page(log_in, researcher):
    return log_in(researcher)


DEMO_USERS = ("admin", "researcher", "annotator")
# Rows the demo fixture does not keep: made by migrate in every test database (and left in
# place by the flush after each test that used the live server), and the sessions.
MADE_BY_MIGRATE = ("contenttypes", "auth.permission", "auth.group", "sessions")


@pytest.fixture(scope="session")
def demo_rows(tmp_path_factory) -> dict:
    """What `demo` keeps (per xdist worker): its rows, serialised, and the number of rows of
    each model once it was made."""
    return {"path": tmp_path_factory.mktemp("demo") / "rows.json", "counts": None, "groups": None}


@pytest.fixture
def demo(roles, django_user_model, demo_rows):
    """`make demo`'s data, its users with the test password, and the few objects it lacks.

    Made by `load_demo` once per process (about 5 s: simulated rating, a calibration and a
    release computed) and kept: every later test writes the same rows with the same ids
    instead (a tenth of a second), and fails if any model then counts other than it did."""
    path = demo_rows["path"]
    if demo_rows["counts"] is None:
        assert not _rows_not_made_by_migrate(), "the demo is kept from an empty database"
        _make_demo(django_user_model)
        call_command("dumpdata", exclude=list(MADE_BY_MIGRATE), output=str(path), verbosity=0)
        demo_rows["counts"] = _counts()
        demo_rows["groups"] = dict(Group.objects.values_list("pk", "name"))
    else:
        _write_rows(path, demo_rows["groups"])
        assert _counts() == demo_rows["counts"], "the demo's rows did not all come back"
    users = {name: django_user_model.objects.get(username=name) for name in DEMO_USERS}
    return users, _demo_pages()


def _counts() -> dict[str, int]:
    return {model._meta.label: model._default_manager.count() for model in apps.get_models()}


def _rows_not_made_by_migrate() -> dict[str, int]:
    made = set(MADE_BY_MIGRATE)
    return {
        label: n
        for label, n in _counts().items()
        if n and not {label.split(".")[0], label.lower()} & made
    }


def _write_rows(path: Path, group_names: dict[int, str]) -> None:
    """The dumped rows in one INSERT per table (loaddata saves them one by one: 2,400 queries,
    2 s). Foreign keys are checked at commit, so the order of the tables does not matter. The
    role groups are migrate's, whose ids need not be those of the dump: users join them by name."""
    rows = list(serializers.deserialize("json", path.read_text("utf-8")))
    groups = dict(Group.objects.values_list("name", "pk"))
    tables: dict[type, list] = defaultdict(list)
    for row in rows:
        tables[type(row.object)].append(row.object)
        for name, pks in row.m2m_data.items():
            field = row.object._meta.get_field(name)
            through = field.remote_field.through
            source, target = field.m2m_field_name(), field.m2m_reverse_field_name()
            if field.related_model is Group:
                pks = [groups[group_names[pk]] for pk in pks]
            for pk in pks:
                tables[through].append(
                    through(**{f"{source}_id": row.object.pk, f"{target}_id": pk})
                )
    with transaction.atomic():
        for model, objects in tables.items():
            model._base_manager.bulk_create(objects)
        _sequences_past_rows(list(tables))


def _sequences_past_rows(models: list) -> None:
    """Each id sequence past the largest id of its table, and never back: the flush between
    tests keeps the sequences, so ids are not used again (the cache outlives a test and keys
    some things by id). SQLite's AUTOINCREMENT follows the largest id by itself."""
    if connection.vendor != "postgresql":
        return
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        for model in models:
            table, pk = quote(model._meta.db_table), model._meta.pk.column
            sql = f"SELECT setval(s, GREATEST(nextval(s), MAX({quote(pk)}))) FROM {table}"  # noqa: S608
            cursor.execute(f"{sql}, pg_get_serial_sequence(%s, %s) s GROUP BY s", [table, pk])


def _make_demo(django_user_model) -> None:
    call_command("load_demo", stdout=io.StringIO())
    for name in DEMO_USERS:
        user = django_user_model.objects.get(username=name)
        user.set_password(PASSWORD)
        user.save()
    judge = JudgeConfig.objects.create(
        name="layout judge", base_url="http://127.0.0.1:9/v1", model_id="m", rubric="r"
    )
    JudgeRun.objects.create(name="layout judging", judge=judge, state="cancelled")
    Job.objects.create(
        kind="scenario_import",
        state=Job.State.COMPLETED,
        created_by=django_user_model.objects.get(username="researcher"),
        params={"path": "imports/x/a.jsonl", "filename": "a.jsonl", "dry_run": True},
    )


def _demo_pages() -> dict[str, list[str]]:
    judge = JudgeConfig.objects.get(name="layout judge")
    judge_run = JudgeRun.objects.get(name="layout judging")
    job = Job.objects.get(kind="scenario_import", params__path="imports/x/a.jsonl")
    campaign = Campaign.objects.get(name__contains="demo data")
    calibrated = CalibratedJudge.objects.get(campaign=campaign)
    release = Release.objects.get(campaign=campaign)
    scenario = Scenario.objects.order_by("pk").first()
    return {
        "annotator": [reverse("annotation:home"), reverse("annotation:rate", args=[campaign.pk])],
        "researcher": [
            reverse("scenarios:list"),
            reverse("scenarios:detail", args=[scenario.pk]),
            reverse("scenarios:edit", args=[scenario.pk]),
            reverse("scenarios:history", args=[scenario.pk]),
            reverse("scenarios:import"),
            reverse("scenarios:personas"),
            reverse("companions:list"),
            reverse("companions:runs"),
            reverse("companions:run", args=[campaign.runs.first().pk]),
            reverse("companions:responses"),
            reverse("campaigns:list"),
            reverse("campaigns:detail", args=[campaign.pk]),
            reverse("campaigns:edit", args=[campaign.pk]),
            reverse("campaigns:gold", args=[campaign.pk]),
            reverse("scoring:agreement", args=[campaign.pk]),
            reverse("judges:list"),
            reverse("judges:edit", args=[judge.pk]),
            reverse("judges:runs"),
            reverse("judges:run", args=[judge_run.pk]),
            reverse("calibration:list"),
            reverse("calibration:detail", args=[calibrated.pk]),
            reverse("calibration:route"),
            reverse("releases:list"),
            reverse("releases:detail", args=[release.pk]),
            reverse("job_detail", args=[job.pk]),
        ],
        "admin": [reverse("admin_home"), reverse("scenarios:list")],
    }
