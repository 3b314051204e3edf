"""The H2HTalk paper's hand-set composite of reference metrics: the baseline judge.

Terms whose model is not available here (BERTScore; embedding cosine unless a backend
supplies it) are reported as missing and the remaining weights renormalised to sum to 1. The
`note` of every result says so in one sentence; show it wherever the composite is shown.

An optional embedding term comes from a pluggable backend (EMBEDDING_BACKENDS). The only one
shipped is "char_ngram_hash": the cosine of hashed bags of character n-grams. It is a lexical
proxy, not a neural embedding, and the note says so whenever it feeds the composite.
"""

import math
import re
import zlib
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

# H2HTalk: Evaluating Large Language Models as Emotional Companion (the paper's automatic
# score; the same weights are hard-coded in its released evaluator, evaluate/evaluator.py of
# LolerPanda/H2HTalk): F1 variants, jieba tokens for Chinese. Hand-set, not learned.
PAPER_WEIGHTS = {
    "rouge1": 0.10,
    "rouge2": 0.15,
    "rougeL": 0.20,
    "bertscore": 0.25,
    "embedding_cosine": 0.20,
    "bleu1": 0.03,
    "bleu2": 0.03,
    "bleu3": 0.02,
    "bleu4": 0.02,
}
LABELS = {
    "rouge1": "ROUGE-1",
    "rouge2": "ROUGE-2",
    "rougeL": "ROUGE-L",
    "bertscore": "BERTScore",
    "embedding_cosine": "embedding cosine",
    "bleu1": "BLEU-1",
    "bleu2": "BLEU-2",
    "bleu3": "BLEU-3",
    "bleu4": "BLEU-4",
}
ALIASES = {"embedding_score": "embedding_cosine"}  # the released evaluator's key


# ---------------------------------------------------------------- embedding backends


@dataclass(frozen=True)
class EmbeddingBackend:
    name: str
    label: str
    lexical_proxy: bool  # True: not a neural embedding, and the composite's note says so
    similarity: Callable[[str, str], float] | None  # None: the term stays missing


def _char_ngrams(text: str, sizes=(1, 2, 3)) -> Counter:
    chars = re.sub(r"[\W_]+", " ", text.lower()).strip()
    grams = Counter()
    for n in sizes:
        grams.update(chars[i : i + n] for i in range(len(chars) - n + 1))
    return grams


def hashed_char_ngrams(text: str, dim: int = 2**18) -> Counter:
    """Bag of character 1–3-grams (punctuation folded to spaces) hashed into `dim` buckets.

    crc32 keeps buckets stable across processes (Python's str hash is salted per process).
    """
    vector = Counter()
    for gram, count in _char_ngrams(text).items():
        vector[zlib.crc32(gram.encode("utf-8")) % dim] += count
    return vector


def hashed_ngram_cosine(candidate: str, reference: str) -> float:
    """Cosine of two hashed character-n-gram count vectors, in [0, 1] (0 if either is empty)."""
    a, b = hashed_char_ngrams(candidate), hashed_char_ngrams(reference)
    dot = sum(count * b[bucket] for bucket, count in a.items() if bucket in b)
    norm = math.sqrt(sum(v * v for v in a.values()) * sum(v * v for v in b.values()))
    return dot / norm if norm else 0.0


EMBEDDING_BACKENDS = {
    "none": EmbeddingBackend("none", "no embedding model", False, None),
    "char_ngram_hash": EmbeddingBackend(
        "char_ngram_hash",
        "hashed character n-gram cosine",
        True,
        hashed_ngram_cosine,
    ),
}
DEFAULT_EMBEDDING_BACKEND = "none"


def embedding_features(
    candidate: str, reference: str, backend: str = DEFAULT_EMBEDDING_BACKEND
) -> dict:
    """{"embedding_cosine", "embedding_backend"} from a registered backend; {} for "none"."""
    chosen = EMBEDDING_BACKENDS[backend]
    if chosen.similarity is None:
        return {}
    return {
        "embedding_cosine": chosen.similarity(candidate, reference),
        "embedding_backend": chosen.name,
    }


# ---------------------------------------------------------------- composite


