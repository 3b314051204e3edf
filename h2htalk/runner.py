"""The resumable run engine shared by generation runs and judge runs.

A *run* is a database row with these fields (GenerationRun and JudgeRun both have them):
`state` (draft/queued/running/paused/cancelled/completed/failed), `claim_token`,
`heartbeat_at`, `cancel_requested`, `token_budget`, `tokens_used`, `message`, `started_at`,
`finished_at`. What a run does per item is a `RunSpec`: which items are still pending, which
endpoint and messages each item gets, and how an outcome is stored.

How a run executes (`execute`):

- It is *claimed* first: one conditional UPDATE moves it from queued (or running with a stale
  heartbeat: its executor died) to running with a fresh `claim_token`. A second executor on a
  live run claims nothing and returns at once.
- Only the calling thread touches the database. A thread pool makes the HTTP calls, bounded per
  endpoint across every worker by `h2htalk.llm`'s slot limiter; at most twice the pool size
  requests are in flight or queued, so a 200,000-item run never builds 200,000 prompts at once.
- Every `HEARTBEAT_SECONDS` the executor renews `heartbeat_at` (only while its token is still
  on the row: a run taken over by someone else stops here), and rereads `cancel_requested` and
  `token_budget` (so raising the budget or cancelling takes effect within seconds).
- Each outcome (a `ChatResult` or an `LLMError` after the client's retries) is stored at once
  by `spec.store`, which upserts by the item's unique key, and its tokens are added to
  `tokens_used`. A crash therefore loses only what was in flight; resuming asks `spec.pending()`
  again and does only what is missing.
- It ends as completed (everything has an outcome), paused (budget reached: raise it and
  resume), cancelled, or failed (an unexpected error in the executor itself; resume retries).

Stale takeover: `stale_runs(model)` lists running runs whose heartbeat is older than
`GENERATION_STALE_SECONDS` (default 30; it applies to every kind of run); the worker start hooks
(`scenarios.tasks`, `scoring.tasks`) queue them again, and `claim` lets the new executor in.
"""

import time
import uuid
from collections.abc import Hashable, Iterable
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from datetime import timedelta

from django.conf import settings
from django.db.models import F, Model, Q
from django.utils import timezone

from . import llm

HEARTBEAT_SECONDS = 2.0
MAX_POOL = 64

QUEUED, RUNNING, PAUSED, CANCELLED, COMPLETED, FAILED = (
    "queued",
    "running",
    "paused",
    "cancelled",
    "completed",
    "failed",
)
ACTIVE = (QUEUED, RUNNING)
NOT_CLAIMED, TAKEN_OVER = "not claimed", "taken over"


def stale_after() -> timedelta:
    return timedelta(seconds=getattr(settings, "GENERATION_STALE_SECONDS", 30))


class RunSpec:
    """What one kind of run does per item. Subclass it and set `model` (the run's model).

    An item is any hashable value (e.g. a (scenario id, companion id) pair). The executor
    builds the spec once per execution, after claiming the run, as `SpecClass(run)`.
    """

    model: type[Model]
    cancelled_message = "Cancelled; resume to do the rest."

    def __init__(self, run):
        self.run = run

    def pending(self) -> Iterable[Hashable]:
        """Items without a final outcome, in the order they should be done."""
        raise NotImplementedError

    def endpoint(self, item) -> llm.Endpoint | None:
        """The endpoint answering this item; None skips the item (counted in `summary`)."""
        raise NotImplementedError

    def messages(self, item) -> list[dict]:
        """The chat messages sent for this item (built just before the request)."""
        raise NotImplementedError

    def store(self, item, messages: list[dict], outcome: "llm.ChatResult | llm.LLMError") -> int:
        """Upsert the item's outcome; returns the tokens it used (the runner adds them up)."""
        raise NotImplementedError

    def summary(self, skipped: int) -> tuple[bool, str]:
        """(every item has a final outcome, the message of a completed run)."""
        raise NotImplementedError

    def pool_size(self, endpoints: Iterable[llm.Endpoint]) -> int:
        """Threads for HTTP calls: the endpoints' concurrency together (the limiter bounds them)."""
        distinct = set(endpoints)
        return min(MAX_POOL, max(1, sum(e.max_concurrency for e in distinct)))

    def call(self, endpoint: llm.Endpoint, messages: list[dict]):
        """Runs in a pool thread: one chat completion with retries; errors are returned."""
        try:
            return llm.chat(endpoint, messages)
        except llm.LLMError as error:
            return error


def claim(model: type[Model], run_id: int) -> str | None:
    """Take the run for this executor unless another one is alive on it; returns a token."""
    token = uuid.uuid4().hex
    now = timezone.now()
    stale = Q(heartbeat_at__lt=now - stale_after()) | Q(heartbeat_at__isnull=True)
    claimable = Q(state=QUEUED) | (Q(state=RUNNING) & stale)
    taken = (
        model.objects.filter(pk=run_id)
        .filter(claimable)
        .update(
            state=RUNNING,
            heartbeat_at=now,
            claim_token=token,
            started_at=now,
            finished_at=None,
            message="",
        )
    )
    return token if taken else None


