"""Judge pages and API: configurations (keys never stored, locked once used), run creation for
both modes, run detail with escaped raw outputs, htmx progress, cancel/resume, bias report."""

import json

import pytest
from django.urls import reverse

from h2htalk import heartbeat
from scoring.judges import parsing, prompts
from scoring.models import JudgeConfig, JudgeRun, JudgeVerdict
from tests.conftest import make_user
from tests.llm_server import ChatServer
from tests.scoring.test_judge_support import (
    COMPANIONS,
    campaign_of,
    judge_config,
    judge_run,
    response_run,
    scores_json,
)

pytestmark = pytest.mark.django_db

XSS = "<script>alert('judge')</script>"


@pytest.fixture
def server():
    chat_server = ChatServer(reply=lambda body: scores_json(6)).start()
    yield chat_server
    chat_server.stop()


def config_data(**overrides):
    data = {
        "name": "gpt judge",
        "mode": "single",
        "base_url": "http://127.0.0.1:9/v1",
        "model_id": "gpt-judge",
        "api_key_env": "JUDGE_KEY",
        "rubric": "",
        "temperature": "0",
        "samples": "1",
        "params": "{}",
        "max_concurrency": "4",
        "timeout_seconds": "60",
    }
    data.update(overrides)
    return data


def test_config_create_with_the_default_rubric_and_a_key_variable(researcher_client, monkeypatch):
    response = researcher_client.get(reverse("judges:create"))
    assert response.status_code == 200
    assert "Secure Attachment Persona" in response.content.decode()
    response = researcher_client.post(reverse("judges:create"), config_data(mode="pairwise"))
    assert response.status_code == 302, response.content.decode()[:2000]
    config = JudgeConfig.objects.get(name="gpt judge")
    assert config.rubric == prompts.DEFAULT_PAIRWISE_RUBRIC
    assert config.api_key_env == "JUDGE_KEY"
    # The other mode's default rubric left in place becomes this mode's default.
    data = config_data(name="second", mode="single", rubric=prompts.DEFAULT_PAIRWISE_RUBRIC)
    assert researcher_client.post(reverse("judges:create"), data).status_code == 302
    assert JudgeConfig.objects.get(name="second").rubric == prompts.DEFAULT_SINGLE_RUBRIC
    page = researcher_client.get(reverse("judges:list")).content.decode()
    assert "NOT SET" in page
    monkeypatch.setenv("JUDGE_KEY", "sk-secret-value-123")
    page = researcher_client.get(reverse("judges:list")).content.decode()
    assert "sk-secret-value-123" not in page and ">set<" in page


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"api_key_env": "sk-live-abc123"}, "api_key_env"),
        ({"params": '{"temperature": 1}'}, "params"),
        ({"params": "[1]"}, "params"),
        ({"samples": "3"}, "temperature"),  # samples at temperature 0 repeat themselves
        ({"samples": "0"}, "samples"),
        ({"model_id": ""}, "__all__"),
        ({"base_url": "http://169.254.169.254/latest/"}, "base_url"),  # LLM_ALLOWED_ENDPOINTS
        ({"base_url": "http://192.168.1.20:8000/v1"}, "base_url"),
    ],
)
def test_config_form_refuses(researcher_client, overrides, field):
    response = researcher_client.post(reverse("judges:create"), config_data(**overrides))
    assert response.status_code == 200
    assert field in response.context["form"].errors
    assert not JudgeConfig.objects.exists()


def test_a_used_config_keeps_what_its_verdicts_depend_on(researcher_client):
    config = JudgeConfig.objects.create(
        name="used", model_id="m1", base_url="http://x.test/v1", rubric="R1"
    )
    JudgeRun.objects.create(name="r", judge=config)
    url = reverse("judges:edit", args=[config.pk])
    data = config_data(name="used", model_id="m2", rubric="R2", base_url="http://y.test/v1")
    response = researcher_client.post(url, data)
    assert response.status_code == 302
    config.refresh_from_db()
    assert (config.model_id, config.rubric) == ("m1", "R1")  # locked
    assert config.base_url == "http://y.test/v1"  # the endpoint may move
    # A copy starts from the same values under a new name.
    page = researcher_client.get(reverse("judges:create") + f"?copy={config.pk}").content.decode()
    assert "used (copy)" in page and "R1" in page


