"""Generation runs: call each companion on each scenario of a run, resumably.

Only the main thread touches the database; a thread pool makes the HTTP calls (bounded per
endpoint by h2htalk.llm's slot limiter). A run is claimed by one executor at a time through
a heartbeat on its row, so a crashed worker's run can be taken over once its heartbeat is
stale, and resuming only generates what is missing: the (run, scenario, companion) unique
constraint makes every write an upsert, never a duplicate.
"""

import time
import uuid
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db.models import Count, F, Q
from django.utils import timezone

from h2htalk import llm

from .models import GenerationRun, Response
from .prompts import build_messages

HEARTBEAT_SECONDS = 2.0
ACTIVE = (GenerationRun.State.QUEUED, GenerationRun.State.RUNNING)


def stale_after() -> timedelta:
    return timedelta(seconds=getattr(settings, "GENERATION_STALE_SECONDS", 30))


@dataclass
class RunProgress:
    total: int
    ok: int
    failed: int
    tokens: int

    @property
    def remaining(self) -> int:
        return max(0, self.total - self.ok - self.failed)

    @property
    def percent(self) -> int:
        return round(100 * (self.ok + self.failed) / self.total) if self.total else 0


def progress_of(run: GenerationRun) -> RunProgress:
    counts = run.responses.aggregate(
        ok=Count("pk", filter=Q(status=Response.Status.OK)),
        failed=Count("pk", filter=Q(status=Response.Status.FAILED)),
    )
    total = run.scenarios.count() * run.companions.count()
    run.refresh_from_db(fields=["tokens_used"])
    return RunProgress(total, counts["ok"], counts["failed"], run.tokens_used)


def pending_items(run: GenerationRun) -> list[tuple[int, int]]:
    """(scenario id, companion id) pairs of the run without a successful response."""
    done = set(
        run.responses.filter(status=Response.Status.OK).values_list("scenario_id", "companion_id")
    )
    scenario_ids = list(run.scenarios.order_by("pk").values_list("pk", flat=True))
    companion_ids = list(run.companions.order_by("pk").values_list("pk", flat=True))
    return [(s, c) for s in scenario_ids for c in companion_ids if (s, c) not in done]


def claim(run_id: int) -> str | None:
    """Take the run for this executor unless another one is alive on it; returns a token."""
    token = uuid.uuid4().hex
    now = timezone.now()
    stale = Q(heartbeat_at__lt=now - stale_after()) | Q(heartbeat_at__isnull=True)
    claimable = Q(state=GenerationRun.State.QUEUED) | (Q(state=GenerationRun.State.RUNNING) & stale)
    taken = (
        GenerationRun.objects.filter(pk=run_id)
        .filter(claimable)
        .update(
            state=GenerationRun.State.RUNNING,
            heartbeat_at=now,
            claim_token=token,
            started_at=now,
            finished_at=None,
            message="",
        )
    )
    return token if taken else None


def _beat(run_id: int, token: str) -> GenerationRun | None:
    """Renew the heartbeat; None when someone else took the run over."""
    if not GenerationRun.objects.filter(pk=run_id, claim_token=token).update(
        heartbeat_at=timezone.now()
    ):
        return None
    return GenerationRun.objects.only("cancel_requested", "token_budget").get(pk=run_id)


def _store(run: GenerationRun, scenario_id: int, companion_id: int, messages, outcome) -> int:
    """Upsert one response; returns the tokens it used."""
    if isinstance(outcome, llm.ChatResult):
        values = {
            "status": Response.Status.OK,
            "text": outcome.text,
            "latency_ms": outcome.latency_ms,
            "prompt_tokens": outcome.prompt_tokens,
            "completion_tokens": outcome.completion_tokens,
            "finish_reason": outcome.finish_reason,
            "error": "",
            "attempts": outcome.attempts,
        }
    else:
        values = {
            "status": Response.Status.FAILED,
            "text": "",
            "error": str(outcome)[:2000],
            "attempts": getattr(outcome, "attempts", 1),
        }
    values["prompt_messages"] = messages
    Response.objects.update_or_create(
        run=run, scenario_id=scenario_id, companion_id=companion_id, defaults=values
    )
    tokens = values.get("prompt_tokens", 0) + values.get("completion_tokens", 0)
    if tokens:
        GenerationRun.objects.filter(pk=run.pk).update(tokens_used=F("tokens_used") + tokens)
    return tokens


