"""An imported row as the database stores it, built without model instances: what the
scenario importer (scenarios.importers) sends through h2htalk.bulk for a new scenario and its
first revision.

Each JSON value of a cleaned row (scenarios.import_formats.clean_row) is encoded once, with
sorted keys, and the texts are put together from those pieces: the history, memory and
schedule columns, the canonical text of the content hash (services.content_hash: content_of
written with sorted keys) and the revision snapshot (services.snapshot, SNAPSHOT_FIELDS in
order). PostgreSQL's jsonb keeps no key order, so sorted keys change nothing there; on SQLite a
history turn reads back as {"content", "role"} instead of {"role", "content"}.
"""

import json

from scenarios.models import Revision
from scenarios.services import digest, search_text_of
from scenarios.taxonomy import SUBTASK_VALUES, dimension_of

_json = json.JSONEncoder(ensure_ascii=False, sort_keys=True).encode
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

    def __init__(self, data: dict):
        self.history = _json(data["history"])
        self.memory = _json(data["memory"])
        self.schedule = _json(data["schedule"])
        self.persona = _json(data["persona"])
        self.texts = _json(data["user_message"]), _json(data["reference_response"])
        user_message, reference_response = self.texts
        self.content_hash = digest(
            f'{{"history": {self.history}, "memory": {self.memory}, "persona": {self.persona}, '
            f'"reference_response": {reference_response}, "schedule": {self.schedule}, '
            f'"subtask": {_json(data["subtask"])}, "user_message": {user_message}}}'
        )


def snapshot_text(data: dict, encoded: Encoded, state: str) -> str:
    """services.snapshot of the scenario a row creates, as JSON text."""
    user_message, reference_response = encoded.texts
    return (
        f'{{"external_id": {_json(data["external_id"])}, "subtask": {_json(data["subtask"])}, '
        f'"persona": {encoded.persona}, "language": {_json(data["language"])}, '
        f'"history": {encoded.history}, "memory": {encoded.memory}, '
        f'"schedule": {encoded.schedule}, "user_message": {user_message}, '
        f'"reference_response": {reference_response}, '
        f'"implicit_need": {_json(data["implicit_need"])}, '
        f'"evolving_need": {_json(data["evolving_need"])}, '
        f'"risk_level": {_json(data["risk_level"])}, "source": {_json(data["source"])}, '
        f'"tags": {_json(sorted(data["tags"]))}, "state": {_json(state)}}}'
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
