"""A real gunicorn server with several workers and a tiny HTTP client for its three login paths.

Used by tests/test_login_throttle_server.py (and as a probe: `python -m tests.login_server`).
The client speaks plain http.client so it can bind a chosen loopback source address
(127.0.0.2, 127.0.0.3, …): the server then sees a genuinely different REMOTE_ADDR.
"""

import http.client
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PYTHON = Path(sys.executable)
GUNICORN = PYTHON.parent / "gunicorn"
CSRF_FIELD = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')

IN, WRONG, LOCKED = "in", "wrong", "locked"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Client:
    """One browser-like client: its own cookies, a fixed source address, optional headers."""

    def __init__(self, port: int, source: str = "127.0.0.1", headers: dict | None = None):
        self.port, self.source = port, source
        self.headers = dict(headers or {})
        self.cookies: dict[str, str] = {}

    def request(self, method: str, path: str, body: str | None = None, headers=None):
        conn = http.client.HTTPConnection(
            "127.0.0.1", self.port, timeout=120, source_address=(self.source, 0)
        )
        sent = {**self.headers, **(headers or {})}
        if self.cookies:
            sent["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        try:
            conn.request(method, path, body=body, headers=sent)
            response = conn.getresponse()
            text = response.read().decode("utf-8", "replace")
            for cookie in response.headers.get_all("Set-Cookie") or []:
                name, _, rest = cookie.partition("=")
                self.cookies[name.strip()] = rest.split(";", 1)[0]
            return response.status, response.headers, text
        finally:
            conn.close()

    def csrf(self, path: str) -> str:
        status, _, text = self.request("GET", path)
        found = CSRF_FIELD.search(text)
        if status != 200 or not found:
            raise AssertionError(f"GET {path}: {status}, no CSRF field in the page")
        return found.group(1)

    def post_form(self, path: str, fields: dict, token: str):
        body = urllib.parse.urlencode({**fields, "csrfmiddlewaretoken": token})
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        return self.request("POST", path, body, headers)


def form_outcome(status: int, text: str) -> str:
    """A login page's answer: logged in (redirect), wrong password, or locked out."""
    if status == 302:
        return IN
    if status == 200 and "Too many failed attempts" in text:
        return LOCKED
    if status == 200 and ("did not match" in text or "Please enter the correct" in text):
        return WRONG
    raise AssertionError(f"unexpected login answer {status}: {text[:300]}")


class LoginAttempt:
    """Prepared (CSRF fetched) then sent, so a batch of attempts can be fired at one moment."""

    def __init__(self, port, kind, username, password, source="127.0.0.1", headers=None):
        self.client = Client(port, source, headers)
        self.kind, self.username, self.password = kind, username, password
        self.token = None

    def prepare(self):
        if self.kind == "site":
            self.token = self.client.csrf("/login/")
        elif self.kind == "admin":
            self.token = self.client.csrf("/django-admin/login/?next=/django-admin/")

    def send(self) -> str:
        fields = {"username": self.username, "password": self.password}
        if self.kind == "site":
            return form_outcome(*_status_text(self.client.post_form("/login/", fields, self.token)))
        if self.kind == "admin":
            path = "/django-admin/login/?next=/django-admin/"
            return form_outcome(*_status_text(self.client.post_form(path, fields, self.token)))
        body = urllib.parse.urlencode(fields)
        status, _, text = self.client.request(
            "POST", "/api/token/", body, {"Content-Type": "application/x-www-form-urlencoded"}
        )
        outcome = {200: IN, 400: WRONG, 429: LOCKED}.get(status)
        if outcome is None:
            raise AssertionError(f"unexpected /api/token/ answer {status}: {text[:300]}")
        return outcome


def _status_text(answer):
    return answer[0], answer[2]


def fire(attempts: list[LoginAttempt]) -> list[str]:
    """Prepare every attempt, then send them all at once (one thread each)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    for attempt in attempts:
        attempt.prepare()
    barrier = threading.Barrier(len(attempts))

    def go(attempt):
        barrier.wait()
        return attempt.send()

    with ThreadPoolExecutor(len(attempts)) as pool:
        return list(pool.map(go, attempts))


def one(port, kind, username, password, source="127.0.0.1", headers=None) -> str:
    attempt = LoginAttempt(port, kind, username, password, source, headers)
    attempt.prepare()
    return attempt.send()


def manage(env: dict, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        [str(PYTHON), "manage.py", *args],
        cwd=env.get("H2H_REPO", REPO),
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode:
        raise AssertionError(f"manage.py {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return done.stdout


@contextmanager
def gunicorn(
    env: dict,
    workers: int = 3,
    repo: Path = REPO,
    access_format: str = "%(p)s %(m)s %(U)s %(s)s",
    timeout: int = 120,
):
    """Serve h2htalk with `workers` sync workers on a free loopback port; yields (port, log)."""
    port = free_port()
    log = Path(env.get("H2H_LOG_DIR") or tempfile.gettempdir()) / f"gunicorn-{port}.log"
    errors = log.with_suffix(".err").open("w")
    process = subprocess.Popen(
        [
            str(GUNICORN),
            "h2htalk.wsgi",
            "-b",
            f"127.0.0.1:{port}",
            "-w",
            str(workers),
            "--timeout",
            str(timeout),
            "--access-logfile",
            str(log),
            "--access-logformat",
            access_format,
        ],
        cwd=repo,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=errors,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                text = log.with_suffix(".err").read_text()[-3000:]
                raise AssertionError(f"gunicorn exited: {text}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError("gunicorn did not listen within 60 s") from None
                time.sleep(0.2)
        yield port, log
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        errors.close()


def server_env(database_url: str, **extra: str) -> dict:
    """The process environment of a production-like server: no Redis, no debug."""
    drop = {"REDIS_URL", "CELERY_BROKER_URL", "DJANGO_DEBUG", "DJANGO_SETTINGS_MODULE"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(SECRET_KEY="login-throttle-server-test", DATABASE_URL=database_url, **extra)
    return env


USERS = """
from django.contrib.auth.models import User
User.objects.create_superuser("boss", password="{password}")
for name in ("owner", "owner2", "owner3"):
    User.objects.create_user(name, password="{password}")
"""
