"""Import judge verdicts from JSONL (judges run elsewhere) into an imported JudgeRun.

One JSON object per line. Fields:

| field | single | pairwise | notes |
|---|---|---|---|
| `mode` | `"single"` | `"pairwise"` | required |
| `subtask`, `external_id` | required | required | the scenario |
| `run` | required | required | name of the response run holding the response(s) |
| `first_run`, `second_run` | – | optional | when the two responses come from different runs |
| `companion` | required | – | whose response was graded |
| `first`, `second` | – | required | companions, in the order the judge saw them |
| `sample` | optional | optional | whole number ≥ 0, default 0 (repeated verdicts per item) |
| `scores` | see below | – | `{empathy, fluency, memory_use, planning, persona_consistency, safety}`: whole numbers 1–10 |
| `winner` | – | see below | `"first"`, `"second"` or `"tie"` (as the judge saw them) |
| `rationale` | optional | optional | text |
| `raw_output` | optional | optional | the judge's raw text (kept) |
| `parse` | optional | optional | `"strict"` (default) or `"fallback"`: how the values were obtained |
| `prompt_tokens`, `completion_tokens`, `latency_ms` | optional | optional | whole numbers |

`scores` (single) / `winner` (pairwise) are required unless `raw_output` is given: then the
raw output goes through this platform's parser (strict, tolerant fallback, or failed: an
unparseable output is imported as such and counted). Unknown fields are errors.

All lines go into one JudgeRun (`imported=True`) of one judge configuration, both named on
the upload (a new configuration is created without an endpoint). The import is checked first
(every problem with its line and field) and then written all or nothing; a verdict is keyed
like a judged one (run, response, sample) or (run, first, second, sample), so importing the
same file again changes nothing and a changed line updates its verdict. The run's JSONL export
(`judges:run_export`) writes exactly this schema.
"""

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from django.db import transaction
from django.utils import timezone

from scenarios import validation
from scenarios.models import GenerationRun, Response
from scoring.judges import parsing
from scoring.models import JudgeConfig, JudgeRun, JudgeVerdict

MAX_ERRORS = 500
MAX_RAW_CHARS = 200_000
MAX_SAMPLE = 999
MAX_INT = 2**31 - 1
BATCH = 1000
PROGRESS_EVERY = 500
COMMON = {
    "mode",
    "subtask",
    "external_id",
    "run",
    "sample",
    "rationale",
    "raw_output",
    "parse",
    "prompt_tokens",
    "completion_tokens",
    "latency_ms",
}
FIELDS = {
    "single": COMMON | {"companion", "scores"},
    "pairwise": COMMON | {"first", "second", "winner", "first_run", "second_run"},
}
# The fields a verdict carries besides its key; the API and the JSONL export show the same.
VERDICT_VALUE_FIELDS = [
    "parse",
    "scores",
    "winner",
    "rationale",
    "raw_output",
    "error",
    "prompt_tokens",
    "completion_tokens",
    "latency_ms",
]
SEEN_WINNER = {"first": "1", "second": "2", "tie": "tie"}


class JudgeImportFailed(Exception):
    def __init__(self, report: "ImportReport"):
        super().__init__(f"{report.error_count} error(s); nothing was written")
        self.report = report


@dataclass
class ImportReport:
    filename: str
    judge: str
    run: str
    judge_exists: bool = False
    run_exists: bool = False
    lines: int = 0
    rows: int = 0
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    modes: dict = field(default_factory=dict)
    parse: dict = field(default_factory=dict)
    written: bool = False
    error_count: int = 0
    errors: list = field(default_factory=list)  # {"line", "field", "message"}, the first MAX_ERRORS

    @property
    def ok(self) -> bool:
        return not self.error_count

    def add_error(self, line: int, field_name: str, message: str) -> None:
        self.error_count += 1
        if len(self.errors) < MAX_ERRORS:
            self.errors.append({"line": line, "field": field_name, "message": message})

    def as_dict(self) -> dict:
        return asdict(self)


