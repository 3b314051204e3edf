"""The stored reference metrics and LLM rubric verdicts of many responses, read into columns.

Verifying a release hashes them (releases.freezing.metrics_digest, verdicts_digest) and
computing it reads them again for the composite (releases.data) and the judge's features
(metrics.features.metric_table, rubric_table): for a large release hundreds of thousands of
JSON values decoded five times. Inside `reading_once()` (releases.service.results_for) each
table is read once, its digest computed on the way, and every later use takes its rows from the
columns kept; outside it every call reads what it needs, as before.
"""

import contextlib
import contextvars
import hashlib
import math
from dataclasses import dataclass

import numpy as np

from h2htalk.provenance import canonical
from scoring.frames import finite_number, id_subquery
from scoring.metrics import composite as paper
from scoring.metrics.catalogue import METRIC_FEATURES, RUBRIC_DIMENSIONS
from scoring.models import JudgeVerdict, MetricScore

USABLE = (JudgeVerdict.Parse.STRICT, JudgeVerdict.Parse.FALLBACK)
FEATURE_NUMBERS = (*METRIC_FEATURES, "bertscore")  # then log_length
ENCODERS = tuple(paper.PROVENANCE.values())
CHUNK = 5000

_kept: contextvars.ContextVar[dict | None] = contextvars.ContextVar("stored_columns", default=None)


@contextlib.contextmanager
def reading_once():
    """Within this block each table is read from the database once (for the ids of its first
    read; a later read of other ids reads again)."""
    token = _kept.set({})
    try:
        yield
    finally:
        _kept.reset(token)


def _reusable(found, ordered: list[int], digest: bool) -> bool:
    """Whether columns kept can answer a read of these ids: they were read for them all (for
    exactly them, with the digest, when the digest is asked)."""
    if found is None or (digest and found.digest is None):
        return False
    wanted = np.asarray(ordered, dtype=np.int64)
    if digest:
        return np.array_equal(found.read_for, wanted)
    return bool(np.isin(wanted, found.read_for).all())


def _sorted_ids(response_ids) -> list[int]:
    return sorted(int(pk) for pk in response_ids)


def _finite_numbers(values: list) -> list[float]:
    """finite_number of each value, the common cases (a finite float, an int) without a call."""
    return [
        v if type(v) is float and v - v == 0.0 else float(v) if type(v) is int else finite_number(v)
        for v in values
    ]


# ---------------------------------------------------------------- metrics


def paper_term_keys() -> list[tuple[str, str]]:
    """(term, the key it may be stored under instead) of the paper's composite terms."""
    aliases = {v: k for k, v in paper.ALIASES.items()}
    return [(term, aliases.get(term, term)) for term in paper.PAPER_WEIGHTS]


@dataclass
class MetricColumns:
    """MetricScore.values of the responses read for: one row per response with stored metrics."""

    read_for: np.ndarray  # the sorted ids asked for
    digest: str | None  # metrics_digest of read_for (None: not computed)
    ids: np.ndarray  # sorted ids of the responses with stored metrics (row order)
    paper: np.ndarray  # rows × paper_term_keys(): finite values, NaN when not a number
    features: np.ndarray  # rows × FEATURE_NUMBERS + log_length
    encoders: dict[str, list]  # ENCODERS key → the stored value of each row (None: absent)
    profiles: list[str]  # the metrics profile of each row (MetricScore.profile)

    def rows(self, response_ids) -> np.ndarray:
        """The rows of those of these responses that have stored metrics, in the given order."""
        wanted = np.asarray(response_ids, dtype=np.int64)
        position = np.searchsorted(self.ids, wanted)
        inside = position < len(self.ids)
        inside[inside] = self.ids[position[inside]] == wanted[inside]
        return position[inside]


def metric_columns(response_ids, digest: bool = False) -> MetricColumns:
    """The stored metrics of these responses (and their metrics_digest when asked)."""
    ordered = _sorted_ids(response_ids)
    kept = _kept.get()
    if kept is not None:
        found = kept.get("metrics")
        if _reusable(found, ordered, digest):
            return found
    columns = _read_metrics(ordered, digest, with_columns=kept is not None or not digest)
    if kept is not None:
        kept["metrics"] = columns
    return columns


