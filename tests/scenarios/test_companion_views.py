"""Companion registry, generation-run pages, the response browser and their API."""

import json

import pytest
from django.urls import reverse

from scenarios.models import CompanionModel, GenerationRun, Response
from tests.llm_server import ChatServer
from tests.scenarios import factories

SECRET = "sk-live-0123456789abcdef"


@pytest.fixture
def server():
    chat_server = ChatServer(reply=lambda body: f"{body['model']} answers").start()
    yield chat_server
    chat_server.stop()


@pytest.fixture
def companions(server):
    return [
        CompanionModel.objects.create(
            name=name, base_url=server.base_url, model_id=f"{name}-v1", timeout_seconds=5
        )
        for name in ("alpha", "beta")
    ]


def test_companion_key_is_a_variable_name_and_never_shown(researcher_client, monkeypatch):
    monkeypatch.setenv("ALPHA_KEY", SECRET)
    url = reverse("companions:create")
    data = {
        "name": "alpha",
        "provider": "openai",
        "base_url": "https://api.example.com/v1",
        "model_id": "gpt-x",
        "api_key_env": SECRET,
        "params": '{"temperature": 0.2}',
        "max_concurrency": 4,
        "timeout_seconds": 30,
    }
    response = researcher_client.post(url, data)
    assert "NAME of an environment variable" in response.content.decode()
    assert not CompanionModel.objects.exists()

    researcher_client.post(url, {**data, "api_key_env": "ALPHA_KEY"})
    companion = CompanionModel.objects.get()
    assert companion.api_key_env == "ALPHA_KEY" and companion.params == {"temperature": 0.2}
    pages = [
        researcher_client.get(reverse("companions:list")),
        researcher_client.get(reverse("companions:edit", args=[companion.pk])),
        researcher_client.get(reverse("companion-detail", args=[companion.pk])),
    ]
    for page in pages:
        assert SECRET not in page.content.decode()
    assert ">set</span>" in pages[0].content.decode()
    monkeypatch.delenv("ALPHA_KEY")
    assert "NOT SET" in researcher_client.get(reverse("companions:list")).content.decode()


def test_companion_endpoints_in_metadata_or_private_ranges_are_refused(researcher_client):
    """The issue-12 probe: a metadata URL was saved (201 / 302); now a base_url field error
    naming LLM_ALLOWED_ENDPOINTS, on the page and on the API."""
    data = {
        "name": "probe",
        "provider": "other",
        "base_url": "http://169.254.169.254/latest/",
        "model_id": "m",
        "params": "{}",
        "max_concurrency": 4,
        "timeout_seconds": 30,
    }
    page = researcher_client.post(reverse("companions:create"), data)
    assert page.status_code == 200
    assert "LLM_ALLOWED_ENDPOINTS" in str(page.context["form"].errors["base_url"])
    for url in ("http://169.254.169.254/latest/", "http://[::ffff:10.1.2.3]:8000/v1"):
        api = researcher_client.post(
            "/api/companions/",
            {"name": "probe", "base_url": url, "model_id": "m"},
            content_type="application/json",
        )
        assert api.status_code == 400 and "LLM_ALLOWED_ENDPOINTS" in api.json()["base_url"][0]
    assert not CompanionModel.objects.exists()


def test_generating_companion_needs_endpoint_and_params_cannot_override_messages(
    researcher_client,
):
    response = researcher_client.post(
        reverse("companions:create"),
        {
            "name": "x",
            "provider": "vllm",
            "params": '{"messages": []}',
            "max_concurrency": 2,
            "timeout_seconds": 30,
        },
    )
    form = response.context["form"]
    assert "base URL and a model id" in str(form.non_field_errors())
    assert "set by the platform" in str(form.errors["params"])


