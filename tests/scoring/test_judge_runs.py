"""Judge runs against the real local chat-completions server (eager Celery): both modes, both
orders, scripted replies (strict, fenced, prose, malformed, refusal), retried 500/429, request
errors, budget pause and resume, cancel, and the stale-heartbeat takeover."""

import json
import re
import time

import pytest
from django.core.cache import cache

from h2htalk import heartbeat, runner
from scoring.judges import judging
from scoring.judges.parsing import DIMENSIONS
from scoring.models import JudgeRun, JudgeVerdict
from tests.llm_server import ChatServer
from tests.scoring.test_judge_support import (
    COMPANIONS,
    blocks,
    campaign_of,
    judge_config,
    judge_run,
    response_run,
    scores_json,
    start,
)

pytestmark = pytest.mark.django_db(transaction=True)
Parse = JudgeVerdict.Parse

SINGLE_REPLIES = {
    "valid": scores_json({d: 7 for d in DIMENSIONS}, "Warm and specific."),
    "fenced": "Here is my grading:\n```json\n"
    + scores_json(
        {
            "empathy": 9,
            "fluency": 8,
            "memory_use": 6,
            "planning": 5,
            "persona_consistency": 8,
            "safety": 10,
        },
        "Good.",
    )
    + "\n```\nLet me know if you need more.",
    "prose": "Empathy: 4/10\nFluency: 6/10\nMemory use: 3/10\nPlanning: 5/10\n"
    "Persona consistency: 7/10\nSafety (SAP): 2/10\nRationale: it deflects the risk.",
    "malformed": '{"scores": {"empathy": 7, "fluency": ',
    "refusal": "I'm sorry, but I can't help with that.",
}


def single_reply(body):
    text = blocks(body).get("Reply", "")
    case = re.search(r"case=(\w+)", text)
    return SINGLE_REPLIES[case.group(1)] if case else SINGLE_REPLIES["valid"]


@pytest.fixture
def server():
    chat_server = ChatServer(reply=single_reply).start()
    yield chat_server
    chat_server.stop()


def test_single_mode_stores_every_outcome_and_resume_only_redoes_request_errors(
    server, researcher, django_capture_on_commit_callbacks
):
    texts = [f"case={case} reply text" for case in SINGLE_REPLIES] + ["[[400]] case=valid"]
    responses, scenarios = response_run(texts, reference_response="REFERENCE-ANSWER-TEXT")
    config = judge_config(server, temperature=0.3, params={"max_tokens": 300})
    run = judge_run(config, responses=responses.responses.all(), created_by=researcher)
    server.script.extend(["500", "429:0"])  # two transient failures, retried by the client

    run = start(run, django_capture_on_commit_callbacks)

    assert run.state == JudgeRun.State.COMPLETED, run.message
    assert "1 requests failed" in run.message and "2 unparseable" in run.message
    verdicts = {v.response.text.split()[0]: v for v in run.verdicts.select_related("response")}
    assert len(verdicts) == 6 == run.verdicts.count()
    assert verdicts["case=valid"].parse == Parse.STRICT
    assert verdicts["case=valid"].scores == dict.fromkeys(DIMENSIONS, 7)
    assert verdicts["case=valid"].rationale == "Warm and specific."
    assert verdicts["case=fenced"].parse == Parse.FALLBACK
    assert verdicts["case=fenced"].scores["empathy"] == 9
    assert verdicts["case=prose"].parse == Parse.FALLBACK
    assert verdicts["case=prose"].scores["safety"] == 2
    assert verdicts["case=prose"].rationale == "it deflects the risk."
    assert verdicts["case=malformed"].parse == Parse.FAILED
    assert verdicts["case=refusal"].parse == Parse.FAILED
    assert verdicts["case=refusal"].error == "refusal"
    # Raw outputs are kept exactly, parsed or not.
    for case in ("valid", "fenced", "prose", "malformed", "refusal"):
        assert verdicts[f"case={case}"].raw_output == SINGLE_REPLIES[case]
    error = verdicts["[[400]]"]
    assert error.parse == Parse.ERROR and "HTTP 400" in error.error and error.raw_output == ""

    progress = judging.progress_of(run)
    assert (progress.done, progress.unparseable, progress.failed, progress.remaining) == (
        3,
        2,
        1,
        0,
    )
    assert progress.strict == 1 and progress.fallback == 2
    tokens = sum(v.prompt_tokens + v.completion_tokens for v in run.verdicts.all())
    assert run.tokens_used == tokens > 0
    assert len(server.requests) == 6 + 2  # every item once, plus the two retried failures

    # The request: the judge's model and temperature, the rubric as system message, the
    # scenario and reference answer as context, never a companion's name.
    body = next(r["body"] for r in server.requests if "case=valid" in str(r["body"]))
    assert body["model"] == "judge-model-1"
    assert body["temperature"] == 0.3 and body["max_tokens"] == 300
    assert body["messages"][0] == {"role": "system", "content": config.rubric}
    user = body["messages"][1]["content"]
    assert scenarios[0].user_message in user
    assert "Reference answer (a hint" in user and "REFERENCE-ANSWER-TEXT" in user
    assert '"scores"' in user  # the answer format
    assert not any(name in str(r["body"]) for r in server.requests for name in COMPANIONS)

    # Resume: only the failed request is asked again; the unparseable ones are final.
    error.response.text = "case=valid now without the marker"
    error.response.save()
    run = start(run, django_capture_on_commit_callbacks)
    assert run.state == JudgeRun.State.COMPLETED, run.message
    assert len(server.requests) == 8 + 1
    assert run.verdicts.count() == 6
    assert run.verdicts.get(pk=error.pk).parse == Parse.STRICT
    assert judging.progress_of(run).failed == 0


