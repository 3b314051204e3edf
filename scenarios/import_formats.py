"""Reading a scenario file: the formats the importer knows, each read into raw rows, and the
rules that clean one row (scenarios.importers plans and writes them).

Formats: the platform's JSONL and CSV (README), the released H2HTalk reference files
(`{"response": ...}` per line, file named after its subtask, line n = question qNNN) and
ShareGPT-style `messages` (`from`/`value`). A reader yields (file line, raw row or RowError);
a problem names its line and field, so the preview can list every one.
"""

import codecs
import csv
import io
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import PurePath

from django.utils.translation import gettext, gettext_lazy

from h2htalk import csvexport, uploads
from scenarios import validation
from scenarios.models import Scenario
from scenarios.services import AUTHORED_FIELDS, PERSONA_FIELDS
from scenarios.taxonomy import Subtask, dimension_of

FORMATS = ("jsonl", "csv", "release", "sharegpt")
NATIVE_FIELDS = {*AUTHORED_FIELDS, "dimension", "tags", "state"}
CSV_REQUIRED_COLUMNS = ("subtask", "user_message", "reference_response")
CSV_JSON_COLUMNS = ("history", "memory", "schedule", "persona")
SHAREGPT_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant"}
SHAREGPT_ROLES |= {"bot": "assistant", "system": "system"}
STATE_VALUES = frozenset(Scenario.State.values)


# The benchmark's released files (LolerPanda/H2HTalk, data/): subtask -> lines (= questions).
RELEASE_LINES = {
    "dialogue_base": 1882,
    "dialogue_emotion": 99,
    "dialogue_schedule": 76,
    "recollection_synthesize": 412,
    "recollection_refine": 589,
    "recollection_initialize": 41,
    "itinerary_basic": 207,
    "itinerary_middle": 444,
    "itinerary_advanced": 143,
    "itinerary_feedback": 163,
    "itinerary_initialize": 533,
}
# Leading bytes of files people upload by mistake, and what they are.
SIGNATURES = (
    (b"\x89PNG", gettext_lazy("a PNG image")),
    (b"%PDF", gettext_lazy("a PDF document")),
    (b"\xff\xd8\xff", gettext_lazy("a JPEG image")),
    (b"GIF8", gettext_lazy("a GIF image")),
    (b"PK\x03\x04", gettext_lazy("a zip archive or an Office document")),
    (b"\x1f\x8b", gettext_lazy("a gzip archive")),
    (b"\xd0\xcf\x11\xe0", gettext_lazy("an old Office document")),
)


def not_text(head: bytes) -> str:
    """Why a file whose first bytes are `head` is not one of the text formats ("" if it may
    be): one sentence for the whole file instead of an encoding error on every line."""
    for signature, kind in SIGNATURES:
        if head.startswith(signature):
            return gettext("This is not a JSONL or CSV file: it looks like %(kind)s.") % {
                "kind": kind
            }
    if b"\x00" in head:
        return gettext("This is not a JSONL or CSV file: it holds binary data.")
    lines = head.split(b"\n")
    whole = lines[:-1] or lines  # the last may be cut off mid-character
    bad = sum(not _is_utf8(line) for line in whole)
    if bad * 2 > len(whole):  # most lines: the file, not a line, is wrong
        return gettext(
            "This is not a JSONL or CSV file in UTF-8: most of its lines are not UTF-8 text. "
            "Save it as UTF-8 and upload it again."
        )
    return ""


def _is_utf8(raw: bytes) -> bool:
    try:
        codecs.getincrementaldecoder("utf-8")().decode(raw, final=False)
    except UnicodeDecodeError:
        return False
    return True


@dataclass
class RowError:
    line: int
    field: str
    message: str

    def __str__(self):
        return f"line {self.line}, field {self.field}: {self.message}"


def iter_lines(stream: io.BufferedIOBase) -> Iterator[tuple[int, str | RowError]]:
    """Yield (line number, text); a line over MAX_LINE_BYTES or not UTF-8 becomes a RowError
    (h2htalk.uploads.text_lines)."""
    for number, text in uploads.text_lines(stream):
        if isinstance(text, uploads.LineProblem):
            yield number, RowError(number, text.field, text.message)
        else:
            yield number, text


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
    """The row's cleaned fields, or FieldErrors with the problem of every field that has one
    (a preview lists them all; within a list field, its first bad item)."""
    v = validation
    errors: list[v.FieldError] = []

    def checked(clean, *args):
        try:
            return clean(*args)
        except v.FieldError as error:
            errors.append(error)
            return None

    subtask = checked(v.clean_subtask, raw.get("subtask") or default_subtask)
    dimension = raw.get("dimension")
    if subtask and dimension not in (None, "") and dimension != dimension_of(subtask):
        errors.append(v.FieldError("dimension", f"{dimension!r} does not match subtask {subtask}"))
    row = {
        "external_id": checked(_clean_external_id, raw.get("external_id")),
        "subtask": subtask,
        "persona": checked(clean_persona, raw.get("persona"), line, inline_personas),
        "language": checked(v.clean_language, raw.get("language")),
        "history": checked(v.clean_history, raw.get("history")),
        "memory": checked(v.clean_memory, raw.get("memory")),
        "schedule": checked(v.clean_schedule, raw.get("schedule")),
        "user_message": checked(v.clean_text, raw.get("user_message"), "user_message"),
        "reference_response": checked(
            v.clean_text, raw.get("reference_response"), "reference_response"
        ),
        "implicit_need": checked(v.clean_bool, raw.get("implicit_need"), "implicit_need"),
        "evolving_need": checked(v.clean_bool, raw.get("evolving_need"), "evolving_need"),
        "risk_level": checked(v.clean_risk, raw.get("risk_level")),
        "tags": checked(v.clean_tags, raw.get("tags")),
        "state": checked(_clean_state, raw.get("state")),
        "source": checked(v.clean_text, raw.get("source"), "source"),
    }
    if errors:
        raise v.FieldErrors(errors)
    row["source"] = row["source"][:200]
    return row


def _clean_external_id(value) -> str:
    external_id = validation.clean_text(value, "external_id").strip()
    if len(external_id) > 100:
        raise validation.FieldError("external_id", "is longer than 100 characters")
    return external_id


def _clean_state(value) -> str:
    state = value or ""
    if state and (not isinstance(state, str) or state not in STATE_VALUES):
        raise validation.FieldError("state", f"{state!r} is not one of {Scenario.State.values}")
    return state