@dataclass
class CompositeResult:
    score: float | np.ndarray  # a float for one response, an array for composite_columns
    used_terms: list[str]
    missing_terms: list[str]
    renormalised: bool
    note: str
    weights: dict[str, float]  # the weights actually applied (sum to 1)


def _missing(value) -> bool:
    return value is None or math.isnan(float(value))


MODEL_TERMS = ("bertscore", "embedding_cosine")  # need a model this platform may not have


def _join(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _note(used: list[str], missing: list[str], backend: EmbeddingBackend | None) -> str:
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        why = " (no model for it here)" if len(missing) == 1 else " (no model for them here)"
        if not set(missing) <= set(MODEL_TERMS):
            why = ""
        kept = sum(PAPER_WEIGHTS[t] for t in used)
        text = (
            f"Paper composite (H2HTalk hand-set weights): {_join([LABELS[t] for t in missing])} "
            f"{verb} missing{why}, so the weights of the remaining {len(used)} "
            f"{'term' if len(used) == 1 else 'terms'} (summing to {kept:.2f}) are "
            "renormalised to sum to 1"
        )
    else:
        text = "Paper composite (H2HTalk hand-set weights) with all nine terms"
    if backend is not None and backend.lexical_proxy:
        text += f"; the embedding term is a lexical proxy ({backend.label}), not a neural embedding"
    return text + "."


def _plan(present: Mapping[str, bool], backend_name: str | None):
    used = [t for t in PAPER_WEIGHTS if present.get(t)]
    missing = [t for t in PAPER_WEIGHTS if not present.get(t)]
    if not used:
        raise ValueError("none of the composite's terms is present")
    total = sum(PAPER_WEIGHTS[t] for t in used)
    weights = {t: PAPER_WEIGHTS[t] / total for t in used}
    backend = None
    if "embedding_cosine" in used and backend_name is not None:
        backend = EMBEDDING_BACKENDS.get(backend_name)
        if backend is None:
            raise ValueError(f"unknown embedding backend {backend_name!r}")
    return used, missing, weights, _note(used, missing, backend)


def _canonical(metrics: Mapping) -> dict:
    return {ALIASES.get(key, key): value for key, value in metrics.items()}


def composite(metrics: Mapping, embedding_backend: str | None = None) -> CompositeResult:
    """The paper's composite of one response's metrics (keys as in scoring.metrics.reference).

    A term is missing when its key is absent, None or NaN; its weight is dropped and the rest
    renormalised. `embedding_backend` (or metrics["embedding_backend"]) names the backend that
    produced embedding_cosine, so a lexical proxy is flagged in the note.
    """
    metrics = _canonical(metrics)
    backend_name = embedding_backend or metrics.get("embedding_backend")
    present = {t: not _missing(metrics.get(t)) for t in PAPER_WEIGHTS}
    used, missing, weights, note = _plan(present, backend_name)
    score = math.fsum(weights[t] * float(metrics[t]) for t in used)
    return CompositeResult(score, used, missing, bool(missing), note, weights)


def composite_columns(
    columns: Mapping[str, np.ndarray], embedding_backend: str | None = None
) -> CompositeResult:
    """The composite of many responses at once: `columns` maps term → array (or a DataFrame).

    A term is missing when its column is absent or entirely NaN; a column with only some NaN
    is an error, since the renormalisation must be the same for every row.
    """
    arrays = {}
    for key in columns:
        term = ALIASES.get(key, key)
        if term in PAPER_WEIGHTS:
            arrays[term] = np.asarray(columns[key], dtype=float)
    present = {}
    for term, values in arrays.items():
        nan = np.isnan(values)
        if nan.any() and not nan.all():
            raise ValueError(f"column {term!r} is missing for some rows only")
        present[term] = not nan.all()
    if embedding_backend is None and "embedding_backend" in columns:
        names = {name for name in columns["embedding_backend"] if isinstance(name, str)}
        if len(names) > 1:
            raise ValueError(f"embedding_cosine mixes backends {sorted(names)}")
        embedding_backend = names.pop() if names else None
    used, missing, weights, note = _plan(present, embedding_backend)
    score = sum(weights[t] * arrays[t] for t in used)
    return CompositeResult(score, used, missing, bool(missing), note, weights)
