"""CSV exports, safe to open in a spreadsheet: one writer for every CSV the platform serves,
and the one download response of every streamed export (CSV or JSONL).

A text cell that begins with `=`, `+`, `-`, `@`, a tab or a carriage return is read by Excel,
LibreOffice and Google Sheets as a formula (CSV injection: `=HYPERLINK(...)` in a rationale
becomes a live link that can carry other cells out). Such a cell is written with a single quote
in front, as OWASP recommends; the quote makes the spreadsheet show the text as text.

Numbers (int, float, Decimal; bool) are written as they are, so numeric columns stay numeric: a
negative number is a number, not a formula. Only strings are neutralised.

The escape is reversible: a text cell that already begins with a quote followed by one of those
characters or by another quote gets one more quote in front as well, so `unquote_cell` (used by
the scenario CSV importer) gives back exactly the text that was exported, and an export imports
back unchanged. JSONL exports do not go through here: they are data files, not spreadsheets.
"""

import csv
import io
from collections.abc import Iterable, Iterator, Mapping

from django.http import StreamingHttpResponse
from django.utils import timezone

TRIGGERS = frozenset("=+-@\t\r")
QUOTE = "'"
_AFTER_QUOTE = TRIGGERS | {QUOTE}


def safe_cell(value):
    """The value to write in a CSV cell: a string that a spreadsheet would evaluate, quoted."""
    if isinstance(value, str) and (
        value[:1] in TRIGGERS or (value[:1] == QUOTE and value[1:2] in _AFTER_QUOTE)
    ):
        return QUOTE + value
    return value


def unquote_cell(text: str) -> str:
    """The inverse of `safe_cell` on strings (a cell read back from an exported CSV)."""
    if text[:1] == QUOTE and text[1:2] in _AFTER_QUOTE:
        return text[1:]
    return text


class SafeDictWriter(csv.DictWriter):
    """`csv.DictWriter` that passes every cell through `safe_cell`."""

    def __init__(self, buffer, fieldnames, **kwargs):
        # Rows end in CRLF (RFC 4180). With "\n" alone the csv module would not quote a cell
        # holding a bare "\r", and a spreadsheet would start a new row there, with the rest of
        # the cell, unquoted, as its first cell.
        super().__init__(buffer, fieldnames=fieldnames, lineterminator="\r\n", **kwargs)

    def writerow(self, rowdict):
        return super().writerow({key: safe_cell(value) for key, value in rowdict.items()})

    def writerows(self, rowdicts):
        for rowdict in rowdicts:
            self.writerow(rowdict)


def stream(
    columns: list[str], rows: Iterable[Mapping], batch: int = 500, **kwargs
) -> Iterator[str]:
    """The CSV text of `rows` in chunks (header first, then every `batch` rows), for a
    StreamingHttpResponse. Keyword arguments go to `csv.DictWriter` (e.g. extrasaction)."""
    buffer = io.StringIO()
    writer = SafeDictWriter(buffer, columns, **kwargs)

    def flush() -> str:
        value = buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
        return value

    writer.writeheader()
    yield flush()
    for count, row in enumerate(rows, start=1):
        writer.writerow(row)
        if count % batch == 0:
            yield flush()
    yield flush()


def text(columns: list[str], rows: Iterable[Mapping], **kwargs) -> str:
    """The whole CSV as one string (small tables)."""
    return "".join(stream(columns, rows, **kwargs))


def download(chunks: Iterable[str], content_type: str, filename: str) -> StreamingHttpResponse:
    """A streamed export (CSV or JSONL) as an attachment the browser saves as `filename`."""
    response = StreamingHttpResponse(chunks, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def stamped_filename(prefix: str, extension: str) -> str:
    """`<prefix>-<YYYYmmdd-HHMMSS>.<extension>`: exports of a filtered list, told apart by time."""
    return f"{prefix}-{timezone.now():%Y%m%d-%H%M%S}.{extension}"
