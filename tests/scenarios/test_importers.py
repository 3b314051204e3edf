import io
import json

import pytest

from h2htalk import bulk
from scenarios.importers import ImportFailed, import_file
from scenarios.models import Persona, Revision, Scenario, Tag


def run(content: bytes | str, filename="rows.jsonl", dry_run=False, **options):
    if isinstance(content, str):
        content = content.encode("utf-8")
    return import_file(io.BytesIO(content), filename, dry_run=dry_run, **options)


def jsonl(*rows) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


GOOD = {"external_id": "a1", "subtask": "dialogue_base", "user_message": "hi", "language": "en"}


@pytest.mark.django_db
def test_release_file_gives_one_scenario_per_line_in_order(release_file):
    raw_lines = release_file.read_bytes().split(b"\r\n")
    assert raw_lines[-1] == b""  # CRLF after every line, as SOURCE.md says
    expected = [json.loads(line)["response"] for line in raw_lines[:-1]]

    report = import_file(str(release_file), release_file.name)

    assert report.created == len(expected) == 1882
    scenarios = list(Scenario.objects.order_by("pk"))
    assert [s.external_id for s in scenarios] == [f"q{n:03d}" for n in range(1, 1883)]
    assert [s.reference_response for s in scenarios] == expected
    assert {s.subtask for s in scenarios} == {"dialogue_base"}
    assert {s.dimension for s in scenarios} == {"dialogue"}
    assert "（微微颔首）" in scenarios[0].reference_response or "微微颔首" in expected[0]
    assert all("\r" not in s.reference_response for s in scenarios)


@pytest.mark.django_db
def test_importing_the_release_twice_changes_nothing(release_file):
    import_file(str(release_file), release_file.name)
    counts = (Scenario.objects.count(), Revision.objects.count(), Tag.objects.count())
    hashes = list(Scenario.objects.order_by("pk").values_list("content_hash", "updated_at"))

    report = import_file(str(release_file), release_file.name)

    assert (report.created, report.updated, report.unchanged) == (0, 0, 1882)
    assert (Scenario.objects.count(), Revision.objects.count(), Tag.objects.count()) == counts
    assert list(Scenario.objects.order_by("pk").values_list("content_hash", "updated_at")) == hashes


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("content", "filename", "line", "field"),
    [
        (
            jsonl(GOOD) + '{"subtask": "dialogue_base", "user_message": "x"\n',
            "a.jsonl",
            2,
            "(json)",
        ),
        (jsonl(GOOD, {"external_id": "b", "user_message": "no subtask"}), "a.jsonl", 2, "subtask"),
        (
            jsonl(GOOD, {**GOOD, "external_id": "b", "subtask": "dialogue_x"}),
            "a.jsonl",
            2,
            "subtask",
        ),
        (jsonl({**GOOD, "user_message": "x" * 20_001}), "a.jsonl", 1, "user_message"),
        (jsonl({**GOOD, "usr_message": "typo"}), "a.jsonl", 1, "usr_message"),
        (
            jsonl({**GOOD, "history": [{"role": "friend", "content": "x"}]}),
            "a.jsonl",
            1,
            "history[0].role",
        ),
        (
            jsonl({**GOOD, "schedule": [{"time": "25:00", "activity": "x"}]}),
            "a.jsonl",
            1,
            "schedule[0].time",
        ),
        (
            jsonl({**GOOD, "memory": [{"content": "x", "importance": 5}]}),
            "a.jsonl",
            1,
            "memory[0].importance",
        ),
        (jsonl({**GOOD, "risk_level": "extreme"}), "a.jsonl", 1, "risk_level"),
        (jsonl({**GOOD, "persona": "Nobody Known"}), "a.jsonl", 1, "persona"),
        (jsonl(GOOD, GOOD), "a.jsonl", 2, "external_id"),
        (jsonl(GOOD) + "[1, 2]\n", "a.jsonl", 2, "(json)"),
        ('{"response": "好"}\n{"response": "ok", "extra": 1}\n', "dialogue_base.jsonl", 2, "extra"),
        ('{"response": "好"}\n\n{"response": "ok"}\n', "dialogue_base.jsonl", 2, "(line)"),
        ('{"response": "好"}\n', "unknown_name.jsonl", 1, "subtask"),
        ("subtask,user_message\ndialogue_base,hi\n", "a.csv", 1, "reference_response"),
        ("subtask,user_message,reference_response,colour\n", "a.csv", 1, "colour"),
        (
            'subtask,user_message,reference_response,history\ndialogue_base,hi,ok,"[{""role"": 1,]"\n',
            "a.csv",
            2,
            "history",
        ),
        (
            '{"messages": [{"from": "alien", "value": "x"}], "subtask": "dialogue_base"}\n',
            "s.jsonl",
            1,
            "messages[0].from",
        ),
    ],
    ids=[
        "malformed-json",
        "missing-subtask",
        "unknown-subtask",
        "oversized-text",
        "unknown-field",
        "bad-history-role",
        "bad-time",
        "bad-importance",
        "bad-risk",
        "unknown-persona",
        "repeated-id",
        "not-an-object",
        "release-extra-key",
        "release-blank-line",
        "release-unknown-file",
        "csv-missing-column",
        "csv-unknown-column",
        "csv-bad-json",
        "sharegpt-bad-speaker",
    ],
)
def test_bad_input_names_line_and_field_and_writes_nothing(content, filename, line, field):
    preview = run(content, filename, dry_run=True)
    assert (line, field) in [(e.line, e.field) for e in preview.errors], preview.errors

    with pytest.raises(ImportFailed) as failure:
        run(content, filename)
    assert not failure.value.report.written
    assert Scenario.objects.count() == 0
    assert Revision.objects.count() == 0


