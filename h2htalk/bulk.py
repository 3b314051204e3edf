"""Bulk writes below the ORM, for the importers: rows as tuples of database-ready values go into
a table with PostgreSQL's COPY FROM STDIN (psycopg 3) or, on SQLite, one executemany; ids that
other rows must point at are reserved first, so inserts need no RETURNING and child rows
(tags, revisions) go in the same way.

Why below the ORM: bulk_create spends most of an import's time preparing each field of each
object and building the statement, while COPY takes rows in the server's own text format
(bench/scenarios.py and bench/responses_bench.py measure both against a raw COPY). Values must
be what the column stores: JSON as text (json_text), datetimes through db_datetime.
(The statements are built from table and column names of the models, never from input:
hence the S608 exemptions.)
"""

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager

from django.db import connection


def quoted(table) -> str:
    """A model's table, quoted; a string is taken as already written (a temporary table)."""
    if isinstance(table, str):
        return table
    return connection.ops.quote_name(table._meta.db_table)


@contextmanager
def inserter(table, columns: Sequence[str]) -> Iterator[Callable[[Iterable[tuple]], None]]:
    """A function taking batches of rows (tuples in `columns` order) for a model's table or a
    named table. PostgreSQL: all of them through one COPY, so the server stores rows while the
    caller reads the next ones; SQLite: an executemany per batch. An exception inside aborts
    the COPY (the caller's transaction then rolls back)."""
    names = ", ".join(connection.ops.quote_name(column) for column in columns)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            with cursor.copy(f"COPY {quoted(table)} ({names}) FROM STDIN") as copy:

                def write(rows: Iterable[tuple]) -> None:
                    for row in rows:
                        copy.write_row(row)

                yield write
        else:
            marks = ", ".join(["%s"] * len(columns))
            statement = f"INSERT INTO {quoted(table)} ({names}) VALUES ({marks})"  # noqa: S608
            yield lambda rows: cursor.executemany(statement, rows)


def insert_rows(table, columns: Sequence[str], rows: Iterable[tuple]) -> None:
    """Insert rows (tuples in `columns` order) into a model's table or a named table."""
    with inserter(table, columns) as write:
        write(rows)


def reserve_ids(model, count: int) -> list[int]:
    """`count` new primary keys of a model's table, taken before its rows are inserted.

    PostgreSQL: from the column's sequence (safe under concurrency; numbers may have gaps).
    SQLite: after the highest id ever given (AUTOINCREMENT's sqlite_sequence), which is safe
    because a transaction there holds the write lock from its start (settings:
    transaction_mode IMMEDIATE); call it inside the transaction that inserts the rows.
    """
    if count == 0:
        return []
    table = model._meta.db_table
    column = model._meta.pk.column
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s)",
                [connection.ops.quote_name(table), column, count],
            )
            return [row[0] for row in cursor.fetchall()]
        cursor.execute(f"SELECT MAX({column}) FROM {quoted(model)}")  # noqa: S608
        highest = cursor.fetchone()[0] or 0
        cursor.execute("SELECT seq FROM sqlite_sequence WHERE name = %s", [table])
        given = cursor.fetchone()
        start = max(highest, given[0] if given else 0) + 1
    return list(range(start, start + count))


def json_text(value) -> str:
    """A JSON column's value as stored (UTF-8 text, as the models' UnicodeJSONEncoder)."""
    return json.dumps(value, ensure_ascii=False)


def db_datetime(value):
    """A datetime as the backend stores it (SQLite: naive UTC text)."""
    return connection.ops.adapt_datetimefield_value(value)


def distinct_op() -> str:
    """The null-safe "differs" operator."""
    return "IS DISTINCT FROM" if connection.vendor == "postgresql" else "IS NOT"


def _converter(field, now):
    """How one model field's value goes into a row (as the ORM would store it)."""
    from django.db import models

    if isinstance(field, models.JSONField):
        return (field.encoder or json.JSONEncoder)().encode  # (json.dumps(value, cls=…))
    if isinstance(field, models.DateTimeField):
        if field.auto_now or field.auto_now_add:
            stamp = db_datetime(now)
            return lambda value: stamp
        return lambda value: None if value is None else db_datetime(value)
    return None


def insert_objects(model, objects: Sequence, now, with_pk: bool = False) -> None:
    """Insert unsaved instances of a model: every concrete column (the primary key too when
    with_pk: reserved with reserve_ids), auto_now and auto_now_add fields set to `now`."""
    fields = [f for f in model._meta.concrete_fields if with_pk or not f.primary_key]
    plan = [(field.attname, _converter(field, now)) for field in fields]
    rows = (
        tuple(
            getattr(obj, name) if convert is None else convert(getattr(obj, name))
            for name, convert in plan
        )
        for obj in objects
    )
    insert_rows(model, [field.column for field in fields], rows)
