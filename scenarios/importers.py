"""Scenario import: parse → validate → plan → (dry run | atomic write).

Formats: the platform's JSONL and CSV (README), the released H2HTalk reference files
(`{"response": ...}` per line, file named after its subtask, line n = question qNNN) and
ShareGPT-style `messages` (`from`/`value`). Every problem is reported with its file line and
field; if there is any, nothing is written.
"""

import csv
import io
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import PurePath

from django.db import transaction

from h2htalk import csvexport, uploads
from scenarios import validation
from scenarios.models import Persona, Revision, Scenario, Tag
from scenarios.services import (
    BACK_TO_REVIEW_NOTE,
    CONTENT_FIELDS,
    back_to_review_if_changed,
    changed_fields,
    record_revision,
    snapshot,
)
from scenarios.taxonomy import Subtask, dimension_of

FORMATS = ("jsonl", "csv", "release", "sharegpt")
NATIVE_FIELDS = {
    "external_id",
    "subtask",
    "dimension",
    "persona",
    "language",
    "history",
    "memory",
    "schedule",
    "user_message",
    "reference_response",
    "implicit_need",
    "evolving_need",
    "risk_level",
    "tags",
    "state",
    "source",
}
CSV_REQUIRED_COLUMNS = ("subtask", "user_message", "reference_response")
CSV_JSON_COLUMNS = ("history", "memory", "schedule", "persona")
PERSONA_FIELDS = ("name", "summary", "character", "language", "sap_enabled", "sap_block")
SHAREGPT_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant"}
SHAREGPT_ROLES |= {"bot": "assistant", "system": "system"}
BATCH = 500
STATE_VALUES = frozenset(Scenario.State.values)


class ImportFailed(Exception):
    def __init__(self, report: "ImportReport"):
        super().__init__(f"{len(report.errors)} error(s); nothing was written")
        self.report = report


@dataclass
class RowError:
    line: int
    field: str
    message: str

    def __str__(self):
        return f"line {self.line}, field {self.field}: {self.message}"


@dataclass
class Row:
    line: int
    data: dict  # cleaned fields, persona as a name
    content_hash: str = ""


@dataclass
class ImportReport:
    filename: str
    format: str
    rows: int = 0
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    duplicates: int = 0
    personas_created: int = 0
    back_to_review: int = 0  # approved scenarios whose content the import changes
    written: bool = False
    errors: list[RowError] = field(default_factory=list)
    duplicate_lines: list[dict] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)

    @property
    def ok(self) -> bool:
        return not self.errors


# ---------------------------------------------------------------- reading


def iter_lines(stream: io.BufferedIOBase) -> Iterator[tuple[int, str | RowError]]:
    """Yield (line number, text); a line over MAX_LINE_BYTES or not UTF-8 becomes a RowError
    (h2htalk.uploads.text_lines)."""
    for number, text in uploads.text_lines(stream):
        if isinstance(text, uploads.LineProblem):
            yield number, RowError(number, text.field, text.message)
        else:
            yield number, text


def count_lines(stream) -> int:
    """Lines in a binary stream (for a progress total), leaving it rewound."""
    return uploads.count_lines(stream)


class _CsvLineTooLong(Exception):
    def __init__(self, line: uploads.LongLine):
        super().__init__(line.message)
        self.line = line


def _csv_text_lines(stream) -> Iterator[str]:
    """The file's lines as text for csv.reader (a quoted cell may span lines)."""
    for number, raw in uploads.read_lines(stream):
        if isinstance(raw, uploads.LongLine):
            raise _CsvLineTooLong(raw)
        yield raw.decode("utf-8-sig" if number == 1 else "utf-8")


def detect_format(filename: str, first_bytes: bytes) -> str:
    name = PurePath(filename).name.lower()
    if name.endswith(".csv"):
        return "csv"
    for line in first_bytes.splitlines():
        if line.strip():
            try:
                first = json.loads(line.decode("utf-8-sig"))
            except (ValueError, RecursionError):  # (UnicodeDecodeError is a ValueError)
                return "jsonl"  # the parser reports the line properly
            if isinstance(first, dict) and set(first) == {"response"}:
                return "release"
            if isinstance(first, dict) and ("messages" in first or "conversations" in first):
                return "sharegpt"
            return "jsonl"
    return "jsonl"