class _Lookup:
    """(response run, subtask, external id, companion) -> response id, loaded per run name."""

    def __init__(self):
        self.runs: dict[str, dict | None] = {}

    def response(self, run, subtask, external_id, companion, where, run_field="run") -> int:
        if run not in self.runs:
            rows = Response.objects.filter(run__name=run).values_list(
                "scenario__subtask", "scenario__external_id", "companion__name", "pk"
            )
            found = {(s, e, c): pk for s, e, c, pk in rows}
            exists = bool(found) or GenerationRun.objects.filter(name=run).exists()
            self.runs[run] = found if exists else None
        responses = self.runs[run]
        if responses is None:
            raise validation.FieldError(run_field, f"no response run named {run!r}")
        pk = responses.get((subtask, external_id, companion))
        if pk is None:
            raise validation.FieldError(
                where, f"run {run!r} has no response of {companion!r} to {subtask}/{external_id}"
            )
        return pk


def _text(value, name: str, required: bool = False, limit: int = validation.MAX_TEXT_CHARS):
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise validation.FieldError(name, f"must be text, got {type(value).__name__}")
    if "\x00" in value:
        raise validation.FieldError(name, "contains a NUL character")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as error:
            raise validation.FieldError(name, "contains a lone surrogate") from error
    if len(value) > limit:
        raise validation.FieldError(name, f"is {len(value):,} characters; the limit is {limit:,}")
    if required and not value.strip():
        raise validation.FieldError(name, "is required")
    return value


def _count(value, name: str, nullable: bool = False, limit: int = MAX_INT):
    if value is None:
        return None if nullable else 0
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= limit:
        raise validation.FieldError(name, f"{value!r} is not a whole number from 0 to {limit}")
    return value


def _scores(value) -> dict:
    if not isinstance(value, dict):
        raise validation.FieldError("scores", "must be an object of the six dimensions")
    unknown = sorted(set(value) - set(parsing.DIMENSIONS))
    if unknown:
        raise validation.FieldError(
            f"scores.{unknown[0]}", f"unknown dimension; expected {list(parsing.DIMENSIONS)}"
        )
    missing = [d for d in parsing.DIMENSIONS if d not in value]
    if missing:
        raise validation.FieldError(f"scores.{missing[0]}", "is missing")
    for dimension in parsing.DIMENSIONS:
        score = value[dimension]
        if isinstance(score, bool) or not isinstance(score, int) or not 1 <= score <= 10:
            raise validation.FieldError(
                f"scores.{dimension}", f"{score!r} is not a whole number 1–10"
            )
    return {d: value[d] for d in parsing.DIMENSIONS}


def clean_line(value: dict, lookup: _Lookup) -> tuple[str, dict, dict]:
    """(mode, key fields, value fields) of one line; raises FieldError."""
    mode = value.get("mode")
    if not isinstance(mode, str) or mode not in FIELDS:
        raise validation.FieldError("mode", f"{mode!r} is not 'single' or 'pairwise'")
    unknown = sorted(set(value) - FIELDS[mode])
    if unknown:
        raise validation.FieldError(unknown[0] or '""', f"unknown field for mode {mode}")
    subtask = validation.clean_subtask(value.get("subtask"))
    external_id = _text(value.get("external_id"), "external_id", required=True).strip()
    run = _text(value.get("run"), "run", required=True).strip()
    sample = _count(value.get("sample"), "sample", limit=MAX_SAMPLE)
    values = _verdict_values(mode, value)
    where = (run, subtask, external_id)
    if mode == "single":
        companion = _text(value.get("companion"), "companion", required=True).strip()
        key = {"response_id": lookup.response(*where, companion, "companion"), "sample": sample}
    else:
        key = {**_pair_key(value, where, lookup), "sample": sample}
    return mode, key, values


