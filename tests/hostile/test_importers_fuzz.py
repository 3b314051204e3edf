"""Property-based tests of every importer against hostile files.

Importers: scenarios (platform JSONL, CSV, H2HTalk release files, ShareGPT, and format
detection), responses (platform JSONL and the evaluator layout as a zip built in memory), judge
verdicts (JSONL) and calibrated-judge documents (the upload page and `import_document`).

Properties, for arbitrary bytes, JSON-ish lines and near-valid files (valid rows with one field
replaced by something hostile, or the bytes damaged: invalid UTF-8, BOMs, CRLF mixes, NUL, a
truncation):

- nothing but the importer's own outcome: a report, or its own error type carrying one;
- every error names a field and says something; its line is ≥ 1 unless the error is about the
  file as a whole (a zip's layout, the run name: line 0 by design in the response and verdict
  importers);
- a file with any error writes nothing (row counts before and after);
- a valid file imports exactly its rows, and importing it again changes nothing.

Each example runs in a savepoint that is rolled back, so examples do not see each other's rows.
"""

import io
import json
import os
import zipfile
from contextlib import contextmanager

import pytest
from django.db import transaction
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scenarios import import_formats, importers
from scenarios.companions import imports as response_import
from scenarios.models import CompanionModel, GenerationRun, Persona, Revision, Scenario, Tag
from scenarios.models import Response as ResponseModel
from scenarios.taxonomy import dimension_of
from scoring.calibration.document import SCHEMA, DocumentError
from scoring.calibration.versions import import_document
from scoring.judges import imports as judge_import
from scoring.judges import parsing
from scoring.metrics import features as feature_data
from scoring.models import CalibratedJudge, JudgeConfig, JudgeRun, JudgeVerdict
from tests.hostile.strategies import (
    HOSTILE_TEXTS,
    IDENT,
    JSON_VALUES,
    NAME,
    NONBLANK_TEXT,
    RAW_FRAGMENTS,
    SAFE_TEXT,
    SUBTASKS,
    damaged,
    dumps,
    hostile_fragment,
    jsonish_line,
    lines_file,
    mutated_object,
    object_text,
)
from tests.scenarios import factories

