"""The calibration statistics (h2htalk.stats.calibration) without a database: hand-computed
metrics, the simulation with known weights and a biased judge, and the scenario-grouped CV."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit
from sklearn.linear_model import LogisticRegression

from h2htalk.stats.calibration import splits
from h2htalk.stats.calibration.cross_validation import cross_validate, verdict_sentence
from h2htalk.stats.calibration.data import design_matrix, fingerprint, votes_frame, votes_of
from h2htalk.stats.calibration.metrics import (
    accuracy_with_ties,
    accuracy_without_ties,
    brier,
    choose_tie_band,
    kappa,
    reliability,
    three_way,
    vote_log_loss,
)
from h2htalk.stats.calibration.model import fit_model, fit_slope, linear_decision
from h2htalk.stats.calibration.splits import LeakError, group_splits
from h2htalk.stats.calibration.system import bt_strengths, rank_correlations
from tests import simulators

SINGLE_FEATURES = ["metric_1", "metric_2", "rubric", "log_length"]
PAIRWISE_FEATURES = ["metric_1", "metric_2", "log_length", "judge_win_share"]
PAIRWISE_WEIGHTS = {"metric_1": 1.0, "metric_2": 0.5, "log_length": -0.6}


# ---------------------------------------------------------------- hand-computed metrics


def test_log_loss_brier_over_votes_by_hand():
    p = np.array([0.8, 0.4])
    votes = np.array([[2, 0, 1], [0, 1, 1]])  # (A, tie, B)
    # Votes: A,A,B at p=0.8; tie, B at p=0.4 → outcomes 1,1,0 and ½,0.
    expected_loss = (
        -(
            2 * math.log(0.8)
            + math.log(0.2)
            + 0.5 * math.log(0.4)
            + 0.5 * math.log(0.6)
            + math.log(0.6)
        )
        / 5
    )
    assert vote_log_loss(p, votes) == pytest.approx(expected_loss, abs=1e-12)
    expected_brier = (2 * 0.2**2 + 0.8**2 + 0.1**2 + 0.4**2) / 5
    assert brier(p, votes) == pytest.approx(expected_brier, abs=1e-12)


def test_ece_and_reliability_table_by_hand():
    p = np.array([0.05, 0.15, 0.18, 0.95, 1.0])
    votes = np.array([[0, 0, 2], [1, 0, 1], [1, 0, 0], [3, 0, 0], [0, 0, 1]])
    ece, table = reliability(p, votes, bins=10)
    # Bin [0, .1): p .05, 2 votes, observed 0 → gap .05 (weight 2/9).
    # Bin [.1, .2): p .15 (2 votes) and .18 (1 vote): mean p (.3 + .18)/3 = .16, observed 2/3.
    # Bin [.9, 1] (closed): p .95 (3 votes) and 1.0 (1 vote): mean p .9625, observed 3/4.
    expected = (2 / 9) * 0.05 + (3 / 9) * abs(2 / 3 - 0.16) + (4 / 9) * abs(0.75 - 0.9625)
    assert ece == pytest.approx(expected, abs=1e-12)
    assert len(table) == 10 and table[9]["comparisons"] == 2 and table[5]["mean_p"] is None
    assert table[1]["mean_p"] == pytest.approx(0.16) and table[1]["observed"] == pytest.approx(
        2 / 3
    )


def test_accuracy_with_and_without_ties_and_kappa():
    p = np.array([0.9, 0.6, 0.5, 0.45, 0.2, 0.52])
    majority = np.array([-1, -1, 1, 0, 1, 0])  # −1 = A better
    accuracy, decided = accuracy_without_ties(p, majority)
    # Decided: .9 A ✓, .6 A ✓, .5 → ½, .2 B ✓ → 3.5 / 4.
    assert decided == 4 and accuracy == pytest.approx(3.5 / 4)
    # δ = .05: calls A, A, tie, tie, B, tie → right on 1,2,4,5,6 → 5/6.
    assert accuracy_with_ties(p, majority, 0.05) == pytest.approx(5 / 6)
    assert list(three_way(p, 0.05)) == [-1, -1, 0, 0, 1, 0]
    # δ chosen on this data: 0.05 beats 0 (3/6) and 0.15 (calls .6 a tie: 4/6).
    assert choose_tie_band(p, majority, bands=(0.0, 0.05, 0.15)) == 0.05
    calls = np.array([-1, -1, 0, 0, 1, 0])
    agreement = np.mean(calls == majority)
    chance = sum(np.mean(calls == c) * np.mean(majority == c) for c in (-1, 0, 1))
    expected_kappa = (agreement - chance) / (1 - chance)
    assert kappa(p, majority, 0.05) == pytest.approx(expected_kappa)


def test_fingerprint_ignores_order_and_sees_every_change():
    triples = [(3, 10, -1), (1, 11, 2), (1, 10, 0)]
    first = fingerprint(triples)
    assert first == fingerprint(list(reversed(triples)))
    assert first != fingerprint([(3, 10, -1), (1, 11, 2), (1, 10, 1)])
    assert first != fingerprint(triples[:2])
    import hashlib

    text = "1,10,0\n1,11,2\n3,10,-1\n"
    assert first == hashlib.sha256(text.encode()).hexdigest()


def test_linear_decision_matches_sklearn_and_is_antisymmetric():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(200, 3))
    y = (X @ [1.0, -0.5, 0.2] + rng.logistic(size=200) > 0).astype(int)
    model = LogisticRegression(fit_intercept=False).fit(X / 2.0, y)
    p = expit(linear_decision(X, [0, 0, 0], [2.0, 2.0, 2.0], model.coef_[0], 0.0))
    assert np.max(np.abs(p - model.predict_proba(X / 2.0)[:, 1])) < 1e-12
    q = expit(linear_decision(-X, [0, 0, 0], [2.0, 2.0, 2.0], model.coef_[0], 0.0))
    assert np.max(np.abs(p + q - 1)) < 1e-12
    # A missing difference counts as 0.
    X[0, 1] = np.nan
    z = linear_decision(X[:1], [0, 0, 0], [1, 1, 1], [1.0, 5.0, 0.0], 0.0)
    assert z[0] == pytest.approx(X[0, 0])


def test_fit_slope_recovers_a_known_slope():
    rng = np.random.default_rng(2)
    diff = rng.normal(0, 0.2, 20_000)
    a_wins = rng.random(20_000) < expit(7.0 * diff)
    votes = np.stack([a_wins, np.zeros(20_000), ~a_wins], axis=1).astype(float)
    assert fit_slope(diff, votes) == pytest.approx(7.0, rel=0.05)


def test_rank_correlations_and_bradley_terry_from_probabilities():
    a = np.array([0, 0, 1, 0, 1, 2])
    b = np.array([1, 2, 2, 1, 2, 3])
    theta = bt_strengths(a, b, np.full(6, 0.8), np.full(6, 0.2), [0, 1, 2, 3])
    assert list(np.argsort(-theta)) == [0, 1, 2, 3]
    assert rank_correlations([4, 3, 2, 1], theta) == (pytest.approx(1.0), pytest.approx(1.0))
    assert rank_correlations([1, 2], [2, 1]) == (None, None)


# ---------------------------------------------------------------- the simulation


@pytest.fixture(scope="module")
def single():
    frame, weights = simulators.simulate_comparisons(n_comparisons=3000, judge="single", seed=11)
    return frame, weights, cross_validate(frame, SINGLE_FEATURES, folds=5, seed=1)


@pytest.fixture(scope="module")
def pairwise():
    frame, weights = simulators.simulate_comparisons(
        n_comparisons=3000,
        judge="pairwise",
        seed=12,
        weights=PAIRWISE_WEIGHTS,
        position_bias=1.0,
    )
    return frame, weights, cross_validate(frame, PAIRWISE_FEATURES, folds=5, seed=1)


def _fit_all(frame, features):
    model, _ = fit_model(
        design_matrix(frame, features),
        votes_of(frame),
        frame["scenario"].to_numpy(),
        features,
    )
    return model


def test_fitted_weights_recover_the_known_ones(single):
    frame, weights, _ = single
    model = _fit_all(frame, SINGLE_FEATURES)
    # The model works on standardised differences: back on the raw scale, w / scale.
    recovered = dict(zip(SINGLE_FEATURES, model.raw_weights, strict=True))
    for name, truth in weights.items():
        assert recovered[name] == pytest.approx(truth, abs=0.15 * max(1, abs(truth))), name
    # The standardised weights are the raw ones times the scale, and the scale is the RMS.
    X = design_matrix(frame, SINGLE_FEATURES)
    assert np.allclose(model.scale, np.sqrt((X**2).mean(axis=0)))
    assert np.allclose(model.weights, model.raw_weights * model.scale)
    assert model.intercept == 0.0 and not model.mean.any()


def test_calibrated_beats_the_length_biased_raw_judge_held_out(single):
    _, _, result = single
    raw, calibrated = result.metrics["raw"], result.metrics["calibrated"]
    assert calibrated["accuracy_without_ties"] > raw["accuracy_without_ties"] + 0.02
    assert calibrated["ece"] < raw["ece"]
    assert calibrated["log_loss"] < raw["log_loss"]
    assert result.comparison["raw"]["high"] < 0  # the log-loss gain is clear of zero
    assert result.comparison["composite"]["worse"] is False
    assert "beats the paper's composite" in verdict_sentence(result.metrics, result.comparison)


def test_pairwise_judge_with_position_and_length_bias(pairwise):
    frame, weights, result = pairwise
    raw, calibrated = result.metrics["raw"], result.metrics["calibrated"]
    assert calibrated["accuracy_without_ties"] > raw["accuracy_without_ties"] + 0.05
    assert calibrated["ece"] < raw["ece"]
    model = _fit_all(frame, PAIRWISE_FEATURES)
    recovered = dict(zip(PAIRWISE_FEATURES, model.raw_weights, strict=True))
    for name, truth in weights.items():
        assert recovered[name] == pytest.approx(truth, abs=0.15), name
    # The judge's verdicts add nothing beyond the features humans use: known weight 0.
    assert abs(recovered["judge_win_share"]) < 0.15


def test_held_out_predictions_cover_every_comparison_once(single):
    frame, _, result = single
    assert (result.fold >= 0).all() and result.n_folds == 5
    for name in ("raw", "composite", "calibrated"):
        assert not np.isnan(result.predictions[name]).any()
    for k in range(result.n_folds):
        tested = set(frame["scenario"][result.fold == k])
        trained = set(frame["scenario"][result.fold != k])
        assert not tested & trained


def test_no_scenario_is_in_both_train_and_test_in_any_split(monkeypatch):
    """Every split made (outer folds and the inner folds choosing C) is checked."""
    seen = []
    original = group_splits

    def recording(groups, n_splits, seed=0):
        groups = np.asarray(groups)
        for train, test in original(groups, n_splits, seed):
            seen.append((set(groups[train]), set(groups[test])))
            yield train, test

    monkeypatch.setattr(splits, "group_splits", recording)
    frame, _ = simulators.simulate_comparisons(n_comparisons=600, judge="single", seed=5)
    cross_validate(frame, SINGLE_FEATURES, folds=5, inner_folds=3)
    assert len(seen) == 5 + 5 * 3 + 0  # outer folds, and inner folds inside each
    for train, test in seen:
        assert train and test and not train & test


def test_a_splitter_that_ignores_scenarios_is_caught(monkeypatch):
    from sklearn.model_selection import KFold

    class Leaky(KFold):
        def __init__(self, n_splits, shuffle, random_state):
            super().__init__(n_splits=n_splits, shuffle=shuffle, random_state=random_state)

        def split(self, X, y=None, groups=None):
            return super().split(X)

    monkeypatch.setattr(splits, "GroupKFold", Leaky)
    groups = np.repeat(np.arange(20), 5)
    with pytest.raises(LeakError):
        list(group_splits(groups, 5))


def test_worse_than_the_composite_is_said_plainly():
    """Humans follow the composite; the calibrated judge only gets noise features."""
    rng = np.random.default_rng(8)
    n = 1500
    frame = pd.DataFrame(
        {
            "scenario": rng.integers(0, 300, n),
            "companion_a": rng.integers(0, 3, n),
        }
    )
    frame["companion_b"] = frame["companion_a"] + 1
    frame["composite_diff"] = rng.normal(0, 0.3, n)
    p = expit(6 * frame["composite_diff"])
    a_votes = rng.binomial(3, p)
    frame["votes_a"], frame["votes_tie"], frame["votes_b"] = a_votes, 0, 3 - a_votes
    frame["majority"] = np.where(a_votes >= 2, -1, 1)
    frame["d_noise"] = rng.normal(size=n)
    result = cross_validate(frame, ["noise"], folds=5)
    assert result.metrics["raw"] is None
    assert result.comparison["composite"]["worse"] is True
    sentence = verdict_sentence(result.metrics, result.comparison)
    assert sentence.startswith("The calibrated judge is worse than the paper's composite")


@pytest.mark.parametrize(
    ("point", "low", "high", "start"),
    [
        (-0.05, -0.08, -0.01, "The calibrated judge beats the paper's composite"),
        (-0.01, -0.04, 0.02, "The calibrated judge and the paper's composite are not told apart"),
        (0.01, -0.02, 0.04, "The calibrated judge is worse than the paper's composite"),
        (0.05, 0.02, 0.08, "The calibrated judge is worse than the paper's composite"),
    ],
)
def test_the_verdict_claims_only_what_the_interval_shows(point, low, high, start):
    metrics = {"calibrated": {"log_loss": 0.6}, "composite": {"log_loss": 0.6 - point}}
    composite = {"log_loss_difference": point, "low": low, "high": high, "worse": point > 0}
    sentence = verdict_sentence(metrics, {"composite": composite})
    assert sentence.startswith(start), sentence
    assert ("includes 0" in sentence) == (low <= 0 <= high)


def test_votes_frame_uses_the_agreement_majority():
    judgments = pd.DataFrame(
        {
            "comparison": [1, 1, 1, 2, 2, 3, 3],
            "annotator": [1, 2, 3, 1, 2, 1, 2],
            "preference": [-2, 1, 1, -1, 1, -2, 1],
        }
    )
    table = votes_frame(judgments)
    assert list(table["votes_a"]) == [1, 1, 1] and list(table["votes_b"]) == [2, 1, 1]
    # 1: plurality B; 2: split, summed preference 0 → tie; 3: split, summed −1 → A.
    assert list(table["majority"]) == [1, 0, -1]
    assert table.loc[1, "mean_preference"] == pytest.approx(0.0)
