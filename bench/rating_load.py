"""Load: annotators asking for the next comparison and submitting, against gunicorn on
127.0.0.1 with PostgreSQL, at 1, 10 and 50 concurrent annotators. Stops by itself.

Reports requests/s, median and p95 latency per request kind, and the integrity figures that
must be 0: judgments accepted but not stored ("lost"), and comparisons over k judgments.
BENCH_LOAD_SECONDS sets the time per level (default 20; the reliability issue asks for 120).
"""

import http.client
import json
import os
import random
import signal
import statistics
import threading
import time
from collections import Counter

from bench._common import free_port, log, percentile, start_gunicorn

LEVELS = [int(x) for x in os.environ.get("BENCH_LOAD_LEVELS", "1,10,50").split(",")]
SECONDS = int(os.environ.get("BENCH_LOAD_SECONDS", "20"))
OVERLAP = 3


def _setup(n_annotators: int, n_scenarios: int, tag: str):
    """A campaign (overlap OVERLAP) over n_scenarios scenarios × 3 companions, with its
    comparisons built, and the API tokens of n_annotators annotators assigned to it."""
    from django.contrib.auth import get_user_model

    from annotation.models import Campaign
    from annotation.pairing import build_comparisons
    from h2htalk.roles import ensure_role_groups
    from scenarios.models import CompanionModel, GenerationRun, Response
    from tests.simulators import bulk_scenarios

    ensure_role_groups()
    owner, _ = get_user_model().objects.get_or_create(username="bench-owner")
    models = [
        CompanionModel.objects.get_or_create(
            name=f"bench-model-{i}", defaults={"provider": "imported"}
        )[0]
        for i in range(3)
    ]
    run = GenerationRun.objects.create(name=f"bench load {tag}", kind="import")
    scenarios = bulk_scenarios(n_scenarios, f"load-{tag}", source=f"bench-{tag}")
    Response.objects.bulk_create(
        [
            Response(
                run=run, scenario=s, companion=m, text=f"{m.name} answers scenario {s.external_id}"
            )
            for s in scenarios
            for m in models
        ],
        batch_size=2000,
    )
    campaign = Campaign.objects.create(
        name=f"bench load {tag}",
        owner=owner,
        overlap=OVERLAP,
        state=Campaign.State.OPEN,
        scenario_query=f"q=load-{tag}-",
    )
    campaign.companions.set(models)
    campaign.runs.set([run])
    tokens = _annotator_tokens(campaign, n_annotators, tag)
    build_comparisons(campaign)
    return campaign, tokens


def _annotator_tokens(campaign, n_annotators: int, tag: str) -> list[str]:
    """API tokens of n_annotators users in the annotator group, assigned to campaign."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from rest_framework.authtoken.models import Token

    group = Group.objects.get(name="annotator")
    tokens = []
    for i in range(n_annotators):
        user, _ = get_user_model().objects.get_or_create(username=f"bench-rater-{tag}-{i}")
        user.groups.add(group)
        campaign.annotators.add(user)
        tokens.append(Token.objects.get_or_create(user=user)[0].key)
    return tokens


def _annotator(port, token, campaign_id, deadline, results, lock):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
    rng = random.Random(token)
    mine = {"next": [], "submit": [], "accepted": 0, "refused": 0, "errors": Counter()}

    def post(path, body):
        started = time.perf_counter()
        connection.request("POST", path, body=json.dumps(body), headers=headers)
        response = connection.getresponse()
        payload = response.read()
        return response.status, payload, (time.perf_counter() - started) * 1000

    try:
        while time.monotonic() < deadline:
            status, payload, ms = post(f"/api/rate/campaigns/{campaign_id}/next/", {})
            mine["next"].append(ms)
            if status == 204:
                break
            if status != 200:
                mine["errors"][f"next {status}"] += 1
                continue
            key = json.loads(payload)["key"]
            status, _, ms = post(
                f"/api/rate/assignments/{key}/submit/",
                {"preference": rng.choice([-2, -1, 0, 1, 2])},
            )
            mine["submit"].append(ms)
            if status == 200:
                mine["accepted"] += 1
            elif status == 409:
                mine["refused"] += 1
            else:
                mine["errors"][f"submit {status}"] += 1
    finally:
        connection.close()
        with lock:
            results.append(mine)


def _level(port: int, n: int) -> dict:
    from django.db import connections
    from django.db.models import Max

    from annotation.models import Judgment

    campaign, tokens = _setup(n, n_scenarios=max(300, n * 120), tag=f"c{n}")
    connections.close_all()
    results, lock = [], threading.Lock()
    deadline = time.monotonic() + SECONDS
    started = time.perf_counter()
    threads = [
        threading.Thread(target=_annotator, args=(port, t, campaign.pk, deadline, results, lock))
        for t in tokens
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(SECONDS + 60)
    elapsed = time.perf_counter() - started
    nexts = [ms for r in results for ms in r["next"]]
    submits = [ms for r in results for ms in r["submit"]]
    accepted = sum(r["accepted"] for r in results)
    stored = Judgment.objects.filter(comparison__campaign=campaign).count()
    over_k = campaign.comparisons.filter(judgment_count__gt=OVERLAP).count()
    most = (
        Judgment.objects.filter(comparison__campaign=campaign)
        .values("comparison")
        .annotate(n=Max("comparison__judgment_count"))
    )
    errors = sum((r["errors"] for r in results), Counter())
    return {
        "n": n,
        "seconds": elapsed,
        "requests": len(nexts) + len(submits),
        "next_median": statistics.median(nexts) if nexts else None,
        "next_p95": percentile(nexts, 95) if nexts else None,
        "submit_median": statistics.median(submits) if submits else None,
        "submit_p95": percentile(submits, 95) if submits else None,
        "accepted": accepted,
        "stored": stored,
        "lost": accepted - stored,
        "refused": sum(r["refused"] for r in results),
        "over_k": over_k,
        "comparisons_touched": len(most),
        "errors": dict(errors),
    }


def run() -> list[dict]:
    from django.db import connection

    if connection.vendor != "postgresql":
        return [{"benchmark": "rating load", "notes": "skipped: needs PostgreSQL (row locks)"}]
    port = free_port()
    server = start_gunicorn(port, log_level="warning")
    rows = []
    try:
        for n in LEVELS:
            log(f"{n} concurrent annotators for {SECONDS} s")
            result = _level(port, n)
            rows.append(
                {
                    "benchmark": f"rating load: {n} annotators, next",
                    "rows": result["requests"] // 2,
                    "seconds": round(result["seconds"], 1),
                    "rows_per_s": round(result["requests"] / result["seconds"], 1),
                    "median_ms": result["next_median"],
                    "p95_ms": result["next_p95"],
                    "notes": "rows/s = all requests (next + submit) per second",
                }
            )
            rows.append(
                {
                    "benchmark": f"rating load: {n} annotators, submit",
                    "rows": result["accepted"],
                    "median_ms": result["submit_median"],
                    "p95_ms": result["submit_p95"],
                    "notes": f"accepted {result['accepted']}, stored {result['stored']}, "
                    f"lost {result['lost']}, over k {result['over_k']}, "
                    f"refused (full) {result['refused']}, errors {result['errors'] or 0}",
                }
            )
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(20)
    return rows
