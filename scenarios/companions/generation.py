"""Generation runs: call each companion on each scenario of a run, resumably.

The run engine (claim on the run row, heartbeat, a thread pool for the HTTP calls only,
budget, cancel, stale takeover) is `h2htalk.runner`; this module says what a generation item
is. An item is a (scenario id, companion id) pair; resuming only generates what is missing: the
(run, scenario, companion) unique constraint makes every write an upsert, never a duplicate.
"""

from dataclasses import dataclass

from django.db.models import Count, Q

from h2htalk import llm, runner
from scenarios.companions.prompts import build_messages
from scenarios.models import GenerationRun, Response

ACTIVE = runner.ACTIVE


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


class GenerationSpec(runner.RunSpec):
    model = GenerationRun
    cancelled_message = "Cancelled; resume to generate the rest."

    def __init__(self, run: GenerationRun):
        super().__init__(run)
        self.endpoints = {c.pk: c.endpoint() for c in run.companions.all() if c.can_call}
        self.scenarios = {s.pk: s for s in run.scenarios.select_related("persona")}

    def pending(self):
        return pending_items(self.run)

    def endpoint(self, item) -> llm.Endpoint | None:
        return self.endpoints.get(item[1])

    def pool_size(self, endpoints) -> int:
        # One share per companion that can generate (as before the engine was shared).
        total = sum(e.max_concurrency for e in self.endpoints.values())
        return min(runner.MAX_POOL, max(1, total))

    def messages(self, item) -> list[dict]:
        return build_messages(self.scenarios[item[0]], sap=self.run.sap_enabled)

    def store(self, item, messages, outcome) -> int:
        scenario_id, companion_id = item
        return _store(self.run, scenario_id, companion_id, messages, outcome)

    def summary(self, skipped: int) -> tuple[bool, str]:
        progress = progress_of(self.run)
        message = f"{progress.ok} responses"
        if progress.failed:
            message += f", {progress.failed} failed (resume to retry them)"
        if skipped:
            message += f"; {skipped} items skipped: their companion has no endpoint"
        return progress.remaining == 0 and not progress.failed, message


def _store(run: GenerationRun, scenario_id: int, companion_id: int, messages, outcome) -> int:
    """Upsert one response; returns the tokens it used (the runner adds them to the run)."""
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
    return values.get("prompt_tokens", 0) + values.get("completion_tokens", 0)


def claim(run_id: int) -> str | None:
    """Take the run for this executor unless another one is alive on it; returns a token."""
    return runner.claim(GenerationRun, run_id)


def execute(run_id: int) -> str:
    """Generate every missing response of the run; returns the run's final state."""
    return runner.execute(GenerationSpec, run_id)


def request_cancel(run: GenerationRun) -> None:
    runner.request_cancel(GenerationRun, run)


def stale_runs() -> list[int]:
    return runner.stale_runs(GenerationRun)