def _verdict_values(mode: str, value: dict) -> dict:
    """The verdict fields of one line: given scores / winner, or parsed from its raw output."""
    raw = _text(value.get("raw_output"), "raw_output", limit=MAX_RAW_CHARS)
    rationale = _text(value.get("rationale"), "rationale")
    parse = value.get("parse")
    if parse not in (None, "strict", "fallback", "failed"):
        raise validation.FieldError("parse", f"{parse!r} is not 'strict', 'fallback' or 'failed'")
    values = {
        "rationale": rationale,
        "raw_output": raw,
        "error": "",
        "prompt_tokens": _count(value.get("prompt_tokens"), "prompt_tokens"),
        "completion_tokens": _count(value.get("completion_tokens"), "completion_tokens"),
        "latency_ms": _count(value.get("latency_ms"), "latency_ms", nullable=True),
        "scores": {},
        "winner": "",
    }
    given = "scores" if mode == "single" else "winner"
    if parse == "failed":
        if value.get(given) is not None:
            raise validation.FieldError(given, "must be left out when parse is 'failed'")
        values.update(parse="failed", error=parsing.parse(mode, raw).reason or "unparseable")
    elif value.get(given) is None:
        if parse is not None:
            raise validation.FieldError("parse", f"{parse!r} needs {given}")
        if not raw.strip():
            raise validation.FieldError(given, "is required (or give raw_output to parse)")
        parsed = parsing.parse(mode, raw)
        values.update(
            parse=parsed.status,
            scores=parsed.scores,
            winner=parsing.WINNER_AS_SEEN.get(parsed.winner, ""),
            error=parsed.reason,
        )
        if parsed.ok and not rationale:
            values["rationale"] = parsed.rationale
    elif mode == "single":
        values.update(parse=parse or "strict", scores=_scores(value["scores"]))
    else:
        winner = value["winner"]
        if not isinstance(winner, str) or winner not in SEEN_WINNER:
            raise validation.FieldError("winner", f"{winner!r} is not 'first', 'second' or 'tie'")
        values.update(parse=parse or "strict", winner=winner)
    return values


def _pair_key(value: dict, where: tuple, lookup: _Lookup) -> dict:
    """first_id / second_id of a pairwise line; each response may come from its own run."""
    run, subtask, external_id = where
    first = _text(value.get("first"), "first", required=True).strip()
    second = _text(value.get("second"), "second", required=True).strip()
    first_run = _text(value.get("first_run"), "first_run").strip() or run
    second_run = _text(value.get("second_run"), "second_run").strip() or run
    if first == second and first_run == second_run:
        raise validation.FieldError("second", "is the same response as first")
    return {
        f"{side}_id": lookup.response(
            side_run,
            subtask,
            external_id,
            companion,
            side,
            f"{side}_run" if value.get(f"{side}_run") else "run",
        )
        for side, side_run, companion in (
            ("first", first_run, first),
            ("second", second_run, second),
        )
    }


def _key_tuple(key: dict) -> tuple:
    if "response_id" in key:
        return ("s", key["response_id"], key["sample"])
    return ("p", key["first_id"], key["second_id"], key["sample"])


def _digest(values: dict) -> str:
    text = json.dumps([values[f] for f in VERDICT_VALUE_FIELDS], sort_keys=True, ensure_ascii=False)
    return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()


def _existing(run: JudgeRun | None) -> dict[tuple, tuple[int, str]]:
    if run is None:
        return {}
    existing = {}
    for verdict in run.verdicts.only(
        "pk", "response_id", "first_id", "second_id", "sample", *VERDICT_VALUE_FIELDS
    ):
        if verdict.response_id:
            key = {"response_id": verdict.response_id, "sample": verdict.sample}
        else:
            key = {
                "first_id": verdict.first_id,
                "second_id": verdict.second_id,
                "sample": verdict.sample,
            }
        values = {f: getattr(verdict, f) for f in VERDICT_VALUE_FIELDS}
        existing[_key_tuple(key)] = (verdict.pk, _digest(values))
    return existing


