"""Issue 23 point 2: the whole H2HTalk release (11 files, 4,589 lines) in one upload through the
import page, one preview per file, line for line into the bank; a zip is the same upload; one
bad file writes nothing and its errors are named per file; a PNG gets one sentence; a finished
job's bar ends at 100 % or says failed; a confirmed preview says so."""

import io
import json
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from h2htalk import jobs
from h2htalk.models import Job
from scenarios.import_formats import RELEASE_LINES
from scenarios.models import Scenario
from tests.conftest import SHARED_DATA, require_shared

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8


def release_paths() -> list:
    return [require_shared(SHARED_DATA / f"{subtask}.jsonl") for subtask in RELEASE_LINES]


def upload(path_or_name, content: bytes | None = None) -> SimpleUploadedFile:
    if content is None:
        return SimpleUploadedFile(path_or_name.name, path_or_name.read_bytes())
    return SimpleUploadedFile(path_or_name, content)


def preview(client, files, capture, **options) -> Job:
    data = {"file": files, "format": "auto", "initial_state": "draft", **options}
    with capture(execute=True):
        response = client.post(reverse("scenarios:import"), data)
    assert response.status_code == 302, response.content.decode()[:2000]
    return Job.objects.get(pk=response["Location"].rstrip("/").rsplit("/", 1)[1])


def confirm(client, job: Job, capture) -> Job:
    with capture(execute=True):
        response = client.post(reverse("scenarios:import_confirm", args=[job.pk]))
    return Job.objects.get(pk=response["Location"].rstrip("/").rsplit("/", 1)[1])


def test_the_whole_release_in_one_upload_line_for_line(
    researcher_client, django_capture_on_commit_callbacks
):
    paths = release_paths()
    job = preview(researcher_client, [upload(p) for p in paths], django_capture_on_commit_callbacks)
    assert job.state == Job.State.COMPLETED, job.message
    report = job.result
    assert report["rows"] == report["created"] == 4589 and report["error_count"] == 0
    assert [f["filename"] for f in report["files"]] == [p.name for p in paths]
    assert [f["rows"] for f in report["files"]] == list(RELEASE_LINES.values())
    assert Scenario.objects.count() == 0
    page = researcher_client.get(reverse("job_detail", args=[job.pk])).content.decode()
    assert page.count('class="import-file"') == 11
    assert page.count("reference answers only, no inputs") == 11
    assert page.count("All 1,882 lines of the released file.") == 1
    assert "Before these scenarios can be rated they need:" in page
    assert "Preview (nothing written yet): 11 files" in page

    written = confirm(researcher_client, job, django_capture_on_commit_callbacks)
    assert written.state == Job.State.COMPLETED, written.message
    assert written.result["written"] and written.result["created"] == 4589
    stored = {
        (s, e): text
        for s, e, text in Scenario.objects.values_list(
            "subtask", "external_id", "reference_response"
        )
    }
    assert len(stored) == 4589
    for path in paths:
        subtask = path.name.removesuffix(".jsonl")
        lines = path.read_bytes().decode("utf-8").splitlines()
        assert len(lines) == RELEASE_LINES[subtask]
        for number, line in enumerate(lines, 1):
            expected = json.loads(line)["response"]
            assert stored[(subtask, f"q{number:03d}")] == expected, (path.name, number)
    assert set(Scenario.objects.values_list("state", flat=True)) == {"draft"}

    again = researcher_client.get(reverse("job_detail", args=[job.pk])).content.decode()
    assert "nothing written yet" not in again
    assert "Preview (confirmed: imported): 11 files" in again
    assert f"job #{written.pk}</a> wrote it" in again
    assert 'id="confirm-import"' not in again


def test_a_zip_is_the_same_upload(researcher_client, django_capture_on_commit_callbacks):
    paths = release_paths()[1:4]
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as bundle:
        for path in paths:
            bundle.write(path, f"data/{path.name}")
        bundle.writestr("__MACOSX/._dialogue_emotion.jsonl", b"\x00\x05\x16\x07")
    job = preview(
        researcher_client,
        [upload("release.zip", archive.getvalue())],
        django_capture_on_commit_callbacks,
    )
    assert job.state == Job.State.COMPLETED, job.message
    assert [f["filename"] for f in job.result["files"]] == [p.name for p in paths]
    assert job.result["rows"] == sum(RELEASE_LINES[p.stem] for p in paths)
    assert confirm(researcher_client, job, django_capture_on_commit_callbacks).result["written"]
    assert Scenario.objects.count() == job.result["rows"]


