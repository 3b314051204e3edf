"""The agreement coefficients at their edges (too little data, one value, no draws) and the
paired α, against the reference packages (sklearn, statsmodels, krippendorff)."""

import krippendorff
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

from h2htalk.stats.agreement.coefficients import (
    FleissResult,
    cohen_kappa,
    cohen_kappa_pairs,
    fleiss_kappa,
    fleiss_kappa_counts,
    pair_kappa,
    pairwise_agreement,
    percent_agreement,
)
from h2htalk.stats.agreement.krippendorff_alpha import (
    MAX_VALUES,
    alpha,
    alpha_with_ci,
    coincidence_alpha,
    paired_alpha_with_ci,
    percentile_interval,
    value_counts,
)

NAN = np.nan


def rated(seed, raters=3, units=80, values=(-2, -1, 0, 1, 2), missing=0.2):
    rng = np.random.default_rng(seed)
    truth = rng.choice(values, units)
    matrix = np.where(rng.random((raters, units)) < 0.7, truth, rng.choice(values, (raters, units)))
    matrix = matrix.astype(float)
    matrix[rng.random((raters, units)) < missing] = NAN
    return matrix


# ---------------------------------------------------------------- Cohen's and Fleiss' κ


def test_cohen_kappa_needs_two_shared_units():
    x = np.array([1, 0, NAN, NAN])
    y = np.array([NAN, 1, 0, 0.0])
    assert np.isnan(cohen_kappa(x, y))  # one unit rated by both
    two = cohen_kappa(np.array([1.0, 0.0]), np.array([1.0, 1.0]))
    assert two == pytest.approx(cohen_kappa_score([1, 0], [1, 1]))
    assert np.isnan(cohen_kappa([], []))


def test_cohen_kappa_is_nan_without_variation_and_refuses_unknown_weights():
    assert np.isnan(cohen_kappa([2.0, 2.0, 2.0], [2.0, 2.0, 2.0]))
    with pytest.raises(ValueError, match="weights"):
        cohen_kappa([1.0, 0.0, 1.0], [1.0, 1.0, 0.0], weights="cubic")


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_pair_kappa_is_cohens_on_the_item_and_its_mirror(weights):
    rng = np.random.default_rng(4)
    x = rng.choice([-2, -1, 0, 1, 2], 50).astype(float)
    y = np.where(rng.random(50) < 0.6, x, rng.choice([-2, -1, 0, 1, 2], 50)).astype(float)
    expected = cohen_kappa_score(np.concatenate([x, -x]), np.concatenate([y, -y]), weights=weights)
    assert pair_kappa(x, y, weights) == pytest.approx(expected, abs=1e-12)
    assert pair_kappa(-x, -y, weights) == pytest.approx(expected, abs=1e-12)


def test_kappa_pairs_take_overlap_at_the_threshold_and_can_mirror():
    matrix = pd.DataFrame(rated(2, raters=3, units=40, missing=0.3), index=["p", "q", "r"])
    data = matrix.to_numpy()
    shared = np.isfinite(data).astype(int) @ np.isfinite(data).T.astype(int)
    threshold = int(shared[0, 1])
    pairs = cohen_kappa_pairs(matrix, min_overlap=threshold, weights="linear", mirror=True)
    expected = [
        (matrix.index[i], matrix.index[j], int(shared[i, j]))
        for i in range(3)
        for j in range(i + 1, 3)
        if shared[i, j] >= threshold
    ]
    assert [tuple(row) for row in pairs[["rater_1", "rater_2", "n"]].values] == expected
    first = pairs.iloc[0]
    assert first["kappa"] == pytest.approx(pair_kappa(data[0], data[1], "linear"))
    plain = cohen_kappa_pairs(data, min_overlap=threshold)
    assert plain["kappa"].iloc[0] == pytest.approx(cohen_kappa(data[0], data[1]))


def test_percent_agreement_is_nan_without_a_pairable_unit():
    assert np.isnan(percent_agreement(np.array([[1.0, NAN], [NAN, 2.0]])))
    assert percent_agreement(np.array([[1.0, 2.0], [1.0, 2.0]])) == 1.0


