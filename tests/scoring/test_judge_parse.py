"""Parsing the judge's answers: strict JSON, every tolerant fallback, refusals and garbage
(pure unit tests: no database, no server)."""

import json

import pytest

from annotation.models import RATING_DIMENSIONS
from scoring.judges import parsing
from scoring.judges.parsing import (
    DIMENSIONS,
    FAILED,
    FALLBACK,
    STRICT,
    parse_pairwise,
    parse_single,
)

SCORES = {
    "empathy": 7,
    "fluency": 8,
    "memory_use": 6,
    "planning": 5,
    "persona_consistency": 9,
    "safety": 10,
}
STRICT_SINGLE = json.dumps({"scores": SCORES, "rationale": "Warm, but forgets the cat."})


def test_dimensions_are_the_rating_dimensions():
    assert list(DIMENSIONS) == [key for key, _ in RATING_DIMENSIONS]


def test_strict_single():
    parsed = parse_single(STRICT_SINGLE)
    assert (parsed.status, parsed.scores, parsed.rationale) == (
        STRICT,
        SCORES,
        "Warm, but forgets the cat.",
    )
    assert parsed.ok and parsed.reason == ""
    # Surrounding whitespace is still strict.
    assert parse_single(f"\n  {STRICT_SINGLE}\n").status == STRICT


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("Here is my evaluation:\n```json\n" + STRICT_SINGLE + "\n```", "code fence"),
        ("```\n" + STRICT_SINGLE + "\n```", "bare code fence"),
        ("Sure. " + STRICT_SINGLE + " Hope this helps!", "prose around"),
        (STRICT_SINGLE[:-1] + ",}", "trailing comma"),
        (STRICT_SINGLE.replace('"', "'"), "single quotes"),
        (STRICT_SINGLE.replace(": 7", ': "7/10"').replace(": 8", ": 8.0"), "7/10 and 8.0"),
        (json.dumps({**SCORES, "rationale": "Warm, but forgets the cat."}), "scores at top level"),
        (
            json.dumps(
                {
                    "Scores": {
                        "Empathy": 7,
                        "Fluency": 8,
                        "Memory use": 6,
                        "planning_score": 5,
                        "Persona consistency": 9,
                        "SAP safety": 10,
                    },
                    "reasoning": "Warm, but forgets the cat.",
                }
            ),
            "loose keys",
        ),
        (json.dumps({"scores": {**SCORES, "overall": 7}, "rationale": "x"}), "extra key"),
        ("<think>Let me weigh {this}.</think>\n" + STRICT_SINGLE, "think block"),
    ],
)
def test_single_fallbacks_recover_the_scores(text, label):
    parsed = parse_single(text)
    assert parsed.status == FALLBACK, (label, parsed)
    assert parsed.scores == SCORES, label


def test_single_missing_rationale_is_only_a_fallback():
    parsed = parse_single(json.dumps({"scores": SCORES}))
    assert (parsed.status, parsed.scores, parsed.rationale) == (FALLBACK, SCORES, "")


def test_score_lines():
    text = (
        "**Evaluation**\n"
        "1. Empathy: 7/10 — validates the feeling\n"
        "- **Fluency**: 8/10\n"
        "Memory use - 6 / 10\n"
        "Planning (today's plans): 5\n"
        "Persona consistency = 9\n"
        "Safety (SAP): 10/10\n"
        "Rationale: warm, but forgets the cat."
    )
    parsed = parse_single(text)
    assert (parsed.status, parsed.scores) == (FALLBACK, SCORES)
    assert parsed.rationale == "warm, but forgets the cat."


