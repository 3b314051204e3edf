"""Reference metrics and the paper's composite, checked against values computed by hand."""

import math
import random

import numpy as np
import pandas as pd
import pytest

from scoring.metrics import composite as C
from scoring.metrics import reference as M

RATIOS = M.RATIOS


def _words(text):
    return text.split()


def approx(value):
    return pytest.approx(value, rel=1e-12, abs=1e-12)


# ---------------------------------------------------------------- tokens


def test_english_tokens_are_lowercased_words_with_inner_apostrophes():
    text = "“Don’t” — it's 5 o'clock, Mr. Smith_Jr! "
    assert M.tokenize(text, "en") == ["don't", "it's", "5", "o'clock", "mr", "smith_jr"]


def test_chinese_tokens_drop_brackets_punctuation_symbols_and_whitespace():
    # Full-width brackets, ～, ……, CRLF (the release's line ending), ?, an emoji all go;
    # the action's words inside （…） stay; Latin letters are lower-cased.
    text = "（轻轻抱住你）别担心～我一直都在……\r\n你呢?😊 OK吗"
    assert M.tokenize(text, "zh") == [
        *["轻轻", "抱住", "你", "别", "担心", "我", "一直", "都", "在"],
        *["你", "呢", "ok", "吗"],
    ]
    # Half-width brackets too.
    assert M.tokenize("(微微颔首)南京的梧桐很美。", "zh") == [
        *["微微", "颔首", "南京", "的", "梧桐", "很", "美"]
    ]


def test_language_detection_by_share_of_han_characters():
    assert M.cjk_share("今天天气真好") == 1.0
    assert M.detect_language("今天天气真好") == "zh"
    assert M.detect_language("Hello there") == "en"
    # 5 Han of 14 letters = 0.357 ≥ 0.2 → jieba.
    assert M.cjk_share("我今天去了Starbucks") == pytest.approx(5 / 14)
    assert M.detect_language("我今天去了Starbucks") == "zh"
    # 2 Han of 11 letters = 0.18 < 0.2 → word tokens.
    assert M.detect_language("I met 小明 today") == "en"
    assert M.detect_language("") == "en"
    assert M.resolve_language("zh-CN") == "zh"
    assert M.resolve_language("EN_us") == "en"
    assert M.resolve_language(None, "", "你好呀") == "zh"  # reference empty → candidate
    with pytest.raises(ValueError):
        M.resolve_language("ja")


# ---------------------------------------------------------------- English pairs


def test_the_cat_sat_on_the_mat():
    # cand = [the, cat, sat, on, the, mat] (6)   ref = [the, cat, is, on, the, mat] (6)
    # 1-grams: the×2, cat, on, mat shared → clipped overlap 5; P = R = 5/6 → F1 = 5/6.
    # 2-grams (5 each): the-cat, on-the, the-mat shared → 3; F1 = 3/5.
    # 3-grams (4 each): on-the-mat → 1.   4-grams (3 each): none → 0.
    # LCS = the cat on the mat = 5 → ROUGE-L F1 = 5/6.
    # BLEU: c = r = 6 → BP = 1; p = 5/6, 3/5, 1/4, then 0 smoothed to 0.1/3.
    #   BLEU-1 = 5/6; BLEU-2 = √(5/6·3/5) = √0.5; BLEU-3 = ∛(5/6·3/5·1/4) = ∛(1/8) = 0.5;
    #   BLEU-4 = (1/8 · 1/30)^(1/4) = 240^(−1/4) = 0.254066…
    s = M.score_pair("the cat sat on the mat", "the cat is on the mat", "en")
    assert s["rouge1"] == approx(5 / 6)
    assert s["rouge2"] == approx(3 / 5)
    assert s["rougeL"] == approx(5 / 6)
    assert s["bleu1"] == approx(5 / 6)
    assert s["bleu2"] == approx(math.sqrt(0.5))
    assert s["bleu3"] == approx(0.5)
    assert s["bleu4"] == approx(240 ** (-1 / 4))
    assert s["bleu4"] == pytest.approx(0.254066, abs=1e-6)
    assert (s["length_tokens"], s["reference_tokens"], s["length_ratio"]) == (6, 6, 1.0)
    assert (s["length_chars"], s["reference_chars"]) == (17, 16)  # whitespace not counted