def pairwise_reply(body):
    """Prefers the response that says "better"; some pairs get prose or garbage answers."""
    shown = blocks(body)
    first, second = shown["Response 1"], shown["Response 2"]
    if "garbage" in first + second:
        return "As a judge I think... hmm."
    if "refuse" in first + second:
        return "I cannot evaluate this conversation."
    winner = "1" if "better" in first else "2" if "better" in second else "tie"
    if "prose" in first + second:
        if winner == "tie":
            return "Both responses are equally good."
        return f"Having read both, Response {winner} is better: it listens."
    return json.dumps({"winner": winner, "rationale": f"Response {winner} listens more."})


def test_pairwise_judges_every_comparison_in_both_orders(
    researcher, django_capture_on_commit_callbacks
):
    server = ChatServer(reply=pairwise_reply).start()
    try:
        texts = [
            ["a better answer", "a plain answer", "another plain answer"],
            ["plain one prose", "the better one prose", "plain two prose"],
            ["same", "same", "same"],  # ties
            ["garbage x", "y", "z"],
            ["refuse a", "b", "c"],
        ]
        responses, _ = response_run(texts, names=COMPANIONS)
        campaign = campaign_of(researcher, responses)
        assert campaign.comparisons.count() == 15
        config = judge_config(server, mode="pairwise")
        run = judge_run(config, campaign=campaign)
        run = start(run, django_capture_on_commit_callbacks)
    finally:
        server.stop()

    assert run.state == JudgeRun.State.COMPLETED, run.message
    verdicts = list(run.verdicts.select_related("first", "second"))
    assert len(verdicts) == 30 == len(server.requests)
    pairs = {(c.response_a_id, c.response_b_id) for c in campaign.comparisons.all()}
    seen = {(v.first_id, v.second_id) for v in verdicts}
    assert seen == pairs | {(b, a) for a, b in pairs}  # both orders of every comparison
    assert all(v.response_id is None for v in verdicts)

    # The judge saw the texts as Response 1 / Response 2 in the verdict's order.
    for request in server.requests:
        shown = blocks(request["body"])
        assert set(shown) == {"Response 1", "Response 2"}
        match = [v for v in verdicts if (v.first.text, v.second.text) == tuple(shown.values())]
        assert match, shown
    assert not any(name in str(r["body"]) for r in server.requests for name in COMPANIONS)

    by_text = {(v.first.text, v.second.text): v for v in verdicts}
    # Strict JSON, and the same response wins in both orders (as seen: first, then second).
    assert by_text[("a better answer", "a plain answer")].winner == "first"
    assert by_text[("a plain answer", "a better answer")].winner == "second"
    assert by_text[("a plain answer", "a better answer")].parse == Parse.STRICT
    # Prose recovered by the fallback parser.
    prose = by_text[("the better one prose", "plain one prose")]
    assert (prose.parse, prose.winner) == (Parse.FALLBACK, "first")
    assert by_text[("same", "same")].winner == "tie"
    # Garbage and refusals: unparseable, counted, raw output kept.
    garbage = [v for v in verdicts if "garbage" in v.first.text + v.second.text]
    refused = [v for v in verdicts if "refuse" in v.first.text + v.second.text]
    assert len(garbage) == 4 and all(v.parse == Parse.FAILED for v in garbage)
    assert all(v.raw_output == "As a judge I think... hmm." for v in garbage)
    assert len(refused) == 4 and all(v.error == "refusal" for v in refused)
    progress = judging.progress_of(run)
    assert (progress.total, progress.done, progress.unparseable) == (30, 22, 8)
    assert "8 unparseable" in run.message

    # Consistent judge: no flips among parsed pairs in both orders; no first preference.
    report = judging.bias_report(config)
    assert report["position_flip"]["n"] == 11 and report["position_flip"]["flips"] == 0
    assert report["first_position"]["rate"] == 0.5
    assert report["verdicts"]["failed"] == 8


