"""Reading response files: the input's layout (a .jsonl, a directory or a .zip of companion
folders) and the readers of each format, yielding one `Item` (or a problem naming its file,
line and field) at a time (scenarios.companions.imports matches, plans and writes them).

Formats:

- platform JSONL, one object per line: `{"subtask", "external_id", "companion", "text",
  "prompt_tokens"?, "completion_tokens"?, "latency_ms"?, "finish_reason"?}`;
- the released H2HTalk evaluator layout: one folder per companion (the folder name), inside it
  `<subtask>.jsonl` whose physical line n is question `q{n:03d}` (blank lines are skipped but
  counted, as the evaluator does), each line `{"response"}`, `{"answer"}` or `{"messages"}` (the
  first gpt/assistant turn), or `<subtask>.json` holding one object `{"q001": "text", ...}`. The
  input is a directory or a .zip of such folders, possibly under one top folder.
"""

import codecs
import json
import os
import re
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from json.decoder import scanstring
from pathlib import Path, PurePath, PurePosixPath
from typing import NamedTuple

from h2htalk import uploads
from scenarios import validation
from scenarios.import_formats import RowError
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
MAX_JSON_VALUE_CHARS = 6 * validation.MAX_TEXT_CHARS + 4096  # \uXXXX escapes take six
MAX_INT = 2**31 - 1
CHUNK = 1 << 16
NO_META = (0, 0, None, "")  # prompt_tokens, completion_tokens, latency_ms, finish_reason


@dataclass
class ResponseError(RowError):
    """A RowError that also names the file (its path inside the archive or directory)."""

    file: str = ""

    def __str__(self):
        where = f"{self.file}, " if self.file else ""
        if self.line:
            where += f"line {self.line}, "
        return f"{where}field {self.field}: {self.message}"


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


# ---------------------------------------------------------------- reading


class FileState:
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

    def __init__(self, stream, state: FileState):
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