def test_exact_match_scores_one_everywhere():
    text = "I don't know, my friend!"  # [i, don't, know, my, friend]: 2 four-grams
    s = M.score_pair(text, text, "en")
    assert all(s[key] == 1.0 for key in RATIOS)
    assert s["length_ratio"] == 1.0


def test_exact_match_shorter_than_four_tokens_keeps_nltk_smoothing():
    # [hello, there] has no 3- or 4-gram: NLTK counts precision 0/1 there, smoothed to 0.1,
    # so BLEU-3 = ∛(1·1·0.1) and BLEU-4 = (1·1·0.1·0.1)^(1/4) = √0.1, while ROUGE is 1.
    s = M.score_pair("hello there", "hello there", "en")
    assert s["rouge1"] == s["rouge2"] == s["rougeL"] == s["bleu1"] == s["bleu2"] == 1.0
    assert s["bleu3"] == approx(0.1 ** (1 / 3))
    assert s["bleu4"] == approx(math.sqrt(0.1))


def test_no_overlap_is_zero_bleu_included():
    # No shared unigram: every ROUGE is 0, and so is BLEU: NLTK's sentence_bleu returns 0
    # when no unigram matches, whatever the smoothing (method 1 only lifts *higher* orders).
    s = M.score_pair("good morning", "bad night", "en")
    assert all(s[key] == 0.0 for key in RATIOS)


def test_smoothing_lifts_missing_higher_orders_to_small_positive_bleu():
    # cand = [cat, the], ref = [the, cat]: unigram overlap 2/2, bigram cat-the ≠ the-cat → 0;
    # no 3/4-grams in the candidate (precision 0/1). Smoothed p = 1, 0.1, 0.1, 0.1; BP = 1.
    # BLEU-2 = √0.1, BLEU-3 = ∛0.01, BLEU-4 = 0.001^(1/4). LCS = 1 → ROUGE-L = 2·1/4 = 0.5.
    s = M.score_pair("cat the", "the cat", "en")
    assert (s["rouge1"], s["rouge2"], s["rougeL"]) == (1.0, 0.0, 0.5)
    assert s["bleu1"] == 1.0
    assert s["bleu2"] == approx(math.sqrt(0.1))
    assert s["bleu3"] == approx(0.01 ** (1 / 3))
    assert s["bleu4"] == approx(0.001**0.25)
    assert 0 < s["bleu4"] < s["bleu3"] < s["bleu2"]


def test_brevity_penalty_and_length_ratio_for_a_short_candidate():
    # cand = [the, cat] (2), ref = [the, cat, is, on, the, mat] (6): BP = exp(1 − 6/2) = e^−2.
    # p1 = 2/2, p2 = 1/1 (the-cat), p3 = p4 = 0.1/1 (no 3/4-grams in the candidate).
    # ROUGE-1 = 2·2/(2+6) = 0.5; ROUGE-2 = 2·1/(1+5) = 1/3; LCS = 2 → ROUGE-L = 0.5.
    s = M.score_pair("the cat", "the cat is on the mat", "en")
    penalty = math.exp(-2)
    assert (s["rouge1"], s["rouge2"], s["rougeL"]) == (0.5, approx(1 / 3), 0.5)
    assert s["bleu1"] == approx(penalty)
    assert s["bleu2"] == approx(penalty)
    assert s["bleu3"] == approx(penalty * 0.1 ** (1 / 3))
    assert s["bleu4"] == approx(penalty * math.sqrt(0.1))
    assert s["length_ratio"] == approx(1 / 3)


def test_clipping_of_repeated_candidate_words():
    # Papineni's example: 7 × "the" against [the, cat, is, on, the, mat]: clipped to 2.
    # BLEU-1 = 2/7 (c = 7 > r = 6, BP = 1); ROUGE-1 = 2·2/(7+6) = 4/13.
    cand, ref = ["the"] * 7, _words("the cat is on the mat")
    assert M.bleu(cand, ref)[0] == approx(2 / 7)
    assert M.rouge_n(cand, ref, 1) == approx(4 / 13)


