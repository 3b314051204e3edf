"""A pairwise judge run on a real Celery worker over Redis: killed mid-run, restarted, complete,
with every verdict (both orders) exactly once."""

import json

import pytest
from django.db.models import Count

from scoring.models import JudgeRun, JudgeVerdict
from scoring.tasks import queue_judge_run
from tests.llm_server import ChatServer
from tests.scoring.test_judge_support import (
    COMPANIONS,
    campaign_of,
    judge_config,
    judge_run,
    response_run,
)
from tests.worker import celery_worker, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_killed_worker_judge_run_resumes_and_every_verdict_exists_once(researcher):
    server = ChatServer(reply=lambda body: json.dumps({"winner": "1", "rationale": "r"})).start()
    server.script.extend(["slow:0.15"] * 1000)
    try:
        texts = [[f"s{i} a", f"s{i} b", f"s{i} c"] for i in range(20)]
        responses, _ = response_run(texts, names=COMPANIONS)
        campaign = campaign_of(researcher, responses)
        # Slots held by the killed worker free up after timeout + 5 s.
        config = judge_config(server, mode="pairwise", max_concurrency=2, timeout_seconds=3)
        run = judge_run(config, campaign=campaign, name="judge crash test")
        stale = {"JOB_STALE_SECONDS": "2"}

        with celery_worker(env=stale) as worker:
            queue_judge_run(run)
            wait_for(lambda: JudgeVerdict.objects.filter(run=run).count() >= 30)
            worker.kill()
        killed_at = JudgeVerdict.objects.filter(run=run).count()
        assert killed_at < 120
        assert JudgeRun.objects.get(pk=run.pk).state == JudgeRun.State.RUNNING

        with celery_worker(env=stale):  # its start hook resumes judge runs with a stale heartbeat
            wait_for(
                lambda: JudgeRun.objects.get(pk=run.pk).state == JudgeRun.State.COMPLETED,
                timeout=90,
            )
    finally:
        server.stop()

    verdicts = JudgeVerdict.objects.filter(run=run)
    assert verdicts.count() == 120  # 60 comparisons x 2 orders
    assert verdicts.filter(parse="strict", winner="first").count() == 120
    per_item = verdicts.values("first", "second", "sample").annotate(n=Count("pk"))
    assert {row["n"] for row in per_item} == {1}
    pairs = {(c.response_a_id, c.response_b_id) for c in campaign.comparisons.all()}
    assert {(v.first_id, v.second_id) for v in verdicts} == pairs | {(b, a) for a, b in pairs}
    # Only what was in flight at the kill was asked again: up to 2 × pool items are handed to
    # the pool at once, and an answer received but not yet stored is asked again (a CI run
    # once saw 5 repeats, so the bound is the generation test's, not the pool's 4).
    assert 120 <= len(server.requests) <= 120 + 8
    run.refresh_from_db()
    assert run.tokens_used >= sum(v.prompt_tokens + v.completion_tokens for v in verdicts)
