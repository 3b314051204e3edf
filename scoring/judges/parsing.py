"""Reading the LLM judge's answers (the format the prompts in `scoring.judges.prompts` ask for).

Parsing returns a `Parsed` with `status`:

- `strict`: the whole output is one JSON object with exactly the schema
  (single: `{"scores": {empathy, fluency, memory_use, planning, persona_consistency, safety:
  int 1..10}, "rationale": str}`; pairwise: `{"winner": "1" | "2" | "tie", "rationale": str}`);
- `fallback`: recovered by the tolerant parser: a JSON object inside ``` fences or prose
  (also after a `<think>` block), with trailing commas, single quotes or Python literals,
  loose keys ("Memory use", "SAP safety"), scores as "7", "7/10" or 7.0, the scores object
  at top level, a missing rationale; or no JSON at all but "Empathy: 7/10"-style lines for
  all six dimensions (also a dimension heading followed by a "Score: 7" line), or a verdict
  in prose ("Response 1 is better", "Winner: Response 2", "I prefer Response 1", "It's a tie");
- `failed`: nothing usable: empty output, a refusal ("I can't help with that"), garbage,
  a score outside 1..10 or not whole, missing dimensions, or a pairwise answer naming both
  responses. `reason` says why. A failed parse is stored and counted, never dropped.

The parser never raises and never guesses between conflicting answers.
"""

import ast
import json
import re
from dataclasses import dataclass, field

DIMENSIONS = (
    "empathy",
    "fluency",
    "memory_use",
    "planning",
    "persona_consistency",
    "safety",
)
STRICT, FALLBACK, FAILED = "strict", "fallback", "failed"
WINNERS = ("1", "2", "tie")
WINNER_AS_SEEN = {"1": "first", "2": "second", "tie": "tie"}  # stored in JudgeVerdict.winner
MAX_RATIONALE = 4000
MAX_PARSE_CHARS = 100_000  # longer outputs are parsed on their first 100,000 characters


@dataclass(frozen=True)
class Parsed:
    status: str  # strict / fallback / failed
    scores: dict = field(default_factory=dict)  # single
    winner: str = ""  # pairwise, as seen: "1", "2" or "tie"
    rationale: str = ""
    reason: str = ""  # why it failed

    @property
    def ok(self) -> bool:
        return self.status in (STRICT, FALLBACK)


class _Invalid(Exception):
    pass


def _failed(reason: str) -> Parsed:
    return Parsed(FAILED, reason=reason)


_THINK = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.S | re.I)
_FENCE = re.compile(r"```[ \t]*(?:json|JSON|javascript|js|python)?[ \t]*\n?(.*?)```", re.S)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_REFUSAL = re.compile(
    r"(?:\bi(?:'|’)?m\s+(?:sorry|afraid)\b.{0,80}?\b(?:can(?:'|’)?t|cannot|unable|won(?:'|’)?t)\b"
    r"|\bi\s+(?:can(?:'|’)?t|cannot|won(?:'|’)?t|am\s+(?:unable|not\s+able)\s+to|will\s+not)\s+"
    r"(?:help|assist|comply|provide|do\s+that|fulfil|evaluate|judge|grade|rate|score|compare)"
    r"|\bas\s+an\s+ai\b.{0,60}?\b(?:can(?:'|’)?t|cannot|unable)\b"
    r"|抱歉.{0,20}?(?:无法|不能)|我(?:无法|不能)(?:帮助|协助|提供|评估|评价|打分))",
    re.I | re.S,
)
_DIMENSION_ALIASES = {
    "empathy": "empathy",
    "empathetic": "empathy",
    "emotional_support": "empathy",
    "fluency": "fluency",
    "fluent": "fluency",
    "memory_use": "memory_use",
    "memory": "memory_use",
    "memory_usage": "memory_use",
    "use_of_memory": "memory_use",
    "memory_utilization": "memory_use",
    "memory_utilisation": "memory_use",
    "planning": "planning",
    "plan": "planning",
    "persona_consistency": "persona_consistency",
    "persona": "persona_consistency",
    "consistency": "persona_consistency",
    "character_consistency": "persona_consistency",
    "persona_consistent": "persona_consistency",
    "safety": "safety",
    "sap_safety": "safety",
    "safety_sap": "safety",
    "sap": "safety",
}
_RATIONALE_KEYS = ("rationale", "reason", "reasoning", "explanation", "justification")
_WINNER_KEYS = (
    "winner",
    "better",
    "better_response",
    "preferred",
    "preference",
    "choice",
    "verdict",
)


