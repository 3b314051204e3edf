import os
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import Group
from django.db import transaction
from django.test import override_settings
from django.utils import translation

from h2htalk.celery import app
from h2htalk.roles import ADMIN, ANNOTATOR, RESEARCHER, ensure_role_groups

REPO = Path(__file__).resolve().parent.parent
# The benchmark's released data, beside the checkout (a worktree elsewhere sets
# H2HTALK_SHARED_DATA to the folder).
SHARED_DATA = Path(
    os.environ.get("H2HTALK_SHARED_DATA") or REPO.parent / "shared" / "data" / "h2htalk"
)
PASSWORD = "correct horse battery staple"
FAST_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
REDIS_DATABASES = 16  # Redis's default number of databases


def _redis_database_of_this_worker() -> None:
    """Under `pytest -n N` (pytest-xdist, as `make test` runs) every worker process has its own
    test database (pytest-django adds the suffix) and, from here, its own Redis database: the
    configured one plus the worker's number (gw0 keeps it). Two workers sharing one would see
    each other's cache keys (job ids and user names repeat across their databases) and a
    test's cache.clear() (FLUSHDB) would wipe the other's jobs and throttle counters. Set in
    os.environ as well, so the Celery workers a test starts use the same database."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        return
    moved = {}
    for name in ("CELERY_BROKER_URL", "REDIS_URL"):
        url = os.environ.get(name, "")
        if url.startswith("redis"):
            parts = urlsplit(url)
            number = (int(parts.path.strip("/") or 0) + int(worker[2:])) % REDIS_DATABASES
            moved[name] = os.environ[name] = parts._replace(path=f"/{number}").geturl()
    if not moved:
        return
    broker = moved.get("CELERY_BROKER_URL")
    redis = moved.get("REDIS_URL", broker)  # settings.py: REDIS_URL defaults to the broker
    caches = django_settings.CACHES
    if redis and caches["default"]["BACKEND"].endswith("RedisCache"):
        caches = {"default": {**caches["default"], "LOCATION": redis}}
    override_settings(
        CELERY_BROKER_URL=broker or django_settings.CELERY_BROKER_URL,
        REDIS_URL=redis or django_settings.REDIS_URL,
        CACHES=caches,
    ).enable()  # for the whole process; its setting_changed signal resets the cache handler
    if broker:
        app.conf.broker_url = broker


_redis_database_of_this_worker()


@pytest.fixture(scope="session", autouse=True)
def redis_emptied_at_start():
    """A run starts from an empty Redis database, as from an empty test database: what an earlier
    run left there (a heartbeat keeps 24 h) is keyed by the same database name and job ids, and
    an old beat of "job 5" made the fresh running job 5 of a later run look stale."""
    from django.core.cache import cache

    if django_settings.CACHES["default"]["BACKEND"].endswith("RedisCache"):
        cache.clear()


# Made by migrate's post_migrate receivers and left alone by the flush between tests
# (`flush_by_delete`).
KEPT_BY_FLUSH = frozenset(
    {"django_content_type", "auth_permission", "auth_group", "auth_group_permissions"}
)


@pytest.fixture(scope="session", autouse=True)
def flush_by_delete():
    """After a test on the committed database (`transactional_db`, `live_server`: the browser
    and worker tests, some 150) Django empties every table with one TRUNCATE, which on
    PostgreSQL takes 0.35 s: each of the 60 tables and their indexes get new files. They hold
    the few rows one test made, which DELETE removes in 6 ms. Every foreign key is DEFERRABLE
    INITIALLY DEFERRED (as Django makes them) and the flush runs in one transaction, so the
    order of the tables does not matter. Sequences go on as after TRUNCATE; `reset_sequences`
    and `allow_cascade` keep Django's TRUNCATE.

    The rows migrate's post_migrate signal makes (content types, permissions, the role groups
    and their permissions: KEPT_BY_FLUSH) are left in place, on both backends: the flush sends
    that signal again, and its receivers, which find every row there, then write nothing
    instead of making some 400 rows again after every such test (about 50 s of the workers'
    time in `make test`, py-spy). No test changes those rows."""
    from django.db.backends.postgresql.operations import DatabaseOperations
    from django.db.backends.sqlite3.base import DatabaseWrapper as SQLite

    truncate = DatabaseOperations.sql_flush

    def by_delete(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        if not tables or reset_sequences or allow_cascade:
            return truncate(
                self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade
            )
        delete = style.SQL_KEYWORD("DELETE FROM")
        return ["; ".join(f"{delete} {style.SQL_FIELD(self.quote_name(t))}" for t in tables)]

    def keeping_migrates_rows(flush):
        def sql_flush(self, style, tables, **options):
            return flush(self, style, [t for t in tables if t not in KEPT_BY_FLUSH], **options)

        return sql_flush

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(DatabaseOperations, "sql_flush", keeping_migrates_rows(by_delete))
        patch.setattr(
            SQLite.ops_class, "sql_flush", keeping_migrates_rows(SQLite.ops_class.sql_flush)
        )
        yield


def make_user(django_user_model, username, role=None):
    user = django_user_model.objects.create_user(username=username, password=PASSWORD)
    if role == ADMIN:
        user.is_staff = user.is_superuser = True
        user.save()
    if role:
        user.groups.add(Group.objects.get(name=role))
    return user


@pytest.fixture(autouse=True)
def fast_password_hasher(settings):
    """Tests create many users; the production hasher is deliberately slow."""
    settings.PASSWORD_HASHERS = FAST_HASHERS


@pytest.fixture(autouse=True)
def default_language():
    """Every test starts in the default language: a request whose user reads Chinese leaves
    Chinese active in its thread (LocaleMiddleware activates and never resets), and a later test
    of the same worker would read its messages in Chinese."""
    translation.activate(django_settings.LANGUAGE_CODE)
    yield
    translation.activate(django_settings.LANGUAGE_CODE)


@contextmanager
def as_in_a_test(django_db_blocker, media: Path):
    """For a fixture wider than one test: database access, and what the function-scoped autouse
    fixtures give a test (fast password hasher, media in a temporary folder, eager Celery)."""
    eager = app.conf.task_always_eager
    app.conf.task_always_eager = True
    try:
        with (
            django_db_blocker.unblock(),
            override_settings(PASSWORD_HASHERS=FAST_HASHERS, MEDIA_ROOT=media),
        ):
            yield
    finally:
        app.conf.task_always_eager = eager


@pytest.fixture(scope="module")
def module_db(django_db_setup, django_db_blocker, tmp_path_factory):
    """Rows made once for a whole module: a transaction open from the first test that asks
    for them to the end of the module. Each test's own transaction (`db`) is a savepoint
    inside it, rolled back after the test as usual, so every test starts from these rows
    whatever the one before did; they are rolled back at the end of the module.

    Yields a context manager (`as_in_a_test`) for the module-scoped fixture that writes the
    rows. Only for modules whose tests use `db` (not `transactional_db` or `live_server`) and
    do not make the same rows themselves."""
    with django_db_blocker.unblock():
        outer = transaction.atomic()
        outer._from_testcase = True  # as Django's TestCase marks its own
        outer.__enter__()
    media = tmp_path_factory.mktemp("module-media")
    try:
        yield lambda: as_in_a_test(django_db_blocker, media)
    finally:
        with django_db_blocker.unblock():
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)


@pytest.fixture(autouse=True)
def in_process_cache(settings):
    """Without Redis the cache is the database table h2htalk_cache, shared by every process.
    An in-process test runs inside one transaction, where the threads that write to the cache
    (LLM concurrency slots, job heartbeats) would lock SQLite's in-memory test database, and
    tests without the database could not touch the cache: they get per-process memory, empty
    at the start of each test (job ids repeat across tests). The database cache is tested by
    tests/test_login_throttle.py (in process) and tests/test_login_throttle_server.py (real
    gunicorn workers)."""
    if settings.CACHES["default"]["BACKEND"].endswith("DatabaseCache"):
        from django.core.cache import cache

        settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
        cache.clear()


@pytest.fixture(autouse=True)
def media_in_tmp(settings, tmp_path):
    """Uploads go to a per-test folder, never into the checkout."""
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.fixture
def roles(db):
    ensure_role_groups()


@pytest.fixture
def admin_user(roles, django_user_model):
    return make_user(django_user_model, "admin1", ADMIN)


@pytest.fixture
def researcher(roles, django_user_model):
    return make_user(django_user_model, "researcher1", RESEARCHER)


@pytest.fixture
def annotator(roles, django_user_model):
    return make_user(django_user_model, "annotator1", ANNOTATOR)


@pytest.fixture
def nobody(roles, django_user_model):
    return make_user(django_user_model, "norole1")


@pytest.fixture
def researcher_client(client, researcher):
    client.force_login(researcher)
    return client


@pytest.fixture
def annotator_client(client, annotator):
    client.force_login(annotator)
    return client


def require_shared(path: Path) -> Path:
    """A file of the benchmark's released data: skipped without it, a failure in CI."""
    if not path.exists():
        message = f"{path} is missing (the benchmark's released data, see SOURCE.md)"
        if os.environ.get("CI"):
            pytest.fail(f"{message}; CI is set, so missing input is a failure", pytrace=False)
        pytest.skip(message)
    return path


