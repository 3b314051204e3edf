"""Response import at benchmark scale: 4,650 scenarios × 50 companions = 232,500 responses,
against a raw COPY of the same rows, in one run.

Writes a platform JSONL (one response per line, ~300 characters of mixed Chinese/English text)
to a temporary folder, then, through `import_responses` (the service of the upload job and of
`manage.py import_responses`: a preview pass, then the write pass in one transaction):

1. a fifth of the file (10 companions) into a run of its own, then the whole file into a new
   run, each with the resident peak above what the process held before (Linux: reset through
   /proc/self/clear_refs): flat across the two sizes means the file is streamed;
2. the same file again (everything unchanged: nothing written), and again with every tenth
   text changed (the staging table and its upsert);
3. the raw baseline: the rows just imported, as COPY text, copied (PostgreSQL COPY FROM STDIN)
   into an empty table made `LIKE scenarios_response INCLUDING ALL` (same columns, defaults
   and indexes, no foreign keys), and into the real table emptied (its foreign keys too).
   SQLite has no COPY: there the baseline is one executemany of the same rows.

Each row says its CPU time (this process, and the PostgreSQL server process of the connection)
and the load average; the ratio row divides the import's rows/s by the baseline's.
BENCH_RESPONSE_SCENARIOS / BENCH_RESPONSE_COMPANIONS scale it down for a quick look.
"""

import json
import random
import tempfile
from pathlib import Path

from bench._common import Step, backend_pid, env_int, loadavg, log
from bench.scenarios import generate

PHRASES_ZH = [
    "我一直都在这里陪着你，",
    "听起来今天真的很不容易。",
    "要不要先喝口水，慢慢说？",
    "你已经做得很好了，",
    "明天早上九点的会议别忘了，",
    "我们可以一起把计划拆成小步骤。",
]
PHRASES_EN = [
    "I'm right here with you, ",
    "that sounds like a really hard day. ",
    "Want to take a breath and tell me more? ",
    "You did better than you think. ",
    "Don't forget the 9 am meeting tomorrow, ",
    "we can break the plan into small steps together. ",
]


def _scenario_keys(count: int, workdir: Path) -> list[tuple[str, str]]:
    from scenarios.importers import import_file
    from scenarios.models import Scenario

    path = workdir / "scenarios.jsonl"
    generate(path, int(count * 1.1) + 20)  # ~5% of generated rows carry no external id
    report = import_file(str(path), "scenarios.jsonl")
    assert report.ok, report.errors[:3]
    keys = list(
        Scenario.objects.exclude(external_id="")
        .order_by("pk")
        .values_list("subtask", "external_id")[:count]
    )
    assert len(keys) == count, len(keys)
    return keys


def _write_responses(path: Path, keys, companions: int) -> int:
    rng = random.Random(11)
    lines = 0
    with path.open("w", encoding="utf-8") as out:
        for number in range(companions):
            name = f"bench-companion-{number:02d}"
            for subtask, external_id in keys:
                phrases = PHRASES_ZH if rng.random() < 0.7 else PHRASES_EN
                text = "".join(rng.choices(phrases, k=rng.randint(6, 16)))
                row = {
                    "subtask": subtask,
                    "external_id": external_id,
                    "companion": name,
                    "text": text,
                    "completion_tokens": len(text) // 2,
                    "latency_ms": rng.randint(300, 4000),
                }
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
                lines += 1
    return lines


def _import(label: str, path: Path, lines: int, run: str, server, expect: tuple) -> dict:
    from scenarios.companions.imports import import_responses

    with Step(label, lines, server) as step:
        report = import_responses(str(path), run_name=run)
    assert report.rows == lines and not report.error_count, (report.rows, report.errors[:3])
    counts = (report.created, report.updated, report.unchanged)
    assert counts == expect, (label, counts, expect)
    size = path.stat().st_size / 1e6
    return step.row(f"{size:.0f} MB file; {counts[0]} new, {counts[1]} changed, {counts[2]} same")


def _empty_responses() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("TRUNCATE scenarios_response CASCADE")
        else:
            cursor.execute("DELETE FROM scenarios_response")


COPY_COLUMNS = (
    "run_id, scenario_id, companion_id, status, text, prompt_messages, latency_ms, "
    "prompt_tokens, completion_tokens, finish_reason, error, attempts, created_at, updated_at"
)