def _json_problem(error: Exception) -> str:
    if isinstance(error, RecursionError):
        return "malformed JSON: nested too deeply"
    return "malformed JSON: a number has too many digits"


def _json_objects(stream, skip_blank: bool = True) -> Iterator[tuple[int, dict | RowError]]:
    for number, text in iter_lines(stream):
        if isinstance(text, RowError):
            yield number, text
            continue
        if not text.strip():
            if not skip_blank:
                yield number, RowError(number, "(line)", "empty line")
            continue
        value = validation.json_object(text)
        if isinstance(value, validation.FieldError):
            value = RowError(number, value.field, value.message)
        yield number, value


def read_native_jsonl(stream, **_) -> Iterator[tuple[int, dict | RowError]]:
    for number, value in _json_objects(stream):
        if isinstance(value, dict):
            unknown = sorted(set(value) - NATIVE_FIELDS)
            if unknown:
                yield number, RowError(number, unknown[0] or '""', "unknown field")
                continue
        yield number, value


def read_release(stream, filename: str = "", default_subtask: str = "", **_):
    """A released reference file: the subtask is the file name, line n is question qNNN."""
    subtask = PurePath(filename).name.split(".", 1)[0]
    if subtask not in Subtask.values:
        subtask = default_subtask
    for number, value in _json_objects(stream, skip_blank=False):
        if isinstance(value, RowError):
            yield number, value
            continue
        if set(value) != {"response"}:
            extra = sorted(set(value) - {"response"}) or ["response"]
            yield (
                number,
                RowError(number, extra[0] or '""', 'a release line is {"response": ...} only'),
            )
            continue
        if not subtask:
            yield (
                number,
                RowError(
                    number,
                    "subtask",
                    f"file name {filename!r} is not a subtask and no default subtask was chosen",
                ),
            )
            continue
        yield (
            number,
            {
                "external_id": f"q{number:03d}",
                "subtask": subtask,
                "reference_response": value["response"],
                "language": "zh",
                "source": f"h2htalk-release/{PurePath(filename).name}",
                "tags": ["h2htalk-release"],
            },
        )


def read_sharegpt(stream, **_):
    for number, value in _json_objects(stream):
        if isinstance(value, RowError):
            yield number, value
            continue
        key = "messages" if "messages" in value else "conversations"
        messages = value.get(key)
        if not isinstance(messages, list) or not messages:
            yield number, RowError(number, key, "must be a non-empty list of {from, value}")
            continue
        turns, problem = [], None
        for i, message in enumerate(messages):
            speaker = message.get("from") if isinstance(message, dict) else None
            if speaker not in SHAREGPT_ROLES:
                problem = RowError(number, f"{key}[{i}].from", f"{speaker!r} is not a speaker")
                break
            turns.append({"role": SHAREGPT_ROLES[speaker], "content": message.get("value")})
        if problem:
            yield number, problem
            continue
        row = {k: v for k, v in value.items() if k in NATIVE_FIELDS and k != key}
        if "id" in value and "external_id" not in row:
            row["external_id"] = str(value["id"])
        if turns[-1]["role"] == "assistant":
            row["reference_response"] = turns.pop()["content"]
        if turns and turns[-1]["role"] == "user":
            row["user_message"] = turns.pop()["content"]
        row["history"] = turns
        yield number, row


def read_csv(stream, **_):
    reader = csv.DictReader(_csv_text_lines(stream))
    try:
        header = reader.fieldnames or []
    except UnicodeDecodeError as error:
        yield 1, RowError(1, "(encoding)", f"not valid UTF-8 ({error.reason})")
        return
    except _CsvLineTooLong as error:
        yield 1, RowError(1, "(line)", error.line.message)
        return
    except csv.Error as error:
        yield 1, RowError(1, "(csv)", str(error))
        return
    missing = [column for column in CSV_REQUIRED_COLUMNS if column not in header]
    if missing:
        for column in missing:
            yield 1, RowError(1, column, "required column is missing from the header")
        return
    unknown = [column for column in header if column not in NATIVE_FIELDS]
    if unknown:
        yield 1, RowError(1, unknown[0] or '""', "unknown column")
        return
    while True:
        try:
            record = next(reader)
        except StopIteration:
            return
        except UnicodeDecodeError as error:
            yield (
                reader.line_num + 1,
                RowError(reader.line_num + 1, "(encoding)", f"not valid UTF-8 ({error.reason})"),
            )
            return
        except _CsvLineTooLong as error:
            number = error.line.number
            yield number, RowError(number, "(line)", error.line.message)
            return
        except csv.Error as error:
            yield reader.line_num, RowError(reader.line_num, "(csv)", str(error))
            return
        number = reader.line_num
        if None in record:
            yield number, RowError(number, "(csv)", "more cells than header columns")
            continue
        row, problem = {}, None
        for column, cell in record.items():
            if cell in (None, ""):
                continue
            cell = csvexport.unquote_cell(cell)  # (the export's spreadsheet-safe quote)
            if column in CSV_JSON_COLUMNS and cell.lstrip()[:1] in "[{":
                try:
                    cell = json.loads(cell)
                except json.JSONDecodeError as error:
                    problem = RowError(number, column, f"malformed JSON: {error.msg}")
                    break
                except (ValueError, RecursionError) as error:
                    problem = RowError(number, column, _json_problem(error))
                    break
            row[column] = cell
        yield number, problem or row