@pytest.fixture
def release_file():
    return require_shared(SHARED_DATA / "dialogue_base.jsonl")


@pytest.fixture(autouse=True)
def celery_eager(request):
    """Tasks run in-process unless a test is about jobs (marked `worker`)."""
    if request.node.get_closest_marker("worker"):
        yield
        return
    previous = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = previous


# Modules that mostly wait (real Celery workers, servers and commands in subprocesses, a
# browser, big imports) or take long: run first, so that under `pytest -n` (`make test`) their
# waits overlap the other tests instead of leaving one worker alone with them at the end.
WAITING_FIRST = (
    "tests/test_two_hosts.py",
    "tests/test_faults.py",
    "tests/test_faults_redis.py",
    "tests/test_redis_outage.py",
    "tests/scenarios/test_generation_worker.py",
    "tests/scoring/test_judge_worker.py",
    "tests/scoring/test_release_worker.py",
    "tests/scenarios/test_import_job.py",
    "tests/test_backup.py",
    "tests/test_login_throttle_server.py",
    "tests/test_migrations_keep_rows.py",
    "tests/browser/",
    "tests/hostile/test_schemathesis.py",
    "tests/hostile/test_page_fuzz.py",
)
# Rough seconds per test of these (the other waiting ones: DEFAULT_SECONDS), to deal the
# waiting modules evenly to the workers; the ones named in SPLIT are shared out test by test.
SECONDS_EACH = {
    "tests/test_two_hosts.py": 200,
    "tests/hostile/test_page_fuzz.py": 50,
    "tests/hostile/test_schemathesis.py": 2,
    "tests/test_faults.py": 10,
    "tests/test_migrations_keep_rows.py": 40,
    "tests/test_redis_outage.py": 20,
    "tests/browser/test_accessibility.py": 60,
    "tests/browser/test_whole_path.py": 30,
}
DEFAULT_SECONDS = 5
SPLIT = ("tests/hostile/test_schemathesis.py", "tests/hostile/test_page_fuzz.py")


