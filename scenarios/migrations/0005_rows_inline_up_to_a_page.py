"""PostgreSQL: keep scenario and revision rows up to a page (8 kB) inline and uncompressed.

By default a row over 2 kB has its long values compressed (pglz) and perhaps moved to the TOAST
table. A scenario (its texts, their lower-cased copy in search_text, the JSON columns) and a
revision snapshot are a little over that, and pglz gains little on Chinese text (about 10 % on
the generated bench data), but it was a third of the server's time of an import
(bench/scenarios.py). Tables a little larger, a search scan reads no compressed values; rows
over a page are still compressed and moved as before. SQLite: nothing to do.
"""

from django.db import migrations

TABLES = ("scenarios_scenario", "scenarios_revision")


def _alter(schema_editor, setting: str) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    for table in TABLES:
        schema_editor.execute(f"ALTER TABLE {schema_editor.quote_name(table)} {setting}")


def forwards(apps, schema_editor):
    _alter(schema_editor, "SET (toast_tuple_target = 8160)")


def backwards(apps, schema_editor):
    _alter(schema_editor, "RESET (toast_tuple_target)")


class Migration(migrations.Migration):
    dependencies = [
        ("scenarios", "0004_run_heartbeat_in_cache"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
