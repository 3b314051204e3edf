"""Judge runs: an LLM judge over responses (single-answer grading) or a campaign's comparisons
(pairwise, both orders), with `samples` verdicts per item, on the shared run engine
(`h2htalk.runner`: claim/heartbeat, thread pool for HTTP, retries, budget, cancel/resume,
stale takeover).

Items: single mode `(response id, sample)`; pairwise `(first id, second id, sample)` for both
orders of every comparison (first = the response shown as "Response 1"). Every outcome is
upserted into one JudgeVerdict row per item (the unique constraints), raw output kept:
parsed (`strict` / `fallback`), unparseable (`failed`, with the reason in `error`) or a request
that failed after the client's retries (`error`). Resuming redoes only items without a verdict
and items whose request failed; an unparseable output is the judge's answer and stays (it is
counted, and shown with its raw output).

pandas and the bias statistics are imported by the bias report, their only user: the judge
pages and the run engine import this module and start without them.
"""

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.db.models import Avg, Count, FloatField, Q
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Length

from h2htalk import llm, runner
from scenarios.models import Response
from scoring.judges import parsing, prompts
from scoring.models import JudgeConfig, JudgeRun, JudgeVerdict

if TYPE_CHECKING:
    import pandas as pd

Parse = JudgeVerdict.Parse
ACTIVE = (JudgeRun.State.QUEUED, JudgeRun.State.RUNNING)
FINAL = (Parse.STRICT, Parse.FALLBACK, Parse.FAILED)  # an item with one of these is done
PARSED = (Parse.STRICT, Parse.FALLBACK)
CACHE_LIMIT = 2000  # responses kept in memory while building prompts


def rubric_of(config: JudgeConfig) -> str:
    return config.rubric.strip() or prompts.default_rubric(config.mode)


# ---------------------------------------------------------------- what a run covers


def responses_for(runs=(), companions=(), campaign=None):
    """Successful, non-empty responses of the given generation runs, or of a campaign's
    comparisons; optionally only these companions'."""
    responses = Response.objects.filter(status=Response.Status.OK).exclude(text="")
    if campaign is not None:
        pairs = campaign.comparisons.values_list("response_a_id", "response_b_id")
        ids = {pk for pair in pairs for pk in pair}
        responses = responses.filter(pk__in=ids)
    else:
        responses = responses.filter(run__in=runs)
    if companions:
        responses = responses.filter(companion__in=companions)
    return responses


def comparison_pairs(run: JudgeRun) -> list[tuple[int, int]]:
    if run.campaign_id is None:
        return []
    rows = run.campaign.comparisons.order_by("pk").values_list("response_a_id", "response_b_id")
    return list(dict.fromkeys(rows))


def all_items(run: JudgeRun, config: JudgeConfig | None = None) -> list[tuple]:
    config = config or run.judge
    samples = range(max(1, config.samples))
    if config.mode == JudgeConfig.Mode.PAIRWISE:
        # Both orders of a pair next to each other: a run paused halfway has whole pairs.
        return [
            order
            for a, b in comparison_pairs(run)
            for sample in samples
            for order in ((a, b, sample), (b, a, sample))
        ]
    ids = (
        run.responses.filter(status=Response.Status.OK).order_by("pk").values_list("pk", flat=True)
    )
    return [(pk, sample) for pk in ids for sample in samples]


def done_items(run: JudgeRun) -> set[tuple]:
    verdicts = run.verdicts.filter(parse__in=FINAL)
    single = verdicts.filter(response__isnull=False).values_list("response_id", "sample")
    pairwise = verdicts.filter(first__isnull=False).values_list("first_id", "second_id", "sample")
    return set(single) | set(pairwise)


def pending_items(run: JudgeRun) -> list[tuple]:
    """Items without a final verdict (never judged, or their request failed)."""
    done = done_items(run)
    return [item for item in all_items(run) if item not in done]


@dataclass
class JudgeProgress:
    total: int
    strict: int
    fallback: int
    unparseable: int
    failed: int  # requests that failed (retried on resume)
    tokens: int

    @property
    def done(self) -> int:
        return self.strict + self.fallback

    @property
    def remaining(self) -> int:
        return max(0, self.total - self.done - self.unparseable - self.failed)

    @property
    def percent(self) -> int:
        finished = self.done + self.unparseable + self.failed
        return min(100, round(100 * finished / self.total)) if self.total else 0

    def as_dict(self) -> dict:
        return {
            **vars(self),
            "done": self.done,
            "remaining": self.remaining,
            "percent": self.percent,
        }


