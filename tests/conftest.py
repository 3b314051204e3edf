from pathlib import Path

import pytest
from django.contrib.auth.models import Group

from h2htalk.roles import ADMIN, ANNOTATOR, RESEARCHER, ensure_role_groups

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data" / "h2htalk"
PASSWORD = "correct horse battery staple"


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
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


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


@pytest.fixture
def release_file():
    path = SHARED_DATA / "dialogue_base.jsonl"
    if not path.exists():
        pytest.skip(f"{path} is missing (the benchmark's released data, see SOURCE.md)")
    return path


@pytest.fixture(autouse=True)
def celery_eager(request):
    """Tasks run in-process unless a test is about jobs (marked `worker`)."""
    from h2htalk.celery import app

    if request.node.get_closest_marker("worker"):
        yield
        return
    previous = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = previous