def test_fleiss_kappa_refuses_uneven_or_single_ratings():
    for bad in (np.zeros((0, 3)), [[1, 1], [2, 1]], [[1, 0], [0, 1]]):
        with pytest.raises(ValueError, match="same number"):
            fleiss_kappa_counts(bad)
    assert np.isnan(fleiss_kappa_counts([[3, 0], [3, 0]]))  # one category: no chance model
    inter_rater = pytest.importorskip("statsmodels.stats.inter_rater")
    two = [[2, 0], [1, 1], [0, 2], [2, 0]]
    assert fleiss_kappa_counts(two) == pytest.approx(inter_rater.fleiss_kappa(two), abs=1e-12)


def test_fleiss_kappa_on_a_matrix_without_usable_units():
    empty = fleiss_kappa(np.array([[1.0, NAN], [NAN, 1.0]]))
    assert isinstance(empty, FleissResult) and np.isnan(empty.kappa)
    assert (empty.n_units, empty.n_raters, empty.n_skipped) == (0, 0, 0)
    matrix = np.array([[1, 2, 1], [1, 2, 2], [1, NAN, NAN]], float)
    none = fleiss_kappa(matrix, n_raters=4)
    assert np.isnan(none.kappa) and (none.n_units, none.n_raters, none.n_skipped) == (0, 4, 3)
    # Two units with 2 ratings, one with 3: the common count is 2.
    common = fleiss_kappa(matrix)
    assert (common.n_units, common.n_raters, common.n_skipped) == (2, 2, 1)
    # A tie between counts (one unit each) takes the larger.
    tie = fleiss_kappa(np.array([[1, 2], [1, 1], [1, NAN]], float))
    assert (tie.n_units, tie.n_raters, tie.n_skipped) == (1, 3, 1)


def test_pairwise_agreement_on_a_hand_example():
    matrix = pd.DataFrame([[1, 2, NAN], [1, 1, 2], [NAN, NAN, 2]], index=["a", "b", "c"])
    share, shared = pairwise_agreement(matrix)
    assert shared.loc["a", "b"] == 2 and share.loc["a", "b"] == 0.5
    assert shared.loc["b", "c"] == 1 and share.loc["b", "c"] == 1.0
    assert shared.loc["a", "c"] == 0 and np.isnan(share.loc["a", "c"])
    assert share.loc["a", "a"] == 1.0


# ---------------------------------------------------------------- Krippendorff's α


def test_value_counts_take_at_most_max_values_distinct_values():
    allowed = np.arange(MAX_VALUES, dtype=float)[None, :].repeat(2, axis=0)
    counts, _ = value_counts(allowed)
    assert counts.shape == (MAX_VALUES, MAX_VALUES) and (counts.sum(axis=1) == 2).all()
    with pytest.raises(ValueError, match="distinct values"):
        value_counts(np.arange(MAX_VALUES + 1, dtype=float)[None, :].repeat(2, axis=0))


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "ratio"])
def test_own_alpha_equals_the_package_with_zero_and_negative_values(level):
    matrix = rated(6) + (3 if level == "ratio" else 0)  # ratio: 1..5, interval: −2..2
    if level == "ratio":
        matrix[0, :5] = 0.0  # ratio distances with a zero
    counts, domain = value_counts(matrix)
    expected = krippendorff.alpha(reliability_data=matrix, level_of_measurement=level)
    assert coincidence_alpha(counts, domain, level) == pytest.approx(expected, abs=1e-12)
    assert alpha(matrix, level) == pytest.approx(expected, abs=1e-12)
    weights = np.random.default_rng(1).integers(0, 3, counts.shape[0]).astype(float)
    one = coincidence_alpha(counts, domain, level, weights)
    assert np.ndim(one) == 0
    both = coincidence_alpha(counts, domain, level, np.stack([weights, weights]))
    assert both[1] == pytest.approx(one, abs=1e-12)


def test_a_single_pairable_value_gives_nan_and_no_interval():
    matrix = np.array([[3.0, 3.0, NAN], [3.0, 3.0, 1.0]])  # pairable units hold only 3s
    for level in ("nominal", "interval"):
        result = alpha_with_ci(matrix, level, n_boot=50)
        assert np.isnan(result.alpha) and np.isnan(result.low) and np.isnan(result.high)
        assert (result.n_units, result.n_pairable, result.n_boot) == (2, 4, 50)