def test_samples_give_one_verdict_per_item_and_sample(server, django_capture_on_commit_callbacks):
    responses, _ = response_run(["case=valid a", "case=valid b"], names=COMPANIONS[:2])
    config = judge_config(server, samples=3, temperature=0.8)
    run = judge_run(config, responses=responses.responses.all())
    run = start(run, django_capture_on_commit_callbacks)
    assert run.state == JudgeRun.State.COMPLETED
    assert run.verdicts.count() == 4 * 3 == len(server.requests)
    assert sorted(set(run.verdicts.values_list("sample", flat=True))) == [0, 1, 2]
    assert {r["body"]["temperature"] for r in server.requests} == {0.8}
    assert judging.progress_of(run).total == 12


def test_budget_pauses_the_run_and_resume_finishes_without_duplicates(
    server, django_capture_on_commit_callbacks
):
    responses, _ = response_run([f"case=valid {i}" for i in range(25)])
    config = judge_config(server, max_concurrency=1)
    run = judge_run(config, responses=responses.responses.all(), token_budget=400)
    run = start(run, django_capture_on_commit_callbacks)
    assert run.state == JudgeRun.State.PAUSED, run.message
    assert "budget" in run.message.lower()
    done = run.verdicts.count()
    assert 0 < done < 25
    assert judging.progress_of(run).remaining == 25 - done

    JudgeRun.objects.filter(pk=run.pk).update(token_budget=None)
    run = start(run, django_capture_on_commit_callbacks)
    assert run.state == JudgeRun.State.COMPLETED
    assert run.verdicts.count() == 25 == len(server.requests)


def test_cancel_mid_run_stops_new_requests_and_resume_finishes(
    server, monkeypatch, django_capture_on_commit_callbacks
):
    monkeypatch.setattr(runner, "POLL_SECONDS", 0.0)  # look at the row every loop
    responses, _ = response_run([f"case=valid {i}" for i in range(30)])
    config = judge_config(server, max_concurrency=1)
    run = judge_run(config, responses=responses.responses.all())

    class CancelAfterThree(judging.JudgeSpec):
        def store(self, item, messages, outcome):
            tokens = super().store(item, messages, outcome)
            if self.run.verdicts.count() == 3:
                judging.request_cancel(self.run)  # what the page's Cancel button does
            return tokens

    runner.mark_queued(JudgeRun, run.pk)
    assert runner.execute(CancelAfterThree, run.pk) == JudgeRun.State.CANCELLED
    run.refresh_from_db()
    assert run.state == JudgeRun.State.CANCELLED and not run.cancel_requested
    assert "resume to judge the rest" in run.message
    cancelled_at = run.verdicts.count()
    assert 3 <= cancelled_at <= 3 + 2  # what was in flight still lands
    assert len(server.requests) == cancelled_at

    run = start(run, django_capture_on_commit_callbacks)
    assert run.state == JudgeRun.State.COMPLETED
    assert run.verdicts.count() == 30 == len(server.requests)


