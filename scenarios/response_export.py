"""Response export (JSONL in the importer's schema, CSV) and the filters shared with the pages."""

import csv
import io
import json

from .models import Response
from .response_import import PLATFORM_FIELDS as JSONL_KEYS

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


def filter_responses(params):
    """Responses narrowed by run, companion (ids), subtask and status query parameters."""
    queryset = Response.objects.all()
    for param, field in (("run", "run_id"), ("companion", "companion_id")):
        values = [v for v in params.getlist(param) if v.isdigit()]
        if values:
            queryset = queryset.filter(**{f"{field}__in": values})
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
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for count, response in enumerate(_rows(queryset), start=1):
        writer.writerow(_record(response))
        if count % 500 == 0:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


RESPONSE_EXPORTERS = {"jsonl": (iter_jsonl, "application/x-ndjson"), "csv": (iter_csv, "text/csv")}