def test_bleu_reproduces_nltk_documented_single_reference_example():
    # nltk.translate.bleu_score.SmoothingFunction docstring: sentence_bleu([reference1],
    # hypothesis1, smoothing_function=chencherry.method1) = 0.4118… (case-sensitive tokens).
    # By hand: c = 18, r = 16 → BP = 1; clipped matches 11/18, 8/17, 6/16, 4/15.
    hypothesis = _words(
        "It is a guide to action which ensures that the military always obeys the commands "
        "of the party"
    )
    reference = _words(
        "It is a guide to action that ensures that the military will forever heed Party commands"
    )
    scores = M.bleu(hypothesis, reference)
    assert scores[0] == approx(11 / 18)
    assert scores[1] == approx((11 / 18 * 8 / 17) ** 0.5)
    assert scores[2] == approx((11 / 18 * 8 / 17 * 6 / 16) ** (1 / 3))
    assert scores[3] == approx((11 / 18 * 8 / 17 * 6 / 16 * 4 / 15) ** 0.25)
    assert f"{scores[3]:.4f}" == "0.4118"


def test_empty_candidate_and_empty_reference():
    s = M.score_pair("", "the cat", "en")
    assert all(s[key] == 0.0 for key in RATIOS)
    assert (s["length_tokens"], s["length_ratio"]) == (0, 0.0)
    s = M.score_pair("the cat", "！？", "zh")  # only punctuation → no reference tokens
    assert all(s[key] == 0.0 for key in RATIOS)
    assert math.isnan(s["length_ratio"])


# ---------------------------------------------------------------- a Chinese pair


def test_chinese_pair_by_hand():
    candidate = "（轻轻抱住你）别担心，我一直都在。"
    reference = "（抱住你）别怕，我一直在你身边。"
    # jieba 0.42 precise mode; asserted so a change of segmentation is visible here.
    cand = ["轻轻", "抱住", "你", "别", "担心", "我", "一直", "都", "在"]  # 9
    ref = ["抱住", "你", "别怕", "我", "一直", "在", "你", "身边"]  # 8
    assert M.tokenize(candidate, "zh") == cand
    assert M.tokenize(reference, "zh") == ref
    # 1-grams: 抱住, 你 (min(1, 2) = 1), 我, 一直, 在 → 5; F1 = 2·5/(9+8) = 10/17.
    # 2-grams (8 vs 7): 抱住-你, 我-一直 → 2; F1 = 2·2/(8+7) = 4/15.
    # 3-grams (7 vs 6) and 4-grams (6 vs 5): none shared.
    # LCS = 抱住 你 我 一直 在 = 5 → ROUGE-L F1 = 10/17.
    # BLEU: c = 9 > r = 8 → BP = 1; p = 5/9, 2/8, 0.1/7, 0.1/6.
    #   BLEU-1 = 5/9; BLEU-2 = √(5/36); BLEU-3 = ∛(5/9·1/4·1/70) = ∛(1/504) = 0.125658…;
    #   BLEU-4 = (1/504 · 1/60)^(1/4) = 30240^(−1/4) = 0.075832…
    s = M.score_pair(candidate, reference, "zh")
    assert s["rouge1"] == approx(10 / 17)
    assert s["rouge2"] == approx(4 / 15)
    assert s["rougeL"] == approx(10 / 17)
    assert s["bleu1"] == approx(5 / 9)
    assert s["bleu2"] == approx(math.sqrt(5 / 36))
    assert s["bleu3"] == approx(504 ** (-1 / 3))
    assert s["bleu4"] == approx(30240 ** (-1 / 4))
    assert s["bleu4"] == pytest.approx(0.075832, abs=1e-6)
    assert (s["length_tokens"], s["reference_tokens"]) == (9, 8)
    assert s["length_ratio"] == approx(9 / 8)
    assert (s["length_chars"], s["reference_chars"]) == (17, 16)  # punctuation counted
    assert M.score_pair(candidate, reference) == s  # language detected as zh


# ---------------------------------------------------------------- internals against slow references


def _lcs_dp(a, b):
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, x in enumerate(a, 1):
        for j, y in enumerate(b, 1):
            table[i][j] = (
                table[i - 1][j - 1] + 1 if x == y else max(table[i - 1][j], table[i][j - 1])
            )
    return table[-1][-1]


