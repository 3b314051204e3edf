"""Generation throughput against a local chat-completions server, at concurrency 1, 8 and 32.

The server is the tests' real HTTP server on 127.0.0.1 (tests/llm_server.py), answering every
request after BENCH_LLM_LATENCY_MS (default 200: a fast hosted model's time to a short reply).
For each concurrency c one companion with `max_concurrency = c` generates for
BENCH_GENERATION_REQUESTS_PER_SLOT × c scenarios (default 25 per slot, at least 50) through
the same engine a Celery worker runs (eager here): prompt building, the `openai` client with
its retries, the endpoint limiter and one upsert per response. A last round at c = 32 with no
server delay shows the platform's own ceiling. Reported: requests/s, the ideal c / latency,
the most requests the server saw at once (never above c), and the median client latency.
"""

import random
import statistics
import tempfile
import time
from pathlib import Path

from bench._common import env_int, log
from bench.scenarios import generate

CONCURRENCY = (1, 8, 32)


def _server(latency_s: float):
    from tests.llm_server import ChatServer

    class DelayedServer(ChatServer):
        def behaviour_for(self, body: dict) -> str:
            return f"slow:{latency_s}" if latency_s > 0 else "ok"

    words = ["I", "hear", "you", "and", "I", "am", "right", "here", "with", "you", "tonight"]
    rng = random.Random(7)
    return DelayedServer(reply=lambda body: " ".join(rng.choices(words, k=40))).start()


def _scenarios(count: int) -> list[int]:
    from scenarios.importers import import_file
    from scenarios.models import Scenario

    with tempfile.TemporaryDirectory(prefix="h2htalk-bench-gen-") as workdir:
        path = Path(workdir) / "scenarios.jsonl"
        generate(path, count)
        report = import_file(str(path), "scenarios.jsonl")
        assert report.ok, report.errors[:3]
    return list(Scenario.objects.order_by("pk").values_list("pk", flat=True)[:count])


def _round(server, scenario_ids: list[int], concurrency: int, latency_s: float) -> dict:
    from scenarios.models import CompanionModel, GenerationRun, Response
    from scenarios.tasks import queue_run

    label = f"c{concurrency}-{int(latency_s * 1000)}ms"
    companion = CompanionModel.objects.create(
        name=f"bench {label}",
        base_url=server.base_url,
        model_id=label,
        max_concurrency=concurrency,
        timeout_seconds=30,
    )
    run = GenerationRun.objects.create(name=f"bench {label}", sap_enabled=True)
    run.scenarios.set(scenario_ids)
    run.companions.set([companion])
    server.max_in_flight = 0
    start = time.perf_counter()
    queue_run(run)  # eager: runs to the end here, as one worker would
    seconds = time.perf_counter() - start
    run.refresh_from_db()
    assert run.state == GenerationRun.State.COMPLETED, run.message
    responses = Response.objects.filter(run=run)
    count = responses.count()
    assert count == len(scenario_ids), (count, len(scenario_ids))
    latencies = list(responses.values_list("latency_ms", flat=True))
    ideal = concurrency / latency_s if latency_s else None
    row = {
        "benchmark": f"generation c={concurrency}, server {int(latency_s * 1000)} ms",
        "rows": count,
        "seconds": round(seconds, 3),
        "rows_per_s": round(count / seconds, 1),
        "median_ms": statistics.median(latencies),
        "notes": (
            f"requests/s; ideal {round(ideal, 1) if ideal else '-'}, at most "
            f"{server.max_in_flight} in flight, {run.tokens_used:,} tokens"
        ),
    }
    assert server.max_in_flight <= concurrency, row  # the endpoint limiter held
    log(
        f"{row['benchmark']}: {count} responses in {seconds:.1f} s = "
        f"{row['rows_per_s']} req/s ({row['notes']})"
    )
    return row


def run() -> list[dict]:
    latency_s = env_int("BENCH_LLM_LATENCY_MS", 200) / 1000
    per_slot = env_int("BENCH_GENERATION_REQUESTS_PER_SLOT", 25)
    sizes = {c: max(50, per_slot * c) for c in CONCURRENCY}
    scenario_ids = _scenarios(max(sizes.values()))
    log(f"{len(scenario_ids)} scenarios imported; server latency {latency_s * 1000:.0f} ms")
    server = _server(latency_s)
    rows = []
    try:
        for concurrency in CONCURRENCY:
            rows.append(_round(server, scenario_ids[: sizes[concurrency]], concurrency, latency_s))
        fast = _server(0)
        try:
            rows.append(_round(fast, scenario_ids[: sizes[32]], 32, 0))
        finally:
            fast.stop()
    finally:
        server.stop()
    return rows
