"""Issue 22 point 5: how "both unacceptable", reasons and confidence enter the numbers.

"Both unacceptable" is stored with preference 0 (annotation.rating_details): Bradley–Terry
counts it as a tie, ordinal α and A/tie/B put it on the tie point, and the 4-way nominal label
makes it a category of its own. Checked against the krippendorff package on the mirrored data
built by hand, and for invariance to swapped A/B (screen sides, renumbered companions)."""

import krippendorff
import numpy as np
import pandas as pd
import pytest

from h2htalk.stats import bradley_terry as bt
from h2htalk.stats.agreement.details import (
    agreement_by_confidence,
    preferred_companion,
    reasons_by_companion,
)
from h2htalk.stats.agreement.labels import BOTH_UNACCEPTABLE, label_values
from h2htalk.stats.agreement.reliability import label_agreement
from scoring.releases.computing import _outcome_a

COMPANIONS = ["Ava", "Bo", "Cy"]


def judgments(seed=0, n_units=60, raters=3) -> pd.DataFrame:
    """Votes on comparisons of three companions; about one in six says both unacceptable
    (preference 0, as stored), the rest a preference with reasons and a confidence."""
    rng = np.random.default_rng(seed)
    rows = []
    for unit in range(n_units):
        a, b = sorted(rng.choice(3, size=2, replace=False))
        lean = rng.integers(-2, 3)
        for rater in range(raters):
            unacceptable = rng.random() < 1 / 6
            preference = 0 if unacceptable else int(np.clip(lean + rng.integers(-1, 2), -2, 2))
            reasons = [] if preference == 0 else sorted(rng.choice(["warm", "safe", "plan"], 2))
            rows.append(
                {
                    "comparison": unit,
                    "annotator": f"r{rater}",
                    "preference": preference,
                    "both_unacceptable": unacceptable,
                    "companion_a": COMPANIONS[a],
                    "companion_b": COMPANIONS[b],
                    "reasons": reasons,
                    "confidence": float(rng.integers(1, 4)),
                }
            )
    return pd.DataFrame(rows)


def swapped(frame: pd.DataFrame, which) -> pd.DataFrame:
    """The same votes with A and B of the comparisons `which` swapped (as another numbering
    of the companions, or the other screen side keyed back, would give them)."""
    out = frame.copy()
    flip = out["comparison"].isin(which)
    out.loc[flip, "preference"] = -out.loc[flip, "preference"]
    out.loc[flip, ["companion_a", "companion_b"]] = out.loc[
        flip, ["companion_b", "companion_a"]
    ].to_numpy()
    return out


def test_both_unacceptable_is_a_tie_for_bradley_terry():
    frame = judgments()
    assert (frame.loc[frame["both_unacceptable"], "preference"] == 0).all()
    outcome = _outcome_a(frame["preference"])
    assert (outcome[frame["both_unacceptable"].to_numpy()] == 0.5).all()
    index = {name: i for i, name in enumerate(COMPANIONS)}
    a = frame["companion_a"].map(index).to_numpy()
    b = frame["companion_b"].map(index).to_numpy()
    cells = bt.aggregate(a, b, outcome, 3)
    # A both-unacceptable vote adds half a win to each side, exactly as a tie does.
    ties = frame.assign(both_unacceptable=False)
    assert np.array_equal(
        cells.wins(), bt.aggregate(a, b, _outcome_a(ties["preference"]), 3).wins()
    )
    one = frame[frame["both_unacceptable"]].iloc[:1]
    single = bt.aggregate(
        one["companion_a"].map(index),
        one["companion_b"].map(index),
        _outcome_a(one["preference"]),
        3,
    ).wins()
    assert single.sum() == 1.0 and sorted(single[single > 0]) == [0.5, 0.5]


