"""The login throttle on the real server: gunicorn with 3 worker processes, no Redis (the
database cache, its table made by `manage.py migrate` alone), the production password hasher,
bursts of simultaneous attempts from distinct loopback source addresses (127.0.0.x).

On PostgreSQL when DATABASE_URL names a PostgreSQL server (a database of its own is created
and dropped there, as in CI), else on a SQLite file: one backend per run, since every attempt
costs a real password hash on this 2-core machine."""

import os
import secrets
import urllib.parse

import pytest

from tests import login_server as ls

# A gunicorn of its own whose every attempt costs a production hash: `make test-slow` (CI runs it).
pytestmark = pytest.mark.slow

PASSWORD = "throttle-Server-pass-7"
PAIR, ADDRESS, ACCOUNT = 3, 6, 8  # small budgets: every check costs a real PBKDF2 hash
WORKERS = 3
PROXY = "127.0.0.9"


def _postgres_url():
    url = os.environ.get("DATABASE_URL", "")
    return url if url.startswith(("postgres://", "postgresql://")) else None


@pytest.fixture(scope="module", params=["postgresql" if _postgres_url() else "sqlite"])
def server(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp("login-throttle")
    drop = None
    if request.param == "sqlite":
        database_url = f"sqlite:///{folder / 'db.sqlite3'}"
    else:
        import psycopg

        parts = urllib.parse.urlsplit(_postgres_url())
        name = f"{parts.path.lstrip('/') or 'h2h'}_login_throttle_{os.getpid()}"
        admin_url = urllib.parse.urlunsplit(parts._replace(path="/postgres"))
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"')
        database_url = urllib.parse.urlunsplit(parts._replace(path=f"/{name}"))

        def drop():
            with psycopg.connect(admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    env = ls.server_env(
        database_url,
        LOGIN_FAILURE_LIMIT=str(PAIR),
        LOGIN_ADDRESS_FAILURE_LIMIT=str(ADDRESS),
        LOGIN_ACCOUNT_FAILURE_LIMIT=str(ACCOUNT),
        TRUSTED_PROXIES=PROXY,
        H2H_LOG_DIR=str(folder),
    )
    try:
        ls.manage(env, "migrate", "--noinput")  # nothing else: migrate makes the cache table
        ls.manage(
            env,
            "shell",
            stdin=ls.USERS.format(password=PASSWORD)
            + f'\nfor n in ("owner4", "owner5", "owner6"): User.objects.create_user(n, password="{PASSWORD}")\n',
        )
        with ls.gunicorn(env, workers=WORKERS) as (port, log):
            yield port, log
    finally:
        if drop:
            drop()


def burst(port, kind, username, source, count=12):
    results = ls.fire(
        [ls.LoginAttempt(port, kind, username, "wrong", source) for _ in range(count)]
    )
    return results.count(ls.WRONG), results.count(ls.LOCKED)


@pytest.mark.parametrize("kind", ["site", "token", "admin"])
def test_a_burst_across_workers_checks_at_most_the_limit(server, kind):
    port, log = server
    user = {"site": "owner", "token": "owner2", "admin": "boss"}[kind]
    source = {"site": "127.0.0.2", "token": "127.0.0.3", "admin": "127.0.0.4"}[kind]
    checked, locked = burst(port, kind, user, source)
    assert (checked, locked) == (PAIR, 12 - PAIR)
    assert ls.one(port, kind, user, PASSWORD, source) == ls.LOCKED  # the right password too
    # ...from that address only: one address cannot lock the owner out elsewhere.
    assert ls.one(port, kind, user, PASSWORD, "127.0.0.5") == ls.IN
    served = {line.split()[0] for line in log.read_text().splitlines() if " POST " in line}
    assert len(served) >= 2, f"all POSTs went to one worker ({served}): not a multi-worker test"


def test_the_django_admin_login_shares_the_site_login_budget(server):
    port, _ = server
    for _ in range(PAIR):
        assert ls.one(port, "site", "boss", "wrong", "127.0.0.6") == ls.WRONG
    assert ls.one(port, "admin", "boss", PASSWORD, "127.0.0.6") == ls.LOCKED
    assert ls.one(port, "token", "boss", PASSWORD, "127.0.0.6") == ls.LOCKED


def test_random_names_from_one_address_stop_at_the_address_budget(server):
    port, _ = server
    attempts = [
        ls.LoginAttempt(port, "site", f"nobody-{secrets.token_hex(4)}", "wrong", "127.0.0.7")
        for _ in range(ADDRESS + 6)
    ]
    results = ls.fire(attempts)
    assert results.count(ls.WRONG) == ADDRESS, results
    assert ls.one(port, "site", "owner3", PASSWORD, "127.0.0.7") == ls.LOCKED
    assert ls.one(port, "site", "owner3", PASSWORD, "127.0.0.8") == ls.IN


def test_many_addresses_on_one_account_stop_at_the_account_budget(server):
    port, _ = server
    sources = [f"127.0.1.{n}" for n in range(1, 5)]  # 4 addresses x PAIR = 12 > ACCOUNT
    attempts = [
        ls.LoginAttempt(port, "site", "owner4", "wrong", s) for s in sources for _ in range(PAIR)
    ]
    results = ls.fire(attempts)
    assert results.count(ls.WRONG) == ACCOUNT, results
    assert ls.one(port, "site", "owner4", PASSWORD, "127.0.1.9") == ls.LOCKED


def test_forwarded_for_counts_only_from_the_trusted_proxy(server):
    port, _ = server

    def via(source, client, password, user="owner5"):
        headers = {"X-Forwarded-For": client}
        return ls.one(port, "site", user, password, source, headers)

    # Through the trusted proxy: each client address has its own budget.
    assert [via(PROXY, "203.0.113.1", "wrong") for _ in range(PAIR)] == [ls.WRONG] * PAIR
    assert via(PROXY, "203.0.113.1", PASSWORD) == ls.LOCKED
    assert via(PROXY, "203.0.113.2", PASSWORD) == ls.IN
    # From anywhere else the header is the client's own word: ignored.
    for n in range(PAIR):
        assert via("127.0.2.1", f"198.51.100.{n}", "wrong", "owner6") == ls.WRONG
    assert via("127.0.2.1", "198.51.100.99", PASSWORD, "owner6") == ls.LOCKED
