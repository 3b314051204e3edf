"""Response import: companion outputs from files into one GenerationRun of kind "import".

Formats:

- platform JSONL, one object per line: `{"subtask", "external_id", "companion", "text",
  "prompt_tokens"?, "completion_tokens"?, "latency_ms"?, "finish_reason"?}`;
- the released H2HTalk evaluator layout: one folder per companion (the folder name), inside it
  `<subtask>.jsonl` whose physical line n is question `q{n:03d}` (blank lines are skipped but
  counted, as the evaluator does), each line `{"response"}`, `{"answer"}` or `{"messages"}` (the
  first gpt/assistant turn), or `<subtask>.json` holding one object `{"q001": "text", ...}`. The
  input is a directory or a .zip of such folders, possibly under one top folder.

Benchmark scale is 4,650 scenarios × 50 companions, so the input is streamed twice and never
held in memory: a preview pass validates and counts, and the write pass re-reads it inside one
transaction, upserting in batches. Between and during the passes only small, fixed-size tables
are kept: the (subtask, external id) → scenario lookup and, per companion, two arrays with one
8-byte slot per scenario (where each scenario was first answered in this input, to report
duplicates; and a 63-bit digest of the answer already stored in the run, to tell new, changed
and unchanged rows apart). Every problem is reported with its file, line and field; if there is
any, nothing is written.
"""

import codecs
import hashlib
import json
import os
import re
import zipfile
import zlib
from array import array
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, field
from json.decoder import scanstring
from pathlib import Path, PurePath, PurePosixPath
from typing import NamedTuple

from django.db import transaction
from django.db.models.functions import MD5
from django.utils import timezone

from h2htalk import uploads
from scenarios import validation
from scenarios.importers import ImportFailed, RowError
from scenarios.models import CompanionModel, GenerationRun, Response, Scenario
from scenarios.taxonomy import Subtask

FORMATS = ("jsonl", "evaluator")
PLATFORM_FIELDS = {
    "subtask",
    "external_id",
    "companion",
    "text",
    "prompt_tokens",
    "completion_tokens",
    "latency_ms",
    "finish_reason",
}
ASSISTANT_SPEAKERS = ("gpt", "assistant")
SUBTASKS = frozenset(Subtask.values)
BATCH = 2000  # responses per upsert (Django splits further where the backend needs it)
PROGRESS_EVERY = 2000  # lines between progress callbacks
MAX_ERRORS = 1000  # errors kept in the report; error_count has them all
MAX_COMPANIONS = 200  # per import: each costs 16 bytes per scenario of memory
MAX_JSON_VALUE_CHARS = 6 * validation.MAX_TEXT_CHARS + 4096  # \uXXXX escapes take six
MAX_INT = 2**31 - 1
CHUNK = 1 << 16
UNIQUE_FIELDS = ["run", "scenario", "companion"]
UPDATE_FIELDS = [
    "status",
    "text",
    "prompt_messages",
    "latency_ms",
    "prompt_tokens",
    "completion_tokens",
    "finish_reason",
    "error",
    "attempts",
    "updated_at",
]
NO_META = (0, 0, None, "")  # prompt_tokens, completion_tokens, latency_ms, finish_reason
# What reading a member of a damaged or unsupported archive raises (a bad local header or CRC,
# corrupt deflate data, a truncation, an unknown compression method, encryption).
ARCHIVE_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError)
# (uploads.ArchiveRefused, more bytes out than MAX_ARCHIVE_BYTES, ends the pass: see _scan.)


class ResponseImportFailed(ImportFailed):
    def __init__(self, report: "ResponseImportReport"):
        Exception.__init__(self, f"{report.error_count} error(s); nothing was written")
        self.report = report


@dataclass
class ResponseError(RowError):
    """A RowError that also names the file (its path inside the archive or directory)."""

    file: str = ""

    def __str__(self):
        where = f"{self.file}, " if self.file else ""
        if self.line:
            where += f"line {self.line}, "
        return f"{where}field {self.field}: {self.message}"


