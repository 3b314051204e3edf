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
