"""What the scoring commands share: the domain's own errors (ReleaseError, DocumentError, an
unreadable file) reported as CommandError, so a command prints one message and exits with
status 1 instead of a traceback; and a JSON document read from a file or standard input."""

import json
import sys
from contextlib import contextmanager
from pathlib import Path

from django.core.management.base import CommandError


@contextmanager
def command_errors(*errors: type[Exception], prefix: str = ""):
    """Re-raise any of `errors` raised inside the block as CommandError(prefix + message)."""
    try:
        yield
    except errors as error:
        raise CommandError(f"{prefix}{error}") from error


def read_json(path: str):
    """The JSON document in the file at `path`, or on standard input for '-'."""
    with command_errors(
        OSError, UnicodeDecodeError, json.JSONDecodeError, prefix=f"cannot read {path}: "
    ):
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
        return json.loads(text)