def test_one_bad_file_writes_nothing_and_its_errors_are_named(
    researcher_client, django_capture_on_commit_callbacks
):
    good = release_paths()[1:3]
    bad = upload("dialogue_base.jsonl", b'{"response": "fine"}\n{"answer": "no"}\nnot json\n')
    job = preview(
        researcher_client, [upload(p) for p in good] + [bad], django_capture_on_commit_callbacks
    )
    assert job.state == Job.State.FAILED
    errors = job.result["errors"]
    assert [(e["file"], e["line"], e["field"]) for e in errors] == [
        ("dialogue_base.jsonl", 2, "answer"),
        ("dialogue_base.jsonl", 3, "(json)"),
    ]
    assert [f["error_count"] for f in job.result["files"]] == [0, 0, 2]
    page = researcher_client.get(reverse("job_detail", args=[job.pk])).content.decode()
    assert 'id="file-3"' in page and "2 errors" in page and 'id="confirm-import"' not in page

    # Written straight away (as the confirmed job would): the good files roll back too.
    from scenarios.import_files import UploadFailed, import_upload

    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as bundle:
        for path in good:
            bundle.write(path, path.name)
        bundle.writestr("dialogue_base.jsonl", bad.open().read())
    archive.seek(0)
    with pytest.raises(UploadFailed) as failed:
        import_upload(archive, "upload.zip", dry_run=False)
    assert failed.value.report["error_count"] == 2
    assert Scenario.objects.count() == 0


def test_a_key_in_two_files_is_an_error_of_the_later_file(
    researcher_client, django_capture_on_commit_callbacks
):
    row = {"subtask": "dialogue_base", "external_id": "x1", "user_message": "hi"}
    first = upload("a.jsonl", (json.dumps(row) + "\n").encode())
    second = upload("b.jsonl", (json.dumps({**row, "user_message": "hello"}) + "\n").encode())
    job = preview(researcher_client, [first, second], django_capture_on_commit_callbacks)
    assert job.result["errors"] == [
        {
            "line": 1,
            "field": "external_id",
            "message": "dialogue_base/x1 already appears on a.jsonl line 1",
            "file": "b.jsonl",
        }
    ]


def test_a_png_gets_one_sentence_not_an_error_per_line(
    researcher_client, django_capture_on_commit_callbacks
):
    job = preview(
        researcher_client, [upload("photo.jsonl", PNG)], django_capture_on_commit_callbacks
    )
    assert job.result["error_count"] == 1
    sentence = "This is not a JSONL or CSV file: it looks like a PNG image."
    assert job.result["files"][0]["file_error"] == sentence
    page = researcher_client.get(reverse("job_detail", args=[job.pk])).content.decode()
    assert page.count(sentence) == 1 and "UTF-8" not in page
    pdf = preview(
        researcher_client,
        [upload("paper.csv", b"%PDF-1.7\n" + bytes(range(128, 256)) * 40)],
        django_capture_on_commit_callbacks,
    )
    assert pdf.result["files"][0]["file_error"].endswith("it looks like a PDF document.")


def test_a_finished_bar_is_full_or_says_failed(
    researcher_client, django_capture_on_commit_callbacks
):
    rows = [{"subtask": "dialogue_base", "user_message": f"m{i}"} for i in range(3)]
    text = "\n\n".join(json.dumps(r) for r in rows) + "\n\n"  # blank lines: rows < lines
    job = preview(
        researcher_client,
        [upload("blank.jsonl", text.encode())],
        django_capture_on_commit_callbacks,
    )
    assert job.state == Job.State.COMPLETED and job.result["rows"] == 3
    progress = jobs.live_progress(job)
    assert progress["percent"] == 100 and progress["done"] == progress["total"]
    page = researcher_client.get(reverse("job_detail", args=[job.pk])).content.decode()
    assert "(100%)" in page

    failed = preview(
        researcher_client, [upload("photo.jsonl", PNG)], django_capture_on_commit_callbacks
    )
    page = researcher_client.get(reverse("job_detail", args=[failed.pk])).content.decode()
    assert 'id="job-stopped">failed here' in page
