"""Generation runs against a real local chat-completions server (eager Celery)."""

import pytest

from scenarios.companions import generation
from scenarios.companions.prompts import PROACTIVE_CUE, build_messages
from scenarios.models import CompanionModel, GenerationRun, Response, Scenario
from scenarios.tasks import queue_run
from tests.llm_server import ChatServer
from tests.scenarios import factories


@pytest.fixture
def server():
    chat_server = ChatServer(reply=lambda body: f"{body['model']} says hi").start()
    yield chat_server
    chat_server.stop()


def make_run(server, scenarios, names=("alpha", "beta"), **fields):
    companions = [
        CompanionModel.objects.create(
            name=name, base_url=server.base_url, model_id=f"{name}-7b", timeout_seconds=5
        )
        for name in names
    ]
    run = GenerationRun.objects.create(name=fields.pop("name", "run 1"), **fields)
    run.scenarios.set(scenarios)
    run.companions.set(companions)
    return run


def start(run, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        queue_run(run)
    run.refresh_from_db()
    return run


@pytest.mark.django_db
def test_prompt_carries_persona_sap_subtask_memory_schedule_and_history():
    persona = factories.persona("Mira", character="A night-shift nurse.")
    scenario = factories.scenario(
        persona=persona,
        subtask="dialogue_schedule",
        memory=[{"content": "has a cat named Bao", "category": "pets", "importance": 2}],
        schedule=[{"time": "09:00", "activity": "dentist"}],
        history=[{"role": "user", "content": "morning"}, {"role": "assistant", "content": "hey"}],
        user_message="what's up today?",
    )
    with_sap = build_messages(scenario, sap=True)
    without = build_messages(scenario, sap=False)
    system = with_sap[0]["content"]
    assert "You are Mira." in system and "night-shift nurse" in system
    assert "Secure Attachment Persona" in system
    assert "Secure Attachment Persona" not in without[0]["content"]
    assert "has a cat named Bao (pets, importance 2)" in system
    assert "09:00 dentist" in system and "plans for today" in system
    assert [m["role"] for m in with_sap] == ["system", "user", "assistant", "user"]
    assert with_sap[-1]["content"] == "what's up today?"


@pytest.mark.django_db
def test_proactive_subtask_gets_a_cue_instead_of_a_user_message():
    scenario = factories.scenario(subtask="itinerary_initialize", user_message="")
    messages = build_messages(scenario)
    assert messages[-1] == {"role": "user", "content": PROACTIVE_CUE}


@pytest.mark.django_db(transaction=True)
def test_run_generates_every_pair_once_and_rerun_adds_nothing(
    server, django_capture_on_commit_callbacks
):
    scenarios = [factories.scenario() for _ in range(5)]
    run = start(make_run(server, scenarios, sap_enabled=False), django_capture_on_commit_callbacks)
    assert run.state == GenerationRun.State.COMPLETED, run.message
    responses = Response.objects.filter(run=run)
    assert responses.count() == 10
    assert set(responses.values_list("text", flat=True)) == {"alpha-7b says hi", "beta-7b says hi"}
    first = responses.first()
    assert first.prompt_messages[0]["role"] == "system"
    assert "Secure Attachment Persona" not in first.prompt_messages[0]["content"]
    assert first.latency_ms is not None and first.completion_tokens == 3
    assert run.tokens_used == sum(r.prompt_tokens + r.completion_tokens for r in responses)

    requests = len(server.requests)
    start(run, django_capture_on_commit_callbacks)
    assert len(server.requests) == requests  # nothing missing, nothing sent
    assert Response.objects.filter(run=run).count() == 10


@pytest.mark.django_db(transaction=True)
def test_failures_are_stored_then_retried_on_resume(server, django_capture_on_commit_callbacks):
    scenarios = [factories.scenario(user_message="[[400]] please")] + [
        factories.scenario() for _ in range(2)
    ]
    run = start(make_run(server, scenarios, names=("alpha",)), django_capture_on_commit_callbacks)
    assert run.state == GenerationRun.State.COMPLETED
    assert "1 failed" in run.message
    failed = Response.objects.get(run=run, status=Response.Status.FAILED)
    assert "HTTP 400" in failed.error and failed.text == ""

    Scenario.objects.filter(pk=scenarios[0].pk).update(user_message="please")
    run = start(run, django_capture_on_commit_callbacks)
    assert Response.objects.filter(run=run, status=Response.Status.OK).count() == 3
    assert Response.objects.filter(run=run).count() == 3


@pytest.mark.django_db(transaction=True)
def test_budget_pauses_the_run_and_resume_continues(server, django_capture_on_commit_callbacks):
    scenarios = [factories.scenario() for _ in range(30)]
    run = make_run(server, scenarios, names=("alpha",), token_budget=20)
    CompanionModel.objects.update(max_concurrency=1)
    run = start(run, django_capture_on_commit_callbacks)
    assert run.state == GenerationRun.State.PAUSED, run.message
    done = Response.objects.filter(run=run).count()
    assert 0 < done < 30
    assert "budget" in run.message.lower()

    GenerationRun.objects.filter(pk=run.pk).update(token_budget=None)
    run = start(run, django_capture_on_commit_callbacks)
    assert run.state == GenerationRun.State.COMPLETED
    assert Response.objects.filter(run=run).count() == 30


@pytest.mark.django_db(transaction=True)
def test_a_live_run_cannot_be_claimed_twice(server):
    run = make_run(server, [factories.scenario()])
    GenerationRun.objects.filter(pk=run.pk).update(state=GenerationRun.State.QUEUED)
    assert generation.claim(run.pk) is not None
    assert generation.claim(run.pk) is None  # heartbeat is fresh
    assert generation.execute(run.pk) == "not claimed"
