"""The paper profile: ROUGE-1/2/L and BLEU-1…4 exactly as the released H2HTalk evaluator
computes them, and its aggregation (scoring.metrics.profiles names the profiles).

What the released evaluator (evaluate/ of LolerPanda/H2HTalk at commit 4730dae9) does, as
measured by running it; this module reproduces it, it does not copy it:

- An answer that is not a string, is empty or only whitespace (on either side) is left out: no
  score, and left out of every mean. Otherwise both texts are stripped (str.strip).
- Tokens: every token of jieba.cut (precise mode, HMM on) of the stripped text, punctuation,
  spaces, "\\n" and "\\r\\n" included, nothing lower-cased; English goes through jieba too.
- ROUGE-n: clipped n-gram overlap o, P = o / candidate n-grams, R = o / reference n-grams,
  F1 = 2PR / (P + R); 0 when either side has fewer than n tokens. ROUGE-L: the LCS F1.
- BLEU-n: NLTK sentence_bleu with one reference, SmoothingFunction().method1 (ε = 0.1 over
  the order's candidate n-gram count when nothing matches) and weights (1, 0, 0, 0),
  (0.5, 0.5, 0, 0), (0.33, 0.33, 0.34, 0), (0.25, 0.25, 0.25, 0.25): 0 when no unigram
  matches; brevity penalty exp(1 − r/c) when the candidate is not longer.
- Composite: the paper's weights on the means, a model term that failed or is missing counted
  0.0 (no renormalisation); means are plain means over the answers kept, per subtask and over
  all answers (not a mean of the subtask means). `aggregate` does that.

The figures depend on jieba's dictionary: pyproject.toml pins jieba==0.42.1.
"""

import math
from collections.abc import Iterable, Mapping

import jieba

from scoring.metrics import reference as words

BLEU_WEIGHTS = (
    (1.0, 0.0, 0.0, 0.0),
    (0.5, 0.5, 0.0, 0.0),
    (0.33, 0.33, 0.34, 0.0),
    (0.25, 0.25, 0.25, 0.25),
)
RATIOS = words.RATIOS
MODEL_TERMS = ("bertscore", "embedding_cosine")


def excluded(candidate, reference) -> bool:
    """True when the released evaluator leaves the pair out: a side is not a string, is empty
    or only whitespace."""
    return not (
        isinstance(candidate, str)
        and isinstance(reference, str)
        and candidate.strip()
        and reference.strip()
    )


def tokenize(text: str) -> list[str]:
    """Every token of jieba.cut of the stripped text (punctuation and whitespace kept)."""
    text = text.strip()
    if not text:
        return []
    words._init_jieba()
    return jieba.lcut(text)


def _rouge_n(overlap: int, c: int, r: int, n: int) -> float:
    """F1 from the clipped overlap and the token counts c, r (n-gram counts c − n + 1, …)."""
    if c < n or r < n:
        return 0.0
    recall = overlap / (r - n + 1)
    precision = overlap / (c - n + 1)
    total = precision + recall
    return 2 * precision * recall / total if total else 0.0


def _lcs_f1(lcs: int, c: int, r: int) -> float:
    if not c or not r:
        return 0.0
    recall, precision = lcs / r, lcs / c
    total = precision + recall
    return 2 * precision * recall / total if total else 0.0


def _bleus(overlaps: list[int], c: int, r: int) -> list[float]:
    """NLTK's sentence_bleu with method1 smoothing for each of BLEU_WEIGHTS."""
    if overlaps[0] == 0:  # also an empty candidate
        return [0.0] * len(BLEU_WEIGHTS)
    penalty = 1.0 if c > r else math.exp(1 - r / c)
    precisions = [
        (overlap if overlap else 0.1) / max(1, c - n) for n, overlap in enumerate(overlaps)
    ]
    logs = [math.log(p) for p in precisions]
    return [
        penalty * math.exp(math.fsum(w * log for w, log in zip(weights, logs, strict=True)))
        for weights in BLEU_WEIGHTS
    ]


def score_tokens(candidate: list[str], reference: list[str]) -> list[float]:
    """[rouge1, rouge2, rougeL, bleu1, …, bleu4] of two token lists."""
    cand = words.prepare_tokens(candidate)
    ref = words.prepare_tokens(reference, masks=True)
    c, r = len(candidate), len(reference)
    overlaps = [words._clipped_overlap(a, b) for a, b in zip(cand.ngrams, ref.ngrams, strict=True)]
    lcs = words._lcs(candidate, ref.masks, r)
    return [
        _rouge_n(overlaps[0], c, r, 1),
        _rouge_n(overlaps[1], c, r, 2),
        _lcs_f1(lcs, c, r),
        *_bleus(overlaps, c, r),
    ]


def score_row(candidate, reference) -> tuple:
    """The values of words.KEYS for one pair; the ratios NaN when the pair is left out."""
    candidate = candidate if isinstance(candidate, str) else ""
    reference = reference if isinstance(reference, str) else ""
    cand, ref = tokenize(candidate), tokenize(reference)
    left_out = excluded(candidate, reference)
    ratios = [math.nan] * len(RATIOS) if left_out else score_tokens(cand, ref)
    c, r = len(cand), len(ref)
    counts = (c, words.char_length(candidate), r, words.char_length(reference))
    return (*ratios, *counts, c / r if r else math.nan)


def score_pair(candidate, reference) -> dict | None:
    """The released evaluator's ROUGE/BLEU of one pair with the lengths (tokens of this
    profile, non-whitespace characters); None when it leaves the pair out."""
    if excluded(candidate, reference):
        return None
    row = score_row(candidate, reference)
    out = dict(zip(words.KEYS, row, strict=True))
    for key in words.COUNTS:
        out[key] = int(out[key])
    return out


# ---------------------------------------------------------------- aggregation


def _term(values: Mapping, term: str) -> float:
    """A term's value as the released evaluator adds it: missing or failed → 0.0."""
    value = values.get(term)
    if value is None and term == "embedding_cosine":
        value = values.get("embedding_score")
    try:
        value = float(value)
    except (TypeError, ValueError):
        return 0.0
    return value if math.isfinite(value) else 0.0


def kept(values) -> bool:
    """Whether stored values of this profile count in the means (the pair was not left out)."""
    if not values or values.get("excluded"):
        return False
    number = values.get("rouge1")
    return isinstance(number, int | float) and math.isfinite(number)


def _summary(rows: list[Mapping], weights: Mapping[str, float]) -> dict:
    terms = [*RATIOS, *MODEL_TERMS]
    means = {t: math.fsum(_term(v, t) for v in rows) / len(rows) for t in terms}
    means["composite"] = math.fsum(weights[t] * means[t] for t in weights)
    means["n"] = len(rows)
    return means


def aggregate(rows: Iterable[tuple[str, Mapping | None]]) -> dict:
    """The released evaluator's report from (subtask, values) per answer: plain means of every
    term per subtask and over all answers kept, and the composite of those means (the paper's
    weights, a missing model term 0.0). Answers left out (values None or not kept) count in no
    mean; a subtask with none kept is absent. {"subtasks": {name: means}, "overall": means}."""
    from scoring.metrics.composite import PAPER_WEIGHTS

    groups: dict[str, list[Mapping]] = {}
    for subtask, values in rows:
        if kept(values):
            groups.setdefault(subtask, []).append(values)
    every = [v for group in groups.values() for v in group]
    overall = _summary(every, PAPER_WEIGHTS) if every else None
    return {
        "subtasks": {name: _summary(group, PAPER_WEIGHTS) for name, group in groups.items()},
        "overall": overall,
    }
