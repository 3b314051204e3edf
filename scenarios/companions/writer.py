"""The write of a response import, set-based (h2htalk.bulk: COPY on PostgreSQL, executemany on
SQLite), inside the import's transaction and under its run's lock.

- Into a run without responses every row is new: the rows are copied straight into the
  response table (duplicates in the input are errors found by the scan, and an error means
  nothing is written).
- Into a run with responses, the rows go to a temporary staging table; one statement counts
  them against the run and one upsert (INSERT … SELECT … ON CONFLICT (run, scenario,
  companion) DO UPDATE … WHERE changed) moves them. The server matches rows on the unique index
  instead of Python holding the run's responses, and an unchanged row is left as it was (no
  write, its updated_at kept): a re-import is a no-op. Changed means anything an import sets
  differs (the fields of imports._digest, which the preview compares).

Either way the counts (new, changed, unchanged) are those of what was written.
"""

from contextlib import ExitStack

from django.db import connection

from h2htalk import bulk
from scenarios.models import GenerationRun, Response

COLUMNS = (  # of a row handed to write(), and of the staging table
    "scenario_id",
    "companion_id",
    "text",
    "latency_ms",
    "prompt_tokens",
    "completion_tokens",
    "finish_reason",
)
FROM_ROW = COLUMNS[2:]  # what an import sets from the row…
CONSTANT = {"status": Response.Status.OK, "error": "", "attempts": 0}  # …and the same for all
STAGING_DDL = (
    "CREATE TEMPORARY TABLE response_import_staging (scenario_id bigint NOT NULL, "
    "companion_id bigint NOT NULL, text text NOT NULL, latency_ms integer, "
    "prompt_tokens integer NOT NULL, completion_tokens integer NOT NULL, "
    "finish_reason varchar(30) NOT NULL)"
)


def _staging() -> str:
    schema = "pg_temp" if connection.vendor == "postgresql" else "temp"
    return f"{schema}.response_import_staging"


def _target() -> str:
    return bulk.quoted(Response)


def _changed(current: str, incoming: str) -> tuple[str, list]:
    """SQL true when the stored response `current` differs from `incoming` in what an import
    sets, with its parameters."""
    differs = bulk.distinct_op()
    terms = [f"{current}.{name} {differs} {incoming}.{name}" for name in FROM_ROW]
    terms += [f"{current}.{name} <> %s" for name in ("status", "error")]
    return "(" + " OR ".join(terms) + ")", [CONSTANT["status"], CONSTANT["error"]]


class ResponseWriter:
    """Takes the import's rows in batches (write), then puts them in place (finish). A context
    manager: the batches go through one COPY, so the server stores rows while the next ones are
    read, until pause() (the connection is needed for another query) or an exception (which
    aborts it)."""

    def __init__(self, run: GenerationRun, now):
        self.run_id = run.pk
        self.stamp = bulk.db_datetime(now)
        self.direct = not Response.objects.filter(run_id=run.pk).exists()
        self.written = 0
        self._copy = ExitStack()
        self._write = None

    def __enter__(self):
        if not self.direct:
            with connection.cursor() as cursor:
                cursor.execute(f"DROP TABLE IF EXISTS {_staging()}")
                cursor.execute(STAGING_DDL)
        return self

    def __exit__(self, *exc_info):
        return self._copy.__exit__(*exc_info)

    def pause(self) -> None:
        """End the COPY in progress; the next write starts another."""
        self._copy.close()
        self._write = None

    def write(self, rows: list[tuple]) -> None:
        """Rows in COLUMNS order."""
        if self._write is None:
            table, columns = _staging(), COLUMNS
            if self.direct:
                table = Response
                columns = ("run_id", *COLUMNS, *CONSTANT, "prompt_messages", "created_at")
                columns += ("updated_at",)
            self._write = self._copy.enter_context(bulk.inserter(table, columns))
        if self.direct:
            rest = (*CONSTANT.values(), "[]", self.stamp, self.stamp)
            self._write((self.run_id, *row, *rest) for row in rows)
        else:
            self._write(rows)
        self.written += len(rows)

    def finish(self) -> tuple[int, int, int]:
        """Put the rows in place and record the run's scenarios; (new, changed, unchanged)."""
        self.pause()
        counts = (self.written, 0, 0)
        if not self.direct:
            counts = self._counts()
            self._upsert()
            with connection.cursor() as cursor:
                cursor.execute(f"DROP TABLE {_staging()}")
        through = GenerationRun.scenarios.through
        with connection.cursor() as cursor:  # the run's M2M field, as generated runs have it
            cursor.execute(
                f"INSERT INTO {bulk.quoted(through)} (generationrun_id, scenario_id) "  # noqa: S608 (names, not input: see bulk)
                f"SELECT DISTINCT run_id, scenario_id FROM {_target()} WHERE run_id = %s "
                "ON CONFLICT DO NOTHING",
                [self.run_id],
            )
        return counts

    def _counts(self) -> tuple[int, int, int]:
        changed, params = _changed("r", "s")
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT COUNT(*), COUNT(r.id), "  # noqa: S608
                f"COALESCE(SUM(CASE WHEN r.id IS NOT NULL AND {changed} THEN 1 ELSE 0 END), 0) "
                f"FROM {_staging()} s LEFT JOIN {_target()} r ON r.run_id = %s "
                "AND r.scenario_id = s.scenario_id AND r.companion_id = s.companion_id",
                [*params, self.run_id],
            )
            total, existing, updated = cursor.fetchone()
        return total - existing, updated, existing - updated

    def _upsert(self) -> None:
        changed, params = _changed(_target(), "excluded")
        empty_list = "'[]'::jsonb" if connection.vendor == "postgresql" else "'[]'"
        written = [*FROM_ROW, *CONSTANT, "prompt_messages", "updated_at"]
        columns = ", ".join(["run_id", "scenario_id", "companion_id", *written, "created_at"])
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {_target()} ({columns}) "  # noqa: S608
                f"SELECT %s, scenario_id, companion_id, {', '.join(FROM_ROW)}, %s, %s, %s, "
                f"{empty_list}, %s, %s FROM {_staging()} WHERE true "
                "ON CONFLICT (run_id, scenario_id, companion_id) DO UPDATE SET "
                + ", ".join(f"{name} = excluded.{name}" for name in written)
                + f" WHERE {changed}",
                [self.run_id, *CONSTANT.values(), self.stamp, self.stamp, *params],
            )
