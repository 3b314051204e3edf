"""Field rules for scenario content, shared by the edit form, the API and every importer.

Each validator returns the cleaned value or raises FieldError naming the field (and the item
inside it) so importers can report "line 12, field history[3].role: ...".
"""

import json
import re

from h2htalk import uploads
from scenarios.taxonomy import LANGUAGES, SUBTASK_VALUES, RiskLevel, Subtask

MAX_TEXT_CHARS = 20_000
MAX_ITEMS = 200
HISTORY_ROLES = ("user", "assistant", "system")
TIME_RE = re.compile(r"^([01]\d|2[0-3]):[0-5]\d$")
LANGUAGE_CODES = [code for code, _ in LANGUAGES]
RISK_VALUES = RiskLevel.values


class FieldError(ValueError):
    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class FieldErrors(ValueError):
    """Every FieldError of one item (a row of an import reports them all, not the first)."""

    def __init__(self, errors: list[FieldError]):
        super().__init__("; ".join(str(error) for error in errors))
        self.errors = errors


def clean_text(value, field: str, required: bool = False) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise FieldError(field, f"must be text, got {type(value).__name__}")
    if "\x00" in value:
        raise FieldError(field, "contains a NUL character")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as error:
            raise FieldError(field, "contains a lone surrogate (not valid Unicode text)") from error
    if len(value) > MAX_TEXT_CHARS:
        raise FieldError(field, f"is {len(value):,} characters; the limit is {MAX_TEXT_CHARS:,}")
    if required and not value.strip():
        raise FieldError(field, "is required")
    return value


def clean_subtask(value) -> str:
    if not value:
        raise FieldError("subtask", "is required")
    if not isinstance(value, str) or value not in SUBTASK_VALUES:
        raise FieldError("subtask", f"unknown subtask {value!r}; expected one of {Subtask.values}")
    return value


def clean_choice(value, field: str, choices: list[str], default: str) -> str:
    if value in (None, ""):
        return default
    if value not in choices:
        raise FieldError(field, f"{value!r} is not one of {choices}")
    return value


def clean_risk(value) -> str:
    return clean_choice(value, "risk_level", RISK_VALUES, RiskLevel.NONE)


def clean_language(value) -> str:
    return clean_choice(value, "language", LANGUAGE_CODES, "zh")


def clean_bool(value, field: str) -> bool:
    if value in (None, ""):
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in {"1", "true", "yes", "y"}:
        return True
    if isinstance(value, str) and value.strip().lower() in {"0", "false", "no", "n"}:
        return False
    if value in (0, 1):
        return bool(value)
    raise FieldError(field, f"{value!r} is not true/false")


def _clean_list(value, field: str) -> list:
    if value in (None, ""):
        return []
    if not isinstance(value, list):
        raise FieldError(field, f"must be a list, got {type(value).__name__}")
    if len(value) > MAX_ITEMS:
        raise FieldError(field, f"has {len(value)} items; the limit is {MAX_ITEMS}")
    return value


def clean_history(value) -> list[dict]:
    turns = []
    for i, turn in enumerate(_clean_list(value, "history")):
        where = f"history[{i}]"
        if not isinstance(turn, dict):
            raise FieldError(where, 'must be an object {"role": ..., "content": ...}')
        role = turn.get("role")
        if role not in HISTORY_ROLES:
            raise FieldError(f"{where}.role", f"{role!r} is not one of {list(HISTORY_ROLES)}")
        turns.append(
            {"role": role, "content": clean_text(turn.get("content"), f"{where}.content", True)}
        )
    return turns


def clean_memory(value) -> list[dict]:
    entries = []
    for i, entry in enumerate(_clean_list(value, "memory")):
        where = f"memory[{i}]"
        if isinstance(entry, str):
            entry = {"content": entry}
        if not isinstance(entry, dict):
            raise FieldError(where, 'must be text or an object {"content", "category", ...}')
        cleaned = {"content": clean_text(entry.get("content"), f"{where}.content", True)}
        if entry.get("category") not in (None, ""):
            cleaned["category"] = clean_text(entry["category"], f"{where}.category")
        importance = entry.get("importance")
        if importance not in (None, ""):
            if importance not in (0, 1, 2) or isinstance(importance, bool):
                raise FieldError(f"{where}.importance", f"{importance!r} is not 0, 1 or 2")
            cleaned["importance"] = importance
        entries.append(cleaned)
    return entries


def clean_schedule(value) -> list[dict]:
    items = []
    for i, item in enumerate(_clean_list(value, "schedule")):
        where = f"schedule[{i}]"
        if not isinstance(item, dict):
            raise FieldError(where, 'must be an object {"time": "HH:MM", "activity": ...}')
        time = item.get("time", "")
        if time not in ("", None) and not (isinstance(time, str) and TIME_RE.match(time)):
            raise FieldError(f"{where}.time", f"{time!r} is not HH:MM")
        items.append(
            {"time": time, "activity": clean_text(item.get("activity"), f"{where}.activity", True)}
        )
    return items


def clean_tags(value) -> list[str]:
    if value in (None, ""):
        return []
    if isinstance(value, str):
        value = [part for part in re.split(r"[;,]", value)]
    if not isinstance(value, list):
        raise FieldError("tags", "must be a list of names or a ';'-separated string")
    tags = []
    for i, tag in enumerate(value):
        if not isinstance(tag, str):
            raise FieldError(f"tags[{i}]", "must be text")
        tag = clean_text(tag, f"tags[{i}]").strip()
        if len(tag) > 60:
            raise FieldError(f"tags[{i}]", "is longer than 60 characters")
        if tag and tag not in tags:
            tags.append(tag)
    return tags


def json_error_text(error: json.JSONDecodeError) -> str:
    """Python's message with its place: "Unterminated string starting at column 14", not
    "… starting at at column 14" (some of its messages end in "at")."""
    joint = " column" if error.msg.endswith(" at") else " at column"
    return f"{error.msg}{joint} {error.colno}"


def json_object(text: str) -> "dict | FieldError":
    """One JSONL line as an object, or the FieldError (field "(json)") that says what is wrong."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        return FieldError("(json)", f"malformed JSON: {json_error_text(error)}")
    except RecursionError:
        return FieldError("(json)", "malformed JSON: nested too deeply")
    except ValueError:  # an integer of more digits than Python converts
        return FieldError("(json)", "malformed JSON: a number has too many digits")
    if not isinstance(value, dict):
        return FieldError("(json)", "each line must be a JSON object")
    return value


def json_lines(stream, feed=None):
    """(number, object or FieldError) per non-blank line of a JSONL file, blank lines skipped
    but counted (h2htalk.uploads.text_lines: linear time, MAX_LINE_BYTES, UTF-8)."""
    for number, text in uploads.text_lines(stream, feed=feed):
        if isinstance(text, uploads.LineProblem):
            yield number, FieldError(text.field, text.message)
        elif text.strip():
            yield number, json_object(text)
