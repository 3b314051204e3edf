"""Response export (JSONL in the importer's schema, CSV) and the filters shared with the pages."""

import json

from h2htalk import csvexport
from h2htalk.params import int_list
from scenarios.companions.import_formats import PLATFORM_FIELDS as JSONL_KEYS
from scenarios.models import Response
from scenarios.taxonomy import Subtask

CSV_COLUMNS = [
    "subtask",
    "external_id",
    "companion",
    "run",
    "status",
    "text",
    "prompt_tokens",
    "completion_tokens",
    "latency_ms",
    "finish_reason",
    "error",
]


class FilterError(ValueError):
    """A filter value that is not one of its choices (the page answers 400 with the message)."""


def filter_responses(params):
    """Responses narrowed by run, companion (ids), subtask and status query parameters.

    Ids that are not whole numbers are left out; a subtask or status that is not one of the
    choices (a NUL character, say, which PostgreSQL cannot even compare) raises FilterError.
    """
    queryset = Response.objects.all()
    for param, field in (("run", "run_id"), ("companion", "companion_id")):
        values = int_list(params, param)
        if values:
            queryset = queryset.filter(**{f"{field}__in": values})
    for value in params.getlist("subtask"):
        if value and value not in Subtask.values:
            raise FilterError(f"subtask: {value!r} is not a subtask")
    for value in params.getlist("status"):
        if value and value not in Response.Status.values:
            raise FilterError(f"status: {value!r} is not a response status")
    if params.get("subtask"):
        queryset = queryset.filter(scenario__subtask__in=params.getlist("subtask"))
    if params.get("status"):
        queryset = queryset.filter(status=params["status"])
    return queryset


def _rows(queryset):
    return (
        queryset.select_related("scenario", "companion", "run")
        .order_by("pk")
        .iterator(chunk_size=2000)
    )


def _record(response: Response) -> dict:
    return {
        "subtask": response.scenario.subtask,
        "external_id": response.scenario.external_id,
        "companion": response.companion.name,
        "run": response.run.name,
        "status": response.status,
        "text": response.text,
        "prompt_tokens": response.prompt_tokens,
        "completion_tokens": response.completion_tokens,
        "latency_ms": response.latency_ms,
        "finish_reason": response.finish_reason,
        "error": response.error,
    }


def iter_jsonl(queryset):
    """The importer's platform JSONL: successful responses only, so an export imports back."""
    for response in _rows(queryset.filter(status=Response.Status.OK)):
        record = {key: value for key, value in _record(response).items() if key in JSONL_KEYS}
        yield json.dumps(record, ensure_ascii=False) + "\n"


def iter_csv(queryset):
    yield from csvexport.stream(CSV_COLUMNS, (_record(response) for response in _rows(queryset)))


RESPONSE_EXPORTERS = {"jsonl": (iter_jsonl, "application/x-ndjson"), "csv": (iter_csv, "text/csv")}
