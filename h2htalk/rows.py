"""Model instances from rows of hand-written SQL, for the few hot statements written out (the
rating queue's candidate lock, the API token lookup) because building and compiling them with
the ORM cost more server CPU than running them."""

from contextlib import contextmanager
from functools import cache, lru_cache

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models.base import ModelState


def default_connection():
    """The thread's default connection itself: `django.db.connection` is a proxy that looks it
    up again on every attribute read (a few dozen a rating cycle, about 5% of its server CPU)."""
    return connections[DEFAULT_DB_ALIAS]


def columns(alias: str, names) -> str:
    """`alias.name, …` for a SELECT list."""
    return ", ".join(f"{alias}.{name}" for name in names)


def instance(model, names, values):
    """A `model` instance from these columns (attnames, in any order), each converted as the
    ORM converts it (JSON, booleans on SQLite, …); the fields not read are deferred.

    Built as `Model.from_db` leaves one, without going through `Model.__init__` (its signals
    and its walk over every field): a rating cycle builds a dozen of them. The models read
    here have no `__init__`, `from_db` or init-signal receivers of their own
    (tests/test_rows.py checks them against the ORM's)."""
    connection = default_connection()
    columns = _reader(connection, model, tuple(names))
    new = model.__new__(model)
    values_of = new.__dict__
    for (name, col, converters), value in zip(columns, values, strict=True):
        for convert in converters:
            value = convert(value, col, connection)
        values_of[name] = value
    state = new._state = ModelState()
    state.adding, state.db = False, connection.alias
    return new


def _reader(connection, model, names: tuple) -> list:
    """Per column its expression and the converters the ORM applies to it: looked up once per
    connection (per thread) and kept on it."""
    readers = getattr(connection, "h2htalk_row_readers", None)  # the thread's own connection
    if readers is None:
        readers = connection.h2htalk_row_readers = {}
    if (model, names) not in readers:
        columns = []
        for name in names:
            col = model._meta.get_field(name).get_col(model._meta.db_table)
            converters = connection.ops.get_db_converters(col) + col.get_db_converters(connection)
            columns.append((name, col, tuple(converters)))
        readers[model, names] = columns
    return readers[model, names]


def db_value(model, name: str, value, connection=None):
    """`value` as the database takes it for this field of `model` (a UUID or a time on SQLite,
    JSON, …), for a parameter of a hand-written statement; `connection`: the default one, when
    the caller has it at hand."""
    return model._meta.get_field(name).get_db_prep_value(value, connection or default_connection())


@contextmanager
def bound_cursor():
    """A cursor for a hot hand-written statement: on PostgreSQL it sends the values apart from
    the statement (server-side binding), so psycopg prepares a statement after the settings'
    `prepare_threshold` runs on a connection and PostgreSQL parses and plans it once there
    (the ORM's cursors bind on the client: each statement text differs, nothing is prepared).
    Elsewhere the usual cursor. Counted and logged like any other statement."""
    connection = default_connection()
    if connection.vendor != "postgresql":
        with connection.cursor() as cursor:
            yield cursor
        return
    connection.ensure_connection()
    with connection.wrap_database_errors:
        raw = _server_binding_cursor()(connection.connection)
    with connection._prepare_cursor(raw) as cursor:
        yield cursor


@cache
def _server_binding_cursor():
    """Django's server-binding psycopg cursor, keeping the statement's text for Django's query
    log once psycopg runs it prepared (psycopg then drops it, and the log would read None)."""
    from django.db.backends.postgresql.base import ServerBindingCursor

    class LoggedServerBindingCursor(ServerBindingCursor):
        _query_cls = _hot_query()

        def execute(self, query, params=None, **kwargs):
            result = super().execute(query, params, **kwargs)
            if self._query is None:
                self._query = _Logged(query)
            return result

    return LoggedServerBindingCursor


class _Logged:
    """What Django's query log reads of a psycopg query: its text (placeholders left in)."""

    def __init__(self, text: str):
        self.query, self.params = text.encode(), None


@cache
def _hot_query():
    """psycopg's conversion of a statement (placeholders to $n), kept for every hot statement:
    psycopg keeps it only for statements under 4 KB with at most 50 values (ORM statements vary
    without end), so these few long ones were split again on every run, about a twentieth of a
    rating cycle's server CPU. Their texts are a handful, so the cache stays small."""
    from psycopg._queries import PostgresQuery, _query2pg_nocache

    converted = lru_cache(maxsize=256)(_query2pg_nocache)

    class HotQuery(PostgresQuery):
        __slots__ = ()

        def convert(self, query, vars) -> None:
            if vars is None or not isinstance(query, str | bytes):
                return super().convert(query, vars)  # no placeholders to convert
            if isinstance(query, str):
                query = query.encode(self._tx.encoding)
            self.query, self._want_formats, self._order, self._parts = converted(
                query, self._tx.encoding
            )
            self.dump(vars)
            return None

    return HotQuery
