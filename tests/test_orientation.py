"""Every agreement figure on preference data is the same however companions and comparisons are
numbered (h2htalk.stats.agreement, "Orientation": each comparison counted once as v and once
mirrored as −v). Renumbering companions swaps A and B of some comparisons; these tests renumber
them (any permutation), rename comparisons, shuffle rows and swap screen sides, and compare
every figure the agreement report, the calibration report's human–human agreement and the
held-out judge metrics show."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from h2htalk.stats.agreement.aggregation import aggregate_labels
from h2htalk.stats.agreement.annotators import annotator_report
from h2htalk.stats.agreement.coefficients import (
    cohen_kappa,
    pair_kappa,
    pairwise_agreement,
    percent_agreement,
)
from h2htalk.stats.agreement.krippendorff_alpha import alpha, paired_alpha_with_ci
from h2htalk.stats.agreement.labels import rating_matrix
from h2htalk.stats.agreement.reliability import label_agreement
from h2htalk.stats.calibration.cross_validation import CVResult, cross_validate
from h2htalk.stats.calibration.metrics import three_way
from scoring.calibration.heldout import human_agreement
from tests import simulators

ANNOTATORS = ["ann", "bo", "cy", "dee", "contrarian"]
RATING = "empathy"


def dominant_judgments(
    seed: int, n_units: int = 40, n_companions: int = 4, dominance: float = 2.0
) -> pd.DataFrame:
    """Judgments keyed as stored (A = the lower companion id) where companion 0 is much better
    than the others: with A = lower id, most labels fall on one side. Annotators agree
    (about 85%), 'contrarian' reads A and B backwards; 1–5 ratings follow quality; the first
    three units are gold."""
    rng = np.random.default_rng(seed)
    quality = np.array([2.0, 0.0, -0.3, -0.6, -0.9, -1.2][:n_companions])
    rows = []
    for unit in range(n_units):
        a, b = sorted(rng.choice(n_companions, 2, replace=False))
        p_a = 1 / (1 + np.exp(-(quality[a] - quality[b]) * dominance))
        truth = -1 if rng.random() < p_a else 1
        if rng.random() < 0.1:
            truth = 0
        for name in rng.choice(ANNOTATORS, int(rng.integers(2, 5)), replace=False):
            label = truth if rng.random() < 0.85 else int(rng.choice([-1, 0, 1]))
            if name == "contrarian":
                label = -label
            preference = int(label * rng.integers(1, 3))
            left_is_a = bool(rng.random() < 0.5)
            rows.append(
                {
                    "comparison": 1000 + unit,
                    "companion_a": int(a),
                    "companion_b": int(b),
                    "annotator": str(name),
                    "preference": preference,
                    "screen_preference": preference if left_is_a else -preference,
                    "left_is_a": left_is_a,
                    "time_on_task_ms": int(rng.integers(3_000, 60_000)),
                    "is_gold": unit < 3,
                    "gold_preference": float(truth) if unit < 3 else np.nan,
                    "dimension": ["dialogue", "itinerary"][unit % 2],
                    f"a_{RATING}": float(np.clip(round(3 + quality[a] + rng.normal()), 1, 5)),
                    f"b_{RATING}": float(np.clip(round(3 + quality[b] + rng.normal()), 1, 5)),
                }
            )
    return pd.DataFrame(rows)


def renumber(frame: pd.DataFrame, companion_ids, comparison_ids, row_order) -> pd.DataFrame:
    """The same judgments after giving companion c the id companion_ids[c] and comparison u
    the id comparison_ids[u − 1000], stored as the platform stores them: A = the lower id, so
    a comparison whose order changes has its keyed preference, gold answer, layout flag and
    A/B ratings swapped (what the annotator saw on screen is unchanged)."""
    out = frame.copy()
    new_a = np.asarray(companion_ids)[frame["companion_a"].to_numpy()]
    new_b = np.asarray(companion_ids)[frame["companion_b"].to_numpy()]
    flip = new_a > new_b
    out["companion_a"] = np.minimum(new_a, new_b)
    out["companion_b"] = np.maximum(new_a, new_b)
    out["comparison"] = np.asarray(comparison_ids)[frame["comparison"].to_numpy() - 1000]
    out.loc[flip, "preference"] = -frame.loc[flip, "preference"]
    out.loc[flip, "gold_preference"] = -frame.loc[flip, "gold_preference"]
    out.loc[flip, "left_is_a"] = ~frame.loc[flip, "left_is_a"]
    out.loc[flip, f"a_{RATING}"] = frame.loc[flip, f"b_{RATING}"]
    out.loc[flip, f"b_{RATING}"] = frame.loc[flip, f"a_{RATING}"]
    return out.iloc[list(row_order)].reset_index(drop=True)


def figures(frame: pd.DataFrame) -> dict:
    """Every figure the agreement report and the calibration report's human–human agreement
    show, keyed by something that does not depend on the numbering."""
    regular = frame[~frame["is_gold"]]
    out = {}
    table = label_agreement(
        regular, labels=["preference5", "winner3", f"rating_{RATING}"], n_boot=200, seed=3
    )
    out["alpha"] = table.drop(columns=["level"]).to_dict(orient="index")
    for name, part in regular.groupby("dimension"):
        out[f"alpha {name}"] = label_agreement(part, n_boot=50, seed=1)["alpha"].to_dict()
    out["annotators"] = annotator_report(frame).to_dict(orient="index")
    share, shared = pairwise_agreement(rating_matrix(regular, "winner3"))
    out["heatmap"] = (share.to_numpy().tolist(), shared.to_numpy().tolist())
    aggregation = aggregate_labels(regular)
    out["aggregation"] = (aggregation.disagreement, aggregation.n_majority_ties)
    out["calibration humans"] = human_agreement(
        regular[["comparison", "annotator", "preference"]], n_boot=200
    )
    return out


def assert_same(left, right, path="figures"):
    if isinstance(left, dict):
        assert set(left) == set(right), path
        for key in left:
            assert_same(left[key], right[key], f"{path}.{key}")
    elif isinstance(left, list | tuple):
        assert len(left) == len(right), path
        for index, (a, b) in enumerate(zip(left, right, strict=True)):
            assert_same(a, b, f"{path}[{index}]")
    elif isinstance(left, float | np.floating) or isinstance(right, float | np.floating):
        if left is None or right is None:
            assert left is right, path
        elif np.isnan(left) or np.isnan(right):
            assert np.isnan(left) and np.isnan(right), path
        else:
            assert left == pytest.approx(right, rel=1e-9, abs=1e-12), path
    else:
        assert left == right, path


@st.composite
def renumberings(draw):
    seed = draw(st.integers(0, 10_000))
    n_companions = draw(st.integers(3, 5))
    frame = dominant_judgments(seed, n_units=30, n_companions=n_companions)
    companion_ids = draw(st.permutations(range(n_companions)))
    comparison_ids = [5000 + i for i in draw(st.permutations(range(30)))]
    rows = draw(st.permutations(range(len(frame))))
    return frame, companion_ids, comparison_ids, rows


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(renumberings())
def test_renumbering_companions_and_comparisons_changes_no_figure(case):
    frame, companion_ids, comparison_ids, rows = case
    before = figures(frame)
    after = figures(renumber(frame, companion_ids, comparison_ids, rows))
    assert_same(before, after)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10_000), st.data())
def test_swapping_screen_sides_changes_no_agreement_figure(seed, data):
    """Showing a pair the other way round (same pair-keyed preference) changes only the
    position-bias columns, which are about the screen."""
    frame = dominant_judgments(seed, n_units=30)
    swap = np.array(data.draw(st.lists(st.booleans(), min_size=len(frame), max_size=len(frame))))
    swapped = frame.copy()
    swapped.loc[swap, "left_is_a"] = ~frame.loc[swap, "left_is_a"]
    swapped.loc[swap, "screen_preference"] = -frame.loc[swap, "screen_preference"]
    before, after = figures(frame), figures(swapped)
    for figures_ in (before, after):
        for row in figures_["annotators"].values():
            for column in ("left_rate", "left_p", "flag", "flag_items", "flagged"):
                row.pop(column)
    assert_same(before, after)


def test_one_dominant_companion_collapses_a_fixed_orientation_but_not_the_mirror():
    """The README's reason: with A = the lower id and one dominant companion, labels pile up on
    one side, α's chance baseline nearly equals the observed agreement and α collapses while
    annotators agree; mirrored, α reflects their agreement (and equals the α of the same data
    renumbered so the dominant companion has the highest id)."""
    frame = dominant_judgments(1, n_units=200, n_companions=2, dominance=6.0)
    frame = frame[frame["annotator"] != "contrarian"].reset_index(drop=True)
    regular = frame[~frame["is_gold"]]
    fixed = alpha(rating_matrix(regular, "winner3"), "nominal")
    mirrored = label_agreement(regular, labels=["winner3"], n_boot=0).at["winner3", "alpha"]
    reversed_ids = renumber(frame, [1, 0], list(range(1000, 1200)), range(len(frame)))
    reversed_regular = reversed_ids[~reversed_ids["is_gold"]]
    assert percent_agreement(rating_matrix(regular, "winner3")) > 0.75
    assert fixed < 0.4 and mirrored > 0.6, (fixed, mirrored)
    assert label_agreement(reversed_regular, labels=["winner3"], n_boot=0).at[
        "winner3", "alpha"
    ] == pytest.approx(mirrored)


def test_mirrored_alpha_is_the_package_alpha_of_the_mirrored_data():
    frame = dominant_judgments(4, n_units=60)
    matrix = rating_matrix(frame, "preference5").to_numpy()
    import krippendorff

    expected = krippendorff.alpha(
        reliability_data=np.hstack([matrix, -matrix]), level_of_measurement="ordinal"
    )
    result = paired_alpha_with_ci(matrix, level="ordinal", n_boot=300, seed=2)
    assert result.alpha == pytest.approx(expected)
    assert result.low <= result.alpha <= result.high
    # Units are comparisons (not comparisons and mirrors), values the judgments given.
    assert result.n_units == int((np.isfinite(matrix).sum(axis=0) >= 2).sum())
    assert result.n_pairable == int(
        np.isfinite(matrix)[:, np.isfinite(matrix).sum(axis=0) >= 2].sum()
    )


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([-1, 0, 1]), st.sampled_from([-1, 0, 1]), st.booleans()),
        min_size=2,
        max_size=60,
    )
)
def test_pair_kappa_does_not_depend_on_which_side_is_a(items):
    x = np.array([i[0] for i in items], dtype=float)
    y = np.array([i[1] for i in items], dtype=float)
    sign = np.where([i[2] for i in items], -1.0, 1.0)
    left, right = pair_kappa(x, y), pair_kappa(sign * x, sign * y)
    assert (np.isnan(left) and np.isnan(right)) or left == pytest.approx(right)


# Held-out judge metrics (calibration report)

FEATURES = ["metric_1", "metric_2", "rubric", "log_length"]


def renumber_comparisons(frame: pd.DataFrame, companion_ids) -> pd.DataFrame:
    """A calibration comparison table after renumbering companions (A = the lower id)."""
    out = frame.copy()
    ids = np.asarray(companion_ids)
    new_a, new_b = ids[frame["companion_a"].to_numpy()], ids[frame["companion_b"].to_numpy()]
    flip = new_a > new_b
    out["companion_a"], out["companion_b"] = np.minimum(new_a, new_b), np.maximum(new_a, new_b)
    for name in [*FEATURES, "composite"]:
        a, b = (
            f"a_{name}" if name != "composite" else "composite_a",
            (f"b_{name}" if name != "composite" else "composite_b"),
        )
        out.loc[flip, a], out.loc[flip, b] = frame.loc[flip, b], frame.loc[flip, a]
    for name in FEATURES:
        out.loc[flip, f"d_{name}"] = -frame.loc[flip, f"d_{name}"]
    out.loc[flip, "composite_diff"] = -frame.loc[flip, "composite_diff"]
    out.loc[flip, "votes_a"] = frame.loc[flip, "votes_b"]
    out.loc[flip, "votes_b"] = frame.loc[flip, "votes_a"]
    out.loc[flip, "majority"] = -frame.loc[flip, "majority"]
    out.loc[flip, "raw"] = 1 - frame.loc[flip, "raw"]
    return out


def heldout_figures(result: CVResult, companion_ids=None) -> dict:
    metrics = {
        name: {k: v for k, v in values.items() if k != "reliability"}
        for name, values in result.metrics.items()
    }
    elo = result.system["elo"]
    companions = result.system["companions"]
    if companion_ids is not None:  # back to the original numbering
        back = {int(new): old for old, new in enumerate(companion_ids)}
        order = np.argsort([back[int(c)] for c in companions])
        elo = {name: [values[i] for i in order] for name, values in elo.items()}
    return {"metrics": metrics, "elo": elo, "comparison": result.comparison}


@pytest.mark.parametrize("companion_ids", [[3, 2, 1, 0], [1, 3, 0, 2]])
def test_heldout_judge_metrics_do_not_depend_on_companion_ids(companion_ids):
    frame, _ = simulators.simulate_comparisons(
        n_comparisons=240, n_companions=4, strength_by_id=True, seed=5
    )
    before = cross_validate(frame, FEATURES, folds=4)
    after = cross_validate(renumber_comparisons(frame, companion_ids), FEATURES, folds=4)
    left, right = heldout_figures(before), heldout_figures(after, companion_ids)
    for judge, values in left["metrics"].items():
        for key, value in values.items():
            other = right["metrics"][judge][key]
            assert (value is None and other is None) or value == pytest.approx(
                other, rel=1e-6, abs=1e-9
            ), (judge, key)
    for name, values in left["elo"].items():
        assert values == pytest.approx(right["elo"][name], abs=1e-6), name


def test_a_good_judge_keeps_its_kappa_when_id_order_follows_strength():
    """Lower ids are the stronger companions, so the human majority is A in most comparisons:
    with A fixed to the lower id, κ of a judge that is right 95% of the time is near 0
    (both marginals are nearly all A); mirrored, κ says what the accuracy says."""
    frame, _ = simulators.simulate_comparisons(
        n_comparisons=600, n_companions=4, strength_by_id=True, quality_spread=3.0, seed=3
    )
    assert (frame["majority"] == -1).mean() > 0.9
    result = cross_validate(frame, ["metric_2"], folds=5)
    calibrated = result.metrics["calibrated"]
    assert calibrated["accuracy_without_ties"] > 0.9
    calls = three_way(result.predictions["calibrated"], result.tie_band["calibrated"])
    fixed = cohen_kappa(calls.astype(float), frame["majority"].to_numpy(dtype=float))
    assert fixed < 0.2, fixed  # what a fixed orientation reports
    assert calibrated["kappa"] > 0.7, calibrated["kappa"]
