"""The database cache's table (settings.CACHES when no Redis is configured), created by
`migrate` so that every deployment has it: the login throttle, job heartbeats and LLM
concurrency slots are shared through it by every web and worker process."""

from django.core.management.commands.createcachetable import Command as CreateCacheTable
from django.db import migrations

TABLE = "h2htalk_cache"  # settings.CACHES["default"]["LOCATION"] without Redis


def create(apps, schema_editor):
    command = CreateCacheTable()
    command.verbosity = 0
    command.create_table(schema_editor.connection.alias, TABLE, dry_run=False)


def drop(apps, schema_editor):
    table = schema_editor.connection.ops.quote_name(TABLE)
    schema_editor.execute(f"DROP TABLE IF EXISTS {table}")


class Migration(migrations.Migration):
    dependencies = [
        ("h2htalk", "0002_job_attempts"),
    ]

    operations = [migrations.RunPython(create, drop)]
