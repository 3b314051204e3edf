"""Scenario export in the platform's JSONL and CSV schema (the importer reads both back)."""

import json
from collections.abc import Iterator

from h2htalk import csvexport
from scenarios.models import Persona, Scenario
from scenarios.services import PERSONA_FIELDS

CSV_COLUMNS = [
    "external_id",
    "subtask",
    "dimension",
    "persona",
    "language",
    "state",
    "user_message",
    "reference_response",
    "history",
    "memory",
    "schedule",
    "implicit_need",
    "evolving_need",
    "risk_level",
    "tags",
    "source",
]


def persona_record(persona: Persona | None) -> dict | None:
    if persona is None:
        return None
    return {name: getattr(persona, name) for name in PERSONA_FIELDS}


def scenario_record(scenario: Scenario) -> dict:
    return {
        "external_id": scenario.external_id,
        "subtask": scenario.subtask,
        "dimension": scenario.dimension,
        "persona": persona_record(scenario.persona),
        "language": scenario.language,
        "state": scenario.state,
        "history": scenario.history,
        "memory": scenario.memory,
        "schedule": scenario.schedule,
        "user_message": scenario.user_message,
        "reference_response": scenario.reference_response,
        "implicit_need": scenario.implicit_need,
        "evolving_need": scenario.evolving_need,
        "risk_level": scenario.risk_level,
        "tags": [tag.name for tag in scenario.tags.all()],
        "source": scenario.source,
    }


def _rows(queryset) -> Iterator[Scenario]:
    yield from (
        queryset.select_related("persona").prefetch_related("tags").order_by("pk").iterator(1000)
    )


def iter_jsonl(queryset) -> Iterator[str]:
    for scenario in _rows(queryset):
        yield json.dumps(scenario_record(scenario), ensure_ascii=False) + "\n"


def _csv_record(scenario: Scenario) -> dict:
    record = scenario_record(scenario)
    for column in ("history", "memory", "schedule", "persona"):
        # The persona goes in as a JSON object so the importer can recreate it.
        value = record[column]
        record[column] = "" if value is None else json.dumps(value, ensure_ascii=False)
    record["tags"] = ";".join(record["tags"])
    return record


def iter_csv(queryset) -> Iterator[str]:
    yield from csvexport.stream(CSV_COLUMNS, (_csv_record(s) for s in _rows(queryset)))


EXPORTERS = {"jsonl": (iter_jsonl, "application/x-ndjson"), "csv": (iter_csv, "text/csv")}