@pytest.mark.django_db
def test_wrong_encoding_is_reported_with_its_line():
    content = jsonl(GOOD).encode() + '{"subtask": "dialogue_base", "user_message": "é"}\n'.encode(
        "latin-1"
    )
    report = run(content, "a.jsonl", dry_run=True)
    assert [(e.line, e.field) for e in report.errors] == [(2, "(encoding)")]


@pytest.mark.django_db
def test_a_failure_during_the_write_leaves_nothing_behind(monkeypatch):
    rows = [{**GOOD, "external_id": f"id{i}"} for i in range(1200)]
    original = bulk.insert_rows
    calls = []

    def failing_insert(table, columns, rows):
        if table is Revision:
            calls.append(len(rows))
            if len(calls) == 2:  # the second batch of 500: the first one is already written
                raise RuntimeError("disk full")
        return original(table, columns, rows)

    monkeypatch.setattr(bulk, "insert_rows", failing_insert)
    with pytest.raises(RuntimeError):
        run(jsonl(*rows))
    assert calls == [500, 500]
    assert Scenario.objects.count() == 0
    assert Revision.objects.count() == 0


@pytest.mark.django_db
def test_reimport_with_changed_text_updates_and_records_a_revision():
    run(jsonl(GOOD, {**GOOD, "external_id": "a2"}))
    report = run(jsonl({**GOOD, "user_message": "hello there", "tags": ["x"]}))
    assert (report.created, report.updated, report.unchanged) == (0, 1, 0)
    scenario = Scenario.objects.get(external_id="a1")
    assert scenario.user_message == "hello there"
    latest = scenario.revisions.first()
    assert latest.number == 2 and latest.action == Revision.Action.IMPORTED
    assert set(latest.changes) == {"user_message", "tags"}


@pytest.mark.django_db
def test_rows_without_id_and_equal_content_are_skipped_as_duplicates():
    row = {"subtask": "dialogue_base", "user_message": "same", "reference_response": "same"}
    report = run(jsonl(row, row, {**row, "user_message": "other"}))
    assert (report.created, report.duplicates) == (2, 1)
    assert report.duplicate_lines == [{"line": 2, "duplicate_of": "line 1"}]
    again = run(jsonl(row))
    assert (again.created, again.duplicates) == (0, 1)
    assert Scenario.objects.count() == 2