def _raw_copy(label: str, table: str, source: Path, lines: int, server) -> dict:
    """COPY the file (COPY text of the imported rows) into `table`, committed."""
    from django.db import connection, transaction

    statement = f"COPY {table} ({COPY_COLUMNS}) FROM STDIN"
    with (
        Step(label, lines, server) as step,
        transaction.atomic(),
        connection.cursor() as cursor,
        cursor.copy(statement) as copy,
        source.open("rb") as f,
    ):
        for chunk in iter(lambda: f.read(1 << 20), b""):
            copy.write(chunk)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM {table}")  # noqa: S608 (the bench's own names)
        assert cursor.fetchone()[0] == lines
    return step.row(f"into {table}")


def _baselines(workdir: Path, lines: int, server) -> list[dict]:
    """The raw baseline(s) of the rows now in the response table (see the module docstring)."""
    from django.db import connection, transaction

    from h2htalk import bulk

    if connection.vendor != "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT {COPY_COLUMNS} FROM scenarios_response ORDER BY id")  # noqa: S608
            rows = cursor.fetchall()
        _empty_responses()
        label = "raw executemany into scenarios_response"
        with Step(label, lines, server) as step, transaction.atomic():
            bulk.insert_rows("scenarios_response", COPY_COLUMNS.split(", "), rows)
        return [step.row("SQLite has no COPY")]
    source = workdir / "responses.copy"
    with connection.cursor() as cursor, source.open("wb") as out:
        query = f"COPY (SELECT {COPY_COLUMNS} FROM scenarios_response ORDER BY id) TO STDOUT"  # noqa: S608
        with cursor.copy(query) as copy:
            for chunk in copy:
                out.write(chunk)
        cursor.execute("CREATE TABLE bench_response_copy (LIKE scenarios_response INCLUDING ALL)")
    like = _raw_copy("raw COPY, LIKE table (no FKs)", "bench_response_copy", source, lines, server)
    _empty_responses()
    real = _raw_copy("raw COPY, scenarios_response", "scenarios_response", source, lines, server)
    return [like, real]


def _changed_copy(path: Path, out: Path) -> int:
    """The file with every tenth text changed; returns how many."""
    changed = 0
    with path.open(encoding="utf-8") as lines, out.open("w", encoding="utf-8") as target:
        for number, line in enumerate(lines):
            if number % 10 == 0:
                row = json.loads(line)
                row["text"] += " (revised)"
                line = json.dumps(row, ensure_ascii=False) + "\n"
                changed += 1
            target.write(line)
    return changed


def _ratio(ours: dict, baseline: dict) -> dict:
    ratio = ours["rows_per_s"] / baseline["rows_per_s"]
    label = f"ratio: import / {baseline['benchmark']}"
    notes = (
        f"{ours['rows_per_s']:,} / {baseline['rows_per_s']:,} rows/s = {ratio:.2f} "
        f"(1/{1 / ratio:.1f}); load {loadavg()}"
    )
    log(f"{label}: {notes}")
    return {"benchmark": label, "ratio": round(ratio, 3), "notes": notes}


def run() -> list[dict]:
    scenarios = env_int("BENCH_RESPONSE_SCENARIOS", 4650)
    companions = env_int("BENCH_RESPONSE_COMPANIONS", 50)
    small = max(1, companions // 5)
    server = backend_pid()
    with tempfile.TemporaryDirectory(prefix="h2htalk-bench-responses-") as workdir:
        workdir = Path(workdir)
        keys = _scenario_keys(scenarios, workdir)
        path, small_path = workdir / "responses.jsonl", workdir / "small.jsonl"
        lines = _write_responses(path, keys, companions)
        small_lines = _write_responses(small_path, keys, small)
        log(f"{lines:,} responses written to a {path.stat().st_size / 1e6:.0f} MB JSONL")
        rows = [
            _import(
                f"import {small_lines:,} (new run)",
                small_path,
                small_lines,
                "bench small",
                server,
                (small_lines, 0, 0),
            )
        ]
        _empty_responses()
        ours = _import(
            f"import {lines:,} (new run)", path, lines, "bench import", server, (lines, 0, 0)
        )
        rows.append(ours)
        rows.append(
            _import("import again (unchanged)", path, lines, "bench import", server, (0, 0, lines))
        )
        changed_path = workdir / "changed.jsonl"
        changed = _changed_copy(path, changed_path)
        rows.append(
            _import(
                "import again (1 in 10 changed)",
                changed_path,
                lines,
                "bench import",
                server,
                (0, changed, lines - changed),
            )
        )
        baselines = _baselines(workdir, lines, server)
        rows += baselines
        rows += [_ratio(ours, baseline) for baseline in baselines]
    return rows
