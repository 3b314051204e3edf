"""Oversized uploads are refused: every upload form and upload API endpoint answers a file (or
document) over `settings.MAX_UPLOAD_BYTES` with an error naming the limit, and writes nothing:
no job, no stored file, no row.

The uploads, found by grepping for FileField / request.FILES / MAX_UPLOAD_BYTES:

- the scenario import form (scenarios:import),
- the response import form (companions:response_import),
- the judge verdict import form (judges:import),
- the calibrated-judge import form (calibration:import; also capped at 2 MB),
- the calibrated-judge import API (calibration-judge-import: a JSON or form body; it answers
  413 before reading the body; the other API endpoints take no files).

The limit is set small through the `settings` fixture rather than sending huge files. Each case
also sends a file of exactly the limit, which must pass the size check (so it really is the size
that is refused, not the content).
"""

import json
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import Campaign
from h2htalk.models import Job
from scenarios.models import CompanionModel, GenerationRun, Response, Scenario
from scoring.models import CalibratedJudge, JudgeConfig, JudgeRun, JudgeVerdict
from tests.scoring.test_release_pipeline import judge_document

LIMIT = 300

SCENARIO_LINE = (
    '{"subtask": "dialogue_emotion", "external_id": "up1", "user_message": "hello", '
    '"reference_response": "hi there"}\n'
)
RESPONSE_LINE = (
    '{"subtask": "dialogue_emotion", "external_id": "up1", "companion": "up-model", '
    '"text": "a reply"}\n'
)
VERDICT_LINE = (
    '{"mode": "single", "subtask": "dialogue_emotion", "external_id": "up1", "run": "r", '
    '"companion": "up-model", "scores": {"empathy": 8}}\n'
)


def padded(text: str, size: int) -> bytes:
    """`text` grown to exactly `size` bytes with trailing newlines (still the same content)."""
    raw = text.encode("utf-8")
    assert len(raw) <= size, (len(raw), size)
    return raw + b"\n" * (size - len(raw))


def calibration_document(size: int) -> bytes:
    """A valid calibrated-judge document of exactly `size` bytes (JSON allows trailing space)."""
    return padded(json.dumps(judge_document("Uploaded judge", reliability=False)), size)


# name -> (url name, file field, other fields, file name, content of n bytes)
FORMS = {
    "scenario import": (
        "scenarios:import",
        "file",
        {"format": "auto", "initial_state": "draft"},
        "scenarios.jsonl",
        lambda n: padded(SCENARIO_LINE, n),
    ),
    "response import": (
        "companions:response_import",
        "file",
        {"run_name": "uploaded run"},
        "responses.jsonl",
        lambda n: padded(RESPONSE_LINE, n),
    ),
    "judge verdict import": (
        "judges:import",
        "file",
        {"judge": "uploaded judge", "run_name": "uploaded verdicts"},
        "verdicts.jsonl",
        lambda n: padded(VERDICT_LINE, n),
    ),
    "calibrated judge import": (
        "calibration:import",
        "document",
        {"name": ""},
        "judge.json",
        calibration_document,
    ),
}


def written(media_root) -> list[str]:
    """Files stored under MEDIA_ROOT (uploads saved for a job go to imports/...)."""
    root = Path(media_root)
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


# Everything an upload could end up as; none may appear when the upload is refused.
MODELS = (
    Job,
    Scenario,
    CompanionModel,
    GenerationRun,
    Response,
    JudgeConfig,
    JudgeRun,
    JudgeVerdict,
    CalibratedJudge,
    Campaign,
)
NOTHING = {model.__name__: 0 for model in MODELS}


def rows() -> dict:
    return {model.__name__: model.objects.count() for model in MODELS}


@pytest.fixture
def small_limit(settings):
    settings.MAX_UPLOAD_BYTES = LIMIT
    return LIMIT


def post_form(client, name, size):
    url_name, field, data, filename, content = FORMS[name]
    upload = SimpleUploadedFile(filename, content(size), content_type="application/octet-stream")
    return client.post(reverse(url_name), {**data, field: upload})


@pytest.mark.parametrize("name", list(FORMS))
def test_form_refuses_a_file_over_the_limit_and_writes_nothing(
    name, researcher_client, small_limit
):
    response = post_form(researcher_client, name, small_limit + 1)

    assert response.status_code == 200  # the form again, not a redirect to a job
    form = response.context["form"]
    field = FORMS[name][1]
    assert form.errors.get(field) == [
        f"The file is {small_limit + 1:,} bytes; the limit is {small_limit:,}."
    ], form.errors
    page = response.content.decode()
    assert f"the limit is {small_limit:,}" in page
    assert rows() == NOTHING
    assert written(django_settings.MEDIA_ROOT) == []


