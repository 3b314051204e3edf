"""Offline reference metrics: ROUGE-1/2/L F1, smoothed sentence BLEU-1…4, lengths.

Every metric compares one candidate (a companion's response) with the scenario's reference
response; no model or network is involved.

- Tokens: Chinese by jieba in precise mode (`jieba.lcut`, HMM on: the released H2HTalk
  evaluator's call), English as lower-cased word tokens (`\\w+`, apostrophes allowed inside a
  word: "don't" is one token). Tokens made only of whitespace, punctuation (Unicode P*) and
  symbols (S*) are dropped, half- and full-width alike, so the brackets of an action
  "（轻轻抱住你）" go and the words inside stay. Latin letters are lower-cased in both modes.
  (The released evaluator keeps punctuation and space tokens and runs jieba on English too;
  ours compares words only.)
- ROUGE-N F1: clipped n-gram overlap o, precision o / candidate n-grams, recall o / reference
  n-grams, F1 their harmonic mean (= 2·o / (cand + ref n-grams)).
- ROUGE-L F1: LCS of the token sequences, P = LCS / candidate tokens, R = LCS / reference
  tokens, F = harmonic mean (β = 1; the rouge-score package's "rougeL", not ROUGE-Lsum).
- BLEU-n (n = 1…4): sentence BLEU with a single reference, the geometric mean of the clipped
  n-gram precisions of orders 1…n with equal weights, times the brevity penalty
  exp(1 − ref/cand) when the candidate is not longer than the reference; zero counts smoothed
  by Chen & Cherry (2014) method 1 (ε = 0.1 added to the numerator). Identical to NLTK's
  `sentence_bleu(..., smoothing_function=SmoothingFunction().method1)` including its edge
  cases: no matching unigram (or an empty candidate) gives 0, and an order with no n-gram in
  the candidate gets precision ε / 1. The released evaluator weights BLEU-3 as
  (0.33, 0.33, 0.34); ours uses exact thirds (on the bench's pairs: mean absolute difference
  0.0007, largest 0.005).
- Lengths: tokens and non-whitespace characters of both texts, and the length ratio
  candidate tokens / reference tokens (NaN when the reference has no tokens).
"""

import math
import multiprocessing
import re
import unicodedata
from collections import Counter
from functools import lru_cache, partial
from typing import NamedTuple

import jieba
import numpy as np

MAX_N = 4
SMOOTHING_EPSILON = 0.1  # Chen & Cherry (2014) method 1, NLTK's default
CJK_SHARE_FOR_CHINESE = 0.2  # detect_language: share of Han characters among letters/digits
LANGUAGES = ("zh", "en")

RATIOS = ("rouge1", "rouge2", "rougeL", "bleu1", "bleu2", "bleu3", "bleu4")
COUNTS = ("length_tokens", "length_chars", "reference_tokens", "reference_chars")
KEYS = (*RATIOS, *COUNTS, "length_ratio")

PARALLEL_MIN_PAIRS = 5_000  # below this a process pool costs more than it saves
CHUNK_SIZE = 2_000

_WORD = re.compile(r"\w+(?:['’]\w+)*")
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]")
_jieba_ready = False
_noise_cache: dict[str, bool] = {}


# ---------------------------------------------------------------- tokens


def _init_jieba() -> None:
    """Load jieba's dictionary once per process, without its log lines."""
    global _jieba_ready
    if not _jieba_ready:
        jieba.setLogLevel(60)
        jieba.initialize()
        _jieba_ready = True


def _is_noise(token: str) -> bool:
    """True when a token is only punctuation (P*), symbols (S*), whitespace or controls."""
    verdict = _noise_cache.get(token)
    if verdict is None:
        verdict = all(unicodedata.category(ch)[0] in "PSZC" for ch in token)
        if len(_noise_cache) < 200_000:
            _noise_cache[token] = verdict
    return verdict


def cjk_share(text: str) -> float:
    """Share of Han characters among the letters and digits of a text (0 when it has none)."""
    letters = sum(ch.isalnum() for ch in text)
    return len(_HAN.findall(text)) / letters if letters else 0.0


@lru_cache(maxsize=8192)
def detect_language(text: str) -> str:
    """Return "zh" when at least CJK_SHARE_FOR_CHINESE of the letters are Han characters, else "en".

    The threshold is low on purpose: jieba copes with Latin words inside Chinese text, while
    word tokenisation would turn a run of Chinese into one long token.
    """
    return "zh" if cjk_share(text) >= CJK_SHARE_FOR_CHINESE else "en"