@pytest.mark.django_db(transaction=True)
def test_run_from_scenario_filter_generates_and_shows_progress(
    client, researcher, companions, django_capture_on_commit_callbacks
):
    client.force_login(researcher)
    chosen = [factories.scenario(researcher, language="en") for _ in range(3)]
    factories.scenario(researcher, language="zh")
    form_page = client.get(reverse("companions:run_create"), {"query": "language=en"})
    assert form_page.context["form"].initial["scenario_query"] == "language=en"
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("companions:run_create"),
            {
                "name": "ablation-no-sap",
                "scenario_query": "language=en",
                "companions": [c.pk for c in companions],
                "token_budget": "",
            },
        )
    run = GenerationRun.objects.get(name="ablation-no-sap")
    assert response["Location"] == reverse("companions:run", args=[run.pk])
    assert run.sap_enabled is False  # unticked checkbox
    assert set(run.scenarios.all()) == set(chosen)
    assert run.state == GenerationRun.State.COMPLETED
    assert Response.objects.filter(run=run, status="ok").count() == 6

    page = client.get(reverse("companions:run", args=[run.pk])).content.decode()
    assert 'id="run-ok">6<' in page and 'id="run-remaining">0<' in page
    partial = client.get(reverse("companions:run_progress", args=[run.pk]))
    assert partial["HX-Refresh"] == "true" and b"<html" not in partial.content


def test_run_form_rejects_an_empty_or_invalid_filter(researcher_client, companions):
    url = reverse("companions:run_create")
    response = researcher_client.post(
        url, {"name": "r", "scenario_query": "language=xx", "companions": [companions[0].pk]}
    )
    assert "scenario filter cannot be used" in str(
        response.context["form"].errors["scenario_query"]
    )
    response = researcher_client.post(
        url, {"name": "r", "scenario_query": "q=nothing-matches", "companions": [companions[0].pk]}
    )
    assert "No scenario matches" in str(response.context["form"].errors["scenario_query"])
    assert not GenerationRun.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_cancel_then_resume_generates_only_the_rest(
    client, researcher, companions, django_capture_on_commit_callbacks
):
    client.force_login(researcher)
    scenarios = [factories.scenario(researcher) for _ in range(4)]
    run = GenerationRun.objects.create(name="r", state=GenerationRun.State.QUEUED)
    run.scenarios.set(scenarios)
    run.companions.set(companions[:1])
    client.post(reverse("companions:run_cancel", args=[run.pk]))
    run.refresh_from_db()
    assert run.state == GenerationRun.State.CANCELLED
    Response.objects.create(run=run, scenario=scenarios[0], companion=companions[0], text="kept")

    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("companions:run_resume", args=[run.pk]))
    run.refresh_from_db()
    assert run.state == GenerationRun.State.COMPLETED
    texts = dict(Response.objects.filter(run=run).values_list("scenario_id", "text"))
    assert texts[scenarios[0].pk] == "kept" and len(texts) == 4


def _seed_responses(researcher, companions):
    scenario = factories.scenario(researcher, reference_response="the reference")
    run = GenerationRun.objects.create(name="imported", kind="import")
    for companion in companions:
        Response.objects.create(
            run=run, scenario=scenario, companion=companion, text=f"<b>{companion.name}</b> says"
        )
    return scenario, run


def test_response_browser_side_by_side_and_filters(researcher_client, researcher, companions):
    scenario, run = _seed_responses(researcher, companions)
    url = reverse("companions:responses")
    page = researcher_client.get(url, {"scenario": scenario.pk}).content.decode()
    assert "the reference" in page
    assert "&lt;b&gt;alpha&lt;/b&gt; says" in page and "&lt;b&gt;beta&lt;/b&gt; says" in page
    only_beta = researcher_client.get(
        url, {"scenario": scenario.pk, "companion": companions[1].pk}
    ).content.decode()
    assert "&lt;b&gt;alpha" not in only_beta and "&lt;b&gt;beta" in only_beta
    index = researcher_client.get(url, {"run": run.pk})
    assert [s.pk for s in index.context["page"].object_list] == [scenario.pk]