@pytest.mark.django_db
def test_inline_persona_is_created_once_and_used():
    persona = {"name": "Aster", "summary": "A gardener", "sap_enabled": False}
    report = run(
        jsonl({**GOOD, "persona": persona}, {**GOOD, "external_id": "a2", "persona": "Aster"})
    )
    assert report.personas_created == 1
    aster = Persona.objects.get(name="Aster")
    assert aster.sap_enabled is False
    assert set(Scenario.objects.values_list("persona__name", flat=True)) == {"Aster"}


@pytest.mark.django_db
def test_csv_with_json_cells_and_tags():
    content = (
        "\ufeffexternal_id,subtask,user_message,reference_response,history,schedule,tags,"
        "implicit_need,risk_level\n"
        'c1,dialogue_schedule,"Busy day, huh?",我在,"[{""role"": ""user"", ""content"": ""早""}]",'
        '"[{""time"": ""09:00"", ""activity"": ""会议""}]",work;schedule,yes,low\n'
    )
    report = run(content, "rows.csv")
    assert report.format == "csv" and report.created == 1
    scenario = Scenario.objects.get()
    assert scenario.history == [{"role": "user", "content": "早"}]
    assert scenario.schedule == [{"time": "09:00", "activity": "会议"}]
    assert sorted(t.name for t in scenario.tags.all()) == ["schedule", "work"]
    assert scenario.implicit_need and scenario.risk_level == "low"


@pytest.mark.django_db
def test_sharegpt_messages_split_into_history_message_and_reference():
    row = {
        "id": "sg1",
        "subtask": "dialogue_emotion",
        "messages": [
            {"from": "system", "value": "You are a companion."},
            {"from": "human", "value": "I failed my exam."},
            {"from": "gpt", "value": "I'm sorry. How are you feeling?"},
            {"from": "human", "value": "Bad."},
            {"from": "gpt", "value": "That makes sense. I'm here."},
        ],
    }
    report = run(jsonl(row), "chat.jsonl")
    assert report.format == "sharegpt"
    scenario = Scenario.objects.get()
    assert scenario.external_id == "sg1"
    assert scenario.user_message == "Bad."
    assert scenario.reference_response == "That makes sense. I'm here."
    assert [t["role"] for t in scenario.history] == ["system", "user", "assistant"]


@pytest.mark.django_db
def test_dry_run_writes_nothing_but_counts():
    report = run(jsonl(GOOD, {**GOOD, "external_id": "b"}), dry_run=True)
    assert (report.rows, report.created, report.written) == (2, 2, False)
    assert Scenario.objects.count() == 0


FULL = {
    "external_id": "f1",
    "subtask": "dialogue_schedule",
    "persona": {"name": "林知夏", "summary": "建筑师", "language": "zh"},
    "language": "zh",
    "history": [
        {"role": "user", "content": '早安\n"引号"'},
        {"content": "嗯", "role": "assistant"},
    ],
    "memory": ["喜欢咖啡", {"content": "怕打雷", "category": "情绪", "importance": 2}],
    "schedule": [{"time": "09:00", "activity": "开会"}, {"activity": "Lunch \\ 午饭"}],
    "user_message": "今天好累 \u2028 tab\t",
    "reference_response": "（递过一杯热水）Rest.",
    "implicit_need": "yes",
    "evolving_need": True,
    "risk_level": "low",
    "tags": ["work", "sleep", "work"],
    "state": "approved",
    "source": "test",
}


@pytest.mark.django_db
def test_an_imported_scenario_stores_what_the_model_computes_itself():
    """The importer writes rows without model instances: its hash, search text and revision
    snapshot must be the ones Scenario.refresh_derived and services.snapshot give."""
    from scenarios.services import content_hash, search_text, snapshot

    run(jsonl(FULL, {**FULL, "external_id": "", "persona": "林知夏", "tags": []}))

    for scenario in Scenario.objects.select_related("persona"):
        assert scenario.content_hash == content_hash(scenario)
        assert scenario.search_text == search_text(scenario)
        assert scenario.dimension == "dialogue"
        assert scenario.revisions.get().snapshot == snapshot(scenario)
    keyed = Scenario.objects.get(external_id="f1")
    assert keyed.history[0] == {"role": "user", "content": '早安\n"引号"'}
    assert keyed.memory == [{"content": "喜欢咖啡"}, FULL["memory"][1]]
    assert sorted(t.name for t in keyed.tags.all()) == ["sleep", "work"]
    assert (keyed.implicit_need, keyed.evolving_need, keyed.state) == (True, True, "approved")


