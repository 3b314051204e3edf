"""Provenance of stored numbers: canonical JSON, its sha256, and the code version.

Releases and calibrated-judge documents both record which code produced them, so that a number
read months later can be traced and a recomputation that differs can be explained. This module
imports nothing from Django, so anything (also the pure statistics) may use it.
"""

import hashlib
import importlib.metadata
import json
import os
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The packages whose code the stored numbers (release results, calibrated judges) come from.
NUMBERS_CODE = ("h2htalk/stats", "scoring/metrics", "scoring/calibration", "scoring/releases")


# One encoder for every call (json.dumps with these options builds a new one each time, which
# costs more than encoding a small value: releases hash hundreds of thousands of them).
_CANONICAL = json.JSONEncoder(
    sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False
)


def canonical(value) -> str:
    """JSON with sorted keys, no spaces, UTF-8 text and no NaN: the same value always gives the
    same text, so its sha256 identifies the value."""
    return _CANONICAL.encode(value)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def code_version() -> str:
    """The version of the code that computes stored numbers: H2HTALK_CODE_VERSION if set (a
    deployment can name its build), else the package version and a sha256 of the Python sources
    of NUMBERS_CODE. No git call: a container without git, or a dirty checkout, still gets a
    version that changes whenever that code changes."""
    return os.environ.get("H2HTALK_CODE_VERSION") or _package_and_sources_version()


@cache
def _package_and_sources_version() -> str:
    try:
        version = importlib.metadata.version("h2htalk-platform")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    digest = hashlib.sha256()
    for package in NUMBERS_CODE:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            digest.update(path.relative_to(ROOT).as_posix().encode())
            digest.update(path.read_bytes())
    return f"h2htalk-platform {version}, statistics code sha256 {digest.hexdigest()[:16]}"