def test_outcome4_is_its_own_nominal_category_on_mirrored_data():
    frame = judgments()
    values = label_values(frame, "outcome4")
    assert set(values.unique()) == {-1.0, 0.0, 1.0, BOTH_UNACCEPTABLE}
    assert (values[frame["both_unacceptable"]] == BOTH_UNACCEPTABLE).all()
    # By hand: raters × comparisons, and the mirror with A and B swapped (BU and tie fixed).
    matrix = frame.pivot(index="annotator", columns="comparison", values="preference")
    codes = np.sign(matrix.to_numpy(float))
    bu = frame.pivot(index="annotator", columns="comparison", values="both_unacceptable")
    codes = np.where(bu.to_numpy(bool), 9.0, codes)
    mirror = np.where(codes == 9.0, 9.0, -codes)
    expected = krippendorff.alpha(
        reliability_data=np.hstack([codes, mirror]), level_of_measurement="nominal"
    )
    table = label_agreement(frame, labels=["outcome4", "winner3", "preference5"], n_boot=50)
    assert table.loc["outcome4", "alpha"] == pytest.approx(expected, abs=1e-12)
    assert table.loc["outcome4", "level"] == "nominal"
    # Counted once per comparison, as the mirrored labels are.
    assert table.loc["outcome4", "n_pairable"] == table.loc["winner3", "n_pairable"]
    assert table.loc["outcome4", "fleiss_units"] == table.loc["winner3", "fleiss_units"]
    # As a category of its own it differs from winner3, where it is the tie.
    assert table.loc["outcome4", "alpha"] != pytest.approx(table.loc["winner3", "alpha"])


def test_agreement_is_the_same_with_a_and_b_swapped_or_renumbered():
    frame = judgments(seed=3)
    labels = ["outcome4", "winner3", "preference5"]
    before = label_agreement(frame, labels=labels, n_boot=200, seed=1)
    flipped = swapped(frame, range(0, 60, 3))
    renumbered = flipped.assign(comparison=1000 - flipped["comparison"])
    for other in (flipped, renumbered):
        after = label_agreement(other, labels=labels, n_boot=200, seed=1)
        for column in ("alpha", "n_units", "n_pairable", "percent_agreement", "fleiss_kappa"):
            assert np.allclose(after[column], before[column]), column


def test_reasons_go_with_the_preferred_companion_whatever_the_orientation():
    frame = pd.DataFrame(
        {
            "preference": [-2, 1, 0, 2, -1],
            "both_unacceptable": [False, False, True, False, False],
            "companion_a": ["Ava", "Ava", "Ava", "Bo", "Bo"],
            "companion_b": ["Bo", "Bo", "Bo", "Cy", "Cy"],
            "reasons": [["warm"], ["safe", "warm"], [], [], ["plan", "odd"]],
        }
    )
    chosen = preferred_companion(frame)
    assert chosen.where(chosen.notna(), "none").tolist() == ["Ava", "Bo", "none", "Cy", "Bo"]
    table = reasons_by_companion(frame, ["warm", "safe", "plan"])
    assert table.to_dict("index") == {
        "Ava": {"preferred": 1, "with_reasons": 1, "warm": 1, "safe": 0, "plan": 0, "odd": 0},
        "Bo": {"preferred": 2, "with_reasons": 2, "warm": 1, "safe": 1, "plan": 1, "odd": 1},
        "Cy": {"preferred": 1, "with_reasons": 0, "warm": 0, "safe": 0, "plan": 0, "odd": 0},
    }
    big = judgments(seed=5)
    keys = ["warm", "safe", "plan"]
    flipped = swapped(big, range(1, 60, 2))
    pd.testing.assert_frame_equal(
        reasons_by_companion(big, keys), reasons_by_companion(flipped, keys)
    )


def test_agreement_by_confidence_counts_votes_against_the_others_consensus():
    frame = pd.DataFrame(
        {
            "comparison": [1, 1, 1, 1, 2, 2, 2],
            "annotator": ["x", "y", "z", "w", "x", "y", "z"],
            "preference": [-1, -2, 1, -1, 2, 1, 0],
            "confidence": [3, 3, 1, 3, 2, np.nan, 1],
        }
    )
    table = agreement_by_confidence(frame)
    # Unit 1: the others of x, y and w say A (as they do), the others of z say A (z: B).
    # Unit 2: the others of x are B and tie (no plurality); of z, B and B (z: tie).
    got = table.to_dict("index")
    assert got[3] == {"n": 3, "n_consensus": 3, "agreement": 1.0}
    assert got[1] == {"n": 2, "n_consensus": 2, "agreement": 0.0}
    assert got[2]["n"] == 1 and got[2]["n_consensus"] == 0 and np.isnan(got[2]["agreement"])
