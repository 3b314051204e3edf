"""Settings read from the environment, each case in a fresh interpreter with a cleaned env."""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

# The variables settings.py reads; every case starts without any of them.
SETTINGS_VARIABLES = {
    "SECRET_KEY",
    "DJANGO_DEBUG",
    "DATABASE_URL",
    "DB_CONN_MAX_AGE",
    "CELERY_BROKER_URL",
    "REDIS_URL",
    "ALLOWED_HOSTS",
    "CSRF_TRUSTED_ORIGINS",
    "DJANGO_SECURE",
    "MEDIA_ROOT",
    "STATIC_ROOT",
    "DJANGO_SETTINGS_MODULE",
    "DJANGO_ALLOW_ASYNC_UNSAFE",  # set by the browser tests' conftest; deploy check rejects it
}

# Prints what the cases check, as JSON on the last line. Celery's own config is read too, so
# "eager" is what the app really does, not only what settings.py says.
REPORT = """
import json, os
os.environ["DJANGO_SETTINGS_MODULE"] = "h2htalk.settings"
from django.conf import settings
from h2htalk.celery import app
db = settings.DATABASES["default"]
print(json.dumps({
    "debug": settings.DEBUG,
    "secret_key": settings.SECRET_KEY,
    "engine": db["ENGINE"],
    "name": str(db["NAME"]),
    "host": db.get("HOST", ""),
    "port": db.get("PORT", ""),
    "user": db.get("USER", ""),
    "eager": app.conf.task_always_eager,
    "broker": app.conf.broker_url,
    "cache": settings.CACHES["default"]["BACKEND"],
}))
"""


def run(code: str, **env) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in SETTINGS_VARIABLES}
    clean.update(env)
    return subprocess.run(
        [sys.executable, "-c", code],
        env=clean,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def report(**env) -> dict:
    result = run(REPORT, **env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("debug", [None, "0", "false"])
def test_secret_key_is_required_without_debug(debug):
    env = {} if debug is None else {"DJANGO_DEBUG": debug}
    result = run("import h2htalk.settings", **env)
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("django.core.exceptions.ImproperlyConfigured:"), result.stderr
    assert "SECRET_KEY" in last


def test_debug_runs_without_secret_key():
    values = report(DJANGO_DEBUG="1")
    assert values["debug"] is True
    assert values["secret_key"]  # a development-only key was filled in


def test_secret_key_from_environment():
    values = report(SECRET_KEY="from-the-env")
    assert values["secret_key"] == "from-the-env" and values["debug"] is False


def test_default_database_is_the_sqlite_file():
    values = report(SECRET_KEY="x")
    assert values["engine"] == "django.db.backends.sqlite3"
    assert values["name"] == str(REPO / "db.sqlite3")


def test_database_url_selects_postgresql():
    values = report(
        SECRET_KEY="x", DATABASE_URL="postgres://someone@db.example:5433/h2htalk_settings_test"
    )
    assert values["engine"] == "h2htalk.postgresql"  # Django's, idle-only health checks
    assert values["name"] == "h2htalk_settings_test"
    assert (values["host"], values["port"], values["user"]) == ("db.example", 5433, "someone")


def test_celery_is_eager_without_a_broker():
    values = report(SECRET_KEY="x")
    assert values["eager"] is True
    assert values["broker"] == "memory://"
    # Shared by every web and worker process (login throttle, heartbeats): never per-process.
    assert values["cache"].endswith("db.DatabaseCache")


def test_celery_uses_a_configured_broker():
    values = report(SECRET_KEY="x", CELERY_BROKER_URL="redis://127.0.0.1:6399/3")
    assert values["eager"] is False
    assert values["broker"] == "redis://127.0.0.1:6399/3"
    assert values["cache"].endswith("RedisCache")  # live job progress shared with workers


def _deploy_check(**env) -> subprocess.CompletedProcess:
    code = (
        "import sys; from django.core.management import execute_from_command_line; "
        "execute_from_command_line(['manage.py', 'check', '--deploy', '--fail-level', 'WARNING'])"
    )
    return run(code, DJANGO_SETTINGS_MODULE="h2htalk.settings", **env)


def test_production_settings_pass_check_deploy():
    production = {
        "SECRET_KEY": "k" * 20 + "-production-only-9f2c1e7a4b6d8e0f3a5c7b9d1e3f5a7c",
        "DJANGO_SECURE": "1",
        "ALLOWED_HOSTS": "h2htalk.example.org",
    }
    result = _deploy_check(**production)
    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout
    # Control: without the hardening switch the same check complains (cookies, HSTS, SSL).
    insecure = _deploy_check(**{**production, "DJANGO_SECURE": "0"})
    assert insecure.returncode != 0 and "SESSION_COOKIE_SECURE" in insecure.stderr