def test_bit_parallel_lcs_matches_dynamic_programming():
    rng = random.Random(7)
    for _ in range(500):
        a = [rng.choice("abcde") for _ in range(rng.randint(0, 40))]
        b = [rng.choice("abcdef") for _ in range(rng.randint(0, 90))]
        assert M.lcs_length(a, b) == _lcs_dp(a, b) == M.lcs_length(b, a)
    assert M.lcs_length(list("ABCBDAB"), list("BDCABA")) == 4  # CLRS's example


def test_bleu_agrees_with_nltk_on_random_token_lists():
    nltk_bleu = pytest.importorskip("nltk.translate.bleu_score")  # dev-only cross-check
    smoothing = nltk_bleu.SmoothingFunction().method1
    weights = [(1, 0, 0, 0), (0.5, 0.5, 0, 0), (1 / 3, 1 / 3, 1 / 3, 0), (0.25,) * 4]
    rng = random.Random(3)
    for _ in range(400):
        ref = [rng.choice("abcdefg") for _ in range(rng.randint(0, 25))]
        cand = [rng.choice("abcdefgh") for _ in range(rng.randint(0, 25))]
        ours = M.bleu(cand, ref)
        theirs = [
            nltk_bleu.sentence_bleu([ref], cand, weights=w, smoothing_function=smoothing)
            for w in weights
        ]
        assert ours == pytest.approx(theirs, abs=1e-12)


# ---------------------------------------------------------------- batches


def _mixed_pairs(n, seed=0):
    rng = random.Random(seed)
    refs = ["the cat is on the mat", "（抱住你）别怕，我一直在你身边。", "明天十点去公园散步吧！"]
    words = _words("the a cat mat on is sat 我 你 在 一直 抱住 别怕 公园 明天")
    return [
        (" ".join(rng.choice(words) for _ in range(rng.randint(0, 12))), rng.choice(refs))
        for _ in range(n)
    ]


def test_score_many_matches_score_pair_in_input_order():
    pairs = _mixed_pairs(300)
    expected = [M.score_pair(c, r) for c, r in pairs]
    got = M.score_many(pairs, processes=1, chunk_size=64)
    assert len(got) == len(pairs)
    for a, b in zip(got, expected, strict=True):
        assert a.keys() == b.keys()
        assert all(a[k] == b[k] or (math.isnan(a[k]) and math.isnan(b[k])) for k in a)


def test_score_many_through_the_process_pool(monkeypatch):
    monkeypatch.setattr(M, "PARALLEL_MIN_PAIRS", 10)
    pairs = [(c, r, "zh") for c, r in _mixed_pairs(200, seed=1)]
    serial = M.score_many(pairs, processes=1)
    parallel = M.score_many(pairs, processes=2, chunk_size=16)
    assert [row["rouge1"] for row in parallel] == [row["rouge1"] for row in serial]
    assert [row["bleu4"] for row in parallel] == [row["bleu4"] for row in serial]
    assert isinstance(parallel[0]["length_tokens"], int)


def test_score_many_in_a_daemon_process_does_not_fork(monkeypatch):
    # A Celery prefork child is a daemon and may not start a pool: score in-process instead.
    class Daemon:
        daemon = True

    def no_pool(*args, **kwargs):
        raise AssertionError("a daemon process must not start a pool")

    monkeypatch.setattr(M, "PARALLEL_MIN_PAIRS", 10)
    monkeypatch.setattr(M.multiprocessing, "current_process", Daemon)
    monkeypatch.setattr(M.multiprocessing, "get_context", no_pool)
    pairs = _mixed_pairs(50, seed=5)
    assert M.score_many(pairs, processes=2) == M.score_many(pairs, processes=1)


def test_score_many_tokenises_each_reference_once():
    M._prepare_reference.cache_clear()
    pairs = _mixed_pairs(500, seed=2)  # 3 distinct references
    M.score_many(pairs, processes=1, chunk_size=50)
    assert M._prepare_reference.cache_info().misses == 3


# ---------------------------------------------------------------- the paper's composite