def test_pairwise_run_from_a_campaign_and_single_run_from_response_runs(
    researcher_client, researcher, server, django_capture_on_commit_callbacks
):
    responses, _ = response_run([["a", "b"], ["c", "d"]], names=COMPANIONS[:2])
    campaign = campaign_of(researcher, responses)
    pairwise = judge_config(server, mode="pairwise")
    single = judge_config(server)
    page = researcher_client.get(reverse("judges:run_create") + f"?judge={pairwise.pk}")
    assert page.status_code == 200

    # Pairwise needs a campaign; single needs runs or a campaign (not both).
    response = researcher_client.post(
        reverse("judges:run_create"), {"name": "p", "judge": pairwise.pk}
    )
    assert "campaign" in response.context["form"].errors
    response = researcher_client.post(
        reverse("judges:run_create"),
        {"name": "s", "judge": single.pk, "campaign": campaign.pk, "response_runs": [responses.pk]},
    )
    assert response.context["form"].errors["__all__"]

    with django_capture_on_commit_callbacks(execute=True):
        response = researcher_client.post(
            reverse("judges:run_create"),
            {"name": "pairwise run", "judge": pairwise.pk, "campaign": campaign.pk},
        )
    run = JudgeRun.objects.get(name="pairwise run")
    assert response["Location"] == reverse("judges:run", args=[run.pk])
    run.refresh_from_db()
    assert run.state == JudgeRun.State.COMPLETED  # eager Celery ran it
    assert run.verdicts.count() == 4  # 2 comparisons x 2 orders (the reply is not pairwise JSON)
    assert run.verdicts.filter(parse="failed").count() == 4

    companion = responses.responses.first().companion
    with django_capture_on_commit_callbacks(execute=True):
        researcher_client.post(
            reverse("judges:run_create"),
            {
                "name": "single run",
                "judge": single.pk,
                "response_runs": [responses.pk],
                "companions": [companion.pk],
            },
        )
    run = JudgeRun.objects.get(name="single run")
    assert run.responses.count() == 2 and run.verdicts.filter(parse="strict").count() == 2


def test_someone_elses_campaign_is_not_offered(researcher_client, django_user_model, server, roles):
    other = make_user(django_user_model, "other-researcher", "researcher")
    responses, _ = response_run([["a", "b"]], names=COMPANIONS[:2])
    campaign = campaign_of(other, responses)
    config = judge_config(server, mode="pairwise")
    response = researcher_client.post(
        reverse("judges:run_create"), {"name": "p", "judge": config.pk, "campaign": campaign.pk}
    )
    assert "campaign" in response.context["form"].errors
    assert not JudgeRun.objects.exists()


def test_run_detail_shows_unparseable_raw_outputs_escaped(researcher_client, server):
    responses, _ = response_run(["hello"], names=COMPANIONS[:1])
    config = judge_config(server)
    run = judge_run(config, responses=responses.responses.all(), state="completed")
    response = responses.responses.get()
    JudgeVerdict.objects.create(
        run=run, response=response, parse="failed", raw_output=XSS, error="refusal"
    )
    JudgeVerdict.objects.create(
        run=run, response=response, sample=1, parse="error", error="HTTP 500: boom"
    )
    JudgeVerdict.objects.create(
        run=run,
        response=response,
        sample=2,
        parse="strict",
        scores=dict.fromkeys(parsing.DIMENSIONS, 4),
    )
    page = researcher_client.get(reverse("judges:run", args=[run.pk])).content.decode()
    assert XSS not in page and "&lt;script&gt;alert(&#x27;judge&#x27;)&lt;/script&gt;" in page
    assert "HTTP 500: boom" in page and COMPANIONS[0] in page
    assert 'id="single-summary"' in page and "4.00" in page
    assert 'id="judge-run-unparseable">1<' in page and 'id="judge-run-failed">1<' in page


def test_progress_partial_polls_while_active_and_reloads_when_done(researcher_client, server):
    responses, _ = response_run(["hello"])
    run = judge_run(judge_config(server), responses=responses.responses.all(), state="running")
    url = reverse("judges:run_progress", args=[run.pk])
    response = researcher_client.get(url)
    assert 'hx-trigger="every 1s"' in response.content.decode()
    assert "HX-Refresh" not in response
    JudgeRun.objects.filter(pk=run.pk).update(state="completed")
    response = researcher_client.get(url)
    assert response["HX-Refresh"] == "true"
    assert "hx-get" not in response.content.decode()


def test_cancel_and_resume_pages(researcher_client, server, django_capture_on_commit_callbacks):
    responses, _ = response_run(["hello", "there"])
    run = judge_run(judge_config(server), responses=responses.responses.all(), state="queued")
    researcher_client.post(reverse("judges:run_cancel", args=[run.pk]))
    run.refresh_from_db()
    assert run.state == JudgeRun.State.CANCELLED and run.cancel_requested
    with django_capture_on_commit_callbacks(execute=True):
        researcher_client.post(
            reverse("judges:run_resume", args=[run.pk]), {"token_budget": "99999"}
        )
    run.refresh_from_db()
    assert run.state == JudgeRun.State.COMPLETED and run.token_budget == 99999
    assert run.verdicts.count() == 2
    assert researcher_client.get(reverse("judges:run_cancel", args=[run.pk])).status_code == 405