def beat(model: type[Model], run_id: int, token: str):
    """Renew the heartbeat; None when someone else took the run over, else the fresh row."""
    if not model.objects.filter(pk=run_id, claim_token=token).update(heartbeat_at=timezone.now()):
        return None
    return model.objects.only("cancel_requested", "token_budget").get(pk=run_id)


def add_tokens(model: type[Model], run_id: int, tokens: int) -> None:
    if tokens:
        model.objects.filter(pk=run_id).update(tokens_used=F("tokens_used") + tokens)


def execute(spec_class: type[RunSpec], run_id: int) -> str:
    """Do every pending item of the run; returns the run's final state (or why it did not run)."""
    model = spec_class.model
    token = claim(model, run_id)
    if token is None:
        return NOT_CLAIMED
    try:
        stop_reason, skipped, spec = _loop(spec_class, model, run_id, token)
    except Exception as error:
        model.objects.filter(pk=run_id, claim_token=token).update(
            state=FAILED,
            message=f"Failed: {type(error).__name__}: {error}"[:2000] + " (resume to retry)",
            finished_at=timezone.now(),
            cancel_requested=False,
        )
        raise
    return _finish(spec, model, run_id, token, stop_reason, skipped)


def _loop(spec_class, model, run_id: int, token: str):
    run = model.objects.get(pk=run_id)
    spec = spec_class(run)
    items, endpoints, skipped = [], {}, 0
    for item in spec.pending():
        endpoint = spec.endpoint(item)
        if endpoint is None:
            skipped += 1
        else:
            items.append(item)
            endpoints[item] = endpoint
    pool_size = spec.pool_size(endpoints.values())
    stop_reason = ""
    last_beat = 0.0
    budget, used = run.token_budget, run.tokens_used
    in_flight = {}
    queue = iter(items)
    with ThreadPoolExecutor(max_workers=pool_size) as pool:
        while True:
            if time.monotonic() - last_beat > HEARTBEAT_SECONDS:
                fresh = beat(model, run_id, token)
                last_beat = time.monotonic()
                if fresh is None:
                    stop_reason = TAKEN_OVER
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
                messages = spec.messages(item)
                future = pool.submit(spec.call, endpoints[item], messages)
                in_flight[future] = (item, messages)
            if not in_flight:
                break
            timeout = max(HEARTBEAT_SECONDS, 0.05)
            finished, _ = wait(in_flight, timeout=timeout, return_when=FIRST_COMPLETED)
            for future in finished:
                item, messages = in_flight.pop(future)
                tokens = spec.store(item, messages, future.result())
                add_tokens(model, run_id, tokens)
                used += tokens
    return stop_reason, skipped, spec


def _finish(spec: RunSpec, model, run_id: int, token: str, stop_reason: str, skipped: int) -> str:
    if stop_reason == TAKEN_OVER:
        return TAKEN_OVER
    run = model.objects.get(pk=run_id)
    complete, summary = spec.summary(skipped)
    if complete:
        stop_reason = ""  # everything is done whatever stopped the loop
    if stop_reason == "cancelled":
        state, message = CANCELLED, spec.cancelled_message
    elif stop_reason == "budget":
        state = PAUSED
        message = (
            f"Token budget reached ({run.tokens_used:,} of {run.token_budget:,}); "
            "raise it and resume."
        )
    else:
        state, message = COMPLETED, summary
    model.objects.filter(pk=run_id, claim_token=token).update(
        state=state, message=message, finished_at=timezone.now(), cancel_requested=False
    )
    return state


def request_cancel(model: type[Model], run) -> None:
    """Ask a queued or running run to stop: requests in flight finish, no new ones start."""
    if run.state in ACTIVE:
        model.objects.filter(pk=run.pk).update(cancel_requested=True)
        if run.state == QUEUED:
            model.objects.filter(pk=run.pk, state=QUEUED).update(
                state=CANCELLED, message="Cancelled before it started."
            )


def stale_runs(model: type[Model]) -> list[int]:
    """Running runs whose executor stopped beating (a crashed worker)."""
    cutoff = timezone.now() - stale_after()
    return list(
        model.objects.filter(state=RUNNING)
        .filter(Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True))
        .values_list("pk", flat=True)
    )


def is_going(model: type[Model], run) -> bool:
    """Queued or running with a live executor: resuming it now would do nothing."""
    return run.state in ACTIVE and run.pk not in stale_runs(model)


def mark_queued(model: type[Model], run_id: int) -> None:
    """Queued again (new, or after a cancel, pause, failure or crash); a worker claims it."""
    model.objects.filter(pk=run_id).update(
        state=QUEUED, cancel_requested=False, message="", claim_token=""
    )