def _call(endpoint: llm.Endpoint, messages: list[dict]):
    try:
        return llm.chat(endpoint, messages)
    except llm.LLMError as error:
        return error


def execute(run_id: int) -> str:
    """Generate every missing response of the run; returns the run's final state."""
    token = claim(run_id)
    if token is None:
        return "not claimed"
    run = GenerationRun.objects.get(pk=run_id)
    endpoints = {c.pk: c.endpoint() for c in run.companions.all() if c.can_generate}
    pending = pending_items(run)
    items = [item for item in pending if item[1] in endpoints]
    skipped = len(pending) - len(items)
    pool_size = min(64, max(1, sum(e.max_concurrency for e in endpoints.values())))
    scenarios = {s.pk: s for s in run.scenarios.select_related("persona")}
    stop_reason = ""
    last_beat = 0.0
    budget, used = run.token_budget, run.tokens_used
    in_flight = {}
    queue = iter(items)
    with ThreadPoolExecutor(max_workers=pool_size) as pool:
        while True:
            if time.monotonic() - last_beat > HEARTBEAT_SECONDS:
                fresh = _beat(run_id, token)
                last_beat = time.monotonic()
                if fresh is None:
                    stop_reason = "taken over"
                elif fresh.cancel_requested:
                    stop_reason = "cancelled"
                else:
                    budget = fresh.token_budget
            if not stop_reason and budget is not None and used >= budget:
                stop_reason = "budget"
            while not stop_reason and len(in_flight) < pool_size * 2:
                item = next(queue, None)
                if item is None:
                    break
                scenario_id, companion_id = item
                messages = build_messages(scenarios[scenario_id], sap=run.sap_enabled)
                future = pool.submit(_call, endpoints[companion_id], messages)
                in_flight[future] = (scenario_id, companion_id, messages)
            if not in_flight:
                break
            finished, _ = wait(in_flight, timeout=HEARTBEAT_SECONDS, return_when=FIRST_COMPLETED)
            for future in finished:
                scenario_id, companion_id, messages = in_flight.pop(future)
                used += _store(run, scenario_id, companion_id, messages, future.result())
    return _finish(run_id, token, stop_reason, skipped)


def _finish(run_id: int, token: str, stop_reason: str, skipped: int) -> str:
    if stop_reason == "taken over":
        return "taken over"
    run = GenerationRun.objects.get(pk=run_id)
    progress = progress_of(run)
    if progress.remaining == 0 and not progress.failed:
        stop_reason = ""  # everything is done whatever stopped the loop
    if stop_reason == "cancelled":
        state, message = GenerationRun.State.CANCELLED, "Cancelled; resume to generate the rest."
    elif stop_reason == "budget":
        state = GenerationRun.State.PAUSED
        message = f"Token budget reached ({run.tokens_used:,} of {run.token_budget:,}); raise it and resume."
    else:
        state = GenerationRun.State.COMPLETED
        message = f"{progress.ok} responses"
        if progress.failed:
            message += f", {progress.failed} failed (resume to retry them)"
        if skipped:
            message += f"; {skipped} items skipped: their companion has no endpoint"
    GenerationRun.objects.filter(pk=run_id, claim_token=token).update(
        state=state, message=message, finished_at=timezone.now(), cancel_requested=False
    )
    return state


def request_cancel(run: GenerationRun) -> None:
    if run.state in ACTIVE:
        GenerationRun.objects.filter(pk=run.pk).update(cancel_requested=True)
        if run.state == GenerationRun.State.QUEUED:
            GenerationRun.objects.filter(pk=run.pk).update(
                state=GenerationRun.State.CANCELLED, message="Cancelled before it started."
            )


def stale_runs() -> list[int]:
    cutoff = timezone.now() - stale_after()
    return list(
        GenerationRun.objects.filter(state=GenerationRun.State.RUNNING)
        .filter(Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True))
        .values_list("pk", flat=True)
    )