def _target_run(report: ImportReport, judge_name: str, run_name: str) -> JudgeRun | None:
    """The imported run the verdicts go into (None: new); problems go into the report."""
    for field_name, name in (("(judge)", judge_name), ("(run)", run_name)):
        try:
            _text(name, field_name)
        except validation.FieldError as error:  # NUL or a lone surrogate: no query can hold it
            report.add_error(0, field_name, f"the name {error.message}")
    if report.error_count:
        return None
    config = JudgeConfig.objects.filter(name=judge_name).first()
    run = JudgeRun.objects.filter(name=run_name).first()
    report.judge_exists, report.run_exists = config is not None, run is not None
    if not judge_name.strip():
        report.add_error(0, "(judge)", "name the judge configuration the verdicts belong to")
    if not run_name.strip():
        report.add_error(0, "(run)", "name the judge run the verdicts go into")
    if run is not None and not run.imported:
        report.add_error(
            0, "(run)", f"judge run {run_name!r} was judged here, not imported: choose another name"
        )
    elif run is not None and run.judge.name != judge_name:
        report.add_error(
            0, "(run)", f"judge run {run_name!r} belongs to the judge {run.judge.name!r}"
        )
    return run


def _pass(stream, report: ImportReport, existing, write, progress) -> None:
    """Read every line once: check it, count it, and hand good rows to `write` (if any)."""
    lookup = _Lookup()
    seen: dict[tuple, int] = {}
    stream.seek(0)
    for number, value in validation.json_lines(stream):
        report.lines = number
        if progress and number % PROGRESS_EVERY == 0:
            progress(number)
        if isinstance(value, validation.FieldError):
            report.add_error(number, value.field, value.message)
            continue
        report.rows += 1
        try:
            mode, key, values = clean_line(value, lookup)
        except validation.FieldError as error:
            report.add_error(number, error.field, error.message)
            continue
        identity = _key_tuple(key)
        if identity in seen:
            report.add_error(
                number,
                "sample",
                f"the same verdict (response(s) and sample) as line {seen[identity]}",
            )
            continue
        seen[identity] = number
        report.modes[mode] = report.modes.get(mode, 0) + 1
        report.parse[values["parse"]] = report.parse.get(values["parse"], 0) + 1
        known = existing.get(identity)
        if known is None:
            report.created += 1
            kind = "create"
        elif known[1] != _digest(values):
            report.updated += 1
            kind = "update"
        else:
            report.unchanged += 1
            kind = "same"
        if write is not None:
            write(kind, known[0] if known else None, key, values)


def import_verdicts(
    stream,
    filename: str,
    judge_name: str,
    run_name: str = "",
    *,
    dry_run: bool = True,
    user=None,
    progress: Callable[[int], None] | None = None,
) -> ImportReport:
    """Check (dry run) or write a JSONL file of verdicts; raises JudgeImportFailed on errors
    when writing (nothing written). A dry run returns the report, errors included."""
    judge_name = judge_name.strip()[:100]
    run_name = (run_name.strip() or filename.rsplit(".", 1)[0] or "imported verdicts")[:120]
    report = ImportReport(filename=filename, judge=judge_name, run=run_name)
    run = _target_run(report, judge_name, run_name)
    if report.error_count:
        return report
    _pass(stream, report, _existing(run), None, progress)
    if report.rows == 0 and not report.error_count:
        report.add_error(0, "(file)", "no verdicts in the file")
    if dry_run or report.error_count:
        return report
    _write(stream, report, judge_name, run_name, user, progress)
    return report