def test_bias_page_and_export(researcher_client, server):
    responses, _ = response_run([["x" * 10, "y" * 30]], names=COMPANIONS[:2])
    config = judge_config(server, mode="pairwise")
    run = judge_run(config, state="completed")
    a, b = responses.responses.order_by("pk")
    JudgeVerdict.objects.create(run=run, first=a, second=b, parse="strict", winner="first")
    JudgeVerdict.objects.create(run=run, first=b, second=a, parse="strict", winner="first")
    page = researcher_client.get(reverse("judges:bias", args=[config.pk])).content.decode()
    assert 'id="bias-flip"' in page and "1.000" in page  # the one pair flipped
    assert "95%" in page
    export = researcher_client.get(reverse("judges:run_export", args=[run.pk]))
    lines = [json.loads(line) for line in b"".join(export.streaming_content).decode().splitlines()]
    assert [line["winner"] for line in lines] == ["first", "first"]
    assert lines[0]["first"] == COMPANIONS[0] and lines[1]["first"] == COMPANIONS[1]


def test_annotators_are_refused(annotator_client, server):
    config = judge_config(server)
    for url in (reverse("judges:list"), reverse("judges:bias", args=[config.pk])):
        assert annotator_client.get(url).status_code == 403
    assert annotator_client.get("/api/judges/configs/").status_code == 403


# ---------------------------------------------------------------- API


def test_api_configs_runs_verdicts_and_bias(
    researcher_client, server, django_capture_on_commit_callbacks
):
    response = researcher_client.post(
        "/api/judges/configs/",
        {
            "name": "api judge",
            "mode": "single",
            "base_url": server.base_url,
            "model_id": "judge-api",
            "api_key_env": "",
            "temperature": 0.2,
            "samples": 2,
        },
        content_type="application/json",
    )
    assert response.status_code == 201, response.json()
    config = response.json()
    assert config["rubric"] == prompts.DEFAULT_SINGLE_RUBRIC and not config["locked"]
    bad = researcher_client.post(
        "/api/judges/configs/",
        {"name": "bad", "api_key_env": "sk-abc-123", "rubric": "r"},
        content_type="application/json",
    )
    assert bad.status_code == 400 and "api_key_env" in bad.json()

    response_run(["one", "two"])
    with django_capture_on_commit_callbacks(execute=True):
        response = researcher_client.post(
            "/api/judges/runs/",
            {"name": "api run", "judge": "api judge", "response_runs": ["responses"]},
            content_type="application/json",
        )
    assert response.status_code == 201, response.json()
    run_id = response.json()["id"]
    detail = researcher_client.get(f"/api/judges/runs/{run_id}/").json()
    assert detail["state"] == "completed" and detail["mode"] == "single"
    assert detail["progress"]["done"] == 4 and detail["progress"]["remaining"] == 0

    verdicts = researcher_client.get(f"/api/judges/verdicts/?run={run_id}").json()
    assert verdicts["count"] == 4
    assert {v["parse"] for v in verdicts["results"]} == {"strict"}
    assert researcher_client.get("/api/judges/verdicts/?run=999999").status_code == 400

    bias = researcher_client.get(f"/api/judges/configs/{config['id']}/bias/").json()
    assert bias["verdicts"]["strict"] == 4 and bias["length_correlation"]["n"] == 2

    # Once used: the rubric is fixed, the endpoint is not; the judge cannot be deleted.
    patched = researcher_client.patch(
        f"/api/judges/configs/{config['id']}/", {"rubric": "new"}, content_type="application/json"
    )
    assert patched.status_code == 400 and "rubric" in patched.json()
    patched = researcher_client.patch(
        f"/api/judges/configs/{config['id']}/",
        {"timeout_seconds": 9},
        content_type="application/json",
    )
    assert patched.status_code == 200 and patched.json()["locked"]
    assert researcher_client.delete(f"/api/judges/configs/{config['id']}/").status_code == 409

    # Resume a finished run (nothing to do), and cancel/resume conflicts.
    with django_capture_on_commit_callbacks(execute=True):
        resumed = researcher_client.post(f"/api/judges/runs/{run_id}/resume/")
    assert resumed.status_code == 200
    JudgeRun.objects.filter(pk=run_id).update(state="running")
    heartbeat.beat(heartbeat.subject(JudgeRun, run_id))  # a live executor
    assert researcher_client.post(f"/api/judges/runs/{run_id}/resume/").status_code == 409
    cancelled = researcher_client.post(f"/api/judges/runs/{run_id}/cancel/")
    assert cancelled.status_code == 200
    assert JudgeRun.objects.get(pk=run_id).cancel_requested


def test_api_pairwise_run_needs_a_campaign(researcher_client, server):
    judge_config(server, mode="pairwise", name="pw")
    response = researcher_client.post(
        "/api/judges/runs/",
        {"name": "x", "judge": "pw", "response_runs": []},
        content_type="application/json",
    )
    assert response.status_code == 400 and "campaign" in response.json()