def test_response_export_jsonl_and_csv(researcher_client, researcher, companions):
    scenario, _run = _seed_responses(researcher, companions)
    url = reverse("companions:response_export")
    body = b"".join(researcher_client.get(url, {"format": "jsonl"}).streaming_content)
    rows = [json.loads(line) for line in body.decode().splitlines()]
    assert {(r["companion"], r["external_id"], r["subtask"]) for r in rows} == {
        ("alpha", scenario.external_id, scenario.subtask),
        ("beta", scenario.external_id, scenario.subtask),
    }
    csv_body = b"".join(
        researcher_client.get(
            url, {"format": "csv", "companion": companions[0].pk}
        ).streaming_content
    ).decode()
    assert csv_body.splitlines()[0].startswith("subtask,external_id,companion")
    assert len(csv_body.splitlines()) == 2 and "alpha" in csv_body


@pytest.mark.django_db(transaction=True)
def test_api_creates_a_run_and_lists_its_responses(
    client, researcher, companions, django_capture_on_commit_callbacks
):
    client.force_login(researcher)
    factories.scenario(researcher, tags=["api"])
    with django_capture_on_commit_callbacks(execute=True):
        created = client.post(
            reverse("run-list"),
            {"name": "api run", "scenario_query": "tags=api", "companions": ["alpha", "beta"]},
            content_type="application/json",
        )
    assert created.status_code == 201, created.json()
    run_id = created.json()["id"]
    detail = client.get(reverse("run-detail", args=[run_id])).json()
    assert detail["state"] == "completed" and detail["progress"]["ok"] == 2
    listed = client.get(reverse("response-list"), {"run": run_id, "companion": companions[0].pk})
    assert [r["text"] for r in listed.json()["results"]] == ["alpha-v1 answers"]

    bad = client.post(
        reverse("run-list"),
        {"name": "bad", "scenario_query": "tags=none", "companions": ["alpha"]},
        content_type="application/json",
    )
    assert bad.status_code == 400 and "scenario_query" in bad.json()


def test_response_import_page_previews_then_writes_an_evaluator_zip(
    researcher_client, researcher, tmp_path, django_capture_on_commit_callbacks
):
    import zipfile

    scenarios = [
        factories.scenario(researcher, subtask="dialogue_emotion", external_id=f"q{n:03d}")
        for n in (1, 2)
    ]
    archive = tmp_path / "outputs.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        for model in ("model-x", "model-y"):
            bundle.writestr(
                f"outputs/{model}/dialogue_emotion.jsonl",
                "".join(json.dumps({"response": f"{model} {n}"}) + "\n" for n in (1, 2)),
            )
    with archive.open("rb") as handle, django_capture_on_commit_callbacks(execute=True):
        response = researcher_client.post(
            reverse("companions:response_import"), {"file": handle, "run_name": "paper outputs"}
        )
    preview = researcher_client.get(response["Location"])
    page = preview.content.decode()
    assert "Preview (nothing written yet)" in page and 'id="count-created">4<' in page
    assert not Response.objects.exists()

    job = preview.context["job"]
    with django_capture_on_commit_callbacks(execute=True):
        confirm = researcher_client.post(
            reverse("companions:response_import_confirm", args=[job.pk])
        )
    done = researcher_client.get(confirm["Location"]).content.decode()
    assert "Imported" in done
    texts = dict(
        Response.objects.filter(run__name="paper outputs", companion__name="model-y").values_list(
            "scenario_id", "text"
        )
    )
    assert texts == {scenarios[0].pk: "model-y 1", scenarios[1].pk: "model-y 2"}


def test_response_jsonl_export_imports_back_unchanged(researcher_client, researcher, companions):
    import io

    from scenarios.companions.imports import import_responses

    _scenario, run = _seed_responses(researcher, companions)
    Response.objects.create(
        run=run,
        scenario=factories.scenario(researcher),
        companion=companions[0],
        status="failed",
        error="HTTP 500",
    )
    body = b"".join(
        researcher_client.get(
            reverse("companions:response_export"), {"format": "jsonl", "run": run.pk}
        ).streaming_content
    )
    assert len(body.splitlines()) == 2  # failed responses are not in the importable export
    report = import_responses(io.BytesIO(body), run.name, filename="export.jsonl")
    assert (report.created, report.updated, report.unchanged) == (0, 0, 2)