# HOSTILE_EXAMPLES=500 explores further (the default keeps the module well under a minute).
EXAMPLES = int(os.environ.get("HOSTILE_EXAMPLES", "30"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)
FEW = settings(FUZZ, max_examples=max(EXAMPLES // 2, 1))

# Errors about the input as a whole, not one of its lines (line 0 by design).
FILE_LEVEL = {"(file)", "(zip)", "(folder)", "run", "(judge)", "(run)"}


@contextmanager
def rolled_back():
    with transaction.atomic():
        yield
        transaction.set_rollback(True)


def error_parts(error) -> tuple[int, str, str]:
    if isinstance(error, dict):
        return error["line"], error["field"], error["message"]
    return error.line, error.field, error.message


def assert_well_formed(errors):
    for error in errors:
        line, field, message = error_parts(error)
        assert isinstance(field, str) and field, error
        assert isinstance(message, str) and message.strip(), error
        assert isinstance(line, int), error
        assert line >= 1 or field in FILE_LEVEL, error


# ================================================================ scenarios

SCENARIO_TABLES = (Scenario, Persona, Tag, Revision)


def scenario_counts():
    return tuple(model.objects.count() for model in SCENARIO_TABLES)


def import_scenarios(data: bytes, filename: str, author, fmt: str, **options):
    """(report, written?) of one write attempt; only the importer's own failure is allowed."""
    try:
        report = importers.import_file(io.BytesIO(data), filename, author, fmt=fmt, **options)
    except importers.ImportFailed as failed:
        assert failed.report.errors, "ImportFailed without an error"
        assert not failed.report.written
        return failed.report, False
    assert report.ok and report.written
    return report, True


def check_scenario_file(data: bytes, filename: str, author, fmt: str, **options):
    before = scenario_counts()
    report, written = import_scenarios(data, filename, author, fmt, **options)
    assert_well_formed(report.errors)
    if not written:
        assert scenario_counts() == before, f"a file with errors wrote something: {report.errors}"
    return report, written


MEMORY_ENTRY = st.one_of(
    NONBLANK_TEXT,
    st.fixed_dictionaries(
        {"content": NONBLANK_TEXT},
        optional={"category": SAFE_TEXT, "importance": st.sampled_from([0, 1, 2])},
    ),
)
SCENARIO_ROW = st.fixed_dictionaries(
    {"subtask": st.sampled_from(SUBTASKS)},
    optional={
        "user_message": SAFE_TEXT,
        "reference_response": SAFE_TEXT,
        "language": st.sampled_from(["zh", "en"]),
        "history": st.lists(
            st.fixed_dictionaries(
                {
                    "role": st.sampled_from(["user", "assistant", "system"]),
                    "content": NONBLANK_TEXT,
                }
            ),
            max_size=3,
        ),
        "memory": st.lists(MEMORY_ENTRY, max_size=3),
        "schedule": st.lists(
            st.fixed_dictionaries(
                {
                    "time": st.from_regex(r"([01]\d|2[0-3]):[0-5]\d", fullmatch=True),
                    "activity": NONBLANK_TEXT,
                }
            ),
            max_size=2,
        ),
        "implicit_need": st.booleans(),
        "evolving_need": st.booleans(),
        "risk_level": st.sampled_from(["none", "low", "medium", "high"]),
        "tags": st.lists(st.from_regex(r"[a-z][a-z0-9\-]{0,10}", fullmatch=True), max_size=3),
        "state": st.sampled_from(["draft", "in_review", "approved", "retired"]),
        "source": SAFE_TEXT,
        "persona": st.sampled_from(
            ["", {"name": "Fuzz persona", "summary": "calm", "sap_enabled": False}]
        ),
    },
)


@st.composite
def scenario_rows(draw, min_size=1, max_size=5) -> list[dict]:
    """Valid rows with distinct (subtask, external id)."""
    rows = draw(st.lists(SCENARIO_ROW, min_size=min_size, max_size=max_size))
    ids = draw(st.lists(IDENT, min_size=len(rows), max_size=len(rows), unique=True))
    for row, external_id in zip(rows, ids, strict=True):
        row["external_id"] = external_id
        if draw(st.booleans()):
            row["dimension"] = dimension_of(row["subtask"])
    return rows


CSV_COLUMNS = sorted(import_formats.NATIVE_FIELDS)


def csv_cell(name, value) -> str:
    if name == "tags":
        return ";".join(value)
    if name in import_formats.CSV_JSON_COLUMNS and not isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def csv_bytes(rows: list[dict], columns=None, cell=csv_cell) -> bytes:
    import csv

    columns = columns or CSV_COLUMNS
    out = io.StringIO(newline="")
    writer = csv.writer(out)
    writer.writerow(columns)
    for row in rows:
        writer.writerow([cell(c, row[c]) if c in row else "" for c in columns])
    return out.getvalue().encode("utf-8", "surrogatepass")


@pytest.fixture
def author(researcher):
    return researcher


# ---------------------------------------------------------------- arbitrary input


@FUZZ
@given(
    data=st.binary(max_size=3000),
    fmt=st.sampled_from(["auto", *import_formats.FORMATS]),
    filename=st.sampled_from(["x.jsonl", "x.csv", "dialogue_base.jsonl", "weird name", ".csv"]),
)
def test_scenario_import_of_arbitrary_bytes(author, data, fmt, filename):
    with rolled_back():
        check_scenario_file(data, filename, author, fmt, default_subtask="dialogue_base")


@FUZZ
@given(
    lines=st.lists(jsonish_line(), min_size=1, max_size=6),
    fmt=st.sampled_from(["auto", "jsonl", "release", "sharegpt"]),
)
def test_scenario_import_of_jsonish_lines(author, lines, fmt):
    with rolled_back():
        check_scenario_file(lines_file(lines), "dialogue_base.jsonl", author, fmt)


# ---------------------------------------------------------------- near-valid rows


@FUZZ
@given(data=st.data(), rows=scenario_rows())
def test_scenario_jsonl_with_one_hostile_field(author, data, rows):
    lines = [dumps(row) for row in rows]
    victim = data.draw(st.integers(0, len(lines) - 1))
    lines[victim] = data.draw(mutated_object(rows[victim]))
    file = data.draw(damaged(lines_file(lines)))
    with rolled_back():
        check_scenario_file(file, "x.jsonl", author, "jsonl")


@FUZZ
@given(data=st.data(), rows=scenario_rows())
def test_scenario_csv_with_one_hostile_cell(author, data, rows):
    victim = data.draw(st.integers(0, len(rows) - 1))
    column = data.draw(st.sampled_from(CSV_COLUMNS))
    hostile = data.draw(
        st.sampled_from(HOSTILE_TEXTS)
        | st.sampled_from(RAW_FRAGMENTS)
        | hostile_fragment()
        | st.text(max_size=30)
        | st.just('"a,b""\nc')
    )
    rows[victim][column] = hostile

    def cell(name, value):
        return value if isinstance(value, str) and name == column else csv_cell(name, value)

    columns = CSV_COLUMNS
    shape = data.draw(st.integers(0, 3))
    if shape == 1:
        columns = [*CSV_COLUMNS, "unknown"]
    elif shape == 2:
        columns = [c for c in CSV_COLUMNS if c != "reference_response"]
    file = csv_bytes(rows, columns, cell)
    if shape == 3:
        file += b'dialogue_base,"unterminated\n'
    file = data.draw(damaged(file))
    with rolled_back():
        check_scenario_file(file, "x.csv", author, "csv")


@FUZZ
@given(data=st.data(), texts=st.lists(SAFE_TEXT, min_size=1, max_size=5))
def test_scenario_release_file_with_one_hostile_line(author, data, texts):
    lines = [dumps({"response": text}) for text in texts]
    victim = data.draw(st.integers(0, len(lines) - 1))
    lines[victim] = data.draw(mutated_object({"response": texts[victim]}))
    name = data.draw(st.sampled_from(["dialogue_base.jsonl", "unknown.jsonl"]))
    file = data.draw(damaged(lines_file(lines)))
    with rolled_back():
        check_scenario_file(file, name, author, "release")


SHAREGPT_ROW = st.fixed_dictionaries(
    {
        "subtask": st.sampled_from(SUBTASKS),
        "messages": st.tuples(NONBLANK_TEXT, SAFE_TEXT, SAFE_TEXT).map(
            lambda t: [
                {"from": "system", "value": t[0]},
                {"from": "human", "value": t[1]},
                {"from": "gpt", "value": t[2]},
            ]
        ),
    }
)


@FUZZ
@given(data=st.data(), rows=st.lists(SHAREGPT_ROW, min_size=1, max_size=4))
def test_scenario_sharegpt_with_one_hostile_field(author, data, rows):
    for i, row in enumerate(rows):
        row["id"] = f"s{i}"
    lines = [dumps(row) for row in rows]
    victim = data.draw(st.integers(0, len(lines) - 1))
    lines[victim] = data.draw(
        mutated_object(rows[victim], keys=["messages", "subtask", "id", "persona", "history"])
    )
    file = data.draw(damaged(lines_file(lines)))
    with rolled_back():
        check_scenario_file(file, "x.jsonl", author, "sharegpt")


# ---------------------------------------------------------------- valid files


def assert_imports_exactly(data: bytes, filename, author, fmt, n_rows):
    before = scenario_counts()
    report, written = import_scenarios(data, filename, author, fmt)
    assert written, report.errors
    assert (report.created, report.updated) == (n_rows, 0)
    assert Scenario.objects.count() == before[0] + n_rows
    assert Revision.objects.count() == before[3] + n_rows
    after = scenario_counts()
    again, written = import_scenarios(data, filename, author, fmt)
    assert written, again.errors
    assert (again.created, again.updated, again.unchanged) == (0, 0, n_rows)
    assert scenario_counts() == after


@FUZZ
@given(rows=scenario_rows())
def test_valid_scenario_jsonl_imports_exactly_its_rows(author, rows):
    with rolled_back():
        assert_imports_exactly(
            lines_file([dumps(r) for r in rows]), "x.jsonl", author, "jsonl", len(rows)
        )


@FUZZ
@given(rows=scenario_rows(), bom=st.booleans())
def test_valid_scenario_csv_imports_exactly_its_rows(author, rows, bom):
    data = (b"\xef\xbb\xbf" if bom else b"") + csv_bytes(rows)
    with rolled_back():
        assert_imports_exactly(data, "x.csv", author, "csv", len(rows))


@FUZZ
@given(texts=st.lists(SAFE_TEXT, min_size=1, max_size=6))
def test_valid_release_file_imports_exactly_its_rows(author, texts):
    data = lines_file([dumps({"response": t}) for t in texts])
    with rolled_back():
        assert_imports_exactly(data, "dialogue_emotion.jsonl", author, "release", len(texts))
        numbered = Scenario.objects.filter(subtask="dialogue_emotion")
        assert set(numbered.values_list("external_id", flat=True)) == {
            f"q{n:03d}" for n in range(1, len(texts) + 1)
        }


@FUZZ
@given(rows=st.lists(SHAREGPT_ROW, min_size=1, max_size=4))
def test_valid_sharegpt_imports_exactly_its_rows(author, rows):
    for i, row in enumerate(rows):
        row["id"] = i  # a number: becomes the external id "0", "1", …
    with rolled_back():
        assert_imports_exactly(
            lines_file([dumps(r) for r in rows]), "x.jsonl", author, "sharegpt", len(rows)
        )


# ---------------------------------------------------------------- known-bad values: reported


BAD_VALUES = [
    ("subtask", "[]", "subtask"),
    ("subtask", '{"a": 1}', "subtask"),
    ("state", '["approved"]', "state"),
    ("state", '{"a": 1}', "state"),
    ("state", "1", "state"),
    ("user_message", '"a\\u0000b"', "user_message"),
    ("user_message", '"\\ud800"', "user_message"),
    ("reference_response", '"x\\udfffy"', "reference_response"),
    ("external_id", '"\\ud83d"', "external_id"),
    ("history", '[{"role": "user", "content": "\\ud800"}]', "history[0].content"),
    ("tags", '["a\\u0000b"]', "tags[0]"),
    ("tags", '["\\ud800"]', "tags[0]"),
    ("schedule", '[{"time": 0, "activity": "x"}]', "schedule[0].time"),
    ("implicit_need", "1" * 5000, "(json)"),
    ("memory", "[" * 5000 + "]" * 5000, "(json)"),
    ("persona", '{"name": "\\udfff"}', "persona.name"),
    ("unknown", "1", "unknown"),
]


@pytest.mark.parametrize(("key", "fragment", "field"), BAD_VALUES)
def test_scenario_hostile_value_is_a_line_error(author, key, fragment, field):
    good = dumps({"subtask": "dialogue_base", "external_id": "ok1", "user_message": "hi"})
    row = {"subtask": "dialogue_base", "external_id": "bad1", "user_message": "hi"}
    pairs = [(k, dumps(v)) for k, v in row.items() if k != key] + [(key, fragment)]
    data = lines_file([good, object_text(pairs)])
    report, written = check_scenario_file(data, "x.jsonl", author, "jsonl")
    assert not written
    assert [(e.line, e.field) for e in report.errors] == [(2, field)], report.errors


def test_scenario_csv_deeply_nested_cell_is_a_line_error(author):
    data = csv_bytes([{"subtask": "dialogue_base", "history": "[" * 5000}])
    report, written = check_scenario_file(data, "x.csv", author, "csv")
    assert not written and [(e.line, e.field) for e in report.errors] == [(2, "history")]


# ================================================================ responses

RESPONSE_TABLES = (ResponseModel, CompanionModel, GenerationRun)
QUESTIONS = [("dialogue_base", f"q{n:03d}") for n in (1, 2, 3)] + [("itinerary_basic", "q001")]


def response_counts():
    return tuple(model.objects.count() for model in RESPONSE_TABLES)


@pytest.fixture
def questions(researcher):
    for subtask, external_id in QUESTIONS:
        factories.scenario(researcher, subtask=subtask, external_id=external_id)
    return QUESTIONS


def import_response_file(source: bytes, filename: str, run_name="fuzz run"):
    try:
        report = response_import.import_responses(io.BytesIO(source), run_name, filename=filename)
    except response_import.ResponseImportFailed as failed:
        assert failed.report.error_count and failed.report.errors
        assert not failed.report.written
        return failed.report, False
    assert report.ok and report.written
    return report, True


def check_response_file(source: bytes, filename: str, run_name="fuzz run"):
    before = response_counts()
    report, written = import_response_file(source, filename, run_name)
    assert_well_formed(report.errors)
    if not written:
        assert response_counts() == before, f"a file with errors wrote something: {report.errors}"
    return report, written


RESPONSE_ROW = st.fixed_dictionaries(
    {"text": NONBLANK_TEXT},
    optional={
        "prompt_tokens": st.integers(0, 2**31 - 1),
        "completion_tokens": st.integers(0, 2**31 - 1),
        "latency_ms": st.integers(0, 10**6) | st.none(),
        "finish_reason": st.sampled_from(["stop", "length", ""]),
    },
)


@st.composite
def response_rows(draw, max_size=6) -> list[dict]:
    keys = draw(
        st.lists(
            st.tuples(st.sampled_from(QUESTIONS), st.sampled_from(["alpha", "beta-2", "Gamma_3"])),
            min_size=1,
            max_size=max_size,
            unique=True,
        )
    )
    rows = []
    for (subtask, external_id), companion in keys:
        row = {"subtask": subtask, "external_id": external_id, "companion": companion}
        rows.append(row | draw(RESPONSE_ROW))
    return rows


def zip_bytes(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return out.getvalue()


def evaluator_answer(draw, text):
    shape = draw(st.integers(0, 2))
    if shape == 0:
        return {"response": text}
    if shape == 1:
        return {"answer": text}
    return {"messages": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": text}]}


@st.composite
def evaluator_layout(draw) -> tuple[dict[str, bytes], int]:
    """({path: content}, number of responses) of a valid evaluator layout."""
    models = draw(st.lists(NAME, min_size=1, max_size=3, unique=True))
    top = draw(st.sampled_from(["", "outputs/"]))
    members, count = {}, 0
    for model in models:
        texts = draw(st.lists(NONBLANK_TEXT, min_size=1, max_size=3))
        if draw(st.booleans()):
            lines = [dumps(evaluator_answer(draw, t)) for t in texts]
            members[f"{top}{model}/dialogue_base.jsonl"] = lines_file(lines)
        else:
            document = {f"q{n:03d}": t for n, t in enumerate(texts, start=1)}
            members[f"{top}{model}/dialogue_base.json"] = dumps(document).encode()
        count += len(texts)
    if top == "" and len(models) == 1:
        members["other/itinerary_basic.jsonl"] = b'{"response": "ok"}\n'  # keep 2 top folders
        count += 1
    return members, count


@FUZZ
@given(data=st.binary(max_size=3000), filename=st.sampled_from(["r.jsonl", "r.zip", "r.txt"]))
def test_response_import_of_arbitrary_bytes(questions, data, filename):
    with rolled_back():
        check_response_file(data, filename)


@FUZZ
@given(lines=st.lists(jsonish_line(), min_size=1, max_size=6))
def test_response_import_of_jsonish_lines(questions, lines):
    with rolled_back():
        check_response_file(lines_file(lines), "r.jsonl")


@FUZZ
@given(data=st.data(), rows=response_rows())
def test_response_jsonl_with_one_hostile_field(questions, data, rows):
    lines = [dumps(row) for row in rows]
    victim = data.draw(st.integers(0, len(lines) - 1))
    lines[victim] = data.draw(mutated_object(rows[victim]))
    file = data.draw(damaged(lines_file(lines)))
    run_name = data.draw(st.sampled_from(["fuzz run", "", " ", "r" * 121, "\x00"]))
    with rolled_back():
        check_response_file(file, "r.jsonl", run_name)


HOSTILE_MEMBER_NAMES = [
    "../escape/dialogue_base.jsonl",
    "/abs/dialogue_base.jsonl",
    "m/unknown_subtask.jsonl",
    "m/sub/dir/dialogue_base.jsonl",
    "m/dialogue_base.txt",
    ".DS_Store",
    "__MACOSX/m/._dialogue_base.jsonl",
    "m\\dialogue_base.jsonl",
    "   /dialogue_base.jsonl",
    "x" * 150 + "/dialogue_base.jsonl",
    "模型/dialogue_base.jsonl",
    "m/dialogue_base.json",
    "m/itinerary_basic.jsonl",
]


@FUZZ
@given(data=st.data(), layout=evaluator_layout())
def test_response_zip_with_hostile_member(questions, data, layout):
    members, _ = layout
    action = data.draw(st.integers(0, 3))
    names = sorted(members)
    if action == 0:  # damage one file's content
        name = data.draw(st.sampled_from(names))
        lines = members[name].decode().splitlines() or [""]
        victim = data.draw(st.integers(0, len(lines) - 1))
        try:
            row = json.loads(lines[victim])
        except ValueError:
            row = {}
        if isinstance(row, dict) and name.endswith(".jsonl"):
            lines[victim] = data.draw(mutated_object(row))
        else:
            lines[victim] = data.draw(hostile_fragment())
        members[name] = data.draw(damaged(lines_file(lines)))
    elif action == 1:  # an extra member with a hostile name and content
        name = data.draw(st.sampled_from(HOSTILE_MEMBER_NAMES))
        members[name] = data.draw(
            st.binary(max_size=200) | jsonish_line().map(lambda s: lines_file([s]))
        )
    elif action == 2:  # a JSON document member that is not an object of answers
        name = data.draw(st.sampled_from(names)).rsplit(".", 1)[0] + ".json"
        members = {k: v for k, v in members.items() if k.rsplit(".", 1)[0] != name[:-5]}
        members[name] = data.draw(
            hostile_fragment().map(str.encode)
            | st.binary(max_size=200)
            | st.just(b'{"q001": "a", "q001": "b"}')
            | st.just(b'{"q001": "a",}')
            | st.just(b'{"q999": "a"}')
        )
    file = zip_bytes(members)
    if action == 3:  # the archive itself damaged
        file = data.draw(damaged(file))
    with rolled_back():
        check_response_file(file, "outputs.zip")


@FUZZ
@given(rows=response_rows())
def test_valid_response_jsonl_imports_exactly_its_rows(questions, rows):
    data = lines_file([dumps(r) for r in rows])
    with rolled_back():
        before = ResponseModel.objects.count()
        report, written = import_response_file(data, "r.jsonl")
        assert written, report.errors
        assert (report.created, report.updated) == (len(rows), 0)
        assert ResponseModel.objects.count() == before + len(rows)
        after = response_counts()
        again, written = import_response_file(data, "r.jsonl")
        assert written, again.errors
        assert (again.created, again.updated, again.unchanged) == (0, 0, len(rows))
        assert response_counts() == after


@FUZZ
@given(layout=evaluator_layout())
def test_valid_evaluator_zip_imports_exactly_its_rows(questions, layout):
    members, count = layout
    data = zip_bytes(members)
    with rolled_back():
        before = ResponseModel.objects.count()
        report, written = import_response_file(data, "outputs.zip")
        assert written, report.errors
        assert (report.created, report.updated) == (count, 0)
        assert ResponseModel.objects.count() == before + count
        after = response_counts()
        again, written = import_response_file(data, "outputs.zip")
        assert written, again.errors
        assert (again.created, again.updated, again.unchanged) == (0, 0, count)
        assert response_counts() == after


@pytest.mark.parametrize(
    ("fragment", "field"),
    [
        ("[]", "subtask"),
        ('{"x": 1}', "subtask"),
        ('"\\ud800"', "subtask"),
    ],
)
def test_response_hostile_subtask_is_a_line_error(questions, fragment, field):
    pairs = [("subtask", fragment), ("external_id", '"q001"'), ("companion", '"a"')]
    data = lines_file([object_text([*pairs, ("text", '"hi"')])])
    report, written = check_response_file(data, "r.jsonl")
    assert not written and [(e.line, e.field) for e in report.errors] == [(1, field)]


@pytest.mark.parametrize(
    ("key", "fragment", "field"),
    [
        ("text", '"\\ud800"', "text"),
        ("companion", '"\\udfff"', "companion"),
        ("prompt_tokens", "1" * 5000, "(json)"),
        ("text", "[" * 5000 + "]" * 5000, "(json)"),
    ],
)
def test_response_hostile_value_is_a_line_error(questions, key, fragment, field):
    row = {"subtask": "dialogue_base", "external_id": "q001", "companion": "a", "text": "hi"}
    pairs = [(k, dumps(v)) for k, v in row.items() if k != key] + [(key, fragment)]
    data = lines_file([object_text(pairs)])
    report, written = check_response_file(data, "r.jsonl")
    assert not written and [(e.line, e.field) for e in report.errors] == [(1, field)]


def test_response_evaluator_json_with_huge_number_is_an_error(questions):
    data = zip_bytes(
        {"m/dialogue_base.json": b'{"q001": ' + b"1" * 5000 + b"}", "n/dialogue_base.jsonl": b""}
    )
    report, written = check_response_file(data, "outputs.zip")
    assert not written and report.errors


# ================================================================ judge verdicts

VERDICT_TABLES = (JudgeVerdict, JudgeRun, JudgeConfig)
RESPONSE_RUN = "fuzz responses"
COMPANIONS = ("a", "b", "c")


def verdict_counts():
    return tuple(model.objects.count() for model in VERDICT_TABLES)


@pytest.fixture
def judged(researcher):
    run = GenerationRun.objects.create(name=RESPONSE_RUN, kind="import")
    companions = [CompanionModel.objects.create(name=n, provider="imported") for n in COMPANIONS]
    for external_id in ("q001", "q002"):
        scenario = factories.scenario(researcher, subtask="dialogue_base", external_id=external_id)
        for companion in companions:
            ResponseModel.objects.create(
                run=run, scenario=scenario, companion=companion, text=f"text {external_id}"
            )
    return run


def import_verdict_file(data: bytes):
    try:
        report = judge_import.import_verdicts(
            io.BytesIO(data), "v.jsonl", "fuzz judge", "fuzz judging", dry_run=False
        )
    except judge_import.JudgeImportFailed as failed:
        assert failed.report.error_count
        return failed.report, False
    assert report.written == (report.error_count == 0)
    return report, report.written


def check_verdict_file(data: bytes):
    before = verdict_counts()
    report, written = import_verdict_file(data)
    assert_well_formed(report.errors)
    assert report.error_count >= len(report.errors)
    if not written:
        assert verdict_counts() == before, f"a file with errors wrote something: {report.errors}"
    return report, written


SCORES = st.fixed_dictionaries({d: st.integers(1, 10) for d in parsing.DIMENSIONS})
RAW_OUTPUT = st.one_of(
    NONBLANK_TEXT,
    SCORES.map(lambda s: json.dumps({"scores": s, "rationale": "fine"})),
    st.sampled_from(['{"winner": "1", "rationale": "x"}', "Response 2 is better.", "It's a tie"]),
)


@st.composite
def verdict_rows(draw, max_size=6) -> list[dict]:
    keys = draw(
        st.lists(
            st.tuples(
                st.sampled_from(["single", "pairwise"]),
                st.sampled_from(["q001", "q002"]),
                st.permutations(COMPANIONS).map(lambda p: tuple(p[:2])),
                st.integers(0, 3),
            ),
            min_size=1,
            max_size=max_size,
            unique_by=lambda k: (k[0], k[1], k[2] if k[0] == "pairwise" else k[2][0], k[3]),
        )
    )
    rows = []
    for mode, external_id, (first, second), sample in keys:
        row = {
            "mode": mode,
            "subtask": "dialogue_base",
            "external_id": external_id,
            "run": RESPONSE_RUN,
            "sample": sample,
        }
        if mode == "single":
            row["companion"] = first
        else:
            row["first"], row["second"] = first, second
        given = "scores" if mode == "single" else "winner"
        if draw(st.booleans()):
            row[given] = draw(
                SCORES if mode == "single" else st.sampled_from(["first", "second", "tie"])
            )
            if draw(st.booleans()):
                row["parse"] = draw(st.sampled_from(["strict", "fallback"]))
        else:
            row["raw_output"] = draw(RAW_OUTPUT)
        if draw(st.booleans()):
            row["rationale"] = draw(SAFE_TEXT)
        if draw(st.booleans()):
            row["prompt_tokens"] = draw(st.integers(0, 2**31 - 1))
        rows.append(row)
    return rows


@FUZZ
@given(data=st.binary(max_size=3000))
def test_verdict_import_of_arbitrary_bytes(judged, data):
    with rolled_back():
        check_verdict_file(data)


@FUZZ
@given(lines=st.lists(jsonish_line(), min_size=1, max_size=6))
def test_verdict_import_of_jsonish_lines(judged, lines):
    with rolled_back():
        check_verdict_file(lines_file(lines))


@FUZZ
@given(data=st.data(), rows=verdict_rows())
def test_verdict_jsonl_with_one_hostile_field(judged, data, rows):
    lines = [dumps(row) for row in rows]
    victim = data.draw(st.integers(0, len(lines) - 1))
    lines[victim] = data.draw(mutated_object(rows[victim]))
    file = data.draw(damaged(lines_file(lines)))
    with rolled_back():
        check_verdict_file(file)


@FUZZ
@given(rows=verdict_rows())
def test_valid_verdict_file_imports_exactly_its_rows(judged, rows):
    data = lines_file([dumps(r) for r in rows])
    with rolled_back():
        before = JudgeVerdict.objects.count()
        report, written = import_verdict_file(data)
        assert written, report.errors
        assert (report.created, report.updated) == (len(rows), 0)
        assert JudgeVerdict.objects.count() == before + len(rows)
        after = verdict_counts()
        again, written = import_verdict_file(data)
        assert written, again.errors
        assert (again.created, again.updated, again.unchanged) == (0, 0, len(rows))
        assert verdict_counts() == after


@pytest.mark.parametrize(
    ("key", "fragment", "field"),
    [
        ("mode", "[]", "mode"),
        ("mode", '{"single": 1}', "mode"),
        ("winner", '["first"]', "winner"),
        ("winner", "{}", "winner"),
        ("subtask", "[]", "subtask"),
        ("rationale", '"\\ud800"', "rationale"),
        ("raw_output", '"x\\udfff"', "raw_output"),
        ("sample", "1" * 5000, "(json)"),
        ("first", "[" * 5000 + "]" * 5000, "(json)"),
    ],
)
def test_verdict_hostile_value_is_a_line_error(judged, key, fragment, field):
    row = {
        "mode": "pairwise",
        "subtask": "dialogue_base",
        "external_id": "q001",
        "run": RESPONSE_RUN,
        "first": "a",
        "second": "b",
        "winner": "first",
    }
    pairs = [(k, dumps(v)) for k, v in row.items() if k != key] + [(key, fragment)]
    report, written = check_verdict_file(lines_file([object_text(pairs)]))
    assert not written
    assert [(e["line"], e["field"]) for e in report.errors] == [(1, field)], report.errors


# ================================================================ calibrated-judge documents

BASE_DOCUMENT = {
    "schema": SCHEMA,
    "name": "fuzz calibrated judge",
    "version": 1,
    "features": ["rouge1", "log_length"],
    "scaling": {"mean": [0.1, 4.0], "scale": [0.2, 1.5]},
    "weights": [0.7, -0.3],
    "intercept": 0.05,
    "judge": None,
}
METRICS_ONLY = list(feature_data.METRIC_FEATURES + feature_data.LENGTH_FEATURES)
FINITE = st.floats(allow_nan=False, allow_infinity=False)
SAFE_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | FINITE | SAFE_TEXT,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(SAFE_TEXT, children, max_size=3)
    ),
    max_leaves=8,
)


@st.composite
def valid_documents(draw) -> dict:
    names = draw(st.lists(st.sampled_from(METRICS_ONLY), min_size=1, max_size=4, unique=True))
    n = len(names)
    document = {
        "schema": SCHEMA,
        "name": draw(NONBLANK_TEXT.filter(lambda s: len(s) <= 120)),
        "version": draw(st.integers(1, 10_000)),
        "features": names,
        "scaling": {
            "mean": draw(st.lists(FINITE, min_size=n, max_size=n)),
            "scale": draw(st.lists(st.floats(1e-6, 1e6), min_size=n, max_size=n)),
        },
        "weights": draw(st.lists(FINITE, min_size=n, max_size=n)),
        "intercept": draw(FINITE),
        "judge": None,
    }
    extra = draw(st.dictionaries(st.sampled_from(["notes", "training", "heldout"]), SAFE_JSON))
    return document | extra


def post_document(client, data: bytes, name=""):
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("judge.json", data, content_type="application/json")
    return client.post(reverse("calibration:import"), {"document": upload, "name": name})


def check_document_upload(client, data: bytes, name=""):
    before = CalibratedJudge.objects.count()
    response = post_document(client, data, name)  # a 500 raises here
    assert response.status_code in (200, 302), response.status_code
    if response.status_code == 200:  # the form again, with its error
        assert response.context["form"].errors, "a 200 without an error"
        assert CalibratedJudge.objects.count() == before
    return response


@FUZZ
@given(data=st.binary(max_size=2000))
def test_calibrated_judge_upload_of_arbitrary_bytes(researcher_client, data):
    with rolled_back():
        check_document_upload(researcher_client, data)


@FUZZ
@given(data=st.data())
def test_calibrated_judge_upload_with_one_hostile_field(researcher_client, data):
    keys = [*BASE_DOCUMENT, "scaling.mean", "scaling.scale", "judge.config", "judge.mode"]
    key = data.draw(st.sampled_from(keys))
    fragment = data.draw(hostile_fragment())
    if "." in key:
        outer, inner = key.split(".")
        base = BASE_DOCUMENT[outer] or {"config": "j", "mode": "single"}
        nested = object_text(
            [(k, dumps(v)) for k, v in base.items() if k != inner] + [(inner, fragment)]
        )
        pairs = [(k, dumps(v)) for k, v in BASE_DOCUMENT.items() if k != outer] + [(outer, nested)]
    else:
        pairs = [(k, dumps(v)) for k, v in BASE_DOCUMENT.items() if k != key] + [(key, fragment)]
    if data.draw(st.booleans()):
        pairs.append(("extra", data.draw(hostile_fragment())))
    body = data.draw(damaged(object_text(pairs).encode("utf-8", "surrogatepass")))
    name = data.draw(st.sampled_from(["", "renamed", "\x00", " "]))
    with rolled_back():
        check_document_upload(researcher_client, body, name)


@FUZZ
@given(
    value=JSON_VALUES
    | st.builds(
        lambda extra: BASE_DOCUMENT | extra,
        st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=3),
    )
)
def test_import_document_of_arbitrary_json(researcher, value):
    """The API hands `import_document` any JSON value."""
    with rolled_back():
        before = CalibratedJudge.objects.count()
        try:
            import_document(value, user=researcher)
        except DocumentError as error:
            assert str(error).strip()
            assert CalibratedJudge.objects.count() == before


@FEW
@given(document=valid_documents(), rename=st.booleans())
def test_valid_calibrated_judge_imports_once(researcher_client, document, rename):
    data = json.dumps(document, ensure_ascii=False).encode()
    with rolled_back():
        before = CalibratedJudge.objects.count()
        response = post_document(researcher_client, data)
        assert response.status_code == 302, response.context and response.context["form"].errors
        assert CalibratedJudge.objects.count() == before + 1
        response = post_document(researcher_client, data)  # the same document again
        assert response.status_code == 302, response.context and response.context["form"].errors
        assert CalibratedJudge.objects.count() == before + 1
        if rename:
            assert post_document(researcher_client, data, "copy").status_code == 302
            assert CalibratedJudge.objects.count() == before + 2


@pytest.mark.parametrize(
    ("key", "fragment"),
    [
        ("weights", "[" + "1" * 400 + ", 1]"),  # a number too large for a float
        ("version", str(2**40)),  # beyond the database's integer column
        ("name", '"a\\u0000b"'),
        ("name", '"\\ud800"'),
        ("notes", '"\\u0000"'),  # an extra field: stored as it is
        ("notes", '"\\udfff"'),
        ("notes", "NaN"),
        ("heldout", '{"x": Infinity}'),
        ("intercept", "1" * 5000),
        ("notes", "[" * 5000 + "]" * 5000),
    ],
)
def test_calibrated_judge_hostile_value_is_refused(researcher_client, key, fragment):
    pairs = [(k, dumps(v)) for k, v in BASE_DOCUMENT.items() if k != key] + [(key, fragment)]
    response = check_document_upload(researcher_client, object_text(pairs).encode())
    assert response.status_code == 200