def _read_metrics(ordered: list[int], digest: bool, with_columns: bool) -> MetricColumns:
    """One pass over the stored rows in id order beside the sorted ids: the digest's
    "id<TAB>canonical values" lines ("-" when none), and the columns."""
    rows = (
        MetricScore.objects.filter(response_id__in=id_subquery(ordered))
        .order_by("response_id")
        .values_list("response_id", "values", "profile")
        .iterator(chunk_size=CHUNK)
    )
    terms = paper_term_keys()
    keys = list(
        dict.fromkeys([*FEATURE_NUMBERS, "length_chars", *(k for pair in terms for k in pair)])
    )
    paper_at = [(term, keys.index(term), keys.index(alias)) for term, alias in terms]
    features_at = [keys.index(name) for name in FEATURE_NUMBERS]
    chars_at = keys.index("length_chars")
    size = len(ordered) if with_columns else 0
    ids: list[int] = []
    paper_table = np.empty((size, len(terms)))
    features = np.empty((size, len(FEATURE_NUMBERS) + 1))
    encoders: dict[str, list] = {key: [] for key in ENCODERS}
    profiles: list[str] = []
    hashed = hashlib.sha256() if digest else None
    stored = next(rows, None)
    for pk in ordered:
        while stored is not None and stored[0] < pk:
            stored = next(rows, None)
        found = stored is not None and stored[0] == pk
        if hashed is not None:
            hashed.update(f"{pk}\t{canonical(stored[1]) if found else '-'}\n".encode())
        if not (found and with_columns) or (ids and ids[-1] == pk):
            continue
        values = stored[1]
        number = _finite_numbers([values.get(key) for key in keys])
        row = len(ids)
        # A term stored under its alias only: values.get(term, values.get(alias)).
        paper_table[row] = [
            number[i] if i == j or term in values else number[j] for term, i, j in paper_at
        ]
        chars = number[chars_at]
        features[row] = [
            *(number[i] for i in features_at),
            math.log1p(chars) if not math.isnan(chars) else math.nan,
        ]
        ids.append(pk)
        for key, column in encoders.items():
            column.append(values.get(key))
        profiles.append(stored[2])
    return MetricColumns(
        read_for=np.asarray(ordered, dtype=np.int64),
        digest=hashed.hexdigest() if hashed is not None else None,
        ids=np.asarray(ids, dtype=np.int64),
        paper=paper_table[: len(ids)],
        features=features[: len(ids)],
        encoders=encoders,
        profiles=profiles,
    )


# ---------------------------------------------------------------- verdicts


@dataclass
class VerdictRows:
    """The usable single-answer verdicts of a judge config on the responses read for, in id
    order: the response and the 1–10 score of each rubric dimension (NaN: absent or not a
    number; range not checked here)."""

    read_for: np.ndarray
    digest: str | None  # verdicts_digest of read_for (None: not computed)
    response: np.ndarray
    scores: np.ndarray  # verdicts × RUBRIC_DIMENSIONS


def verdict_rows(config, response_ids, digest: bool = False) -> VerdictRows:
    """The usable verdicts of `config` on these responses (and the digest of every verdict of
    the config on them, single or pairwise, when asked: verdicts_digest)."""
    ordered = _sorted_ids(response_ids)
    kept = _kept.get()
    key = ("verdicts", config.pk)
    if kept is not None:
        found = kept.get(key)
        if _reusable(found, ordered, digest):
            return found
    rows = _read_verdicts(config, ordered, digest, with_rows=kept is not None or not digest)
    if kept is not None:
        kept[key] = rows
    return rows


def _read_verdicts(config, ordered: list[int], digest: bool, with_rows: bool) -> VerdictRows:
    ids = set(ordered)
    hashed = hashlib.sha256() if digest else None
    responses: list[int] = []
    scores: list[list[float]] = []

    def keep(response, parse, values) -> None:
        if with_rows and response in ids and parse in USABLE:
            responses.append(response)
            values = values or {}
            scores.append(_finite_numbers([values.get(d) for d in RUBRIC_DIMENSIONS]))

    if digest:  # every verdict of the config (also pairwise ones) in id order
        rows = (
            JudgeVerdict.objects.filter(run__judge=config)
            .values_list(
                "pk", "response_id", "first_id", "second_id", "sample", "parse", "winner", "scores"
            )
            .order_by("pk")
        )
        for pk, response, first, second, sample, parse, winner, values in rows.iterator(
            chunk_size=CHUNK
        ):
            if response in ids or (first in ids and second in ids):
                hashed.update(
                    f"{pk}\t{response}\t{first}\t{second}\t{sample}\t{parse}\t{winner}\t"
                    f"{canonical(values or {})}\n".encode()
                )
                keep(response, parse, values)
    else:
        rows = (
            JudgeVerdict.objects.filter(
                run__judge=config, response_id__in=id_subquery(ordered), parse__in=USABLE
            )
            .order_by("pk")
            .values_list("response_id", "parse", "scores")
        )
        for response, parse, values in rows.iterator(chunk_size=CHUNK):
            keep(response, parse, values)
    return VerdictRows(
        read_for=np.asarray(ordered, dtype=np.int64),
        digest=hashed.hexdigest() if hashed is not None else None,
        response=np.asarray(responses, dtype=np.int64),
        scores=np.asarray(scores, dtype=float).reshape(len(scores), len(RUBRIC_DIMENSIONS)),
    )