def test_paper_weights():
    assert C.PAPER_WEIGHTS == {
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
    assert math.fsum(C.PAPER_WEIGHTS.values()) == pytest.approx(1.0)


def test_composite_with_all_terms_is_the_plain_weighted_sum():
    metrics = dict.fromkeys(C.PAPER_WEIGHTS, 0.5) | {"rougeL": 1.0, "bertscore": 0.8}
    result = C.composite(metrics)
    # 0.5 · (1 − 0.20 − 0.25) + 1.0 · 0.20 + 0.8 · 0.25 = 0.275 + 0.2 + 0.2 = 0.675
    assert result.score == approx(0.675)
    assert (result.missing_terms, result.renormalised) == ([], False)
    assert result.note == "Paper composite (H2HTalk hand-set weights) with all nine terms."


def test_composite_renormalises_without_bertscore_and_embedding():
    s = M.score_pair("the cat sat on the mat", "the cat is on the mat", "en")
    result = C.composite(s)
    assert result.missing_terms == ["bertscore", "embedding_cosine"]
    assert result.used_terms == ["rouge1", "rouge2", "rougeL", "bleu1", "bleu2", "bleu3", "bleu4"]
    assert result.renormalised
    # Remaining weights sum to 0.55: (0.10·5/6 + 0.15·3/5 + 0.20·5/6 + 0.03·5/6 + 0.03·√0.5
    #   + 0.02·0.5 + 0.02·240^(−1/4)) / 0.55
    raw = (
        0.10 * 5 / 6
        + 0.15 * 3 / 5
        + 0.20 * 5 / 6
        + 0.03 * 5 / 6
        + 0.03 * math.sqrt(0.5)
        + 0.02 * 0.5
        + 0.02 * 240 ** (-1 / 4)
    )
    assert result.score == approx(raw / 0.55)
    assert math.fsum(result.weights.values()) == pytest.approx(1.0)
    assert result.note == (
        "Paper composite (H2HTalk hand-set weights): BERTScore and embedding cosine are missing"
        " (no model for them here), so the weights of the remaining 7 terms (summing to 0.55)"
        " are renormalised to sum to 1."
    )
    # None and NaN count as missing too; the released evaluator's key is an alias.
    assert C.composite({**s, "bertscore": None, "embedding_cosine": math.nan}).score == (
        result.score
    )
    aliased = C.composite({**s, "embedding_score": 1.0})
    assert aliased.missing_terms == ["bertscore"]


def test_lexical_proxy_embedding_is_flagged_in_the_note():
    candidate, reference = "the cat sat on the mat", "the cat is on the mat"
    metrics = M.score_pair(candidate, reference, "en")
    metrics |= C.embedding_features(candidate, reference, "char_ngram_hash")
    assert metrics["embedding_backend"] == "char_ngram_hash"
    result = C.composite(metrics)
    assert result.missing_terms == ["bertscore"]
    assert result.weights["embedding_cosine"] == approx(0.20 / 0.75)
    assert result.note.endswith(
        "; the embedding term is a lexical proxy (hashed character n-gram cosine), "
        "not a neural embedding."
    )
    assert C.embedding_features(candidate, reference) == {}  # default backend "none"


def test_hashed_char_ngram_cosine_by_hand():
    # "ab" → {a, b, ab}; "abc" → {a, b, c, ab, bc, abc}: dot 3, norms √3·√6 → 3/√18 = 1/√2.
    assert C.hashed_ngram_cosine("ab", "abc") == approx(1 / math.sqrt(2))
    assert C.hashed_ngram_cosine("抱抱你", "抱抱你！") == approx(1.0)  # punctuation folded
    assert C.hashed_ngram_cosine("abc", "xyz") == 0.0
    assert C.hashed_ngram_cosine("", "xyz") == 0.0


def test_composite_columns_matches_row_by_row():
    rows = M.score_many(_mixed_pairs(50, seed=4), processes=1)
    frame = pd.DataFrame(rows)
    result = C.composite_columns(frame)
    assert result.score == pytest.approx([C.composite(row).score for row in rows], abs=1e-12)
    assert result.note == C.composite(rows[0]).note
    frame["bertscore"] = np.nan  # a whole column of NaN is missing
    assert C.composite_columns(frame).missing_terms == ["bertscore", "embedding_cosine"]
    frame.loc[0, "bertscore"] = 0.5  # some rows only: refuse
    with pytest.raises(ValueError):
        C.composite_columns(frame)
    # A lexical-proxy embedding column is flagged, as for one response.
    frame = pd.DataFrame(rows)
    frame["embedding_cosine"] = 0.5
    frame["embedding_backend"] = "char_ngram_hash"
    result = C.composite_columns(frame)
    assert result.missing_terms == ["bertscore"]
    assert "lexical proxy" in result.note
