"""Migrations keep every row (issue 13).

Moving models between packages may change where Django thinks a model lives, never the data.
A database filled by `load_demo` at the latest schema is migrated back to the schema the project
had before the move (the leaf migration of each app at commit 7c5d9c6, `TODAYS_SCHEMA` below)
and forward again: every table holds as many rows as before. (Filling the old schema with
today's `load_demo` stopped working once a later migration added a column today's models write;
the round trip crosses the move both ways and keeps working as the schema grows.)
"""

import io

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

# The leaf migration of each project app at commit 7c5d9c6 ("today's schema" of issue 13).
# Third-party and contrib apps stay at their latest migration.
TODAYS_SCHEMA = {
    "annotation": "0003_handout_order_revisions_exclusions",
    "h2htalk": "0003_cache_table",
    "scenarios": "0003_unicode_json",
    "scoring": "0003_releases",
    "webhooks": None,  # an app born later: none of its migrations (None: unapply them all)
}
# Django's own bookkeeping of applied migrations grows with them, by design.
BOOKKEEPING_TABLES = {"django_migrations"}


def _migrate(targets: list[tuple[str, str]]) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return MigrationExecutor(connection)  # a fresh loader sees what is applied now


def _todays_targets(executor: MigrationExecutor) -> list[tuple[str, str]]:
    leaves = dict(executor.loader.graph.leaf_nodes())
    return [(app, TODAYS_SCHEMA.get(app, leaf)) for app, leaf in sorted(leaves.items())]


def _row_counts() -> dict[str, int]:
    counts = {}
    with connection.cursor() as cursor:
        for table in sorted(connection.introspection.table_names(cursor)):
            if table in BOOKKEEPING_TABLES:
                continue
            # The name comes from the database's own catalogue, quoted: nothing from outside.
            quoted = connection.ops.quote_name(table)
            cursor.execute(f"SELECT COUNT(*) FROM {quoted}")  # noqa: S608
            counts[table] = cursor.fetchone()[0]
    return counts


@pytest.mark.slow  # migrates a demo database back and forth: `make test-slow` (CI runs it)
@pytest.mark.django_db(transaction=True)
def test_migrating_the_demo_database_across_the_move_keeps_every_row():
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    try:
        call_command("load_demo", stdout=io.StringIO())
        before = _row_counts()
        assert sum(before.values()) > 0, "load_demo filled nothing"

        old = _migrate(_todays_targets(executor))
        assert old.migration_plan(_todays_targets(old)) == [], "not at today's schema"
        after_executor = _migrate(latest)
        after = _row_counts()

        assert after_executor.migration_plan(after_executor.loader.graph.leaf_nodes()) == []
        changed = {
            table: (rows, after.get(table, "table gone"))
            for table, rows in before.items()
            if after.get(table) != rows
        }
        assert not changed, f"rows lost or added by migrating (before, after): {changed}"
    finally:
        _migrate(latest)