@dataclass
class ResponseImportReport:
    filename: str
    format: str
    run: str
    run_exists: bool = False
    files: int = 0
    lines: int = 0  # physical lines read (the unit of progress)
    rows: int = 0  # responses found, good or bad
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    companions_created: int = 0
    new_companions: list[str] = field(default_factory=list)
    companions: dict[str, int] = field(default_factory=dict)  # rows per companion
    subtasks: dict[str, int] = field(default_factory=dict)  # rows per subtask
    written: bool = False
    error_count: int = 0
    errors: list[ResponseError] = field(default_factory=list)  # the first MAX_ERRORS

    def as_dict(self) -> dict:
        return asdict(self)

    @property
    def ok(self) -> bool:
        return not self.error_count

    def add_error(self, line: int, field_name: str, message: str, file: str = "") -> None:
        self.error_count += 1
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(ResponseError(line, field_name, message, file))


class Item(NamedTuple):
    """One response as read from the input, before the scenario and companion are looked up."""

    subtask: str
    external_id: str
    companion: str
    text: str
    meta: tuple  # NO_META's shape
    id_field: str  # the field an unknown or repeated question is reported on


# ---------------------------------------------------------------- the input


@dataclass(frozen=True)
class InputFile:
    path: str  # shown in errors: relative to the directory, or inside the archive
    kind: str  # "platform", "jsonl" or "json"
    companion: str = ""
    subtask: str = ""


def _ignored(parts: tuple[str, ...]) -> bool:
    """Hidden files and macOS archive litter (.DS_Store, __MACOSX/) are not inputs."""
    return any(part.startswith(".") or part == "__MACOSX" for part in parts)


def _layout(paths: list[str]) -> tuple[list[InputFile], list[ResponseError]]:
    """Model folders holding subtask files, possibly all under one top folder."""
    files, errors = [], []
    entries = [(path, PurePosixPath(path).parts) for path in sorted(paths)]
    entries = [(path, parts) for path, parts in entries if not _ignored(parts)]
    if not entries:
        message = "no response files: expected <model folder>/<subtask>.jsonl"
        return [], [ResponseError(0, "(file)", message)]
    top = {parts[0] for _, parts in entries}
    # One top folder holding model folders (not one model folder holding subtask files).
    strip = len(top) == 1 and any(len(parts) >= 3 for _, parts in entries)
    for path, parts in entries:
        parts = parts[1:] if strip else parts
        if len(parts) != 2:
            message = "expected <model folder>/<subtask>.jsonl (or .json), one folder per model"
            errors.append(ResponseError(0, "(file)", message, path))
            continue
        companion, name = parts
        subtask, _, extension = name.rpartition(".")
        if extension not in ("jsonl", "json") or subtask not in SUBTASKS:
            message = (
                f"{name!r} is not a subtask file: expected <subtask>.jsonl or <subtask>.json "
                f"with a subtask of {Subtask.values}"
            )
            errors.append(ResponseError(0, "(file)", message, path))
            continue
        try:
            companion = _clean_companion(companion)
        except validation.FieldError as error:
            errors.append(ResponseError(0, "(folder)", f"model name {error.message}", path))
            continue
        files.append(InputFile(path, extension, companion, subtask))
    return files, errors


