"""Issue 25's probes against a real server: `python -m tests.users_probes [DATABASE_URL]`.

gunicorn (3 workers, 30 s timeout, as in production) on a fresh database (PostgreSQL when a
postgres:// URL is given: a database of its own is created and dropped; else a SQLite file),
no Redis. Prints one line per probe:
1. two admins POST /api/users/ at once: 1,500 `Case_i` and 1,500 `case_i`; then the same
   names in both lists;
2. full-width `ａｄｍｉｎ` and Cyrillic `аdmin` beside `admin`; `ａｄｍｉｎ` logging in;
3. a NUL in the name and in the campaigns cell of an upload to /manage/users/create/;
5. a 100,000-row upload (and 5,000 and 10,000 rows, the cap);
8. the set-password link's token in the access log.
"""

import os
import re
import secrets
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid
from pathlib import Path

from tests import login_server as ls

PASSWORD = "probe-Admin-pass-7"
SETUP = """
from django.contrib.auth.models import Group, User
from rest_framework.authtoken.models import Token
from h2htalk.accounts import links
from h2htalk.roles import ensure_role_groups
ensure_role_groups()
admin = User.objects.create_superuser("admin", password="{password}")
admin.groups.add(Group.objects.get(name="admin"))
print("TOKEN", Token.objects.create(user=admin).key)
print("LINK", links.password_path(User.objects.create_user("newcomer")))
"""


def _json_post(port, token, body: str):
    headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
    return ls.Client(port).request("POST", "/api/users/", body.encode(), headers)


def _users(prefix: str, n: int) -> str:
    import json

    return json.dumps(
        [
            {"username": f"{prefix}_{i}", "email": f"{prefix}{i}@example.org", "role": "annotator"}
            for i in range(n)
        ]
    )


def parallel(port, token, first: str, second: str, n: int = 1500) -> list:
    bodies, answers = [_users(first, n), _users(second, n)], [None, None]
    barrier = threading.Barrier(2)

    def send(i):
        barrier.wait()
        status, headers, text = _json_post(port, token, bodies[i])
        answers[i] = (status, headers.get("Content-Type"), text[:160])

    threads = [threading.Thread(target=send, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def _multipart(content: bytes) -> tuple[str, bytes]:
    boundary = uuid.uuid4().hex
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="u.csv"\r\n'
            "Content-Type: text/csv\r\n\r\n"
        ).encode()
        + content
        + f"\r\n--{boundary}--\r\n".encode()
    )
    return f"multipart/form-data; boundary={boundary}", body


def upload(admin: ls.Client, content: bytes):
    token = admin.csrf("/manage/")
    kind, body = _multipart(content)
    started = time.monotonic()
    status, _, text = admin.request(
        "POST",
        "/manage/users/create/",
        body,
        {"Content-Type": kind, "X-CSRFToken": token, "Referer": f"http://127.0.0.1:{admin.port}/"},
    )
    errors = re.findall(r"<tr><td>([^<]*)</td><td><code>([^<]*)</code></td><td>([^<]*)</td>", text)
    return status, round(time.monotonic() - started, 1), errors[:3]


def _login(port, username) -> int:
    client = ls.Client(port)
    fields = {"username": username, "password": PASSWORD}
    return client.post_form("/login/", fields, client.csrf("/login/"))[0]


def main(database_url: str | None = None) -> None:
    folder = Path(tempfile.mkdtemp(prefix="h2h-probes-"))
    drop = None
    if database_url and database_url.startswith("postgres"):
        import psycopg

        parts = urllib.parse.urlsplit(database_url)
        name = f"{parts.path.lstrip('/')}_probes_{secrets.token_hex(3)}"
        admin_url = urllib.parse.urlunsplit(parts._replace(path="/postgres"))
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        database_url = urllib.parse.urlunsplit(parts._replace(path=f"/{name}"))

        def drop():
            with psycopg.connect(admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    database_url = database_url or f"sqlite:///{folder / 'db.sqlite3'}"
    env = ls.server_env(database_url, H2H_LOG_DIR=str(folder))
    try:
        ls.manage(env, "migrate", "--noinput")
        out = ls.manage(env, "shell", stdin=SETUP.format(password=PASSWORD))
        token = re.search(r"TOKEN (\S+)", out).group(1)
        link = re.search(r"LINK (\S+)", out).group(1)
        server = ls.gunicorn(env, workers=3, access_format="%(r)s %(s)s", timeout=30)
        with server as (port, log):
            _probes(port, token, link, log)
    finally:
        if drop:
            drop()


def _probes(port, token, link, log) -> None:
    print("1. Case_i || case_i:", parallel(port, token, "Case", "case"))
    print("1. same names twice:", parallel(port, token, "Same", "Same"))
    body = '[{"username": "ａｄｍｉｎ", "email": "a@example.org", "role": "annotator"}, '
    body += '{"username": "аdmin", "email": "b@example.org", "role": "annotator"}]'
    status, _, text = _json_post(port, token, body)
    print("2. ａｄｍｉｎ, аdmin via API:", status, text[:300])
    print("2. login as ａｄｍｉｎ:", _login(port, "ａｄｍｉｎ"), "(302: logged in as admin)")
    admin = ls.Client(port)
    fields = {"username": "admin", "password": PASSWORD}
    admin.post_form("/login/", fields, admin.csrf("/login/"))
    header = b"username,email,role,campaigns\n"
    print(
        "2. ａｄｍｉｎ, аdmin via upload:",
        upload(
            admin,
            header
            + "ａｄｍｉｎ,a@example.org,annotator,\nаdmin,b@example.org,annotator,\n".encode(),
        ),
    )
    print("3. NUL in name:", upload(admin, header + b"ab\x00c,a@example.org,annotator,\n"))
    print(
        "3. NUL in campaigns:", upload(admin, header + b"abc,a@example.org,annotator,Pi\x00lot\n")
    )
    for n in (5_000, 10_000, 100_000):
        rows = b"".join(f"bulk{n}_{i},b{i}@example.org,annotator,\n".encode() for i in range(n))
        print(f"5. {n:,}-row upload:", upload(admin, header + rows))
    ls.Client(port).request("GET", link)
    time.sleep(0.5)
    secret = link.rstrip("/").rsplit("/", 1)[1]
    lines = [line for line in log.read_text().splitlines() if "/password/set/" in line]
    print("8. access log:", lines[:2], "token present:", secret in log.read_text())


if __name__ == "__main__":
    os.environ.setdefault("SECRET_KEY", "probes")
    main(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("DATABASE_URL"))