@pytest.mark.parametrize("name", list(FORMS))
def test_form_accepts_a_file_of_exactly_the_limit(name, researcher_client, small_limit):
    """The boundary: the same content at the limit passes the size check (a job or a judge)."""
    response = post_form(researcher_client, name, small_limit)

    assert response.status_code == 302, response.context["form"].errors
    if name == "calibrated judge import":
        assert CalibratedJudge.objects.get().name == "Uploaded judge"
    else:
        job = Job.objects.get()
        assert job.params["dry_run"] is True  # a preview: nothing imported yet
        assert written(django_settings.MEDIA_ROOT) == [job.params["path"]]


def test_the_calibration_form_keeps_its_own_2_mb_cap(researcher_client, settings):
    """With MAX_UPLOAD_BYTES above it, the calibrated-judge document is still capped at 2 MB."""
    settings.MAX_UPLOAD_BYTES = 10 * 1024 * 1024
    cap = 2 * 1024 * 1024
    response = post_form(researcher_client, "calibrated judge import", cap + 1)
    assert response.status_code == 200
    assert response.context["form"].errors["document"] == [
        f"The file is {cap + 1:,} bytes; the limit is {cap:,}."
    ]
    assert rows() == NOTHING


# ---------------------------------------------------------------- the import API


@pytest.fixture
def api(researcher):
    client = APIClient()
    client.force_authenticate(researcher)
    return client


def big_document() -> dict:
    """A valid document whose JSON is well over LIMIT bytes (558)."""
    return judge_document("N" * 120)


# The ways to send a document to the import API: (body, format).
API_BODIES = {
    "json object": lambda: ({"document": big_document()}, "json"),
    "json string": lambda: ({"document": json.dumps(big_document())}, "json"),
    "form field": lambda: ({"document": json.dumps(big_document())}, "multipart"),
}


@pytest.mark.parametrize("how", list(API_BODIES))
def test_api_refuses_a_document_over_the_limit_and_writes_nothing(api, small_limit, how):
    body, fmt = API_BODIES[how]()
    response = api.post(reverse("calibration-judge-import"), body, format=fmt)

    assert 400 <= response.status_code < 500, (response.status_code, response.content[:300])
    assert f"the limit is {small_limit:,}" in response.json()["detail"]
    assert rows() == NOTHING


def test_api_accepts_a_document_at_the_limit_and_refuses_one_byte_more(api, settings):
    body = json.dumps({"document": judge_document("Uploaded judge", reliability=False)})
    size = len(body.encode())
    url = reverse("calibration-judge-import")

    settings.MAX_UPLOAD_BYTES = size - 1
    refused = api.post(url, body, content_type="application/json")
    assert refused.status_code == 413, refused.content[:300]
    assert refused.json()["detail"] == f"The request is {size:,} bytes; the limit is {size - 1:,}."
    assert rows() == NOTHING

    settings.MAX_UPLOAD_BYTES = size
    response = api.post(url, body, content_type="application/json")
    assert response.status_code == 201, response.content[:300]
    assert CalibratedJudge.objects.get().name == "Uploaded judge"


# ---------------------------------------------------------------- hostile content (issue 12.4)
#
# The uploads below go through the real form and the real job (eager Celery, the commit hooks
# run). Nothing here asserts a time: the long-line probe's figures are in the note.

MIB = 1024 * 1024
ONE_LINE_BYTES = 20 * MIB  # one line, no newline: the probe that used to take seconds


def one_line_file(size: int) -> bytes:
    return b'{"text": "' + b"x" * (size - 12) + b'"}'


def run_upload(client, capture, name: str, content: bytes, filename: str | None = None) -> Job:
    """Upload through the form; the preview job runs (eagerly) when the request commits."""
    url_name, field, data, default_name, _ = FORMS[name]
    upload = SimpleUploadedFile(filename or default_name, content)
    with capture(execute=True):
        response = client.post(reverse(url_name), {**data, field: upload})
    assert response.status_code == 302, response.context["form"].errors
    return Job.objects.order_by("-pk").first()


def error_messages(job: Job) -> list[str]:
    return [f"{e.get('field')}: {e.get('message')}" for e in job.result.get("errors", [])]


JOB_FORMS = ["scenario import", "response import", "judge verdict import"]