class Input:
    """Where the responses come from: a directory, a .zip or a .jsonl, as a path or a stream.

    Nothing is kept open between passes: each pass opens what it reads (a stream is rewound,
    so it must be seekable).
    """

    def __init__(self, source, filename: str | None = None):
        if isinstance(source, str | os.PathLike):
            self.path, self.stream = Path(source), None
            name = filename or self.path.resolve().name  # (resolved: "." has no name)
        else:
            self.path, self.stream = None, source
            name = filename or getattr(source, "name", "") or "upload"
        self.filename = PurePath(str(name)).name or str(name)
        if self.path is not None and self.path.is_dir():
            self.kind, self.format = "dir", "evaluator"
        elif self.filename.lower().endswith(".zip"):
            self.kind, self.format = "zip", "evaluator"
        else:
            self.kind, self.format = "file", "jsonl"
        self._layout = None

    def layout(self) -> tuple[list[InputFile], list[ResponseError]]:
        if self._layout is None:
            self._layout = self._read_layout()
        return self._layout

    def _read_layout(self):
        if self.kind == "file":
            if not self.filename.lower().endswith(".jsonl"):
                message = "expected a directory or .zip in the evaluator layout, or a .jsonl file"
                return [], [ResponseError(0, "(file)", message, self.filename)]
            return [InputFile(self.filename, "platform")], []
        if self.kind == "dir":
            paths = []
            for root, dirs, names in os.walk(self.path):
                dirs[:] = sorted(d for d in dirs if not _ignored((d,)))
                relative = Path(root).relative_to(self.path)
                paths += [(relative / name).as_posix() for name in names]
            return _layout(paths)
        try:
            with self._zip() as archive:
                # Refused before anything in it is read: size, entries, compression ratio.
                problems = uploads.zip_problems(archive)
                paths = [info.filename for info in archive.infolist() if not info.is_dir()]
        except zipfile.BadZipFile as error:
            return [], [ResponseError(0, "(zip)", f"not a valid zip archive: {error}", "")]
        if problems:
            return [], [ResponseError(0, "(zip)", problem, self.filename) for problem in problems]
        return _layout(paths)

    def _zip(self) -> zipfile.ZipFile:
        if self.stream is not None:
            self.stream.seek(0)
            return zipfile.ZipFile(self.stream)
        return zipfile.ZipFile(self.path)

    @contextmanager
    def opener(self) -> Iterator[Callable]:
        """For one pass: a function opening an InputFile as a binary stream (a context manager)."""
        if not self.layout()[0]:
            yield None  # nothing to read (a broken archive, say): open nothing
        elif self.kind == "zip":
            budget = uploads.ArchiveBudget()  # the headers may lie: count what comes out
            with self._zip() as archive:
                yield lambda item: budget.wrap(archive.open(item.path))
        elif self.kind == "dir":
            yield lambda item: open(self.path / item.path, "rb")  # noqa: SIM115
        elif self.stream is not None:

            def rewound(item):
                self.stream.seek(0)
                return nullcontext(self.stream)

            yield rewound
        else:
            yield lambda item: open(self.path, "rb")  # noqa: SIM115

    def default_run_name(self) -> str:
        stem = self.filename if self.kind == "dir" else self.filename.rsplit(".", 1)[0]
        return (stem or "imported responses")[:120]


def count_input_lines(source, filename: str | None = None) -> int:
    """Physical lines in every input file (the progress total), reading in chunks."""
    source = source if isinstance(source, Input) else Input(source, filename)
    files, _ = source.layout()
    total = 0
    with source.opener() as open_file:
        for item in files:
            counter = _FileState()
            try:
                with open_file(item) as stream:
                    for chunk in iter(lambda stream=stream: stream.read(1 << 20), b""):
                        counter.feed(chunk)
            except ARCHIVE_ERRORS as error:
                if source.kind != "zip" or isinstance(error, RecursionError):
                    raise
                # (the scan reports the member)
            except uploads.ArchiveRefused:
                total += counter.lines
                break  # (the scan reports it)
            total += counter.lines
    if source.stream is not None:
        source.stream.seek(0)
    return total


# ---------------------------------------------------------------- reading


class _FileState:
    """Counts a file's physical lines and feeds its bytes to the input fingerprint."""

    def __init__(self, fingerprint=None):
        self.fingerprint = fingerprint
        self.newlines = 0
        self.last = b"\n"

    def feed(self, raw: bytes) -> None:
        if raw:
            self.newlines += raw.count(b"\n")
            self.last = raw[-1:]
            if self.fingerprint is not None:
                self.fingerprint.update(raw)

    @property
    def lines(self) -> int:
        return self.newlines + (self.last != b"\n")


def _clean_companion(value) -> str:
    name = validation.clean_text(value, "companion", required=True).strip()
    if len(name) > 100:
        raise validation.FieldError("companion", "is longer than 100 characters")
    return name


def _clean_count(value, name: str, nullable: bool = False) -> int | None:
    if value is None:
        return None if nullable else 0
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    elif isinstance(value, float) and nullable and value >= 0:
        value = round(value)  # latencies are often measured in fractional milliseconds
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_INT:
        raise validation.FieldError(name, f"{value!r} is not a whole number from 0 to {MAX_INT}")
    return value


