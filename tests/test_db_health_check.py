"""A kept PostgreSQL connection is health-checked (`SELECT 1`) only after it sat idle
(h2htalk/postgresql/base.py): not before every request, which cost two statements per rating
cycle, and a connection psycopg knows closed is replaced before the request's first statement.

Django's test client leaves the connection alone between requests, so the request's start and
end are played here as Django's handler plays them (`close_old_connections` on each)."""

import time

import pytest
from django.db import close_old_connections, connection, connections

from h2htalk.postgresql.base import IDLE_SECONDS

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def checks(monkeypatch):
    """The health checks sent (each a call of is_usable), on a connection kept across requests
    with health checks on, as under gunicorn with DB_CONN_MAX_AGE."""
    if connection.vendor != "postgresql":
        pytest.skip("the health check backend is PostgreSQL's: run with DATABASE_URL=postgres")
    sent = []
    wrapper = connections["default"]
    original = type(wrapper).is_usable

    def counted(self):
        sent.append(1)
        return original(self)

    monkeypatch.setattr(type(wrapper), "is_usable", counted)
    monkeypatch.setitem(wrapper.settings_dict, "CONN_MAX_AGE", 600)
    monkeypatch.setitem(wrapper.settings_dict, "CONN_HEALTH_CHECKS", True)
    wrapper.close()  # opened again with these settings by the first request
    yield sent
    wrapper.close()


def _request() -> int:
    """One request: Django's start, a statement, Django's end; the statement's answer."""
    close_old_connections()
    with connection.cursor() as cursor:
        cursor.execute("SELECT 41 + 1")
        (answer,) = cursor.fetchone()
    close_old_connections()
    return answer


def test_a_connection_that_just_answered_a_request_is_not_checked_again(checks):
    _request()  # a new connection: nothing to check
    kept = connection.connection
    for _ in range(5):
        assert _request() == 42
    assert connection.connection is kept and checks == []  # kept, and no SELECT 1


def test_a_connection_idle_for_a_while_is_checked_first(checks):
    _request()
    kept = connection.connection
    connection.answered_at = time.monotonic() - IDLE_SECONDS - 1
    assert _request() == 42
    assert connection.connection is kept and len(checks) == 1


def test_a_connection_psycopg_knows_closed_is_replaced_before_the_first_statement(checks):
    _request()
    underneath = connection.connection
    underneath.close()  # as when the server went away and psycopg noticed
    assert _request() == 42
    assert connection.connection is not underneath and not connection.connection.closed
    assert len(checks) == 1  # the closed one was checked, not trusted