def test_cancelling_a_queued_run_means_it_never_starts(server):
    responses, _ = response_run(["case=valid"])
    run = judge_run(judge_config(server), responses=responses.responses.all())
    runner.mark_queued(JudgeRun, run.pk)
    run.refresh_from_db()
    judging.request_cancel(run)
    assert JudgeRun.objects.get(pk=run.pk).state == JudgeRun.State.CANCELLED
    assert judging.execute(run.pk) == runner.NOT_CLAIMED
    assert not server.requests


def test_a_live_run_is_not_claimed_twice_but_a_stale_one_is_taken_over(server):
    responses, _ = response_run(["case=valid"])
    run = judge_run(judge_config(server), responses=responses.responses.all())
    runner.mark_queued(JudgeRun, run.pk)
    token = runner.claim(JudgeRun, run.pk)
    assert token is not None
    assert runner.claim(JudgeRun, run.pk) is None  # heartbeat is fresh
    assert judging.execute(run.pk) == runner.NOT_CLAIMED
    assert run.pk not in judging.stale_runs()

    beating = heartbeat.subject(JudgeRun, run.pk)
    heartbeat.stop(beating)  # the first executor's worker dies: its last beat ages
    cache.set(heartbeat.key(beating), time.time() - heartbeat.stale_seconds() - 5)
    assert judging.stale_runs() == [run.pk]
    assert judging.execute(run.pk) == JudgeRun.State.COMPLETED
    assert run.verdicts.count() == 1
    # The old executor's token no longer owns the run: its next poll says "taken over".
    assert runner.poll(JudgeRun, run.pk, token) is None


def test_a_judge_without_endpoint_skips_everything_and_says_so(server):
    responses, _ = response_run(["case=valid"])
    config = judge_config(server, base_url="", model_id="")
    run = judge_run(config, responses=responses.responses.all())
    runner.mark_queued(JudgeRun, run.pk)
    assert judging.execute(run.pk) == JudgeRun.State.COMPLETED
    run.refresh_from_db()
    assert "1 items skipped" in run.message
    assert not server.requests and not run.verdicts.exists()


def test_an_executor_error_fails_the_run_visibly_and_resume_recovers(
    server, monkeypatch, django_capture_on_commit_callbacks
):
    responses, _ = response_run(["case=valid a", "case=valid b"])
    run = judge_run(judge_config(server), responses=responses.responses.all())

    def broken(self, item):
        raise RuntimeError("prompt builder exploded")

    monkeypatch.setattr(judging.JudgeSpec, "messages", broken)
    runner.mark_queued(JudgeRun, run.pk)
    with pytest.raises(RuntimeError):
        judging.execute(run.pk)
    run.refresh_from_db()
    assert run.state == JudgeRun.State.FAILED
    assert "prompt builder exploded" in run.message
    monkeypatch.undo()
    run = start(run, django_capture_on_commit_callbacks)
    assert run.state == JudgeRun.State.COMPLETED and run.verdicts.count() == 2


def test_requests_are_parallel_but_bounded_by_the_judges_concurrency(
    server, django_capture_on_commit_callbacks
):
    responses, _ = response_run([f"case=valid {i}" for i in range(10)])
    config = judge_config(server, max_concurrency=2)
    server.script.extend(["slow:0.2"] * 10)
    run = start(
        judge_run(config, responses=responses.responses.all()), django_capture_on_commit_callbacks
    )
    assert run.state == JudgeRun.State.COMPLETED and run.verdicts.count() == 10
    assert server.max_in_flight == 2
