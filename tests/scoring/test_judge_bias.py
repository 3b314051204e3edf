"""Judge bias numbers: hand-made data with known answers, and a simulated biased judge behind
the local chat-completions server whose numbers must come back as simulated."""

import json
import math
import random
import zlib

import pandas as pd
import pytest
from scipy import stats

from scoring.judges import bias, judging
from scoring.judges.parsing import DIMENSIONS
from tests.llm_server import ChatServer
from tests.scoring.test_judge_support import (
    blocks,
    campaign_of,
    judge_config,
    judge_run,
    response_run,
    start,
)

LENGTHS = {1: 100, 2: 50, 3: 80, 4: 80, 5: 10, 6: 20, 7: 30, 8: 300, 9: 40, 10: 400}


def pairwise_frame():
    rows = [
        (1, 2, "first"),  # 1 wins
        (2, 1, "second"),  # 1 wins again: consistent
        (3, 4, "first"),  # 3 wins
        (4, 3, "first"),  # 4 wins: the winner flipped with the order
        (5, 6, "tie"),
        (6, 5, "tie"),  # tie both ways: consistent
        (7, 8, "second"),  # 8 wins
        (8, 7, "first"),  # 8 wins: consistent
        (9, 10, "first"),  # judged in one order only
    ]
    return pd.DataFrame(
        [
            {
                "run": 1,
                "first": a,
                "second": b,
                "sample": 0,
                "winner": w,
                "first_len": LENGTHS[a],
                "second_len": LENGTHS[b],
            }
            for a, b, w in rows
        ]
    )


def test_position_flip_rate_on_known_data():
    result = bias.position_flips(pairwise_frame())
    assert (result["n"], result["flips"], result["rate"]) == (4, 1, 0.25)
    low, high = stats.binomtest(1, 4).proportion_ci(method="wilson")
    assert result["low"] == pytest.approx(low) and result["high"] == pytest.approx(high)
    assert result["low"] == pytest.approx(0.045587, abs=1e-6)
    assert result["high"] == pytest.approx(0.699358, abs=1e-6)


def test_flips_pair_up_by_run_and_sample_only():
    frame = pairwise_frame()
    other = frame.assign(sample=1)
    other.loc[other["first"] == 2, "winner"] = "first"  # sample 1: pair (1, 2) flips
    result = bias.position_flips(pd.concat([frame, other]))
    assert (result["n"], result["flips"]) == (8, 3)
    # A second run's verdicts are not paired with the first run's.
    lonely = frame[frame["first"] < frame["second"]].assign(run=2)
    assert bias.position_flips(pd.concat([frame, lonely]))["n"] == 4


def test_first_position_preference_on_known_data():
    result = bias.first_position(pairwise_frame())
    # Non-tie verdicts: 7, of which 5 chose the response shown first.
    assert (result["n"], result["first"], result["ties"], result["verdicts"]) == (7, 5, 2, 9)
    assert result["rate"] == pytest.approx(5 / 7)
    low, high = stats.binomtest(5, 7).proportion_ci(method="wilson")
    assert (result["low"], result["high"]) == (pytest.approx(low), pytest.approx(high))
    assert result["p_value"] == pytest.approx(stats.binomtest(5, 7, 0.5).pvalue)


def test_longer_preference_on_known_data():
    result = bias.longer_preferred(pairwise_frame())
    # Equal lengths (3, 4) left out; of the other 5 non-tie verdicts 4 chose the longer one.
    assert (result["n"], result["longer"], result["rate"]) == (5, 4, 0.8)


def test_length_correlation_on_known_data():
    lengths = [10, 20, 30, 40, 50, 60]
    overall = [1, 3, 2, 5, 4, 6]  # Spearman's rho = 1 - 6*4/(6*35) = 31/35
    rows = [
        {"response": i, "overall": o, "length": n}
        for i, (o, n) in enumerate(zip(overall, lengths, strict=True))
    ]
    # Samples are averaged per response: response 0 twice with mean 1; a missing score is left out.
    rows += [
        {"response": 0, "overall": 0.5, "length": 10},
        {"response": 0, "overall": 1.5, "length": 10},
    ]
    rows += [{"response": 99, "overall": None, "length": 5}]
    result = bias.length_correlation(pd.DataFrame(rows))
    assert result["n"] == 6
    assert result["rho"] == pytest.approx(31 / 35)
    half = 1.959963984540054 * math.sqrt(1.06 / 3)
    assert result["low"] == pytest.approx(math.tanh(math.atanh(31 / 35) - half))
    assert result["high"] == pytest.approx(math.tanh(math.atanh(31 / 35) + half))
    assert result["low"] == pytest.approx(0.2327, abs=1e-3)


def test_wilson_against_scipy_and_edges():
    for k, n in [(0, 5), (5, 5), (3, 10), (50, 120)]:
        low, high = stats.binomtest(k, n).proportion_ci(method="wilson")
        assert bias.wilson(k, n) == (pytest.approx(low), pytest.approx(high))
    assert bias.wilson(0, 0) == (None, None)


