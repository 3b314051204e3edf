"""Dump and restore a whole study as JSONL (Django's serialisation, one object per line).

What a study is: users and their roles, API tokens, scenarios with their revisions and review
comments, personas, companions, runs and responses, campaigns with comparisons, assignments
and judgments, and everything scoring computed (metrics, judge verdicts, calibrated judges,
reports, releases). Primary keys are kept, so references between objects (and every release
fingerprint built from ids) are the same after a restore. Job rows (progress of background
work) and sessions are left out.
"""

from django.apps import apps
from django.core.management import call_command
from django.core.management.color import no_style
from django.db import connection, transaction

# Role groups and permissions are created by `migrate`; users refer to groups by name.
STUDY_APPS = ["auth.user", "authtoken", "scenarios", "annotation", "scoring"]


def study_models() -> list:
    models = []
    for label in STUDY_APPS:
        if "." in label:
            models.append(apps.get_model(label))
        else:
            models.extend(apps.get_app_config(label).get_models())
    return models


def counts() -> dict[str, int]:
    return {model._meta.label: model._default_manager.count() for model in study_models()}


def dump(stream) -> dict[str, int]:
    """Write the study to a text stream; returns the object count per model."""
    call_command(
        "dumpdata",
        *STUDY_APPS,
        format="jsonl",
        natural_foreign=True,
        stdout=stream,
        verbosity=0,
    )
    return counts()


def restore(path: str) -> dict[str, int]:
    """Load a dump into an empty study database, all or nothing."""
    existing = {label: n for label, n in counts().items() if n}
    if existing:
        raise ValueError(
            "restore needs an empty study database (run migrate on a new database); found "
            + ", ".join(f"{n} {label}" for label, n in sorted(existing.items()))
        )
    with transaction.atomic():
        call_command("loaddata", path, format="jsonl", verbosity=0)
    if connection.vendor == "postgresql":  # loaddata resets sequences; make sure of it
        with connection.cursor() as cursor:
            for statement in connection.ops.sequence_reset_sql(no_style(), study_models()):
                cursor.execute(statement)
    return counts()
