"""The resumable run engine shared by generation runs and judge runs.

A *run* is a row of a `h2htalk.models.BackgroundRun` model (GenerationRun, JudgeRun). What a
run does per item is a `RunSpec`: which items are still pending, which endpoint and messages
each item gets, and how an outcome is stored.

How a run executes (`execute`):

- It is *claimed* first: one conditional UPDATE (on the state and `claim_token` it was read
  with) moves it from queued, or from running with a stale heartbeat (its executor died), to
  running with a fresh `claim_token`, and starts its heartbeat (`h2htalk.heartbeat`, the one
  Jobs beat too). A second executor on a live run claims nothing and returns at once.
- Only the calling thread touches the database. A thread pool makes the HTTP calls, bounded per
  endpoint across every worker by `h2htalk.llm`'s slot limiter; at most twice the pool size
  requests are in flight or queued, so a 200,000-item run never builds 200,000 prompts at once.
- Every `POLL_SECONDS` the executor checks that its token is still on the row (a run taken
  over by someone else stops here) and rereads `cancel_requested` and `token_budget` (so
  raising the budget or cancelling takes effect within seconds).
- Each outcome (a `ChatResult` or an `LLMError` after the client's retries) is stored at once
  by `spec.store`, which upserts by the item's unique key, and its tokens are added to
  `tokens_used` in the same transaction. A crash therefore loses only what was in flight; resuming asks `spec.pending()`
  again and does only what is missing.
- It ends as completed (everything has an outcome), paused (budget reached: raise it and
  resume), cancelled, or failed (an unexpected error in the executor itself; resume retries).

Stale takeover: `stale_runs(model)` lists running runs that lost their worker by
`h2htalk.heartbeat.is_stale` (JOB_STALE_SECONDS, the rule for Jobs too); h2htalk.sweeper hands
them to a live worker through the task registered with `register` (in the app's tasks module),
on every worker start and every JOB_SWEEP_SECONDS, and `claim` lets the new executor in.
"""

import time
import uuid
from collections.abc import Hashable, Iterable
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

from django.db import transaction
from django.db.models import F, Model
from django.utils import timezone

from . import heartbeat, llm
from .models import State

POLL_SECONDS = 2.0
MAX_POOL = 64

QUEUED, RUNNING, PAUSED, CANCELLED, COMPLETED, FAILED = (
    State.QUEUED,
    State.RUNNING,
    State.PAUSED,
    State.CANCELLED,
    State.COMPLETED,
    State.FAILED,
)
ACTIVE = (QUEUED, RUNNING)
NOT_CLAIMED, TAKEN_OVER = "not claimed", "taken over"

_resume_tasks: dict[type[Model], object] = {}


def register(model: type[Model], task) -> None:
    """Declare the Celery task (taking the run id) that executes runs of `model`; the sweeper
    sends it for runs that lost their worker. Called from each app's tasks module."""
    _resume_tasks[model] = task


def resume_tasks() -> dict:
    """Run model -> the task that executes (and so resumes) its runs."""
    return dict(_resume_tasks)


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
    """Take the run for this executor unless another one is alive on it; returns a token.

    The run starts beating at once (stopped by `execute`, or by task_postrun after a crash).
    """
    row = model.objects.filter(pk=run_id).values("state", "claim_token", "started_at").first()
    if row is None or row["state"] not in ACTIVE:
        return None
    if row["state"] == RUNNING and not _lost(model, run_id, row["started_at"]):
        return None
    token = uuid.uuid4().hex
    now = timezone.now()
    taken = model.objects.filter(
        pk=run_id, state=row["state"], claim_token=row["claim_token"]
    ).update(state=RUNNING, claim_token=token, started_at=now, finished_at=None, message="")
    if not taken:
        return None
    heartbeat.start(heartbeat.subject(model, run_id))
    return token


def _lost(model: type[Model], run_id: int, started_at) -> bool:
    name = heartbeat.subject(model, run_id)
    return heartbeat.is_stale(heartbeat.last_beats([name]).get(name), started_at, time.time())


def poll(model: type[Model], run_id: int, token: str):
    """None when someone else took the run over, else the fresh row (cancel and budget)."""
    return (
        model.objects.filter(pk=run_id, claim_token=token)
        .only("cancel_requested", "token_budget")
        .first()
    )


def add_tokens(model: type[Model], run_id: int, tokens: int) -> None:
    if tokens:
        model.objects.filter(pk=run_id).update(tokens_used=F("tokens_used") + tokens)


def execute(spec_class: type[RunSpec], run_id: int) -> str:
    """Do every pending item of the run; returns the run's final state (or why it did not run)."""
    model = spec_class.model
    token = claim(model, run_id)
    if token is None:
        return NOT_CLAIMED
    name = heartbeat.subject(model, run_id)
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
    finally:
        heartbeat.stop(name, only_this_thread=True)
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
    last_poll = 0.0
    budget, used = run.token_budget, run.tokens_used
    in_flight = {}
    queue = iter(items)
    with ThreadPoolExecutor(max_workers=pool_size) as pool:
        while True:
            if time.monotonic() - last_poll > POLL_SECONDS:
                fresh = poll(model, run_id, token)
                last_poll = time.monotonic()
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
            timeout = max(POLL_SECONDS, 0.05)
            finished, _ = wait(in_flight, timeout=timeout, return_when=FIRST_COMPLETED)
            for future in finished:
                item, messages = in_flight.pop(future)
                with transaction.atomic():  # a kill between the two would lose the tokens
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
    running = dict(model.objects.filter(state=RUNNING).values_list("pk", "started_at"))
    beats = heartbeat.last_beats(heartbeat.subject(model, pk) for pk in running)
    now = time.time()
    return [
        pk
        for pk, started_at in running.items()
        if heartbeat.is_stale(beats.get(heartbeat.subject(model, pk)), started_at, now)
    ]


def is_going(model: type[Model], run) -> bool:
    """Queued or running with a live executor: resuming it now would do nothing."""
    return run.state in ACTIVE and run.pk not in stale_runs(model)


def mark_queued(model: type[Model], run_id: int) -> None:
    """Queued again (new, or after a cancel, pause, failure or crash); a worker claims it."""
    model.objects.filter(pk=run_id).update(
        state=QUEUED, cancel_requested=False, message="", claim_token=""
    )