def test_empty_and_degenerate_inputs_give_no_numbers():
    empty_pairs = pd.DataFrame(
        columns=["run", "first", "second", "sample", "winner", "first_len", "second_len"]
    )
    empty_single = pd.DataFrame(columns=["response", "overall", "length"])
    report = bias.report(empty_pairs, empty_single)
    assert report["position_flip"]["n"] == 0 and report["position_flip"]["rate"] is None
    assert report["first_position"]["rate"] is None
    assert report["length_correlation"]["rho"] is None
    constant = pd.DataFrame(
        {"response": [1, 2, 3, 4], "overall": [5, 5, 5, 5], "length": [1, 2, 3, 4]}
    )
    assert bias.length_correlation(constant)["rho"] is None
    assert bias.length_correlation(constant)["n"] == 4


def _draw(key: str) -> float:
    return random.Random(zlib.crc32(key.encode())).random()


@pytest.mark.django_db(transaction=True)
def test_simulated_biased_judge_numbers_come_back(researcher, django_capture_on_commit_callbacks):
    """A pairwise judge that picks Response 1 60% of the time and otherwise the longer one (so
    about 80% first overall), and a single judge whose scores grow with length."""
    decisions: dict[tuple[str, str], str] = {}
    graded: dict[str, int] = {}

    def reply(body):
        shown = blocks(body)
        if "Reply" in shown:
            text = shown["Reply"]
            noise = 1 if _draw("noise" + text) < 0.3 else 0
            score = max(1, min(10, 1 + len(text) // 25 + noise))
            graded[text] = score
            return json.dumps({"scores": dict.fromkeys(DIMENSIONS, score), "rationale": "r"})
        first, second = shown["Response 1"], shown["Response 2"]
        if _draw(first + "|" + second) < 0.6:
            winner = "1"
        else:
            winner = "1" if len(first) > len(second) else "2"
        decisions[(first, second)] = winner
        return json.dumps({"winner": winner, "rationale": "r"})

    server = ChatServer(reply=reply).start()
    try:
        rng = random.Random(7)
        texts = [
            [f"a{i} " + "x" * rng.randint(5, 200), f"b{i} " + "y" * rng.randint(5, 200)]
            for i in range(60)
        ]
        responses, _ = response_run(texts, names=("Left-Model", "Right-Model"))
        campaign = campaign_of(researcher, responses)
        pairwise = judge_config(server, mode="pairwise", name="biased pairwise", max_concurrency=8)
        run = start(judge_run(pairwise, campaign=campaign), django_capture_on_commit_callbacks)
        assert run.state == "completed" and run.verdicts.count() == 120

        single = judge_config(server, name="length-loving grader", max_concurrency=8)
        graded_run = judge_run(single, responses=responses.responses.all(), name="grading")
        graded_run = start(graded_run, django_capture_on_commit_callbacks)
        assert graded_run.verdicts.count() == 120
    finally:
        server.stop()

    report = judging.bias_report(pairwise)
    # First-position preference: exactly the simulated decisions (no ties were drawn).
    n_first = sum(1 for w in decisions.values() if w == "1")
    first = report["first_position"]
    assert (first["n"], first["first"]) == (120, n_first)
    assert 0.7 <= first["rate"] <= 0.9  # ~0.6 + 0.4 * 0.5 by construction
    assert first["low"] < 0.8 < first["high"]
    assert first["p_value"] < 0.001
    # Position flips: a pair flips when the same response does not win in both orders.
    flips = 0
    for (one, two), winner in decisions.items():
        if one < two:
            back = decisions[(two, one)]
            winner_ab = one if winner == "1" else two
            winner_ba = two if back == "1" else one
            flips += winner_ab != winner_ba
    assert (report["position_flip"]["n"], report["position_flip"]["flips"]) == (60, flips)
    assert report["position_flip"]["rate"] > 0.3
    # Longer preference among verdicts that chose by length or by position.
    longer = sum(
        1
        for (one, two), winner in decisions.items()
        if len(one) != len(two) and (len(one) > len(two)) == (winner == "1")
    )
    assert report["longer_preferred"]["longer"] == longer
    assert report["longer_preferred"]["rate"] > 0.6

    # The single judge: Spearman over responses of simulated score vs length, as simulated.
    lengths = [len(t) for t in graded]
    expected = stats.spearmanr(lengths, list(graded.values())).statistic
    correlation = judging.bias_report(single)["length_correlation"]
    assert correlation["n"] == 120
    assert correlation["rho"] == pytest.approx(expected)
    assert correlation["rho"] > 0.8 and correlation["low"] > 0.6
    # Pairwise numbers of the single judge are empty, and the other way round.
    assert judging.bias_report(single)["first_position"]["n"] == 0
    assert report["length_correlation"]["n"] == 0