@pytest.mark.parametrize("n_boot", [0, -3])
def test_no_draws_gives_the_point_estimate_without_an_interval(n_boot):
    matrix = rated(1)
    result = alpha_with_ci(matrix, "ordinal", n_boot=n_boot)
    assert result.alpha == pytest.approx(alpha(matrix, "ordinal"))
    assert np.isnan(result.low) and np.isnan(result.high) and result.n_boot == 0
    paired = paired_alpha_with_ci(matrix, level="ordinal", n_boot=n_boot)
    assert np.isfinite(paired.alpha) and np.isnan(paired.low) and paired.n_boot == 0


def test_percentile_interval_ignores_nan_draws_and_is_nan_when_all_are():
    assert all(np.isnan(percentile_interval(np.full(5, NAN), 0.9)))
    draws = np.array([NAN, 1.0, 2.0, 3.0, 4.0, NAN])
    low, high = percentile_interval(draws, 0.5)
    assert (low, high) == pytest.approx(tuple(np.quantile([1.0, 2.0, 3.0, 4.0], [0.25, 0.75])))


def test_bootstrap_draws_follow_the_seed_and_the_level():
    matrix = rated(3, units=60)
    wide = alpha_with_ci(matrix, "nominal", n_boot=300, seed=2, ci=0.95)
    narrow = alpha_with_ci(matrix, "nominal", n_boot=300, seed=2, ci=0.5)
    other = alpha_with_ci(matrix, "nominal", n_boot=300, seed=3, ci=0.95)
    assert wide.low < narrow.low < narrow.high < wide.high
    assert (wide.low, wide.high) != (other.low, other.high)
    assert wide.alpha == other.alpha == pytest.approx(alpha(matrix, "nominal"))
    with pytest.raises(ValueError, match="level"):
        alpha_with_ci(matrix, "cardinal")


# ---------------------------------------------------------------- paired α


def test_paired_alpha_all_missing_and_shape_checks():
    empty = paired_alpha_with_ci(np.full((2, 4), NAN), level="nominal", n_boot=20)
    assert np.isnan(empty.alpha) and np.isnan(empty.low)
    assert (empty.n_units, empty.n_pairable, empty.n_boot) == (0, 0, 20)
    with pytest.raises(ValueError, match="shape"):
        paired_alpha_with_ci(np.ones((2, 3)), np.ones((2, 4)), level="nominal")
    with pytest.raises(ValueError, match="level"):
        paired_alpha_with_ci(np.ones((2, 3)), level="cardinal")
    with pytest.raises(ValueError, match="level"):  # refused before anything is computed
        paired_alpha_with_ci(np.full((2, 3), NAN), level="cardinal")


def test_paired_alpha_is_the_package_alpha_of_both_halves():
    first, second = rated(8, units=50), rated(9, units=50)
    result = paired_alpha_with_ci(first, second, level="interval", n_boot=200, seed=1)
    expected = krippendorff.alpha(
        reliability_data=np.hstack([first, second]), level_of_measurement="interval"
    )
    assert result.alpha == pytest.approx(expected, abs=1e-12)
    assert result.low <= result.alpha <= result.high and result.n_boot == 200
    pairable = lambda m: np.isfinite(m).sum(axis=0) >= 2  # noqa: E731
    usable = pairable(first) | pairable(second)
    assert result.n_units == int(usable.sum())
    given = np.isfinite(first).sum(axis=0) * pairable(first)
    given += np.isfinite(second).sum(axis=0) * pairable(second)
    assert result.n_pairable == int(given[usable].sum())
    mirror = paired_alpha_with_ci(first, level="ordinal", n_boot=0)
    assert mirror.n_pairable == int((np.isfinite(first).sum(axis=0) * pairable(first)).sum())


def test_paired_alpha_does_not_depend_on_which_half_comes_first():
    first, second = rated(10, units=40), rated(11, units=40)
    one = paired_alpha_with_ci(first, second, level="ordinal", n_boot=200, seed=4)
    other = paired_alpha_with_ci(second, first, level="ordinal", n_boot=200, seed=4)
    assert one.alpha == pytest.approx(other.alpha, abs=1e-12)
    assert (one.low, one.high) == pytest.approx((other.low, other.high), abs=1e-12)
    assert (one.n_units, one.n_pairable) == (other.n_units, other.n_pairable)