def total_items(run: JudgeRun) -> int:
    samples = max(1, run.judge.samples)
    if run.judge.mode == JudgeConfig.Mode.PAIRWISE:
        return len(comparison_pairs(run)) * 2 * samples
    return run.responses.filter(status=Response.Status.OK).count() * samples


def progress_of(run: JudgeRun) -> JudgeProgress:
    counts = run.verdicts.aggregate(
        **{p: Count("pk", filter=Q(parse=p)) for p in Parse.values},
    )
    run.refresh_from_db(fields=["tokens_used"])
    total = counts[Parse.STRICT] + counts[Parse.FALLBACK] + counts[Parse.FAILED]
    total += counts[Parse.ERROR]
    if not run.imported:
        total = total_items(run)
    return JudgeProgress(
        total=total,
        strict=counts[Parse.STRICT],
        fallback=counts[Parse.FALLBACK],
        unparseable=counts[Parse.FAILED],
        failed=counts[Parse.ERROR],
        tokens=run.tokens_used,
    )


# ---------------------------------------------------------------- executing


def verdict_values(mode: str, outcome) -> dict:
    """The JudgeVerdict fields for one outcome: a ChatResult (parsed) or an LLMError."""
    if isinstance(outcome, llm.ChatResult):
        parsed = parsing.parse(mode, outcome.text)
        return {
            "parse": parsed.status,
            "scores": parsed.scores,
            "winner": parsing.WINNER_AS_SEEN.get(parsed.winner, ""),
            "rationale": parsed.rationale,
            "raw_output": outcome.text,
            "error": parsed.reason,
            "prompt_tokens": outcome.prompt_tokens,
            "completion_tokens": outcome.completion_tokens,
            "latency_ms": outcome.latency_ms,
        }
    return {
        "parse": Parse.ERROR,
        "scores": {},
        "winner": "",
        "rationale": "",
        "raw_output": "",
        "error": str(outcome)[:2000],
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "latency_ms": None,
    }


def item_key(item: tuple) -> dict:
    if len(item) == 2:
        return {"response_id": item[0], "sample": item[1]}
    return {"first_id": item[0], "second_id": item[1], "sample": item[2]}