def resolve_language(language: str | None, *texts: str) -> str:
    """Normalise "zh"/"zh-CN"/"en-US"…; None, "" or "auto" → detect from the texts given."""
    if not language or language == "auto":
        for text in texts:
            if text and text.strip():
                return detect_language(text)
        return "en"
    code = language.lower()
    for known in LANGUAGES:
        if code == known or code.startswith(known + "-") or code.startswith(known + "_"):
            return known
    raise ValueError(f"unsupported language {language!r}: use one of {LANGUAGES} or None")


def tokenize(text: str, language: str | None = None) -> list[str]:
    """Word tokens of a text: jieba for Chinese, \\w+ words for English; no punctuation."""
    language = resolve_language(language, text)
    if not text:
        return []
    if language == "zh":
        _init_jieba()
        return [t.lower() for t in jieba.lcut(text) if not _is_noise(t)]
    return [t.replace("’", "'") for t in _WORD.findall(text.lower())]


def char_length(text: str) -> int:
    """Characters of a text, whitespace not counted."""
    return len("".join(text.split()))


# ---------------------------------------------------------------- prepared texts


class Prepared(NamedTuple):
    """A tokenised text with what the metrics need from it, computed once."""

    tokens: list[str]
    chars: int
    ngrams: tuple[Counter, ...]  # orders 1…MAX_N
    masks: dict[str, int] | None  # token → bitmask of its positions (references only)


def prepare_tokens(tokens: list[str], chars: int = 0, masks: bool = False) -> Prepared:
    ngrams = tuple(
        Counter(tokens if n == 1 else zip(*(tokens[i:] for i in range(n)), strict=False))
        for n in range(1, MAX_N + 1)
    )
    return Prepared(tokens, chars, ngrams, _masks(tokens) if masks else None)


def _masks(tokens: list[str]) -> dict[str, int]:
    masks: dict[str, int] = {}
    for position, token in enumerate(tokens):
        masks[token] = masks.get(token, 0) | (1 << position)
    return masks


def prepare(text: str, language: str, masks: bool = False) -> Prepared:
    return prepare_tokens(tokenize(text, language), char_length(text), masks)


@lru_cache(maxsize=8192)
def _prepare_reference(text: str, language: str) -> Prepared:
    """References are shared by many candidates: tokenise each once per process."""
    return prepare(text, language, masks=True)


# ---------------------------------------------------------------- metrics


def lcs_length(a: list[str], b: list[str]) -> int:
    """Length of the longest common subsequence of two token lists."""
    return _lcs(a, _masks(b), len(b))


def _lcs(tokens: list[str], masks: dict[str, int], m: int) -> int:
    """Bit-parallel LCS (Crochemore et al. 2001; Hyyrö 2004): O(len(tokens)) big-int steps.

    V has one bit per reference position; a zero bit marks where the LCS grew.
    V ← (V + (V & M[t])) | (V & ~M[t]) for each candidate token t; LCS = zeros of V.
    """
    if not m or not tokens:
        return 0
    full = (1 << m) - 1
    v = full
    get = masks.get
    for token in tokens:
        u = v & get(token, 0)
        if u:
            v = ((v + u) | (v - u)) & full
    return m - v.bit_count()


def _clipped_overlap(candidate: Counter, reference: Counter) -> int:
    return sum(
        min(candidate[gram], reference[gram]) for gram in candidate.keys() & reference.keys()
    )


def _f1(overlap: int, candidate_total: int, reference_total: int) -> float:
    # F1 = 2PR / (P + R) with P = o / cand, R = o / ref, i.e. 2o / (cand + ref).
    return 2 * overlap / (candidate_total + reference_total) if overlap else 0.0


def _bleus(overlaps: list[int], c: int, r: int) -> list[float]:
    """BLEU-1…MAX_N from clipped overlaps per order, candidate and reference lengths."""
    if c == 0 or overlaps[0] == 0:
        return [0.0] * MAX_N  # NLTK: no unigram match → 0 whatever the smoothing
    penalty = 1.0 if c > r else math.exp(1 - r / c)
    logs = [
        math.log((overlap or SMOOTHING_EPSILON) / max(1, c - n))
        for n, overlap in enumerate(overlaps)
    ]
    return [penalty * math.exp(math.fsum(logs[:n]) / n) for n in range(1, MAX_N + 1)]


def _score(candidate: Prepared, reference: Prepared) -> tuple:
    c, r = len(candidate.tokens), len(reference.tokens)
    overlaps = [
        _clipped_overlap(cand, ref)
        for cand, ref in zip(candidate.ngrams, reference.ngrams, strict=True)
    ]
    lcs = _lcs(candidate.tokens, reference.masks, r)
    return (
        _f1(overlaps[0], c, r),
        _f1(overlaps[1], max(c - 1, 0), max(r - 1, 0)),
        _f1(lcs, c, r),
        *_bleus(overlaps, c, r),
        c,
        candidate.chars,
        r,
        reference.chars,
        c / r if r else math.nan,
    )