@pytest.mark.django_db
def test_a_persona_defined_on_a_later_line_is_used_by_an_earlier_one():
    rows = [{**GOOD, "external_id": f"id{i}", "persona": "Aster"} for i in range(600)]
    rows.append({**GOOD, "external_id": "last", "persona": {"name": "Aster", "language": "en"}})
    preview = run(jsonl(*rows), dry_run=True)
    assert (preview.errors, preview.created, preview.personas_created) == ([], 601, 1)

    report = run(jsonl(*rows))

    assert report.created == 601 and report.written
    assert set(Scenario.objects.values_list("persona__name", flat=True)) == {"Aster"}


@pytest.mark.django_db
def test_reimport_after_a_persona_was_renamed_puts_the_file_s_persona_back():
    """Unchanged rows are found by content hash and ids; a renamed persona keeps the old name
    in the hash, so the persona itself must be compared too."""
    row = {**GOOD, "persona": {"name": "Aster", "language": "en"}}
    run(jsonl(row))
    Persona.objects.filter(name="Aster").update(name="Aster II")

    report = run(jsonl(row))

    assert (report.updated, report.unchanged, report.personas_created) == (1, 0, 1)
    assert Scenario.objects.get().persona.name == "Aster"


@pytest.mark.django_db
def test_every_error_of_a_long_file_is_reported_in_line_order():
    rows = [{**GOOD, "external_id": f"id{i}"} for i in range(1200)]
    rows[10]["risk_level"] = "extreme"
    rows[700]["persona"] = "Nobody"
    rows[1100]["external_id"] = "id5"
    report = run(jsonl(*rows), dry_run=True)
    expected = [(11, "risk_level"), (701, "persona"), (1101, "external_id")]
    assert [(e.line, e.field) for e in report.errors] == expected
    with pytest.raises(ImportFailed) as failure:
        run(jsonl(*rows))
    assert [(e.line, e.field) for e in failure.value.report.errors] == expected
    assert Scenario.objects.count() == 0 and Tag.objects.count() == 0


@pytest.mark.django_db
def test_a_row_with_three_errors_reports_all_three():
    bad = {**GOOD, "language": "klingon", "risk_level": "extreme", "schedule": [{"time": "25:00"}]}
    report = run(jsonl(GOOD, bad), dry_run=True)
    assert [(e.line, e.field) for e in report.errors] == [
        (2, "language"),
        (2, "schedule[0].time"),
        (2, "risk_level"),
    ]
    assert report.error_count == 3 and not report.ok
    assert "'klingon' is not one of" in report.errors[0].message
    with pytest.raises(ImportFailed) as failure:
        run(jsonl(GOOD, bad))
    assert failure.value.report.error_count == 3
    assert Scenario.objects.count() == 0 and Persona.objects.count() == 0


@pytest.mark.django_db
def test_a_row_with_a_bad_subtask_still_reports_its_other_fields():
    bad = {"subtask": "nope", "dimension": "dialogue", "tags": 5, "implicit_need": "maybe"}
    report = run(jsonl(bad), dry_run=True)
    # No dimension check without a subtask to check it against.
    assert [e.field for e in report.errors] == ["subtask", "implicit_need", "tags"]


@pytest.mark.django_db
def test_errors_are_counted_past_the_cap_and_kept_up_to_it(monkeypatch):
    from scenarios import importers

    monkeypatch.setattr(importers, "MAX_ERRORS", 5)
    rows = [
        {**GOOD, "external_id": f"id{i}", "language": "xx", "risk_level": "?"} for i in range(4)
    ]
    report = run(jsonl(*rows), dry_run=True)
    assert report.error_count == 8 and len(report.errors) == 5
    assert [e.line for e in report.errors] == [1, 1, 2, 2, 3]
    assert report.as_dict()["error_count"] == 8