class JudgeSpec(runner.RunSpec):
    model = JudgeRun
    cancelled_message = "Cancelled; resume to judge the rest."

    def __init__(self, run: JudgeRun):
        super().__init__(run)
        self.config = run.judge
        self.mode = self.config.mode
        self.rubric = rubric_of(self.config)
        self._endpoint = self.config.endpoint() if self.config.can_call else None
        self._items: list[tuple] = []
        self._position: dict[tuple, int] = {}
        self._responses: dict[int, Response] = {}

    def pending(self):
        self._items = pending_items(self.run)
        self._position = {item: i for i, item in enumerate(self._items)}
        return self._items

    def endpoint(self, item):
        return self._endpoint

    def _response(self, pk: int, item: tuple) -> Response:
        if pk not in self._responses:
            if len(self._responses) > CACHE_LIMIT:
                self._responses.clear()
            # Load this response and those of the next items in one query.
            start = self._position.get(item, 0)
            ids = {pk}
            for later in self._items[start : start + CACHE_LIMIT // 2]:
                ids.update(later[:-1])
            queryset = Response.objects.filter(pk__in=ids).select_related("scenario__persona")
            self._responses.update({r.pk: r for r in queryset})
        return self._responses[pk]

    def messages(self, item) -> list[dict]:
        if len(item) == 2:
            response = self._response(item[0], item)
            return prompts.single_messages(self.rubric, response.scenario, response.text)
        first, second = self._response(item[0], item), self._response(item[1], item)
        return prompts.pairwise_messages(self.rubric, first.scenario, first.text, second.text)

    def store(self, item, messages, outcome) -> int:
        values = verdict_values(self.mode, outcome)
        JudgeVerdict.objects.update_or_create(run=self.run, **item_key(item), defaults=values)
        return values["prompt_tokens"] + values["completion_tokens"]

    def summary(self, skipped: int) -> tuple[bool, str]:
        progress = progress_of(self.run)
        message = (
            f"{progress.done} verdicts ({progress.strict} strict JSON, {progress.fallback} "
            f"recovered), {progress.unparseable} unparseable"
        )
        if progress.failed:
            message += f", {progress.failed} requests failed (resume to retry them)"
        if skipped:
            message += f"; {skipped} items skipped: the judge has no endpoint (base URL and model)"
        return progress.remaining == 0 and not progress.failed and not skipped, message


def execute(run_id: int) -> str:
    """Judge every pending item of the run; returns the run's final state."""
    return runner.execute(JudgeSpec, run_id)


def request_cancel(run: JudgeRun) -> None:
    runner.request_cancel(JudgeRun, run)


def stale_runs() -> list[int]:
    return runner.stale_runs(JudgeRun)


def is_going(run: JudgeRun) -> bool:
    return runner.is_going(JudgeRun, run)


# ---------------------------------------------------------------- reports


def single_summary(run: JudgeRun) -> list[dict]:
    """Per companion: parsed verdicts and the mean score of each dimension and overall."""
    means = {d: Avg(Cast(KT(f"scores__{d}"), FloatField())) for d in parsing.DIMENSIONS}
    rows = (
        run.verdicts.filter(parse__in=PARSED, response__isnull=False)
        .values("response__companion__name")
        .annotate(n=Count("pk"), **means)
        .order_by("response__companion__name")
    )
    summary = []
    for row in rows:
        scores = {d: row[d] for d in parsing.DIMENSIONS}
        summary.append(
            {
                "companion": row["response__companion__name"],
                "n": row["n"],
                "scores": scores,
                "overall": parsing.overall(scores) if None not in scores.values() else None,
            }
        )
    return summary


def pairwise_summary(run: JudgeRun) -> list[dict]:
    """Per companion: wins, ties and losses over parsed pairwise verdicts (both orders)."""
    rows = (
        run.verdicts.filter(parse__in=PARSED, first__isnull=False)
        .values("first__companion__name", "second__companion__name", "winner")
        .annotate(n=Count("pk"))
    )
    table: dict[str, dict] = {}
    for row in rows:
        first, second = row["first__companion__name"], row["second__companion__name"]
        for name in (first, second):
            table.setdefault(name, {"companion": name, "wins": 0, "ties": 0, "losses": 0})
        if row["winner"] == "tie":
            table[first]["ties"] += row["n"]
            table[second]["ties"] += row["n"]
        else:
            winner, loser = (first, second) if row["winner"] == "first" else (second, first)
            table[winner]["wins"] += row["n"]
            table[loser]["losses"] += row["n"]
    for entry in table.values():
        n = entry["wins"] + entry["ties"] + entry["losses"]
        entry["n"] = n
        entry["win_rate"] = (entry["wins"] + entry["ties"] / 2) / n if n else None
    return sorted(table.values(), key=lambda e: (-(e["win_rate"] or 0), e["companion"]))


def verdict_frames(config: JudgeConfig) -> "tuple[pd.DataFrame, pd.DataFrame]":
    """Parsed verdicts of a judge configuration (every run of it, imported ones too).

    pairwise: run, first, second, sample, winner, first_len, second_len;
    single: run, response, sample, overall, length (characters).
    """
    import pandas as pd

    verdicts = JudgeVerdict.objects.filter(run__judge=config, parse__in=PARSED)
    pairwise_rows = (
        verdicts.filter(first__isnull=False)
        .annotate(first_len=Length("first__text"), second_len=Length("second__text"))
        .values_list(
            "run_id", "first_id", "second_id", "sample", "winner", "first_len", "second_len"
        )
    )
    pairwise = pd.DataFrame(
        list(pairwise_rows),
        columns=["run", "first", "second", "sample", "winner", "first_len", "second_len"],
    )
    single_rows = (
        verdicts.filter(response__isnull=False)
        .annotate(length=Length("response__text"))
        .values_list("run_id", "response_id", "sample", "scores", "length")
    )
    single = pd.DataFrame(
        [
            (run, response, sample, parsing.overall(scores or {}), length)
            for run, response, sample, scores, length in single_rows
        ],
        columns=["run", "response", "sample", "overall", "length"],
    )
    return pairwise, single


def bias_report(config: JudgeConfig) -> dict:
    """Position-flip rate, first-position preference, longer-response preference and the
    score–length correlation of one judge configuration, with the counts of its verdicts."""
    from scoring.judges import bias

    pairwise, single = verdict_frames(config)
    report = bias.report(pairwise, single)
    counts = dict.fromkeys(Parse.values, 0)
    rows = JudgeVerdict.objects.filter(run__judge=config).values("parse").annotate(n=Count("pk"))
    counts.update({row["parse"]: row["n"] for row in rows})
    report["verdicts"] = counts
    report["judge"] = {"id": config.pk, "name": config.name, "mode": config.mode}
    return report
