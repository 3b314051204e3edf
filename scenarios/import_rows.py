"""An imported row as the database stores it, built without model instances: what the
scenario importer (scenarios.importers) sends through h2htalk.bulk for a new scenario and its
first revision.

Each JSON value of a cleaned row (scenarios.import_formats.clean_row) is encoded once and the
texts are put together from those pieces: the canonical text of the content hash
(services.content_hash: content_of written with sorted keys), the history, memory and schedule
columns and the revision snapshot (services.snapshot, SNAPSHOT_FIELDS in order). On PostgreSQL
the columns are jsonb, which keeps no key order of its own, so the sorted pieces serve as they
are; SQLite stores the text, so there the columns and snapshot keep the row's key order (as
the ORM would write them) and history, memory and schedule are encoded a second time.
"""

import json

from scenarios.models import Revision
from scenarios.services import digest, search_text_of
from scenarios.taxonomy import SUBTASK_VALUES, dimension_of

# CPython's C encoder called directly: JSONEncoder.encode builds one per call (a few µs, as
# much again as encoding a short history), and a str or bool needs no encoder at all.
_text = json.encoder.encode_basestring  # a str as JSON, non-ASCII kept (ensure_ascii=False)


def _c_encoder(sort_keys: bool):
    return json.encoder.c_make_encoder(
        None, json.JSONEncoder().default, _text, None, ": ", ", ", sort_keys, False, True
    )


_sorted, _ordered = _c_encoder(True), _c_encoder(False)
_BOOL = {True: "true", False: "false"}


def _json(value: list, encoder=_sorted) -> str:
    """A cleaned list as json.dumps(value, ensure_ascii=False, sort_keys=…) writes it."""
    return "".join(encoder(value, 0))


def _names(tags: list[str]) -> str:
    return "[" + ", ".join(_text(tag) for tag in sorted(tags)) + "]"


_DIMENSIONS = {subtask: dimension_of(subtask) for subtask in SUBTASK_VALUES}

SCENARIO_COLUMNS = (
    "id",
    "external_id",
    "dimension",
    "subtask",
    "persona_id",
    "history",
    "memory",
    "schedule",
    "user_message",
    "reference_response",
    "implicit_need",
    "evolving_need",
    "risk_level",
    "language",
    "source",
    "content_hash",
    "search_text",
    "state",
    "created_by_id",
    "created_at",
    "updated_at",
)
REVISION_COLUMNS = (
    "scenario_id",
    "number",
    "author_id",
    "created_at",
    "action",
    "note",
    "snapshot",
    "changes",
)


class Encoded:
    """The JSON pieces of a row's content and its content hash."""

    __slots__ = ("content_hash", "history", "memory", "persona", "schedule", "texts")

    def __init__(self, data: dict, keep_order: bool):
        """`keep_order`: the columns are stored as text (SQLite), keys in the row's order."""
        history, memory, schedule = (
            _json(data[name]) for name in ("history", "memory", "schedule")
        )
        self.persona = _text(data["persona"])
        self.texts = _text(data["user_message"]), _text(data["reference_response"])
        user_message, reference_response = self.texts
        self.content_hash = digest(
            f'{{"history": {history}, "memory": {memory}, "persona": {self.persona}, '
            f'"reference_response": {reference_response}, "schedule": {schedule}, '
            f'"subtask": {_text(data["subtask"])}, "user_message": {user_message}}}'
        )
        if keep_order:
            history, memory, schedule = (
                _json(data[name], _ordered) for name in ("history", "memory", "schedule")
            )
        self.history, self.memory, self.schedule = history, memory, schedule


def snapshot_text(data: dict, encoded: Encoded, state: str) -> str:
    """services.snapshot of the scenario a row creates, as JSON text."""
    user_message, reference_response = encoded.texts
    return (
        f'{{"external_id": {_text(data["external_id"])}, "subtask": {_text(data["subtask"])}, '
        f'"persona": {encoded.persona}, "language": {_text(data["language"])}, '
        f'"history": {encoded.history}, "memory": {encoded.memory}, '
        f'"schedule": {encoded.schedule}, "user_message": {user_message}, '
        f'"reference_response": {reference_response}, '
        f'"implicit_need": {_BOOL[data["implicit_need"]]}, '
        f'"evolving_need": {_BOOL[data["evolving_need"]]}, '
        f'"risk_level": {_text(data["risk_level"])}, "source": {_text(data["source"])}, '
        f'"tags": {_names(data["tags"])}, "state": {_text(state)}}}'
    )


def scenario_row(pk: int, data: dict, encoded: Encoded, persona_id, state: str, author_id, stamp):
    """A new scenario's values in SCENARIO_COLUMNS order (`stamp`: bulk.db_datetime)."""
    return (
        pk,
        data["external_id"],
        _DIMENSIONS[data["subtask"]],
        data["subtask"],
        persona_id,
        encoded.history,
        encoded.memory,
        encoded.schedule,
        data["user_message"],
        data["reference_response"],
        data["implicit_need"],
        data["evolving_need"],
        data["risk_level"],
        data["language"],
        data["source"],
        encoded.content_hash,
        search_text_of(
            data["external_id"],
            data["persona"],
            data["user_message"],
            data["reference_response"],
            data["history"],
            data["memory"],
            data["schedule"],
        ),
        state,
        author_id,
        stamp,
        stamp,
    )


def revision_row(pk: int, number: int, author_id, stamp, note: str, snapshot: str, changes: str):
    """An "imported" revision's values in REVISION_COLUMNS order (snapshot, changes: JSON)."""
    return (
        pk,
        number,
        author_id,
        stamp,
        Revision.Action.IMPORTED.value,
        note[:300],
        snapshot,
        changes,
    )