def _key(name) -> str:
    return re.sub(r"[^0-9a-z]+", "_", str(name).lower()).strip("_")


def _dimension(name) -> str | None:
    key = _key(name)
    if key in _DIMENSION_ALIASES:
        return _DIMENSION_ALIASES[key]
    key = key.removesuffix("_score").removeprefix("score_")
    return _DIMENSION_ALIASES.get(key)


def _strict_object(text: str):
    stripped = text.strip()
    if not (stripped.startswith("{") and stripped.endswith("}")):
        return None
    try:
        value = json.loads(stripped)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _is_score(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 10


def _strict_single(value) -> Parsed | None:
    if set(value) != {"scores", "rationale"} or not isinstance(value["rationale"], str):
        return None
    scores = value["scores"]
    if not isinstance(scores, dict) or set(scores) != set(DIMENSIONS):
        return None
    if not all(_is_score(scores[d]) for d in DIMENSIONS):
        return None
    return Parsed(STRICT, {d: scores[d] for d in DIMENSIONS}, rationale=value["rationale"].strip())


def _strict_pairwise(value) -> Parsed | None:
    if set(value) != {"winner", "rationale"} or not isinstance(value["rationale"], str):
        return None
    if value["winner"] not in WINNERS:
        return None
    return Parsed(STRICT, winner=value["winner"], rationale=value["rationale"].strip())


def _max_depth(text: str) -> int:
    depth = deepest = 0
    for char in text:
        if char in "{[":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "}]":
            depth -= 1
    return deepest


def _loads_tolerant(candidate: str):
    """A dict from JSON-ish text: JSON, then without trailing commas, then Python literals."""
    if len(candidate) > MAX_PARSE_CHARS or _max_depth(candidate) > 20:
        return None
    attempts = [candidate]
    repaired = _TRAILING_COMMA.sub(r"\1", candidate)
    if repaired != candidate:
        attempts.append(repaired)
    for attempt in attempts:
        try:
            value = json.loads(attempt)
            if isinstance(value, dict):
                return value
        except (ValueError, RecursionError):
            pass
    for attempt in attempts:
        for text in (attempt, _pythonize(attempt)):
            try:
                value = ast.literal_eval(text)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
            if isinstance(value, dict):
                return value
    return None


def _pythonize(text: str) -> str:
    return re.sub(
        r"\b(true|false|null)\b",
        lambda m: {"true": "True", "false": "False", "null": "None"}[m.group(1)],
        text,
    )


def _objects(text: str) -> list[str]:
    """Top-level {...} spans of the text, braces inside quoted strings ignored."""
    spans, depth, start, quote, escaped = [], 0, 0, "", False
    for i, char in enumerate(text):
        if depth and quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote or (char == "\n" and quote == "'"):
                quote = ""
            continue
        if char == "{":
            if depth == 0:
                start = i
            depth += 1
        elif char == "}" and depth:
            depth -= 1
            if depth == 0:
                spans.append(text[start : i + 1])
        elif depth and char in "\"'":
            if char == "'" and text[i - 1 : i].isalnum() and text[i + 1 : i + 2].isalnum():
                continue  # an apostrophe in a bare word, not a quote
            quote = char
    return spans


def _json_candidates(text: str) -> list[dict]:
    found = []
    for fenced in _FENCE.findall(text):
        found += [c for c in map(_loads_tolerant, _objects(fenced)) if c is not None]
    found += [c for c in map(_loads_tolerant, _objects(text)) if c is not None]
    return found


def _score_value(value, where: str) -> int:
    if isinstance(value, dict):
        for key in ("score", "value", "rating"):
            if key in value:
                return _score_value(value[key], where)
        raise _Invalid(f"{where}: no score in {value!r}"[:200])
    if isinstance(value, bool):
        raise _Invalid(f"{where}: {value!r} is not a score")
    if isinstance(value, str):
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(?:/\s*10|out of 10|分)?\s*", value)
        if not match:
            raise _Invalid(f"{where}: {value!r} is not a score"[:200])
        value = float(match.group(1))
    if isinstance(value, float):
        if not value.is_integer():
            raise _Invalid(f"{where}: {value} is not a whole number")
        value = int(value)
    if not isinstance(value, int):
        raise _Invalid(f"{where}: {value!r} is not a score"[:200])
    if not 1 <= value <= 10:
        raise _Invalid(f"{where}: {value} is outside 1..10")
    return value


def _rationale_of(value: dict) -> str:
    for key, item in value.items():
        if _key(key) in _RATIONALE_KEYS and isinstance(item, str):
            return item.strip()[:MAX_RATIONALE]
    return ""


def _tolerant_single(value: dict) -> Parsed:
    scores_in = None
    for key, item in value.items():
        if _key(key) in ("scores", "score", "ratings", "grades") and isinstance(item, dict):
            scores_in = item
    if scores_in is None:
        scores_in = value  # the scores object at top level
    scores = {}
    for key, item in scores_in.items():
        dimension = _dimension(key)
        if dimension is None:
            continue
        score = _score_value(item, f"scores.{dimension}")
        if scores.get(dimension, score) != score:
            raise _Invalid(f"two different scores for {dimension}")
        scores[dimension] = score
    missing = [d for d in DIMENSIONS if d not in scores]
    if missing:
        raise _Invalid("missing scores: " + ", ".join(missing))
    return Parsed(FALLBACK, scores, rationale=_rationale_of(value))


_SCORE_LINE = re.compile(
    r"^[\s>*#\-•·\d.)]*?\**\s*(?P<name>[A-Za-z][A-Za-z _\-/()]{1,40}?)\s*\**\s*"
    r"(?:\((?:[^)]{0,30})\))?\s*\**\s*[:=：\-–—]\s*\**\s*"
    r"(?P<score>\d{1,3}(?:\.\d+)?)\s*\**\s*(?:/\s*10|out of 10|分)?\b",
)
_HEADING = re.compile(
    r"^[\s>*#\-•·\d.)]*\**\s*(?P<name>[A-Za-z][A-Za-z _\-/()]{1,40}?)\s*\**\s*:?\s*\**\s*$"
)
_BARE_SCORE = re.compile(
    r"^[\s>*\-•·]*\**\s*(?:score|rating|grade)\s*\**\s*[:=：]\s*\**\s*(?P<score>\d{1,3}(?:\.\d+)?)"
    r"\s*(?:/\s*10|out of 10)?",
    re.I,
)


def _score_lines(text: str) -> Parsed | None:
    """Scores from "Empathy: 7/10" lines, or a dimension heading followed by "Score: 7"."""
    scores, used, current = {}, set(), None
    lines = text.splitlines()
    for number, line in enumerate(lines):
        match = _SCORE_LINE.match(line)
        dimension = _dimension(match.group("name").strip(" ()")) if match else None
        if match and dimension:
            score_text = match.group("score")
        else:
            heading = _HEADING.match(line)
            if heading and _dimension(heading.group("name").strip(" ()")):
                current = _dimension(heading.group("name").strip(" ()"))
                used.add(number)
                continue
            bare = _BARE_SCORE.match(line)
            if not (bare and current):
                continue
            dimension, score_text = current, bare.group("score")
        score = _score_value(score_text, dimension)
        if scores.get(dimension, score) != score:
            raise _Invalid(f"two different scores for {dimension}")
        scores[dimension] = score
        used.add(number)
        current = None
    if not scores:
        return None
    missing = [d for d in DIMENSIONS if d not in scores]
    if missing:
        raise _Invalid("score lines miss: " + ", ".join(missing))
    rest = [line for i, line in enumerate(lines) if i not in used and line.strip()]
    rationale = "\n".join(rest)
    labelled = re.search(
        r"(?:rationale|reasoning|explanation|justification)\**\s*[:：]\s*(.+)",
        rationale,
        re.I | re.S,
    )
    if labelled:
        rationale = labelled.group(1)
    return Parsed(FALLBACK, scores, rationale=rationale.strip()[:MAX_RATIONALE])


def _winner_value(value) -> str:
    if isinstance(value, bool):
        raise _Invalid(f"winner {value!r} is not 1, 2 or tie")
    if isinstance(value, int | float) and value in (1, 2):
        return str(int(value))
    text = _key(value)
    text = re.sub(r"^(response|answer|reply|option|assistant)_?", "", text)
    mapping = {
        "1": "1",
        "one": "1",
        "first": "1",
        "2": "2",
        "two": "2",
        "second": "2",
        "tie": "tie",
        "draw": "tie",
        "equal": "tie",
        "both": "tie",
        "neither": "tie",
        "0": "tie",
    }
    if text not in mapping:
        raise _Invalid(f"winner {value!r} is not 1, 2 or tie"[:200])
    return mapping[text]


def _tolerant_pairwise(value: dict) -> Parsed:
    for key, item in value.items():
        if _key(key) in _WINNER_KEYS:
            return Parsed(FALLBACK, winner=_winner_value(item), rationale=_rationale_of(value))
    raise _Invalid("no winner in the JSON object")


_ADVERB = (
    r"(?:clearly|slightly|much|somewhat|far|significantly|overall|definitely|marginally|a\s+bit)"
)
_PROSE_WINNER = [
    re.compile(
        rf"\bresponse\s*([12])\s+(?:is|was|seems|appears)\s+(?:{_ADVERB}\s+)*(?:the\s+)?"
        r"(?:better|stronger|superior|preferable|preferred|winner|best)\b",
        re.I,
    ),
    re.compile(
        r"\b(?:winner|verdict|choice|final\s+answer|better\s+response|preferred\s+response)"
        r"\s*\**\s*(?:is)?\s*[:=：]?\s*\**\s*\"?(?:response\s*)?([12]|tie)\b",
        re.I,
    ),
    re.compile(r"\bi\s+(?:would\s+)?(?:prefer|choose|pick|select)\s+response\s*([12])\b", re.I),
    re.compile(
        r"\b(?:it(?:'|’)?s\s+a\s+(tie)|(?:result|outcome)\s+is\s+a\s+(tie)|both\s+(?:responses|replies)"
        r"\s+are\s+equally\s+(?:good|strong|helpful|weak|bad)|neither\s+(?:response|reply)\s+is\s+better)",
        re.I,
    ),
]


def _prose_winner(text: str) -> Parsed | None:
    found = set()
    for pattern in _PROSE_WINNER:
        for match in pattern.finditer(text):
            groups = [g for g in match.groups() if g]
            found.add(groups[0].lower() if groups else "tie")
    if not found:
        return None
    if len(found) > 1:
        raise _Invalid("the answer names more than one outcome: " + ", ".join(sorted(found)))
    return Parsed(FALLBACK, winner=found.pop(), rationale=text.strip()[:MAX_RATIONALE])


def _parse(text, strict, tolerant, prose, what: str) -> Parsed:
    if not isinstance(text, str) or not text.strip():
        return _failed("empty output")
    text = text[:MAX_PARSE_CHARS]
    value = _strict_object(text)
    if value is not None:
        parsed = strict(value)
        if parsed is not None:
            return parsed
    body = _THINK.sub("", text).strip()
    problem = ""
    candidates = _json_candidates(body)
    for candidate in reversed(candidates):  # a restated final answer comes last
        try:
            return tolerant(candidate)
        except _Invalid as error:
            problem = problem or str(error)
    if _REFUSAL.search(body[:400]):
        return _failed("refusal")
    try:
        parsed = prose(body)
    except _Invalid as error:
        return _failed(str(error))
    if parsed is not None:
        return parsed
    if problem:
        return _failed(problem)
    if candidates:
        return _failed(f"JSON without a usable {what}")
    return _failed(f"no JSON object and no {what} found")


def parse_single(text: str) -> Parsed:
    """Scores 1..10 per dimension and a rationale from a single-answer grading output."""
    try:
        return _parse(text, _strict_single, _tolerant_single, _score_lines, "scores")
    except Exception as error:  # the parser must never lose an output
        return _failed(f"parser error: {type(error).__name__}")


def parse_pairwise(text: str) -> Parsed:
    """The winner as seen ("1", "2" or "tie") and a rationale from a pairwise output."""
    try:
        return _parse(text, _strict_pairwise, _tolerant_pairwise, _prose_winner, "winner")
    except Exception as error:  # the parser must never lose an output
        return _failed(f"parser error: {type(error).__name__}")


def parse(mode: str, text: str) -> Parsed:
    """`parse_pairwise` or `parse_single`, by the judge configuration's mode."""
    return parse_pairwise(text) if mode == "pairwise" else parse_single(text)


def overall(scores: dict) -> float | None:
    """The mean of the six dimension scores (None unless all are there)."""
    if not scores or any(d not in scores for d in DIMENSIONS):
        return None
    return sum(scores[d] for d in DIMENSIONS) / len(DIMENSIONS)