def _write(stream, report: ImportReport, judge_name, run_name, user, progress) -> None:
    checked = report
    with transaction.atomic():
        config, run = (
            JudgeConfig.objects.select_for_update().filter(name=judge_name).first(),
            JudgeRun.objects.select_for_update().filter(name=run_name).first(),
        )
        if config is None:
            mode = (
                "pairwise"
                if checked.modes.get("pairwise", 0) > checked.modes.get("single", 0)
                else "single"
            )
            config = JudgeConfig.objects.create(
                name=judge_name,
                mode=mode,
                rubric="(Imported: this judge ran elsewhere; its verdicts came from a file.)",
            )
        if run is None:
            run = JudgeRun.objects.create(
                name=run_name,
                judge=config,
                imported=True,
                created_by=user,
                state=JudgeRun.State.COMPLETED,
            )
        fresh = ImportReport(filename=report.filename, judge=judge_name, run=run_name)
        fresh.judge_exists, fresh.run_exists = report.judge_exists, report.run_exists
        creates, updates = [], []

        def flush():
            JudgeVerdict.objects.bulk_create(creates, batch_size=BATCH)
            JudgeVerdict.objects.bulk_update(updates, VERDICT_VALUE_FIELDS, batch_size=BATCH)
            creates.clear()
            updates.clear()

        def write(kind, pk, key, values):
            if kind == "create":
                creates.append(JudgeVerdict(run=run, **key, **values))
            elif kind == "update":
                updates.append(JudgeVerdict(pk=pk, run=run, **key, **values))
            if len(creates) + len(updates) >= BATCH:
                flush()

        _pass(stream, fresh, _existing(run), write, progress)
        if fresh.error_count:  # the database changed since the check
            report.errors, report.error_count = fresh.errors, fresh.error_count
            raise JudgeImportFailed(report)
        flush()
        total = run.verdicts.count()
        JudgeRun.objects.filter(pk=run.pk).update(
            state=JudgeRun.State.COMPLETED,
            message=f"{total} verdicts imported (last file: {report.filename})",
            finished_at=timezone.now(),
        )
        for name in ("created", "updated", "unchanged", "rows", "modes", "parse"):
            setattr(report, name, getattr(fresh, name))
        report.written = True


# ---------------------------------------------------------------- export


def export_lines(run: JudgeRun):
    """The run's verdicts as JSONL lines in the import schema (failed requests are left out:
    they have no output)."""
    verdicts = (
        run.verdicts.exclude(parse=JudgeVerdict.Parse.ERROR)
        .select_related(
            "response__scenario",
            "response__companion",
            "response__run",
            "first__scenario",
            "first__companion",
            "first__run",
            "second__companion",
            "second__run",
        )
        .order_by("pk")
    )
    for verdict in verdicts.iterator(chunk_size=1000):
        if verdict.response_id:
            response = verdict.response
            row = {
                "mode": "single",
                "subtask": response.scenario.subtask,
                "external_id": response.scenario.external_id,
                "run": response.run.name,
                "companion": response.companion.name,
            }
            if verdict.parse != JudgeVerdict.Parse.FAILED:
                row["scores"] = verdict.scores
        else:
            first, second = verdict.first, verdict.second
            row = {
                "mode": "pairwise",
                "subtask": first.scenario.subtask,
                "external_id": first.scenario.external_id,
                "run": first.run.name,
                "first": first.companion.name,
                "second": second.companion.name,
            }
            if second.run.name != first.run.name:
                row["second_run"] = second.run.name
            if verdict.parse != JudgeVerdict.Parse.FAILED:
                row["winner"] = verdict.winner
        if verdict.parse in (JudgeVerdict.Parse.FALLBACK, JudgeVerdict.Parse.FAILED):
            row["parse"] = verdict.parse
        row["sample"] = verdict.sample
        if verdict.rationale:
            row["rationale"] = verdict.rationale
        if verdict.raw_output:
            row["raw_output"] = verdict.raw_output
        for name in ("prompt_tokens", "completion_tokens", "latency_ms"):
            if getattr(verdict, name):
                row[name] = getattr(verdict, name)
        yield json.dumps(row, ensure_ascii=False) + "\n"
