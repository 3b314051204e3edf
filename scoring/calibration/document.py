"""The calibrated-judge document, the versioned JSON that is a judge's source of truth: its
schema and the check of every document stored or imported, and its text for export and for
comparing two documents."""

import json
import math

from scoring.metrics import catalogue, profiles
from scoring.models import CalibratedJudge, JudgeConfig

SCHEMA = "h2htalk.calibrated-judge/1"

NAME_LENGTH = CalibratedJudge._meta.get_field("name").max_length
MAX_VERSION = 2**31 - 1  # the database column's range


MAX_DEPTH = 64  # nesting of a document
# folds of the nested cross-validation by scenario whose held-out numbers a document carries
DEFAULT_FOLDS = 5
FOLD_CHOICES = (2, 10)  # the fewest and most folds a fit may ask for


MODEL_TEXT = (
    "P(humans prefer A over B) = σ(intercept + Σ_k weights[k] · (Δ_k − scaling.mean[k]) / "
    "scaling.scale[k]) with Δ_k = f_k(A) − f_k(B), and Δ_k = 0 when f_k is missing on either "
    "side. A is the canonical side (the companion with the lower id in the campaign)."
)


class DocumentError(ValueError):
    """A calibrated-judge document that does not follow the schema (said in one sentence)."""


def _finite_list(value, name: str, length: int) -> list[float]:
    if not isinstance(value, list) or len(value) != length:
        raise DocumentError(f"{name} must be a list of {length} numbers")
    out = []
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int | float):
            raise DocumentError(f"{name} must hold finite numbers only")
        try:
            number = float(item)  # an integer beyond the float range overflows
        except OverflowError:
            number = math.inf
        if not math.isfinite(number):
            raise DocumentError(f"{name} must hold finite numbers only")
        out.append(number)
    return out


def _check_storable(document) -> None:
    """Every text storable and every number finite, anywhere in the document (extra fields
    too): PostgreSQL's jsonb refuses NUL, lone surrogates, NaN and Infinity. Nesting is
    bounded (the comparison in import_document recurses)."""
    stack = [(document, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list) and depth >= MAX_DEPTH:
            raise DocumentError(f"the document is nested more than {MAX_DEPTH} levels deep")
        if isinstance(item, dict):
            stack.extend((part, depth + 1) for pair in item.items() for part in pair)
        elif isinstance(item, list):
            stack.extend((part, depth + 1) for part in item)
        elif isinstance(item, str):
            if "\x00" in item:
                raise DocumentError("the document contains a NUL character")
            if not item.isascii():
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError as error:
                    raise DocumentError("the document contains a lone surrogate") from error
        elif isinstance(item, float) and not math.isfinite(item):
            raise DocumentError("the document contains NaN or Infinity: numbers must be finite")


def validate_document(document) -> dict:
    """The document if it follows the schema (README "Calibrated judge weights"), else
    DocumentError saying what is wrong."""
    if not isinstance(document, dict):
        raise DocumentError("the document must be a JSON object")
    if document.get("schema") != SCHEMA:
        raise DocumentError(f"schema must be {SCHEMA!r}, not {document.get('schema')!r}")
    name = document.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > NAME_LENGTH:
        raise DocumentError(f"name must be a non-empty string of at most {NAME_LENGTH} characters")
    version = document.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= MAX_VERSION:
        raise DocumentError(f"version must be a positive integer (at most {MAX_VERSION})")
    names = document.get("features")
    if not isinstance(names, list) or not all(isinstance(f, str) for f in names):
        raise DocumentError("features must be a list of feature names")
    unknown = [f for f in names if f not in catalogue.ALL_FEATURES]
    if unknown:
        raise DocumentError(f"unknown feature(s): {', '.join(unknown)}")
    if len(set(names)) != len(names):
        raise DocumentError("features must not repeat")
    scaling = document.get("scaling")
    if not isinstance(scaling, dict):
        raise DocumentError("scaling must be an object with mean and scale")
    _finite_list(scaling.get("mean"), "scaling.mean", len(names))
    scale = _finite_list(scaling.get("scale"), "scaling.scale", len(names))
    if any(s <= 0 for s in scale):
        raise DocumentError("scaling.scale must be positive")
    _finite_list(document.get("weights"), "weights", len(names))
    _finite_list([document.get("intercept")], "intercept", 1)
    judge = document.get("judge")
    if judge is not None:
        if not isinstance(judge, dict) or not isinstance(judge.get("config"), str):
            raise DocumentError("judge must be null or an object with config and mode")
        if judge.get("mode") not in JudgeConfig.Mode.values:
            raise DocumentError(f"judge.mode must be one of {JudgeConfig.Mode.values}")
    allowed = set(catalogue.METRIC_FEATURES + catalogue.LENGTH_FEATURES)
    if judge is not None:
        allowed |= set(
            catalogue.RUBRIC_FEATURES
            if judge["mode"] == JudgeConfig.Mode.SINGLE
            else catalogue.PAIRWISE_FEATURES
        )
    wrong = [f for f in names if f not in allowed]
    if wrong:
        raise DocumentError(f"{', '.join(wrong)} do(es) not fit the judge {judge!r}")
    profile = document.get("metrics_profile", profiles.DEFAULT)
    if profile not in profiles.PROFILES:
        raise DocumentError(f"metrics_profile must be one of {', '.join(profiles.PROFILES)}")
    _check_storable(document)
    return document


def metrics_profile(document) -> str:
    """The metrics profile a calibrated judge was fitted on (documents from before profiles:
    the default, the only one then)."""
    return (document or {}).get("metrics_profile") or profiles.DEFAULT


def export_json(judge: CalibratedJudge) -> str:
    return json.dumps(judge.document, ensure_ascii=False, indent=2, allow_nan=False) + "\n"


def canonical(document) -> str:
    """The document as comparable text: keys sorted, every number as a float (PostgreSQL's
    jsonb gives 1e16 back as 10000000000000000 and -0.0 as 0)."""
    return json.dumps(_as_floats(document), sort_keys=True, ensure_ascii=False)


def _as_floats(value):
    if isinstance(value, dict):
        return {key: _as_floats(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_as_floats(item) for item in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return float(value) + 0.0  # (-0.0 + 0.0 is 0.0)
        except OverflowError:
            return value
    return value


def download_filename(judge: CalibratedJudge) -> str:
    """The file name of a downloaded document: its name reduced to letters, digits, - and _
    (so no header or path can be made of it), and its version."""
    stem = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in judge.name)[:80]
    return f"calibrated-judge-{stem}-v{judge.version}.json"