def rouge_n(candidate: list[str], reference: list[str], n: int) -> float:
    """ROUGE-N F1 of two token lists (clipped n-gram overlap), any n ≥ 1."""
    cand = Counter(zip(*(candidate[i:] for i in range(n)), strict=False))
    ref = Counter(zip(*(reference[i:] for i in range(n)), strict=False))
    return _f1(_clipped_overlap(cand, ref), sum(cand.values()), sum(ref.values()))


def bleu(candidate: list[str], reference: list[str]) -> list[float]:
    """[BLEU-1, …, BLEU-4] of two token lists, smoothed (Chen & Cherry method 1)."""
    cand, ref = prepare_tokens(candidate), prepare_tokens(reference)
    overlaps = [_clipped_overlap(a, b) for a, b in zip(cand.ngrams, ref.ngrams, strict=True)]
    return _bleus(overlaps, len(candidate), len(reference))


def _as_dict(row) -> dict:
    out = dict(zip(KEYS, row, strict=True))
    for key in COUNTS:
        out[key] = int(out[key])
    return out


def score_pair(candidate: str, reference: str, language: str | None = None) -> dict:
    """All reference metrics of one response: RATIOS in [0, 1], COUNTS, length_ratio.

    language None → detected from the reference (the candidate when the reference is empty);
    candidate and reference always share one tokeniser.
    """
    language = resolve_language(language, reference, candidate)
    return _as_dict(_score(prepare(candidate, language), _prepare_reference(reference, language)))


# ---------------------------------------------------------------- batches


def _score_chunk(chunk: list[tuple], profile: str = "platform") -> np.ndarray:
    out = np.empty((len(chunk), len(KEYS)))
    if profile == "paper":
        from scoring.metrics import paper_profile

        for row, (candidate, reference, _) in enumerate(chunk):
            out[row] = paper_profile.score_row(candidate, reference)
        return out
    for row, (candidate, reference, language) in enumerate(chunk):
        language = resolve_language(language, reference, candidate)
        out[row] = _score(prepare(candidate, language), _prepare_reference(reference, language))
    return out


def _worker_init() -> None:
    _init_jieba()  # a no-op after fork from a parent that loaded it already


def score_many(
    pairs,
    language: str | None = None,
    processes: int = 2,
    chunk_size: int = CHUNK_SIZE,
    profile: str = "platform",
) -> list[dict]:
    """score_pair over many (candidate, reference[, language]) pairs, results in input order.

    profile "paper": scoring.metrics.paper_profile.score_row instead (language ignored: the
    released evaluator runs jieba on every text); a pair it leaves out has NaN ratios.

    Pairs are grouped by reference so each reference is tokenised once per worker, cut into
    chunks, and the chunks spread over `processes` worker processes (forked after jieba is
    loaded). Batches under PARALLEL_MIN_PAIRS, processes ≤ 1, or a caller that is itself a
    daemon process (a Celery prefork child cannot fork a pool) run in this process.
    """
    rows = [
        (pair[0] or "", pair[1] or "", pair[2] if len(pair) > 2 and pair[2] else language)
        for pair in pairs
    ]
    if not rows:
        return []
    order = sorted(range(len(rows)), key=lambda i: (rows[i][1], rows[i][2] or ""))
    chunks = [
        [rows[i] for i in order[start : start + chunk_size]]
        for start in range(0, len(order), chunk_size)
    ]
    parallel = (
        processes > 1
        and len(rows) >= PARALLEL_MIN_PAIRS
        and not multiprocessing.current_process().daemon
    )
    if profile == "paper" or any(not (row[2] or "").lower().startswith("en") for row in rows):
        _init_jieba()  # before forking, so no worker loads the dictionary again
    if parallel:
        methods = multiprocessing.get_all_start_methods()
        context = multiprocessing.get_context("fork" if "fork" in methods else None)
        with context.Pool(min(processes, len(chunks)), initializer=_worker_init) as pool:
            results = pool.map(partial(_score_chunk, profile=profile), chunks, chunksize=1)
    else:
        results = [_score_chunk(chunk, profile) for chunk in chunks]
    table = np.empty((len(rows), len(KEYS)))
    table[np.asarray(order)] = np.concatenate(results)
    return [_as_dict(row) for row in table.tolist()]