READERS: dict[str, Callable] = {
    "jsonl": read_native_jsonl,
    "csv": read_csv,
    "release": read_release,
    "sharegpt": read_sharegpt,
}


# ---------------------------------------------------------------- validating


def clean_persona(value, line: int, inline: dict) -> str:
    """Return the persona name; an object defines the persona (created on write if new)."""
    if value in (None, ""):
        return ""
    if isinstance(value, str):
        return validation.clean_text(value, "persona")[:120]
    if not isinstance(value, dict):
        raise validation.FieldError("persona", "must be a name or an object with a name")
    name = validation.clean_text(value.get("name"), "persona.name", required=True)
    unknown = sorted(set(value) - set(PERSONA_FIELDS))
    if unknown:
        raise validation.FieldError(f"persona.{unknown[0]}", "unknown field")
    definition = {
        "name": name[:120],
        "summary": validation.clean_text(value.get("summary"), "persona.summary")[:500],
        "character": validation.clean_text(value.get("character"), "persona.character"),
        "language": validation.clean_language(value.get("language")),
        "sap_enabled": validation.clean_bool(value.get("sap_enabled", True), "persona.sap_enabled"),
    }
    if value.get("sap_block") not in (None, ""):
        definition["sap_block"] = validation.clean_text(value["sap_block"], "persona.sap_block")
    inline.setdefault(definition["name"], definition)
    return definition["name"]


def clean_row(raw: dict, line: int, default_subtask: str, inline_personas: dict) -> dict:
    v = validation
    subtask = v.clean_subtask(raw.get("subtask") or default_subtask)
    if raw.get("dimension") not in (None, "") and raw["dimension"] != dimension_of(subtask):
        raise v.FieldError("dimension", f"{raw['dimension']!r} does not match subtask {subtask}")
    external_id = v.clean_text(raw.get("external_id"), "external_id").strip()
    if len(external_id) > 100:
        raise v.FieldError("external_id", "is longer than 100 characters")
    state = raw.get("state") or ""
    if state and (not isinstance(state, str) or state not in STATE_VALUES):
        raise v.FieldError("state", f"{state!r} is not one of {Scenario.State.values}")
    return {
        "external_id": external_id,
        "subtask": subtask,
        "persona": clean_persona(raw.get("persona"), line, inline_personas),
        "language": v.clean_language(raw.get("language")),
        "history": v.clean_history(raw.get("history")),
        "memory": v.clean_memory(raw.get("memory")),
        "schedule": v.clean_schedule(raw.get("schedule")),
        "user_message": v.clean_text(raw.get("user_message"), "user_message"),
        "reference_response": v.clean_text(raw.get("reference_response"), "reference_response"),
        "implicit_need": v.clean_bool(raw.get("implicit_need"), "implicit_need"),
        "evolving_need": v.clean_bool(raw.get("evolving_need"), "evolving_need"),
        "risk_level": v.clean_risk(raw.get("risk_level")),
        "tags": v.clean_tags(raw.get("tags")),
        "state": state,
        "source": v.clean_text(raw.get("source"), "source")[:200],
    }


# ---------------------------------------------------------------- planning and writing


@dataclass
class Plan:
    report: ImportReport
    creates: list[Row] = field(default_factory=list)
    updates: list[tuple[Row, Scenario]] = field(default_factory=list)
    inline_personas: dict = field(default_factory=dict)
    personas: dict = field(default_factory=dict)  # name -> Persona (existing)


