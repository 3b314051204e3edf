"""The set-based write of a response import (scenarios.companions.writer): one COPY straight
into a run without responses, a staging table and one upsert into a run with some; on
PostgreSQL (CI) the rows go through COPY, on SQLite through executemany."""

import pytest
from django.db import connection

from scenarios.companions import imports as response_import
from scenarios.companions.imports import (
    ResponseImportFailed,
    build_response_plan,
    import_responses,
)
from scenarios.companions.writer import ResponseWriter
from scenarios.models import CompanionModel, GenerationRun, Response
from tests.scenarios.test_response_import import db_counts, jsonl, make_scenarios, stored

pytestmark = pytest.mark.django_db

QUESTIONS = 40


@pytest.fixture
def bank():
    make_scenarios("itinerary_basic", QUESTIONS)


def rows(companions=("alpha", "beta"), suffix=""):
    return [
        {
            "subtask": "itinerary_basic",
            "external_id": f"q{n:03d}",
            "companion": companion,
            "text": f"{companion} {n}{suffix}",
            "latency_ms": 100 + n,
        }
        for companion in companions
        for n in range(1, QUESTIONS + 1)
    ]


@pytest.fixture
def small_batches(monkeypatch):
    """Batches of 7: several COPY batches are sent before any line of interest."""
    monkeypatch.setattr(response_import, "BATCH", 7)


def counting_writes(monkeypatch) -> dict:
    """Count the writer's batches and note which path (direct or staging) it took."""
    seen = {"batches": 0, "direct": []}
    original = ResponseWriter.write

    def write(writer, batch):
        seen["batches"] += 1
        seen["direct"].append(writer.direct)
        return original(writer, batch)

    monkeypatch.setattr(ResponseWriter, "write", write)
    return seen


def test_a_new_run_is_copied_straight_and_a_companion_first_seen_mid_file_is_created(
    bank, tmp_path, small_batches, monkeypatch
):
    seen = counting_writes(monkeypatch)
    path = tmp_path / "r.jsonl"
    path.write_text(jsonl(*rows()), encoding="utf-8")  # beta first appears on line 41

    report = import_responses(str(path), "run")

    assert (report.created, report.updated, report.unchanged) == (80, 0, 0)
    assert report.new_companions == ["alpha", "beta"] and report.companions_created == 2
    assert seen["batches"] == 12 and set(seen["direct"]) == {True}
    assert stored()[("beta", "itinerary_basic", "q040")] == "beta 40"
    assert Response.objects.get(text="alpha 7").latency_ms == 107
    run = GenerationRun.objects.get()
    assert run.scenarios.count() == QUESTIONS
    assert {c.name for c in run.companions.all()} == {"alpha", "beta"}


def test_new_changed_and_unchanged_rows_in_one_reimport(bank, tmp_path, monkeypatch):
    path = tmp_path / "r.jsonl"
    path.write_text(jsonl(*rows(("alpha",))), encoding="utf-8")
    import_responses(str(path), "run")
    before = {r.scenario.external_id: r for r in Response.objects.select_related("scenario")}
    again = rows(("alpha", "gamma"))
    for row in again[:5]:
        row["text"] += " (revised)"
    again[5]["latency_ms"] = None  # metadata alone is a change too
    path.write_text(jsonl(*again), encoding="utf-8")
    seen = counting_writes(monkeypatch)

    preview = import_responses(str(path), "run", dry_run=True)
    report = import_responses(str(path), "run")

    counts = (report.created, report.updated, report.unchanged)
    assert counts == (preview.created, preview.updated, preview.unchanged) == (40, 6, 34)
    assert set(seen["direct"]) == {False}  # a run with responses: staged, then one upsert
    after = {
        r.scenario.external_id: r
        for r in Response.objects.filter(companion__name="alpha").select_related("scenario")
    }
    touched = {q for q in after if after[q].updated_at != before[q].updated_at}
    assert touched == {f"q{n:03d}" for n in range(1, 7)}
    assert all(after[q].created_at == before[q].created_at for q in after)
    assert after["q001"].text == "alpha 1 (revised)" and after["q006"].latency_ms is None
    assert Response.objects.count() == 80
    assert not _staging_table_left()


def _staging_table_left() -> bool:
    """Whether this connection still holds the staging table."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT to_regclass('pg_temp.response_import_staging')")
            return cursor.fetchone()[0] is not None
        cursor.execute(
            "SELECT COUNT(*) FROM temp.sqlite_master WHERE name = 'response_import_staging'"
        )
        return cursor.fetchone()[0] > 0


@pytest.mark.parametrize("existing_run", [False, True], ids=["new-run", "existing-run"])
def test_a_bad_line_mid_file_after_batches_were_sent_leaves_nothing(
    bank, tmp_path, small_batches, existing_run
):
    path = tmp_path / "r.jsonl"
    if existing_run:
        path.write_text(jsonl(*rows(("alpha",))), encoding="utf-8")
        import_responses(str(path), "run")
    before, counts = stored(), db_counts()
    bad = rows(("alpha", "beta"), suffix=" again")
    bad[60] = {**bad[60], "prompt_tokens": -3}  # line 61: 60 rows (8 batches) already sent
    path.write_text(jsonl(*bad), encoding="utf-8")

    with pytest.raises(ResponseImportFailed) as failure:
        import_responses(str(path), "run")

    errors = failure.value.report.errors
    assert [(e.file, e.line, e.field) for e in errors] == [("r.jsonl", 61, "prompt_tokens")]
    assert "nothing was written" in str(failure.value)
    assert stored() == before and db_counts() == counts
    assert not CompanionModel.objects.filter(name="beta").exists()
    assert not _staging_table_left()


def test_an_input_changed_after_its_preview_is_refused_mid_copy(bank, tmp_path, small_batches):
    path = tmp_path / "r.jsonl"
    path.write_text(jsonl(*rows()), encoding="utf-8")
    plan = build_response_plan(str(path), "run")
    changed = rows()
    changed[50]["text"] = "edited after the preview"
    path.write_text(jsonl(*changed), encoding="utf-8")

    with pytest.raises(ResponseImportFailed):
        response_import.write_response_plan(plan)
    assert db_counts() == (0, 0, 0)
