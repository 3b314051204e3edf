"""The paper profile against the released H2HTalk evaluator's own values.

tests/scoring/data/paper_metrics_expected.jsonl holds 475 pairs: references from all 11 files of
the release (file and line; read again here from ../shared/data/h2htalk/) against identical,
perturbed, shuffled, truncated, foreign (another line's reference), English, CRLF and padded
candidates, plus empty, whitespace-only, punctuation-only, English and CRLF cases. Their
expected values were obtained by running the ROUGE, BLEU and tokenizer functions and
process_qa_pair of evaluate/ (LolerPanda/H2HTalk at commit 4730dae9; Python 3.11.7, jieba
0.42.1, NLTK 3.10.4) outside this repository; `expected` null = the evaluator leaves the pair
out. paper_aggregate_expected.json holds that evaluator's aggregation (evaluate_model's means
per scenario and overall, composite of the means, BERTScore and embedding failed → 0.0) of the
same pairs grouped by the reference's file ("literal" for the literal references). Only values
are committed, never the evaluator's code.
"""

import json
import math
import random
from functools import cache
from pathlib import Path

import pytest

from scoring.metrics import composite as paper
from scoring.metrics import paper_profile as P
from scoring.metrics import reference as R
from tests.conftest import SHARED_DATA, require_shared

DATA = Path(__file__).parent / "data"
KEYS = ("rouge1", "rouge2", "rougeL", "bleu1", "bleu2", "bleu3", "bleu4")
FILES = 11
TOLERANCE = 1e-9


@cache
def _lines(name: str) -> tuple[str, ...]:
    path = require_shared(SHARED_DATA / name)
    raw = path.read_bytes().decode("utf-8").split("\r\n")
    return tuple(json.loads(line.strip())["response"] for line in raw if line.strip())


def _text(row: dict, side: str) -> str:
    if side == "reference":
        if "reference_text" in row:
            return row["reference_text"]
        return _lines(row["reference"]["file"])[row["reference"]["line"] - 1]
    if "candidate" in row:
        return row["candidate"]
    return _lines(row["candidate_from"]["file"])[row["candidate_from"]["line"] - 1]


@cache
def _pairs() -> list[tuple[dict, str, str]]:
    with open(DATA / "paper_metrics_expected.jsonl", encoding="utf-8") as stream:
        rows = [json.loads(line) for line in stream]
    return [(row, _text(row, "candidate"), _text(row, "reference")) for row in rows]


def test_the_pair_set_covers_every_file_and_the_edge_cases():
    pairs = _pairs()
    assert len(pairs) >= 300
    assert len({row["reference"]["file"] for row, _, _ in pairs if "reference" in row}) == FILES
    kinds = {row["kind"] for row, _, _ in pairs}
    assert {"empty", "whitespace", "english", "punctuation", "crlf", "crlf_reference"} <= kinds
    assert {"identical", "perturbed", "shuffled", "truncated", "foreign"} <= kinds
    assert any("\r\n" in c for _, c, _ in pairs) and any("\r\n" in r for _, _, r in pairs)


def test_paper_profile_reproduces_the_released_evaluator_on_every_pair():
    worst = dict.fromkeys(KEYS, 0.0)
    for row, candidate, reference in _pairs():
        got = P.score_pair(candidate, reference)
        if row["expected"] is None:
            assert got is None, row["id"]
            continue
        assert got is not None, row["id"]
        for key in KEYS:
            worst[key] = max(worst[key], abs(got[key] - row["expected"][key]))
    assert max(worst.values()) <= TOLERANCE, worst


def test_the_platform_profile_is_a_different_measure_on_the_same_pairs():
    """Not a bug to fix: what the paper profile exists for (README, reference metrics)."""
    differing = 0
    scored = [(row, c, r) for row, c, r in _pairs() if row["expected"] is not None]
    for row, candidate, reference in scored:
        ours = R.score_pair(candidate, reference)
        differing += any(abs(ours[k] - row["expected"][k]) > TOLERANCE for k in KEYS)
    assert differing > len(scored) // 2


def test_tokens_keep_punctuation_spaces_and_case():
    assert P.tokenize("  Hi HI\r\n好。 ") == ["Hi", " ", "HI", "\r\n", "好", "。"]
    assert P.tokenize(" \r\n ") == []
    assert P.excluded(" \r\n", "好") and P.excluded("好", "") and P.excluded(None, "好")
    assert not P.excluded("。", "好")


def _rows_for_aggregate():
    rows = []
    for row, candidate, reference in _pairs():
        values = P.score_pair(candidate, reference)
        rows.append((row["subtask"], values))
    return rows


def _close(got: dict, expected: dict, keys) -> None:
    for key in keys:
        assert got[key] == pytest.approx(expected[key], abs=TOLERANCE), key


def test_aggregate_reproduces_the_released_evaluator_report():
    with open(DATA / "paper_aggregate_expected.json", encoding="utf-8") as stream:
        expected = json.load(stream)["aggregate"]
    got = P.aggregate(_rows_for_aggregate())
    means = [*KEYS, "bertscore"]
    _close(got["overall"], expected, means)
    assert got["overall"]["embedding_cosine"] == expected["embedding_score"] == 0.0
    assert got["overall"]["composite"] == pytest.approx(expected["composite_score"], abs=1e-12)
    assert got["overall"]["n"] == expected["n"]
    assert set(got["subtasks"]) == set(expected["scenarios"])
    for name, scenario in expected["scenarios"].items():
        mine = got["subtasks"][name]
        _close(mine, scenario, means)
        assert mine["composite"] == pytest.approx(scenario["composite_score"], abs=TOLERANCE)
        assert mine["n"] == scenario["n"]


def test_aggregate_does_not_depend_on_the_order_of_answers():
    rows = _rows_for_aggregate()
    shuffled = rows[:]
    random.Random(7).shuffle(shuffled)
    a, b = P.aggregate(rows), P.aggregate(shuffled)
    assert a["overall"]["composite"] == pytest.approx(b["overall"]["composite"], abs=1e-12)
    for name in a["subtasks"]:
        assert a["subtasks"][name]["rouge1"] == pytest.approx(b["subtasks"][name]["rouge1"])


def test_left_out_answers_count_in_no_mean_and_a_failed_model_term_counts_zero():
    one = {k: 1.0 for k in KEYS}
    got = P.aggregate([("a", one), ("a", None), ("a", {**one, "bertscore": math.nan})])
    assert got["overall"]["n"] == 2
    assert got["overall"]["rouge1"] == 1.0
    assert got["overall"]["bertscore"] == 0.0
    # An identical answer without the two model terms: 0.55 (no renormalisation), not 1.
    assert got["overall"]["composite"] == pytest.approx(0.55, abs=1e-12)
    assert paper.composite(one).score == pytest.approx(1.0)
    assert paper.composite(one, profile="paper").score == pytest.approx(0.55, abs=1e-12)
