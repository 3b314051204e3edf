"""The LLM judge's output parser against arbitrary and JSON-ish text (scoring.judges.parsing).

It must never raise, and never hit its own last-resort `except` ("parser error: …", which
would mean an unexpected exception inside); every result is strict, fallback or failed with
values in range; a strict, valid verdict round-trips exactly.
"""

import json
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scoring.judges import parsing
from tests.hostile.strategies import JSON_VALUES, RAW_FRAGMENTS

EXAMPLES = int(os.environ.get("HOSTILE_EXAMPLES", "200"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])

KEYS = st.sampled_from(
    [
        "scores",
        "score",
        "ratings",
        "rationale",
        "reason",
        "winner",
        "better",
        "verdict",
        "Empathy",
        "empathy",
        "Memory use",
        "SAP safety",
        "fluency",
        "planning",
        "persona_consistency",
        "safety",
        "memory_use",
        "empathy_score",
    ]
)
SCORE_LIKE = st.one_of(
    st.integers(-5, 15),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["7", "7/10", "7.0", "7.5", "10 out of 10", "8分", "", "seven", "1e400"]),
    st.booleans(),
    st.none(),
    st.just({"score": 7}),
    st.just({"value": "11"}),
)
WINNER_LIKE = st.sampled_from(
    ["1", "2", "tie", "Response 1", "response_2", "first", "second", "both", "neither", "0",
     1, 2, 1.0, 2.5, True, None, [], {}, "3", "draw"]
)  # fmt: skip


@st.composite
def verdict_ish(draw) -> str:
    """Text that resembles a judge's answer: JSON objects with loose keys and values, in
    fences, after a <think> block, with prose and trailing commas, or score lines."""
    obj = draw(st.dictionaries(KEYS, SCORE_LIKE | WINNER_LIKE | JSON_VALUES | st.text(max_size=20)))
    if draw(st.booleans()):
        obj["scores"] = draw(st.dictionaries(KEYS, SCORE_LIKE, max_size=8))
    text = json.dumps(obj, allow_nan=True)
    style = draw(st.integers(0, 8))
    if style == 1:
        text = f"```json\n{text}\n```"
    elif style == 2:
        text = f"<think>{draw(st.text(max_size=40))}</think>\n{text}"
    elif style == 3:
        text = text.replace("}", ",}").replace('"', "'")
    elif style == 4:
        text = f"{draw(st.text(max_size=40))} {text} {draw(st.text(max_size=40))}"
    elif style == 5:
        lines = [
            f"{d.replace('_', ' ').title()}: {draw(SCORE_LIKE)}/10" for d in parsing.DIMENSIONS
        ]
        text = "\n".join(draw(st.permutations(lines))) + "\nRationale: " + draw(st.text())
    elif style == 6:
        text = draw(
            st.sampled_from(
                [
                    "Response 1 is better. Response 2 is better.",
                    "Winner: Response 2",
                    "I prefer response 1",
                    "It's a tie",
                    "I'm sorry, but I can't help with that.",
                    "{" * 500,
                    "[" * 10_000,
                    "{'a': " * 100 + "1" + "}" * 100,
                    "{" + '"x":' * 2000 + "}",
                ]
            )
        )
    elif style == 7:
        text = text + draw(st.sampled_from(RAW_FRAGMENTS))
    elif style == 8:
        text = "x" * parsing.MAX_PARSE_CHARS + text
    return text


def check(parsed: parsing.Parsed, mode: str) -> None:
    assert isinstance(parsed, parsing.Parsed)
    assert parsed.status in (parsing.STRICT, parsing.FALLBACK, parsing.FAILED)
    assert not parsed.reason.startswith("parser error"), parsed.reason  # an unexpected exception
    assert isinstance(parsed.rationale, str)
    if parsed.status == parsing.FAILED:
        assert parsed.reason, "a failed parse says why"
        assert parsed.scores == {} and parsed.winner == ""
        return
    assert parsed.reason == ""
    if mode == "single":
        assert set(parsed.scores) == set(parsing.DIMENSIONS)
        for value in parsed.scores.values():
            assert type(value) is int and 1 <= value <= 10, parsed.scores
        assert parsed.winner == ""
        assert parsing.overall(parsed.scores) is not None
    else:
        assert parsed.winner in parsing.WINNERS
        assert parsing.WINNER_AS_SEEN[parsed.winner] in ("first", "second", "tie")
        assert parsed.scores == {}
    if parsed.status == parsing.FALLBACK:
        assert len(parsed.rationale) <= parsing.MAX_RATIONALE


@FUZZ
@given(text=st.text(max_size=500), mode=st.sampled_from(["single", "pairwise"]))
def test_arbitrary_text(text, mode):
    check(parsing.parse(mode, text), mode)


@FUZZ
@given(text=verdict_ish(), mode=st.sampled_from(["single", "pairwise"]))
def test_json_ish_text(text, mode):
    check(parsing.parse(mode, text), mode)


@FUZZ
@given(value=JSON_VALUES, mode=st.sampled_from(["single", "pairwise"]))
def test_any_json_value(value, mode):
    check(parsing.parse(mode, json.dumps(value)), mode)


@settings(FUZZ, max_examples=max(EXAMPLES // 4, 1))
@given(
    value=st.none() | st.integers() | st.binary(max_size=20) | st.lists(st.integers(), max_size=3),
    mode=st.sampled_from(["single", "pairwise"]),
)
def test_not_text_at_all(value, mode):
    parsed = parsing.parse(mode, value)
    check(parsed, mode)
    assert parsed.status == parsing.FAILED


RATIONALE = st.text(max_size=200).filter(lambda s: s == s.strip())


@FUZZ
@given(
    scores=st.fixed_dictionaries({d: st.integers(1, 10) for d in parsing.DIMENSIONS}),
    rationale=RATIONALE,
    indent=st.sampled_from([None, 2]),
    ascii_only=st.booleans(),
)
def test_strict_single_round_trips(scores, rationale, indent, ascii_only):
    text = json.dumps(
        {"scores": scores, "rationale": rationale}, indent=indent, ensure_ascii=ascii_only
    )
    parsed = parsing.parse_single(text)
    assert parsed.status == parsing.STRICT, parsed.reason
    assert parsed.scores == scores and parsed.rationale == rationale


@FUZZ
@given(winner=st.sampled_from(parsing.WINNERS), rationale=RATIONALE, ascii_only=st.booleans())
def test_strict_pairwise_round_trips(winner, rationale, ascii_only):
    text = json.dumps({"winner": winner, "rationale": rationale}, ensure_ascii=ascii_only)
    parsed = parsing.parse_pairwise(text)
    assert parsed.status == parsing.STRICT, parsed.reason
    assert parsed.winner == winner and parsed.rationale == rationale


@FUZZ
@given(
    scores=st.fixed_dictionaries({d: st.integers(1, 10) for d in parsing.DIMENSIONS}),
    wrong=st.sampled_from(parsing.DIMENSIONS),
    bad=st.sampled_from([0, 11, -1, 100, 7.5, "7.5", True, None, "n/a"]),
)
def test_a_score_out_of_range_never_passes(scores, wrong, bad):
    scores[wrong] = bad
    parsed = parsing.parse_single(json.dumps({"scores": scores, "rationale": "r"}))
    check(parsed, "single")
    assert parsed.status == parsing.FAILED