def _scenario_from(data: dict, personas: dict, initial_state: str) -> Scenario:
    fields = {k: v for k, v in data.items() if k not in ("tags", "persona", "state")}
    scenario = Scenario(**fields, state=data["state"] or initial_state)
    scenario.persona = personas.get(data["persona"]) if data["persona"] else None
    return scenario


def build_plan(
    stream,
    filename: str,
    fmt: str = "auto",
    default_subtask: str = "",
    initial_state: str = Scenario.State.DRAFT,
    progress: Callable[[int], None] | None = None,
) -> Plan:
    if fmt == "auto":
        head = stream.read(64 * 1024)
        stream.seek(0)
        fmt = detect_format(filename, head)
    if fmt not in READERS:
        raise ValueError(f"unknown format {fmt!r}; expected one of {FORMATS}")
    report = ImportReport(filename=PurePath(filename).name, format=fmt)
    plan = Plan(report=report)
    rows: list[Row] = []
    for count, (line, item) in enumerate(
        READERS[fmt](stream, filename=filename, default_subtask=default_subtask), start=1
    ):
        is_header = fmt == "csv" and line == 1
        report.rows += not is_header
        if isinstance(item, RowError):
            report.errors.append(item)
            continue
        try:
            rows.append(Row(line, clean_row(item, line, default_subtask, plan.inline_personas)))
        except validation.FieldError as error:
            report.errors.append(RowError(line, error.field, error.message))
        if progress and count % BATCH == 0:
            progress(count)
    if progress:
        progress(report.rows)
    _match_personas(plan, rows)
    _match_existing(plan, rows, initial_state)
    return plan


def _match_personas(plan: Plan, rows: list[Row]) -> None:
    names = {row.data["persona"] for row in rows if row.data["persona"]}
    plan.personas = {p.name: p for p in Persona.objects.filter(name__in=names)}
    for row in rows:
        name = row.data["persona"]
        if name and name not in plan.personas and name not in plan.inline_personas:
            plan.report.errors.append(
                RowError(row.line, "persona", f"unknown persona {name!r}: create it first")
            )


def _match_existing(plan: Plan, rows: list[Row], initial_state: str) -> None:
    report = plan.report
    existing = {}
    keyed = [row for row in rows if row.data["external_id"]]
    for start in range(0, len(keyed), BATCH):
        chunk = keyed[start : start + BATCH]
        for scenario in (
            Scenario.objects.filter(
                subtask__in={r.data["subtask"] for r in chunk},
                external_id__in={r.data["external_id"] for r in chunk},
            )
            .select_related("persona")
            .prefetch_related("tags")
        ):
            existing[(scenario.subtask, scenario.external_id)] = scenario
    hashes = {}
    unkeyed = [row for row in rows if not row.data["external_id"]]
    preview_personas = {**{n: Persona(name=n) for n in plan.inline_personas}, **plan.personas}
    for row in unkeyed:
        scenario = _scenario_from(row.data, preview_personas, initial_state)
        scenario.refresh_derived()
        row.content_hash = scenario.content_hash
    for start in range(0, len(unkeyed), BATCH):
        chunk = {row.content_hash for row in unkeyed[start : start + BATCH]}
        for pk, digest in Scenario.objects.filter(content_hash__in=chunk).values_list(
            "pk", "content_hash"
        ):
            hashes.setdefault(digest, f"existing scenario #{pk}")

    seen_keys: dict = {}
    for row in rows:
        data = row.data
        if data["external_id"]:
            key = (data["subtask"], data["external_id"])
            if key in seen_keys:
                report.errors.append(
                    RowError(
                        row.line,
                        "external_id",
                        f"{key[0]}/{key[1]} already appears on line {seen_keys[key]}",
                    )
                )
                continue
            seen_keys[key] = row.line
            current = existing.get(key)
            if current is None:
                plan.creates.append(row)
                continue
            incoming = _incoming_snapshot(data, current, preview_personas)
            current_snapshot = snapshot(current)
            if changed_fields(current_snapshot, incoming):
                plan.updates.append((row, current))
                if _goes_back_to_review(current_snapshot, incoming):
                    report.back_to_review += 1
            else:
                report.unchanged += 1
        else:
            first = hashes.get(row.content_hash)
            if first:
                report.duplicates += 1
                report.duplicate_lines.append({"line": row.line, "duplicate_of": first})
            else:
                hashes[row.content_hash] = f"line {row.line}"
                plan.creates.append(row)
    report.created = len(plan.creates)
    report.updated = len(plan.updates)
    report.personas_created = len(set(plan.inline_personas) - set(plan.personas))