def _clean_meta(value: dict) -> tuple:
    finish_reason = validation.clean_text(value.get("finish_reason"), "finish_reason")
    if len(finish_reason) > 30:
        raise validation.FieldError("finish_reason", "is longer than 30 characters")
    return (
        _clean_count(value.get("prompt_tokens"), "prompt_tokens"),
        _clean_count(value.get("completion_tokens"), "completion_tokens"),
        _clean_count(value.get("latency_ms"), "latency_ms", nullable=True),
        finish_reason,
    )


def read_platform(stream, item: InputFile, state) -> Iterator[tuple[int, Item | Exception]]:
    for number, value in validation.json_lines(stream, feed=state.feed):
        if isinstance(value, validation.FieldError):
            yield number, value
            continue
        unknown = sorted(set(value) - PLATFORM_FIELDS)
        if unknown:
            yield number, validation.FieldError(unknown[0] or '""', "unknown field")
            continue
        try:
            subtask = value.get("subtask")
            # (SUBTASKS: Subtask.values is rebuilt on every access; a list is unhashable)
            if not isinstance(subtask, str) or subtask not in SUBTASKS:
                subtask = validation.clean_subtask(subtask)
            external_id = validation.clean_text(
                value.get("external_id"), "external_id", required=True
            ).strip()
            if len(external_id) > 100:
                raise validation.FieldError("external_id", "is longer than 100 characters")
            companion = _clean_companion(value.get("companion"))
            text = validation.clean_text(value.get("text"), "text", required=True)
            meta = _clean_meta(value)
        except validation.FieldError as error:
            yield number, error
            continue
        yield number, Item(subtask, external_id, companion, text, meta, "external_id")


def _evaluator_text(value, where: str = "") -> tuple[str, object]:
    """(field, text) of one evaluator answer, in the released evaluator's order of keys."""
    if isinstance(value, str):
        return where, value
    if not isinstance(value, dict):
        raise validation.FieldError(where, "must be text or an object with a response")
    prefix = f"{where}." if where else ""
    if "response" in value:
        return f"{prefix}response", value["response"]
    if "answer" in value:
        return f"{prefix}answer", value["answer"]
    if "messages" in value:
        messages = value["messages"]
        if not isinstance(messages, list):
            raise validation.FieldError(f"{prefix}messages", "must be a list of {from, value}")
        for i, message in enumerate(messages):
            if isinstance(message, dict) and message.get("from") in ASSISTANT_SPEAKERS:
                return f"{prefix}messages[{i}].value", message.get("value")
        raise validation.FieldError(f"{prefix}messages", "has no gpt/assistant message")
    raise validation.FieldError(
        f"{prefix}response", 'is missing: expected "response", "answer" or "messages"'
    )


def read_evaluator_jsonl(stream, item: InputFile, state):
    for number, value in validation.json_lines(stream, feed=state.feed):
        if isinstance(value, validation.FieldError):
            yield number, value
            continue
        try:
            where, text = _evaluator_text(value)
            text = validation.clean_text(text, where, required=True)
        except validation.FieldError as error:
            yield number, error
            continue
        question = f"q{number:03d}"
        yield number, Item(item.subtask, question, item.companion, text, NO_META, "(question)")


class _Malformed(Exception):
    def __init__(self, line: int, field_name: str, message: str):
        super().__init__(message)
        self.line, self.field, self.message = line, field_name, message


