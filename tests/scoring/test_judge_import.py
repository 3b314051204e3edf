"""Importing judge verdicts from JSONL: good and bad lines, line-numbered errors, all or
nothing, idempotence, raw outputs parsed here, the export round trip, and the pages."""

import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from h2htalk.models import Job
from scoring.judges import judging
from scoring.judges.imports import JudgeImportFailed, export_lines, import_verdicts
from scoring.models import JudgeConfig, JudgeRun, JudgeVerdict
from tests.scoring.test_judge_support import COMPANIONS, response_run

pytestmark = pytest.mark.django_db
A, B, C = COMPANIONS
SCORES = {
    "empathy": 8,
    "fluency": 9,
    "memory_use": 7,
    "planning": 6,
    "persona_consistency": 9,
    "safety": 10,
}


@pytest.fixture
def scenarios():
    _, made = response_run(
        [["a one", "b one", "c one"], ["a two", "b two", "c two"]], names=COMPANIONS
    )
    return made


def single(scenario, companion=A, **extra):
    return {
        "mode": "single",
        "subtask": scenario.subtask,
        "external_id": scenario.external_id,
        "run": "responses",
        "companion": companion,
        "scores": SCORES,
        **extra,
    }


def pairwise(scenario, first=A, second=B, winner="first", **extra):
    return {
        "mode": "pairwise",
        "subtask": scenario.subtask,
        "external_id": scenario.external_id,
        "run": "responses",
        "first": first,
        "second": second,
        "winner": winner,
        **extra,
    }


def jsonl(*rows) -> io.BytesIO:
    lines = [row if isinstance(row, str) else json.dumps(row, ensure_ascii=False) for row in rows]
    return io.BytesIO(("\n".join(lines) + "\n").encode())


def run_import(stream, dry_run=False, judge="external gpt", run_name="ext run"):
    return import_verdicts(stream, "verdicts.jsonl", judge, run_name, dry_run=dry_run)


def good_file(scenarios):
    s1, s2 = scenarios
    return jsonl(
        single(s1, rationale="kind", raw_output='{"scores": ...}', prompt_tokens=120),
        single(s1, sample=1, scores={**SCORES, "empathy": 3}),
        single(s2, companion=B),
        pairwise(s1),
        pairwise(s1, first=B, second=A, winner="second"),
        pairwise(s2, first=A, second=C, winner="tie", sample=2),
    )


def test_dry_run_counts_and_writes_nothing_then_the_write_and_a_reimport(scenarios):
    report = run_import(good_file(scenarios), dry_run=True)
    assert report.ok and not report.written
    assert (report.rows, report.created, report.updated, report.unchanged) == (6, 6, 0, 0)
    assert report.modes == {"single": 3, "pairwise": 3}
    assert not JudgeRun.objects.exists() and not JudgeConfig.objects.exists()

    report = run_import(good_file(scenarios))
    assert report.written and report.created == 6
    run = JudgeRun.objects.get(name="ext run")
    assert run.imported and run.state == JudgeRun.State.COMPLETED
    assert run.judge.name == "external gpt" and run.judge.base_url == ""
    assert run.verdicts.count() == 6
    verdict = run.verdicts.get(response__text="a one", sample=0)
    assert (verdict.parse, verdict.scores, verdict.rationale) == ("strict", SCORES, "kind")
    assert verdict.raw_output == '{"scores": ...}' and verdict.prompt_tokens == 120
    flipped = run.verdicts.get(first__text="b one")
    assert (flipped.second.text, flipped.winner) == ("a one", "second")
    assert run.verdicts.get(sample=2).winner == "tie"

    # The same file again: nothing changes.
    report = run_import(good_file(scenarios))
    assert (report.created, report.updated, report.unchanged) == (0, 0, 6)
    assert JudgeVerdict.objects.count() == 6
    # One changed line updates its verdict only.
    s1 = scenarios[0]
    changed = jsonl(single(s1, rationale="now harsher", scores={**SCORES, "safety": 2}))
    report = run_import(changed)
    assert (report.created, report.updated, report.unchanged) == (0, 1, 0)
    assert run.verdicts.get(response__text="a one", sample=0).scores["safety"] == 2
    assert JudgeVerdict.objects.count() == 6
    assert judging.progress_of(run).total == 6


def test_bad_lines_are_reported_by_line_and_nothing_is_written(scenarios):
    s1, s2 = scenarios
    stream = jsonl(
        single(s1),  # 1: fine
        "{not json",  # 2
        single(s1, colour="blue"),  # 3: unknown field
        single(s1, companion="Nobody-Model"),  # 4
        single(s2, scores={**SCORES, "empathy": 11}),  # 5
        single(s2, scores={"empathy": 7}),  # 6
        pairwise(s1, winner="left"),  # 7
        pairwise(s1, second=A),  # 8: the same response twice
        single(s1),  # 9: the same verdict as line 1
        {**single(s1, sample=3), "run": "no such run"},  # 10
        {**single(s1), "mode": "triple"},  # 11
        {**single(s1, sample=4), "external_id": "q999"},  # 12
        "[1, 2]",  # 13
        pairwise(s2, winner=None),  # 14: no winner and no raw output
        "",  # 15: blank lines are fine
        single(s2, parse="failed"),  # 16: failed with scores
    )
    report = run_import(stream, dry_run=True)
    found = {(e["line"], e["field"]) for e in report.errors}
    assert found == {
        (2, "(json)"),
        (3, "colour"),
        (4, "companion"),
        (5, "scores.empathy"),
        (6, "scores.fluency"),
        (7, "winner"),
        (8, "second"),
        (9, "sample"),
        (10, "run"),
        (11, "mode"),
        (12, "companion"),
        (13, "(json)"),
        (14, "winner"),
        (16, "scores"),
    }
    assert report.error_count == 14
    messages = {e["line"]: e["message"] for e in report.errors}
    assert "as line 1" in messages[9]
    assert "no response run named 'no such run'" in messages[10]
    assert "11 is not a whole number 1–10" in messages[5]

    with pytest.raises(JudgeImportFailed):
        raise JudgeImportFailed(report)
    report = run_import(stream)  # writing refuses too
    assert not report.written and report.error_count == 14
    assert not JudgeVerdict.objects.exists() and not JudgeRun.objects.exists()