def _goes_back_to_review(current: dict, incoming: dict) -> bool:
    """As back_to_review_if_changed, on snapshots (for the preview of an import)."""
    return (
        current["state"] == Scenario.State.APPROVED
        and incoming["state"] == Scenario.State.APPROVED
        and any(current[name] != incoming[name] for name in CONTENT_FIELDS)
    )


def _incoming_snapshot(data: dict, current: Scenario, personas: dict) -> dict:
    incoming = _scenario_from(data, personas, current.state)
    return snapshot(incoming, tags=data["tags"])


def _ensure_tags(names: Iterable[str]) -> dict[str, Tag]:
    names = set(names)
    Tag.objects.bulk_create([Tag(name=n) for n in names], ignore_conflicts=True)
    return {tag.name: tag for tag in Tag.objects.filter(name__in=names)}


@transaction.atomic
def write_plan(
    plan: Plan,
    author,
    initial_state: str = Scenario.State.DRAFT,
    progress: Callable[[int], None] | None = None,
) -> ImportReport:
    report = plan.report
    if report.errors:
        raise ImportFailed(report)
    for name, definition in plan.inline_personas.items():
        if name not in plan.personas:
            plan.personas[name] = Persona.objects.create(**definition)
    tags = _ensure_tags(t for row in plan.creates for t in row.data["tags"])
    tags |= _ensure_tags(t for row, _ in plan.updates for t in row.data["tags"])
    done = 0
    for start in range(0, len(plan.creates), BATCH):
        chunk = plan.creates[start : start + BATCH]
        scenarios = [_scenario_from(r.data, plan.personas, initial_state) for r in chunk]
        for scenario in scenarios:
            scenario.created_by = author
            scenario.refresh_derived()
        Scenario.objects.bulk_create(scenarios)
        Through = Scenario.tags.through
        Through.objects.bulk_create(
            [
                Through(scenario_id=s.pk, tag_id=tags[name].pk)
                for s, r in zip(scenarios, chunk, strict=True)
                for name in r.data["tags"]
            ]
        )
        Revision.objects.bulk_create(
            [
                Revision(
                    scenario=s,
                    number=1,
                    author=author,
                    action=Revision.Action.IMPORTED,
                    note=f"imported from {report.filename} line {r.line}",
                    snapshot=snapshot(s, tags=r.data["tags"]),
                )
                for s, r in zip(scenarios, chunk, strict=True)
            ]
        )
        done += len(chunk)
        if progress:
            progress(done)
    for row, scenario in plan.updates:
        before = snapshot(scenario)
        for name, value in row.data.items():
            if name not in ("tags", "persona", "state"):
                setattr(scenario, name, value)
        scenario.persona = plan.personas.get(row.data["persona"]) if row.data["persona"] else None
        scenario.state = row.data["state"] or scenario.state
        sent_back = back_to_review_if_changed(scenario, before)
        scenario.save()
        scenario.tags.set([tags[name] for name in row.data["tags"]])
        record_revision(
            scenario,
            author,
            Revision.Action.IMPORTED,
            before,
            note=f"updated from {report.filename} line {row.line}"
            + (f"; {BACK_TO_REVIEW_NOTE}" if sent_back else ""),
        )
        done += 1
        if progress:
            progress(done)
    report.written = True
    return report


def import_file(path_or_stream, filename: str, author=None, dry_run: bool = False, **options):
    """Plan and (unless dry_run) write one file. Raises ImportFailed when any row is bad."""
    progress = options.pop("progress", None)
    initial_state = options.get("initial_state", Scenario.State.DRAFT)
    stream = open(path_or_stream, "rb") if isinstance(path_or_stream, str) else path_or_stream  # noqa: SIM115
    try:
        plan = build_plan(stream, filename, progress=progress, **options)
    finally:
        if isinstance(path_or_stream, str):
            stream.close()
    if dry_run:
        return plan.report
    return write_plan(plan, author, initial_state=initial_state, progress=progress)