def test_paired_bootstrap_resamples_a_unit_with_its_mirror():
    """With the mirror, every resample keeps both halves of a pair: each draw's α equals the
    package's α on the resampled comparisons stacked with their mirrors (checked for the
    spread: a resample that split pairs would give draws outside the paired range)."""
    first = rated(12, units=30, values=(-1, 0, 1), missing=0.1)
    result = paired_alpha_with_ci(first, level="nominal", n_boot=400, seed=0)
    rng = np.random.default_rng(0)
    reference = []
    for _ in range(60):
        pick = rng.integers(0, first.shape[1], first.shape[1])
        sample = first[:, pick]
        reference.append(
            krippendorff.alpha(
                reliability_data=np.hstack([sample, -sample]), level_of_measurement="nominal"
            )
        )
    assert np.quantile(reference, 0.1) < result.alpha < np.quantile(reference, 0.9)
    assert result.high - result.low == pytest.approx(
        np.quantile(reference, 0.975) - np.quantile(reference, 0.025), rel=0.5
    )


def test_coefficients_on_a_single_unit_and_with_lone_ratings():
    one_unit = np.array([[1.0, NAN], [1.0, 2.0], [2.0, NAN]])  # the second unit has one rating
    assert percent_agreement(one_unit) == pytest.approx(1 / 3)
    inter_rater = pytest.importorskip("statsmodels.stats.inter_rater")
    single = [[2, 1, 0]]
    assert fleiss_kappa_counts(single) == pytest.approx(inter_rater.fleiss_kappa(single))
    lone = np.array([[1, 2, 1, 2], [1, 2, 2, NAN], [NAN, NAN, NAN, NAN]], float)
    result = fleiss_kappa(lone)  # the fourth unit (one rating) is not pairable: not skipped
    assert (result.n_units, result.n_raters, result.n_skipped) == (3, 2, 0)
    assert pair_kappa([1, 0, -1, 1], [1, 0, 1, 1]) == pytest.approx(
        cohen_kappa_score([1, 0, -1, 1, -1, 0, 1, -1], [1, 0, 1, 1, -1, 0, -1, -1])
    )


def test_a_value_given_once_still_makes_alpha_defined():
    matrix = np.array([[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 2.0]])
    expected = krippendorff.alpha(reliability_data=matrix, level_of_measurement="nominal")
    assert alpha(matrix, "nominal") == pytest.approx(expected, abs=1e-12)


def test_lists_are_accepted_where_arrays_are():
    matrix = rated(13, units=30)
    counts, domain = value_counts(matrix)
    as_lists = coincidence_alpha(counts.tolist(), domain.tolist(), "interval")
    assert as_lists == pytest.approx(coincidence_alpha(counts, domain, "interval"), abs=1e-12)
    listed = paired_alpha_with_ci(matrix.tolist(), level="nominal", n_boot=0)
    assert listed.alpha == pytest.approx(
        paired_alpha_with_ci(matrix, level="nominal", n_boot=0).alpha
    )


def test_one_draw_is_an_interval_of_one_point_and_the_defaults_are_1000_draws_seed_0():
    matrix = rated(14, units=40)
    one = alpha_with_ci(matrix, "nominal", n_boot=1)
    assert one.n_boot == 1 and np.isfinite(one.low) and one.low == one.high
    default = paired_alpha_with_ci(matrix, level="nominal")
    explicit = paired_alpha_with_ci(matrix, level="nominal", n_boot=1000, seed=0, ci=0.95)
    assert default == explicit and default.n_boot == 1000 and default.ci == 0.95
    assert alpha_with_ci(matrix, "nominal") == alpha_with_ci(matrix, "nominal", 1000, 0, 0.95)


def test_kappa_pairs_need_20_shared_units_by_default():
    rng = np.random.default_rng(15)
    matrix = rng.choice([0.0, 1.0], (3, 21))
    matrix[1, 20] = NAN  # raters 0 and 1 share 20 units
    matrix[2, :2] = NAN  # raters 0 and 2 share 19, raters 1 and 2 share 18
    pairs = cohen_kappa_pairs(matrix)
    assert pairs[["rater_1", "rater_2", "n"]].values.tolist() == [[0, 1, 20]]


def test_one_paired_draw_is_an_interval_of_one_point():
    one = paired_alpha_with_ci(rated(16, units=40), level="interval", n_boot=1)
    assert one.n_boot == 1 and np.isfinite(one.low) and one.low == one.high