@pytest.mark.parametrize("name", JOB_FORMS)
def test_a_20_mb_line_is_an_error_naming_the_line_limit(
    name, researcher_client, django_capture_on_commit_callbacks, settings
):
    settings.MAX_LINE_BYTES = limit = 1024 * 1024  # the default
    job = run_upload(
        researcher_client,
        django_capture_on_commit_callbacks,
        name,
        one_line_file(ONE_LINE_BYTES),
    )

    assert job.state == Job.State.FAILED, job.message
    assert error_messages(job) == [
        f"(line): line 1 is longer than {limit:,} bytes (MAX_LINE_BYTES)"
    ], job.result
    assert rows()["Scenario"] == rows()["Response"] == rows()["JudgeVerdict"] == 0


def test_a_csv_line_over_the_limit_is_an_error_naming_it(
    researcher_client, django_capture_on_commit_callbacks, settings
):
    settings.MAX_LINE_BYTES = 1000
    content = (
        "subtask,user_message,reference_response\n"
        f"dialogue_emotion,hello,{'y' * 2000}\n"
        "dialogue_emotion,hi,fine\n"
    ).encode()
    job = run_upload(
        researcher_client, django_capture_on_commit_callbacks, "scenario import", content, "s.csv"
    )
    assert job.state == Job.State.FAILED
    assert error_messages(job) == ["(line): line 2 is longer than 1,000 bytes (MAX_LINE_BYTES)"]


def test_the_line_limit_counts_bytes_without_the_newline(settings):
    """A line of exactly the limit passes; one byte more is a LongLine; the next line keeps
    its number and its bytes (the long one is skipped, not held)."""
    import io

    from h2htalk import uploads

    stream = io.BytesIO(b"a" * 10 + b"\n" + b"b" * 11 + b"\n" + b"c" * 11 + b"\nlast")
    got = list(uploads.read_lines(stream, limit=10))
    assert got[0] == (1, b"a" * 10 + b"\n")
    assert isinstance(got[1][1], uploads.LongLine) and got[1][0] == 2
    assert got[1][1].message == "line 2 is longer than 10 bytes (MAX_LINE_BYTES)"
    assert isinstance(got[2][1], uploads.LongLine) and got[2][0] == 3
    assert got[3] == (4, b"last")


def zip_of(entries: dict[str, bytes]) -> bytes:
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path, data in entries.items():
            archive.writestr(path, data)
    return buffer.getvalue()