def _path(item) -> str:
    return Path(str(item.path)).resolve().relative_to(REPO).as_posix()


def _first(path: str) -> int | None:
    return next((i for i, start in enumerate(WAITING_FIRST) if path.startswith(start)), None)


def pytest_collection_modifyitems(config, items):
    """The waiting modules first, dealt to the workers of `pytest -n`: pytest-xdist's worksteal
    hands each worker a contiguous share of the list, so each share starts with its part of
    them (heaviest first, to the least loaded share), then the other tests in their order (idle
    workers steal from the end of the longest queue). Modules stay whole (module-scoped
    fixtures are made once), except those in SPLIT."""
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    groups: dict[str, list] = {}
    rest = []
    for item in items:
        path = _path(item)
        if _first(path) is None:
            rest.append(item)
        else:
            groups.setdefault(path, []).append(item)
    for path in [path for path in groups if path.startswith(SPLIT)]:
        tests = groups.pop(path)
        for part in range(workers):
            if tests[part::workers]:
                groups[f"{path} {part}"] = tests[part::workers]
    heads: list[list] = [[] for _ in range(workers)]
    load = [0.0] * workers

    def seconds(group: list) -> float:
        return len(group) * SECONDS_EACH.get(_path(group[0]), DEFAULT_SECONDS)

    for group in sorted(groups.values(), key=seconds, reverse=True):
        least = load.index(min(load))
        heads[least] += group
        load[least] += seconds(group)
    ordered, left = [], len(items)
    for share, head in enumerate(heads):
        size = left // (workers - share)  # as worksteal divides the list
        taken = max(0, size - len(head))
        ordered += head + rest[:taken]
        rest = rest[taken:]
        left -= size
    items[:] = ordered + rest


def pytest_xdist_auto_num_workers(config):
    """`-n auto` (`make test`): one worker more than the cores this process may use. Much of the
    suite waits (Celery workers, servers, subprocesses, a browser); the extra worker runs tests
    meanwhile."""
    return len(os.sched_getaffinity(0)) + 1
