"""Redis stops under a real server (issue 25, points 8 and 9): gunicorn with 2 workers on a
SQLite file, its cache and broker a Redis this test starts on its own port (tests/redis_server.py,
never the machine's shared one), killed mid-test and started again empty.

While Redis is down the session pages, both logins and a job's page keep answering from the
database (sessions and the login throttle fall back to it: h2htalk.outage), nothing answers 500,
and the login throttle still locks; once Redis is back everything works without a restart.
The access log the server wrote meanwhile holds no set-password token (h2htalk.redact)."""

import re
import time
import urllib.parse

import pytest

from tests import login_server as ls
from tests.redis_server import redis_server

# A gunicorn and a Redis of its own, Redis killed and started again: `make test-slow` (CI runs it).
pytestmark = pytest.mark.slow

PASSWORD = "outage-Server-pass-7"
SETUP = """
from django.contrib.auth.models import Group, User
from h2htalk.accounts import links
from h2htalk.models import Job
from h2htalk.roles import ensure_role_groups
ensure_role_groups()
ann = User.objects.create_user("ann", password="{password}")
ann.groups.add(*Group.objects.filter(name__in=["annotator", "researcher"]))
User.objects.create_user("bob", password="{password}")
newcomer = User.objects.create_user("newcomer")
job = Job.objects.create(kind="scenario_import", state="completed", created_by=ann)
print("JOB", job.pk)
print("LINK", links.password_path(newcomer))
"""


def _login(port) -> ls.Client:
    client = ls.Client(port)
    fields = {"username": "ann", "password": PASSWORD}
    status, _headers, text = client.post_form("/login/", fields, client.csrf("/login/"))
    assert status == 302, (status, text[:500])
    return client


def _token(port, username="bob", password=PASSWORD) -> tuple[int, str]:
    body = urllib.parse.urlencode({"username": username, "password": password})
    status, _headers, text = ls.Client(port).request(
        "POST", "/api/token/", body, {"Content-Type": "application/x-www-form-urlencoded"}
    )
    return status, text


def _pages(port, client, job: int) -> dict[str, int]:
    """Each page's status for this logged-in client, and both logins afresh."""
    answers = {}
    for path in ("/rate/", f"/jobs/{job}/", f"/jobs/{job}/progress/"):
        status, headers, _ = client.request("GET", path)
        assert status != 503 or headers.get("Retry-After"), path
        answers[path] = status
    answers["login"] = _login(port) and 302
    answers["token"] = _token(port)[0]
    return answers


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("redis-outage")
    with redis_server() as redis:
        env = ls.server_env(
            f"sqlite:///{folder / 'db.sqlite3'}",
            REDIS_URL=redis.url,
            CELERY_BROKER_URL=redis.url,
            LOGIN_FAILURE_LIMIT="3",
            LOGIN_ADDRESS_FAILURE_LIMIT="30",
            LOGIN_ACCOUNT_FAILURE_LIMIT="40",
            H2H_LOG_DIR=str(folder),
        )
        ls.manage(env, "migrate", "--noinput")
        out = ls.manage(env, "shell", stdin=SETUP.format(password=PASSWORD))
        job = int(re.search(r"JOB (\d+)", out).group(1))
        link = re.search(r"LINK (\S+)", out).group(1)
        with ls.gunicorn(env, workers=2, access_format="%(r)s %(U)s %(f)s %(s)s") as (port, log):
            yield redis, port, log, job, link


def test_pages_and_logins_work_through_a_redis_outage(server):
    redis, port, log, job, _link = server
    client = _login(port)
    ok = {"/rate/": 200, f"/jobs/{job}/": 200, f"/jobs/{job}/progress/": 200}
    ok |= {"login": 302, "token": 200}
    assert _pages(port, client, job) == ok

    redis.stop()
    assert _pages(port, client, job) == ok  # the session made before the outage still works
    assert _pages(port, client, job) == ok  # (both workers, once Redis is known to be down)
    later = _login(port)  # a session made during the outage
    assert later.request("GET", "/rate/")[0] == 200
    # the throttle still counts (in the database): the 4th try is refused even with the
    # right password
    assert [_token(port, "bob", "wrong")[0] for _ in range(3)] == [400, 400, 400]
    assert _token(port, "bob")[0] == 429

    redis.start()  # back, empty, on the same port: no restart of the web server
    time.sleep(6)  # h2htalk.outage.RETRY_SECONDS: then Redis is tried again
    assert _pages(port, client, job) == ok
    assert later.request("GET", "/rate/")[0] == 200
    assert " 500" not in log.read_text()


def test_the_access_log_holds_no_set_password_token(server):
    _redis, port, log, _job, link = server
    token = link.rstrip("/").rsplit("/", 1)[1]
    client = ls.Client(port)
    status, headers, _ = client.request("GET", link)
    assert status == 302 and headers["Location"].endswith("/set-password/")
    client.request("GET", headers["Location"], headers={"Referer": f"http://x{link}"})
    time.sleep(0.5)
    text = log.read_text()
    assert "/password/set/" in text and "[redacted]" in text
    assert token not in text