def test_raw_outputs_without_values_go_through_the_parser(scenarios):
    s1, s2 = scenarios
    stream = jsonl(
        {
            **single(s1),
            "scores": None,
            "raw_output": "```json\n" + json.dumps({"scores": SCORES, "rationale": "ok"}) + "\n```",
        },
        {**pairwise(s1), "winner": None, "raw_output": "Response 2 is better."},
        {**pairwise(s2), "winner": None, "raw_output": "I can't help with that."},
        {**single(s2), "scores": None, "parse": "failed", "raw_output": ""},
    )
    report = run_import(stream)
    assert report.written, report.errors
    assert report.parse == {"fallback": 2, "failed": 2}
    run = JudgeRun.objects.get()
    assert run.verdicts.get(response__text="a one").scores == SCORES
    assert run.verdicts.get(first__text="a one").winner == "second"
    refused = run.verdicts.get(first__text="a two")
    assert (refused.parse, refused.error, refused.raw_output) == (
        "failed",
        "refusal",
        "I can't help with that.",
    )
    assert judging.progress_of(run).unparseable == 2


def test_a_judged_run_or_another_judges_run_is_not_a_target(scenarios, settings):
    config = JudgeConfig.objects.create(
        name="local", base_url="http://127.0.0.1:9/v1", model_id="m", rubric="r"
    )
    JudgeRun.objects.create(name="judged here", judge=config)
    report = run_import(good_file(scenarios), run_name="judged here", judge="local")
    assert not report.written and report.errors[0]["field"] == "(run)"
    run_import(good_file(scenarios), run_name="ext", judge="external gpt")
    report = run_import(good_file(scenarios), run_name="ext", judge="local")
    assert "belongs to the judge 'external gpt'" in report.errors[0]["message"]


def test_export_then_import_gives_the_same_verdicts(scenarios):
    run_import(good_file(scenarios))
    run_import(
        jsonl(
            {**pairwise(scenarios[1], first=B, second=C), "winner": None, "raw_output": "garbage"}
        )
    )
    source = JudgeRun.objects.get(name="ext run")
    exported = "".join(export_lines(source))
    assert exported.count("\n") == 7
    report = run_import(io.BytesIO(exported.encode()), run_name="copy")
    assert report.written and report.created == 7, report.errors
    copy = JudgeRun.objects.get(name="copy")
    fields = (
        "response",
        "first",
        "second",
        "sample",
        "parse",
        "scores",
        "winner",
        "rationale",
        "raw_output",
        "error",
        "prompt_tokens",
    )

    def rows(run):
        return sorted(tuple(str(v) for v in row) for row in run.verdicts.values_list(*fields))

    assert rows(copy) == rows(source)


def test_import_pages_preview_then_confirm(
    researcher_client, scenarios, django_capture_on_commit_callbacks
):
    upload = SimpleUploadedFile("ext.jsonl", good_file(scenarios).getvalue())
    with django_capture_on_commit_callbacks(execute=True):
        response = researcher_client.post(
            reverse("judges:import"), {"file": upload, "judge": "external gpt", "run_name": ""}
        )
    job = Job.objects.get(kind="judge_import")
    assert response.status_code == 302 and response["Location"] == reverse(
        "judges:import_job", args=[job.pk]
    )
    assert job.state == Job.State.COMPLETED, job.message
    page = researcher_client.get(response["Location"]).content.decode()
    assert "Preview (nothing written yet)" in page and 'id="confirm-import"' in page
    assert not JudgeVerdict.objects.exists()

    with django_capture_on_commit_callbacks(execute=True):
        response = researcher_client.post(reverse("judges:import_confirm", args=[job.pk]))
    written = Job.objects.filter(kind="judge_import").exclude(pk=job.pk).get()
    assert written.state == Job.State.COMPLETED and written.result["written"]
    assert JudgeRun.objects.get().name == "ext" and JudgeVerdict.objects.count() == 6
    page = researcher_client.get(response["Location"]).content.decode()
    assert "Imported" in page and 'id="confirm-import"' not in page

    # A written job cannot be "confirmed" again; a bad file shows its errors, no button.
    response = researcher_client.post(reverse("judges:import_confirm", args=[written.pk]))
    assert Job.objects.filter(kind="judge_import").count() == 2
    bad = SimpleUploadedFile("bad.jsonl", b'{"mode": "single"}\n')
    with django_capture_on_commit_callbacks(execute=True):
        response = researcher_client.post(reverse("judges:import"), {"file": bad, "judge": "x"})
    page = researcher_client.get(response["Location"]).content.decode()
    assert "Errors" in page and 'id="confirm-import"' not in page
    assert "subtask" in page


def test_only_jsonl_uploads(researcher_client):
    upload = SimpleUploadedFile("verdicts.csv", b"a,b\n")
    response = researcher_client.post(reverse("judges:import"), {"file": upload, "judge": "x"})
    assert response.status_code == 200 and "Upload a .jsonl file" in response.content.decode()
    assert not Job.objects.exists()