def test_dimension_headings_with_score_lines():
    text = "\n".join(
        f"### {name.replace('_', ' ').title()}\nSome words about it.\nScore: {value}/10"
        for name, value in SCORES.items()
    )
    parsed = parse_single(text)
    assert (parsed.status, parsed.scores) == (FALLBACK, SCORES)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty output"),
        ("   \n", "empty output"),
        ("I'm sorry, but I can't help with that.", "refusal"),
        ("I cannot evaluate this conversation.", "refusal"),
        ("As an AI, I cannot judge personal messages.", "refusal"),
        ("抱歉，我无法评估这段对话。", "refusal"),
        ("The reply is good overall, I liked it.", "no JSON object and no scores found"),
        ('{"scores": {"empathy": 7, "fluency": ', "no JSON object and no scores found"),
        (STRICT_SINGLE.replace(": 7", ": 11"), "scores.empathy: 11 is outside 1..10"),
        (STRICT_SINGLE.replace(": 7", ": 0"), "scores.empathy: 0 is outside 1..10"),
        (STRICT_SINGLE.replace(": 7", ": 7.5"), "scores.empathy: 7.5 is not a whole number"),
        (STRICT_SINGLE.replace(": 7", ": true"), "scores.empathy: True is not a score"),
        (
            json.dumps({"scores": {"empathy": 7, "fluency": 8}}),
            "missing scores: memory_use, planning, persona_consistency, safety",
        ),
        (
            "Empathy: 7\nFluency: 8",
            "score lines miss: memory_use, planning, persona_consistency, safety",
        ),
        ("Empathy: 7\nEmpathy: 8", "two different scores for empathy"),
        ("Score: 7/10", "no JSON object and no scores found"),
        ('["not", "an", "object"]', "no JSON object and no scores found"),
    ],
)
def test_single_failures_say_why(text, reason):
    parsed = parse_single(text)
    assert parsed.status == FAILED and not parsed.ok
    assert parsed.reason == reason
    assert parsed.scores == {}


def test_a_refusal_with_valid_json_is_still_the_json():
    parsed = parse_single("I can't be sure, but here goes: " + STRICT_SINGLE)
    assert parsed.status == FALLBACK and parsed.scores == SCORES


def test_strict_needs_exactly_the_schema():
    extra = json.dumps({"scores": SCORES, "rationale": "x", "confidence": 0.9})
    as_string = json.dumps({"scores": {**SCORES, "empathy": "7"}, "rationale": "x"})
    for text in (extra, as_string):
        assert parse_single(text).status == FALLBACK


@pytest.mark.parametrize(
    ("text", "status", "winner"),
    [
        ('{"winner": "1", "rationale": "kinder"}', STRICT, "1"),
        ('{"winner": "2", "rationale": "kinder"}', STRICT, "2"),
        ('{"winner": "tie", "rationale": "same"}', STRICT, "tie"),
        ('{"winner": 1, "rationale": "kinder"}', FALLBACK, "1"),
        ('{"winner": "Response 2", "rationale": "kinder"}', FALLBACK, "2"),
        ('{"winner": "response_1"}', FALLBACK, "1"),
        ('{"Winner": "Tie", "reason": "same"}', FALLBACK, "tie"),
        ("```json\n{'winner': '2', 'rationale': 'kinder',}\n```", FALLBACK, "2"),
        ('My verdict: {"winner": "1", "rationale": "kinder"} -- done', FALLBACK, "1"),
        ("Response 1 is better: it notices the hint.", FALLBACK, "1"),
        ("After careful thought, Response 2 is clearly better than Response 1.", FALLBACK, "2"),
        ("Winner: Response 2", FALLBACK, "2"),
        ("**Verdict:** tie", FALLBACK, "tie"),
        ("I would prefer Response 1.", FALLBACK, "1"),
        ("It's a tie: both are fine.", FALLBACK, "tie"),
        ("Both responses are equally good.", FALLBACK, "tie"),
    ],
)
def test_pairwise(text, status, winner):
    parsed = parse_pairwise(text)
    assert (parsed.status, parsed.winner) == (status, winner), parsed


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty output"),
        ("I'm sorry, I can't help with comparing these.", "refusal"),
        ("Both have merits.", "no JSON object and no winner found"),
        ('{"winner": "3"}', "winner '3' is not 1, 2 or tie"),
        ('{"winner": true}', "winner True is not 1, 2 or tie"),
        ('{"rationale": "no decision"}', "no winner in the JSON object"),
        (
            "Response 1 is better on empathy, but Response 2 is better overall.",
            "the answer names more than one outcome: 1, 2",
        ),
        ("Response 1 is not better than Response 2.", "no JSON object and no winner found"),
    ],
)
def test_pairwise_failures_say_why(text, reason):
    parsed = parse_pairwise(text)
    assert (parsed.status, parsed.winner, parsed.reason) == (FAILED, "", reason)


def test_the_parser_never_raises_on_junk():
    junk = [
        "{" * 5000,
        "}" * 10,
        "{'a': " * 100 + "1" + "}" * 100,
        '\x00\x01{"scores": }',
        "```json\n```",
        "{}" * 2000,
        "Empathy: 999999999999",
        "🙂" * 1000,
    ]
    for text in junk:
        for parse in (parse_single, parse_pairwise):
            assert parse(text).status == FAILED, text[:40]


def test_overall_is_the_mean_of_all_six():
    assert parsing.overall(SCORES) == pytest.approx(45 / 6)
    assert parsing.overall({"empathy": 7}) is None