class _JsonObjectReader:
    """Incremental reader of one JSON object's members, holding at most one value in memory."""

    WHITESPACE = re.compile(r"[ \t\r\n]*")

    def __init__(self, stream, state: _FileState):
        self.stream, self.state = stream, state
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.json = json.JSONDecoder()
        self.buf, self.pos, self.line, self.eof, self.started = "", 0, 1, False, False

    def _fill(self) -> bool:
        if self.eof:
            return False
        raw = self.stream.read(CHUNK)
        self.state.feed(raw)
        try:
            text = self.decoder.decode(raw, final=not raw)
        except UnicodeDecodeError as error:
            line = self.line + self.buf.count("\n", self.pos) + raw[: error.start].count(b"\n")
            raise _Malformed(line, "(encoding)", "not valid UTF-8") from error
        if text and not self.started:
            self.started = True
            text = text.removeprefix("\ufeff")  # a byte order mark
        self.eof = not raw
        self.buf = self.buf[self.pos :] + text
        self.pos = 0
        return True

    def _advance(self, to: int) -> None:
        self.line += self.buf.count("\n", self.pos, to)
        self.pos = to

    def peek(self) -> str:
        """The next character that is not whitespace ("" at the end)."""
        while True:
            self._advance(self.WHITESPACE.match(self.buf, self.pos).end())
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._fill():
                return ""

    def expect(self, characters: str, what: str) -> str:
        found = self.peek()
        if found == "" or found not in characters:
            shown = repr(found) if found else "the end of the file"
            raise _Malformed(self.line, "(json)", f"malformed JSON: expected {what}, found {shown}")
        self._advance(self.pos + 1)
        return found

    def value(self, parse):
        """Parse one value at pos, reading more until it is complete (or clearly bad)."""
        while True:
            try:
                value, end = parse(self.buf, self.pos)
            except (ValueError, RecursionError) as error:  # (ValueError: a huge integer)
                if len(self.buf) - self.pos > MAX_JSON_VALUE_CHARS:
                    raise _Malformed(
                        self.line,
                        "(json)",
                        f"no complete JSON value within {MAX_JSON_VALUE_CHARS:,} characters "
                        f"(malformed, or over the {validation.MAX_TEXT_CHARS:,}-character limit)",
                    ) from error
                if self._fill():
                    continue
                message = getattr(error, "msg", None) or (
                    "nested too deeply"
                    if isinstance(error, RecursionError)
                    else "a number has too many digits"
                )
                raise _Malformed(self.line, "(json)", f"malformed JSON: {message}") from error
            if end >= len(self.buf) and self._fill():
                continue  # a number or literal might go on in the next chunk
            self._advance(end)
            return value

    def members(self) -> Iterator[tuple[int, str, object]]:
        self.expect("{", 'an object {"q001": "…", …}')
        if self.peek() == "}":
            self._advance(self.pos + 1)
        else:
            while True:
                if self.peek() != '"':
                    self.expect('"', "a question id in double quotes")
                line = self.line
                key = self.value(lambda s, i: scanstring(s, i + 1))
                self.expect(":", "':' after the question id")
                self.peek()
                yield line, key, self.value(self.json.raw_decode)
                if self.expect(",}", "',' or '}'") == "}":
                    break
        if self.peek():
            raise _Malformed(self.line, "(json)", "malformed JSON: more data after the object")

    def drain(self) -> None:
        for chunk in iter(lambda: self.stream.read(1 << 20), b""):
            self.state.feed(chunk)


def read_evaluator_json(stream, item: InputFile, state):
    """A `<subtask>.json` object {"q001": answer, ...}; an answer is text or like a JSONL line."""
    reader = _JsonObjectReader(stream, state)
    try:
        for line, key, value in reader.members():
            try:
                where, text = _evaluator_text(value, key or '""')
                text = validation.clean_text(text, where, required=True)
            except validation.FieldError as error:
                yield line, error
                continue
            yield line, Item(item.subtask, key, item.companion, text, NO_META, key or '""')
    except _Malformed as error:
        yield error.line, validation.FieldError(error.field, error.message)
        reader.drain()


READERS = {"platform": read_platform, "jsonl": read_evaluator_jsonl, "json": read_evaluator_json}


# ---------------------------------------------------------------- matching