def bomb() -> bytes:
    """A small zip whose one entry expands 64 MiB of one repeated line (over 1,000 times)."""
    line = b'{"response": "' + b"a" * 50 + b'"}\n'
    return zip_of({"model-a/dialogue_base.jsonl": line * (64 * MIB // len(line))})


def assert_refused_before_reading(job: Job, expected: str) -> None:
    assert job.state == Job.State.FAILED, job.message
    errors = job.result["errors"]
    assert [e["field"] for e in errors] == ["(zip)"], errors
    assert expected in errors[0]["message"], errors
    # Nothing was read from the archive: no file opened, no line counted, nothing written.
    assert job.result["files"] == job.result["lines"] == job.result["rows"] == 0
    assert job.total == 0
    assert rows()["Response"] == rows()["CompanionModel"] == rows()["GenerationRun"] == 0


def test_a_zip_bomb_is_refused_by_its_compression_ratio(
    researcher_client, django_capture_on_commit_callbacks, settings
):
    settings.MAX_ARCHIVE_RATIO = 200  # the default
    content = bomb()
    assert len(content) < MIB // 4
    job = run_upload(
        researcher_client,
        django_capture_on_commit_callbacks,
        "response import",
        content,
        "bomb.zip",
    )
    assert_refused_before_reading(job, "the limit is 200 (MAX_ARCHIVE_RATIO)")


def test_a_zip_over_the_uncompressed_size_limit_is_refused(
    researcher_client, django_capture_on_commit_callbacks, settings
):
    settings.MAX_ARCHIVE_BYTES = 10 * MIB
    settings.MAX_ARCHIVE_RATIO = 100_000  # (so it is the total that refuses it)
    job = run_upload(
        researcher_client, django_capture_on_commit_callbacks, "response import", bomb(), "big.zip"
    )
    assert_refused_before_reading(
        job,
        f"the archive expands to {64 * MIB - 64 * MIB % 67:,} bytes; the limit is "
        f"{10 * MIB:,} (MAX_ARCHIVE_BYTES)",
    )


def test_a_zip_with_too_many_entries_is_refused(
    researcher_client, django_capture_on_commit_callbacks, settings
):
    settings.MAX_ARCHIVE_ENTRIES = 5
    entries = {f"model-{i}/dialogue_base.jsonl": b'{"response": "hi"}\n' for i in range(6)}
    job = run_upload(
        researcher_client,
        django_capture_on_commit_callbacks,
        "response import",
        zip_of(entries),
        "many.zip",
    )
    assert_refused_before_reading(
        job, "the archive holds 6 entries; the limit is 5 (MAX_ARCHIVE_ENTRIES)"
    )


def test_decompressed_bytes_are_counted_whatever_the_headers_say(settings):
    """The running count while reading (headers can lie): over MAX_ARCHIVE_BYTES it stops."""
    import io

    from h2htalk import uploads

    settings.MAX_ARCHIVE_BYTES = 100
    budget = uploads.ArchiveBudget()
    first = budget.wrap(io.BytesIO(b"x" * 60))
    assert first.read() == b"x" * 60
    second = budget.wrap(io.BytesIO(b"y\n" * 30))
    with pytest.raises(uploads.ArchiveRefused, match=r"more than 100 bytes \(MAX_ARCHIVE_BYTES\)"):
        list(uploads.read_lines(second))


# ---------------------------------------------------------------- stored files are deleted


def stored() -> list[str]:
    return written(django_settings.MEDIA_ROOT)


def test_a_confirmed_import_deletes_its_upload_when_the_write_job_ends(
    researcher_client, django_capture_on_commit_callbacks
):
    preview = run_upload(
        researcher_client,
        django_capture_on_commit_callbacks,
        "scenario import",
        SCENARIO_LINE.encode(),
    )
    assert preview.state == Job.State.COMPLETED, preview.message
    assert stored() == [preview.params["path"]]  # kept for the confirmation

    with django_capture_on_commit_callbacks(execute=True):
        response = researcher_client.post(reverse("scenarios:import_confirm", args=[preview.pk]))
    job = Job.objects.get(params__dry_run=False)
    assert response["Location"] == reverse("job_detail", args=[job.pk])
    assert job.state == Job.State.COMPLETED, job.message
    assert Scenario.objects.count() == 1
    assert stored() == []
    assert job.params["path"] == preview.params["path"]
    assert "upload_deleted" in Job.objects.get(pk=job.pk).params

    page = researcher_client.get(reverse("job_detail", args=[preview.pk])).content.decode()
    assert f'href="{reverse("job_detail", args=[job.pk])}"' in page  # where the import went

    # Confirming again starts nothing new (the file is gone, and it was imported).
    again = researcher_client.post(reverse("scenarios:import_confirm", args=[preview.pk]))
    assert again["Location"] == reverse("job_detail", args=[job.pk])
    assert Job.objects.count() == 2


@pytest.mark.parametrize("name", JOB_FORMS)
def test_a_failed_preview_deletes_its_upload_at_once(
    name, researcher_client, django_capture_on_commit_callbacks
):
    job = run_upload(researcher_client, django_capture_on_commit_callbacks, name, b"not json\n")
    assert job.state == Job.State.FAILED
    assert stored() == []


def test_retention_and_preview_expiry_are_settings(
    researcher_client, django_capture_on_commit_callbacks, settings
):
    from datetime import timedelta

    from django.utils import timezone

    from h2htalk import uploads

    settings.UPLOAD_RETENTION_SECONDS = 3600
    failed = run_upload(
        researcher_client, django_capture_on_commit_callbacks, "scenario import", b"not json\n"
    )
    assert failed.state == Job.State.FAILED
    assert stored() == [failed.params["path"]]  # kept for an hour
    assert uploads.purge() == []

    Job.objects.filter(pk=failed.pk).update(finished_at=timezone.now() - timedelta(hours=2))
    assert uploads.purge() == [failed.params["path"]]
    assert stored() == []

    settings.UPLOAD_RETENTION_SECONDS = 0
    settings.UPLOAD_PREVIEW_SECONDS = 600
    preview = run_upload(
        researcher_client,
        django_capture_on_commit_callbacks,
        "scenario import",
        SCENARIO_LINE.encode(),
    )
    assert preview.state == Job.State.COMPLETED
    assert uploads.purge() == [] and stored() == [preview.params["path"]]
    Job.objects.filter(pk=preview.pk).update(finished_at=timezone.now() - timedelta(seconds=601))
    assert uploads.purge() == [preview.params["path"]]
    assert stored() == []

    response = researcher_client.post(
        reverse("scenarios:import_confirm", args=[preview.pk]), follow=True
    )
    assert "upload it again" in response.content.decode()
    assert Job.objects.filter(params__dry_run=False).count() == 0
    page = researcher_client.get(reverse("job_detail", args=[preview.pk])).content.decode()
    assert 'id="upload-deleted"' in page