def _digest(text_md5: str, status, latency_ms, prompt_tokens, completion_tokens, finish, error):
    """A 63-bit digest of what an import sets on a response (0 means "no response")."""
    value = "\x1f".join(
        map(str, (text_md5, status, latency_ms, prompt_tokens, completion_tokens, finish, error))
    )
    digest = hashlib.blake2b(value.encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") >> 1) or 1


def _item_digest(item: Item) -> int:
    prompt_tokens, completion_tokens, latency_ms, finish_reason = item.meta
    text_md5 = hashlib.md5(item.text.encode(), usedforsecurity=False).hexdigest()
    ok = Response.Status.OK
    return _digest(text_md5, ok, latency_ms, prompt_tokens, completion_tokens, finish_reason, "")


class _Index:
    """The lookups both passes share; their size depends on scenarios × companions, not rows."""

    def __init__(self):
        self.scenarios: dict[tuple[str, str], int] = {}  # (subtask, external id) -> slot
        self.scenario_ids = array("q")
        rows = Scenario.objects.exclude(external_id="").values_list("pk", "subtask", "external_id")
        for pk, subtask, external_id in rows.order_by().iterator(chunk_size=5000):
            self.scenarios[(subtask, external_id)] = len(self.scenario_ids)
            self.scenario_ids.append(pk)
        self.companion_ids = dict(CompanionModel.objects.values_list("name", "pk"))
        self.slots: dict[str, int] = {}  # companion name -> slot in `seen`
        self.names: list[str] = []
        self.seen: list[array] = []  # per companion: (file number << 32 | line) of first answer
        self.existing: dict[int, array] = {}  # companion id -> digest per scenario slot

    def _blank(self) -> array:
        return array("q", bytes(8 * len(self.scenario_ids)))

    def companion_slot(self, name: str) -> int | None:
        slot = self.slots.get(name)
        if slot is None:
            if len(self.names) >= MAX_COMPANIONS:
                return None
            slot = self.slots[name] = len(self.names)
            self.names.append(name)
            self.seen.append(self._blank())
        return slot

    def load_existing(self, run_id: int | None) -> None:
        """The digest of every response already in the run (one query, streamed)."""
        self.existing = {}
        if run_id is None:
            return
        by_id = {pk: slot for slot, pk in enumerate(self.scenario_ids)}
        rows = Response.objects.filter(run_id=run_id).values_list(
            "scenario_id",
            "companion_id",
            MD5("text"),
            "status",
            "latency_ms",
            "prompt_tokens",
            "completion_tokens",
            "finish_reason",
            "error",
        )
        for scenario_id, companion_id, *values in rows.order_by().iterator(chunk_size=5000):
            slot = by_id.get(scenario_id)
            if slot is None:
                continue  # a scenario without an external id: no input line can name it
            digests = self.existing.get(companion_id)
            if digests is None:
                digests = self.existing[companion_id] = self._blank()
            digests[slot] = _digest(*values)


CREATE, UPDATE, UNCHANGED = "create", "update", "unchanged"


def _scan(source: Input, report: ResponseImportReport, index: _Index, emit, progress) -> str:
    """Read every input file once: check each response and hand emit(kind, item, slots, line)
    the good ones. Returns the input's fingerprint (to notice a change between the passes)."""
    files, layout_errors = source.layout()
    for error in layout_errors:
        report.add_error(error.line, error.field, error.message, error.file or source.filename)
    fingerprint = hashlib.blake2b(digest_size=16)
    done = last_progress = 0
    with source.opener() as open_file:
        for number, item in enumerate(files, start=1):
            fingerprint.update(item.path.encode() + b"\0")
            state = _FileState(fingerprint)
            try:
                with open_file(item) as stream:
                    for line, value in READERS[item.kind](stream, item, state):
                        report.rows += 1
                        if isinstance(value, validation.FieldError):
                            report.add_error(line, value.field, value.message, item.path)
                        else:
                            _check(report, index, files, number, item.path, line, value, emit)
                        if progress and done + line - last_progress >= PROGRESS_EVERY:
                            last_progress = done + line
                            progress(last_progress)
            except ARCHIVE_ERRORS as error:
                if source.kind != "zip" or isinstance(error, RecursionError):
                    raise
                message = f"cannot be read from the archive: {error}"
                report.add_error(0, "(zip)", message, item.path)
            except uploads.ArchiveRefused as error:
                report.add_error(0, "(zip)", str(error), item.path)
                done += state.lines
                report.files += 1
                break  # nothing more is read from this archive
            done += state.lines
            report.files += 1
    report.lines = done
    if progress:
        progress(done)
    if not files and not layout_errors:
        report.add_error(0, "(file)", "no response files found", source.filename)
    elif report.rows == 0 and not report.error_count:
        report.add_error(0, "(file)", "no responses in the input", source.filename)
    return fingerprint.hexdigest()


def _check(report, index: _Index, files, file_number, path, line, item: Item, emit) -> None:
    scenario_slot = index.scenarios.get((item.subtask, item.external_id))
    if scenario_slot is None:
        message = f"no scenario {item.subtask}/{item.external_id}: import the scenarios first"
        report.add_error(line, item.id_field, message, path)
        return
    companion_slot = index.companion_slot(item.companion)
    if companion_slot is None:
        message = f"more than {MAX_COMPANIONS} companions in one import"
        report.add_error(line, "companion", message, path)
        return
    seen = index.seen[companion_slot]
    first = seen[scenario_slot]
    if first:
        first_file, first_line = first >> 32, first & 0xFFFFFFFF
        where = f"line {first_line}"
        if first_file != file_number:
            where = f"{files[first_file - 1].path} line {first_line}"
        message = (
            f"{item.subtask}/{item.external_id} for {item.companion} already appears on {where}"
        )
        report.add_error(line, item.id_field, message, path)
        return
    seen[scenario_slot] = file_number << 32 | line
    report.companions[item.companion] = report.companions.get(item.companion, 0) + 1
    report.subtasks[item.subtask] = report.subtasks.get(item.subtask, 0) + 1
    companion_id = index.companion_ids.get(item.companion)
    stored = index.existing.get(companion_id) if companion_id is not None else None
    old = stored[scenario_slot] if stored is not None else 0
    if not old:
        kind = CREATE
    elif old == _item_digest(item):
        kind = UNCHANGED
    else:
        kind = UPDATE
    emit(kind, item, scenario_slot, companion_slot, line)


# ---------------------------------------------------------------- planning and writing


@dataclass
class ResponsePlan:
    report: ResponseImportReport
    source: Input
    run_name: str
    fingerprint: str = ""


def _tally(report: ResponseImportReport, kind: str) -> None:
    if kind == CREATE:
        report.created += 1
    elif kind == UPDATE:
        report.updated += 1
    else:
        report.unchanged += 1


def _check_run(report: ResponseImportReport, run: GenerationRun | None) -> None:
    if run is not None and run.kind != GenerationRun.Kind.IMPORT:
        message = f"run {run.name!r} holds generated responses; import into another run"
        report.add_error(0, "run", message)


def build_response_plan(
    source,
    run_name: str | None = None,
    filename: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> ResponsePlan:
    """The preview pass: read everything once, check it, count what a write would do.

    `source` is a path (directory, .zip, .jsonl) or a seekable binary stream whose `filename`
    says which (.zip or .jsonl). The default run name is the file or directory name.
    """
    source = source if isinstance(source, Input) else Input(source, filename)
    run_name = (run_name or "").strip() or source.default_run_name()
    report = ResponseImportReport(filename=source.filename, format=source.format, run=run_name)
    if len(run_name) > 120:
        report.add_error(0, "run", "the run name is longer than 120 characters")
    try:
        validation.clean_text(run_name, "run")
    except validation.FieldError as error:  # NUL or a lone surrogate: no query can hold it
        report.add_error(0, "run", f"the run name {error.message}")
        run_name = ""
    run = GenerationRun.objects.filter(name=run_name).first() if run_name else None
    report.run_exists = run is not None
    _check_run(report, run)
    index = _Index()
    index.load_existing(run.pk if run else None)
    fingerprint = _scan(source, report, index, lambda kind, *_: _tally(report, kind), progress)
    report.new_companions = [name for name in index.names if name not in index.companion_ids]
    report.companions_created = len(report.new_companions)
    return ResponsePlan(report=report, source=source, run_name=run_name, fingerprint=fingerprint)


def _write_batch(responses: list[Response]) -> None:
    """Insert new responses and overwrite changed ones (one upsert on the unique key)."""
    Response.objects.bulk_create(
        responses,
        batch_size=BATCH,
        update_conflicts=True,
        unique_fields=UNIQUE_FIELDS,
        update_fields=UPDATE_FIELDS,
    )


def write_response_plan(
    plan: ResponsePlan, author=None, progress: Callable[[int], None] | None = None
) -> ResponseImportReport:
    """The write pass: read the input again and upsert it, all in one transaction.

    The run is locked and its responses are reloaded inside the transaction, so the counts are
    those of what was written even if the run changed since the preview. Anything wrong (a bad
    row, an input that changed since the preview, a database error) rolls everything back.
    """
    report = plan.report
    if not report.ok:
        raise ResponseImportFailed(report)
    with transaction.atomic():
        run = GenerationRun.objects.select_for_update().filter(name=plan.run_name).first()
        _check_run(report, run)
        if not report.ok:
            raise ResponseImportFailed(report)
        now = timezone.now()
        if run is None:
            run = GenerationRun.objects.create(
                name=plan.run_name,
                kind=GenerationRun.Kind.IMPORT,
                state=GenerationRun.State.COMPLETED,
                created_by=author,
                started_at=now,
                finished_at=now,
            )
        for name in report.new_companions:
            CompanionModel.objects.get_or_create(
                name=name,
                defaults={
                    "provider": CompanionModel.Provider.IMPORTED,
                    "notes": f"created by the import of {report.filename} into run {run.name}",
                },
            )
        index = _Index()
        index.load_existing(run.pk)
        written = ResponseImportReport(report.filename, report.format, report.run)
        touched = bytearray(len(index.scenario_ids))
        batch: list[Response] = []

        def emit(kind, item: Item, scenario_slot, companion_slot, line):
            companion_id = index.companion_ids.get(item.companion)
            if companion_id is None:  # the input changed since the preview
                written.add_error(line, "companion", f"unknown companion {item.companion!r}")
                return
            _tally(written, kind)
            touched[scenario_slot] = 1
            if kind == UNCHANGED:
                return
            prompt_tokens, completion_tokens, latency_ms, finish_reason = item.meta
            batch.append(
                Response(
                    run_id=run.pk,
                    scenario_id=index.scenario_ids[scenario_slot],
                    companion_id=companion_id,
                    status=Response.Status.OK,
                    text=item.text,
                    prompt_messages=[],
                    latency_ms=latency_ms,
                    prompt_tokens=prompt_tokens,
                    completion_tokens=completion_tokens,
                    finish_reason=finish_reason,
                    error="",
                    attempts=0,
                )
            )
            if len(batch) >= BATCH:
                _write_batch(batch)
                batch.clear()

        fingerprint = _scan(plan.source, written, index, emit, progress)
        if fingerprint != plan.fingerprint and written.ok:
            written.add_error(0, "(file)", "the input changed since it was checked; check it again")
        if not written.ok:
            report.error_count, report.errors = written.error_count, written.errors
            raise ResponseImportFailed(report)
        if batch:
            _write_batch(batch)
        _link(run, index, touched)
        if written.created or written.updated:
            GenerationRun.objects.filter(pk=run.pk).update(
                finished_at=now,
                message=f"imported from {report.filename}: {written.created} new, "
                f"{written.updated} changed, {written.unchanged} unchanged",
            )
    report.created, report.updated, report.unchanged = (
        written.created,
        written.updated,
        written.unchanged,
    )
    report.written = True
    return report


def _link(run: GenerationRun, index: _Index, touched: bytearray) -> None:
    """Record the run's scenarios and companions (its M2M fields), as generated runs have them."""
    companions = [index.companion_ids[name] for name in index.names]
    run.companions.add(*companions)
    Through = GenerationRun.scenarios.through
    ids = [pk for pk, hit in zip(index.scenario_ids, touched, strict=True) if hit]
    for start in range(0, len(ids), BATCH):
        Through.objects.bulk_create(
            [Through(generationrun_id=run.pk, scenario_id=pk) for pk in ids[start : start + BATCH]],
            ignore_conflicts=True,
        )


def import_responses(
    source,
    run_name: str | None = None,
    author=None,
    dry_run: bool = False,
    progress: Callable[[int], None] | None = None,
    filename: str | None = None,
) -> ResponseImportReport:
    """Preview and (unless dry_run) write. Raises ResponseImportFailed when anything is bad."""
    plan = build_response_plan(source, run_name, filename=filename, progress=progress)
    if dry_run:
        return plan.report
    return write_response_plan(plan, author, progress=progress)
