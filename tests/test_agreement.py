"""Agreement, annotator flags and label aggregation: published values, reference libraries,
and simulations with known truth."""

import krippendorff
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

from h2htalk.stats import dawid_skene as ds
from h2htalk.stats.agreement.aggregation import aggregate_labels, majority_labels
from h2htalk.stats.agreement.annotators import annotator_report, loo_consensus
from h2htalk.stats.agreement.coefficients import (
    cohen_kappa,
    cohen_kappa_pairs,
    fleiss_kappa,
    fleiss_kappa_counts,
    pairwise_agreement,
    percent_agreement,
)
from h2htalk.stats.agreement.krippendorff_alpha import (
    LEVELS,
    alpha,
    alpha_with_ci,
    coincidence_alpha,
    value_counts,
)
from h2htalk.stats.agreement.labels import (
    expand_ratings,
    label_level,
    pair_preference,
    rating_dimension_labels,
    rating_labels,
    rating_matrix,
)
from h2htalk.stats.agreement.reliability import label_agreement

NAN = np.nan
# Krippendorff (2011), "Computing Krippendorff's alpha-reliability", the 4 coders × 12 units
# example with missing values: nominal 0.743, ordinal 0.815, interval 0.849, ratio 0.797.
KRIPPENDORFF_2011 = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, NAN, NAN, NAN],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NAN, 3],
    [NAN, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NAN],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NAN],
]
PUBLISHED = {"nominal": 0.743, "ordinal": 0.815, "interval": 0.849, "ratio": 0.797}

# Fleiss' kappa worked example (Wikipedia, "Fleiss' kappa"): 10 subjects, 14 raters,
# 5 categories; p_j = 0.143, 0.200, 0.279, 0.150, 0.229; P̄ = 0.378, P̄e = 0.213, κ = 0.210.
FLEISS_EXAMPLE = [
    [0, 0, 0, 0, 14],
    [0, 2, 6, 4, 2],
    [0, 0, 3, 5, 6],
    [0, 3, 9, 2, 0],
    [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0],
    [3, 2, 6, 3, 0],
    [2, 5, 3, 2, 2],
    [6, 5, 2, 1, 0],
    [0, 2, 2, 3, 7],
]

HONEST = [f"h{i}" for i in range(8)]
ACCURACIES = tuple(np.linspace(0.6, 0.9, 8))
BAD = {"adversary", "left_clicker"}


def simulate(seed=0, n_units=600, n_gold=40, accuracies=ACCURACIES):
    """Judgments with known truth (−1 A, 0 tie, 1 B; 40/20/40%), each unit rated by 3–5 of
    10 annotators: 8 honest with set accuracies (errors uniform over the other two classes),
    an adversary (85% accurate, then A and B swapped) and an always-left clicker. Layouts are
    drawn per assignment; the first `n_gold` units are gold with the true answer."""
    rng = np.random.default_rng(seed)
    truth = rng.choice([-1, 0, 1], n_units, p=[0.4, 0.2, 0.4])
    names = [*HONEST, "adversary", "left_clicker"]
    accuracy = dict(zip(HONEST, accuracies, strict=True)) | {"adversary": 0.85}
    rows = []
    for unit in range(n_units):
        for rater in rng.choice(len(names), rng.integers(3, 6), replace=False):
            name = names[rater]
            left_is_a = bool(rng.random() < 0.5)
            if name == "left_clicker":
                screen = -int(rng.integers(1, 3))
                preference = screen if left_is_a else -screen
            else:
                label = truth[unit]
                if rng.random() > accuracy[name]:
                    label = rng.choice([c for c in (-1, 0, 1) if c != label])
                if name == "adversary":
                    label = -label
                preference = int(label * rng.integers(1, 3))
                screen = preference if left_is_a else -preference
            rows.append(
                {
                    "comparison": unit,
                    "annotator": name,
                    "preference": preference,
                    "screen_preference": screen,
                    "left_is_a": left_is_a,
                    "time_on_task_ms": int(rng.lognormal(np.log(30_000), 0.5)),
                    "is_gold": unit < n_gold,
                    "gold_preference": float(truth[unit]) if unit < n_gold else NAN,
                }
            )
    return pd.DataFrame(rows), truth


@pytest.fixture(scope="module")
def simulated():
    return simulate(seed=0)


def random_matrix(rng, raters, units, values, missing):
    matrix = rng.choice(values, size=(raters, units)).astype(float)
    matrix[rng.random((raters, units)) < missing] = NAN
    return matrix


# Krippendorff's alpha


@pytest.mark.parametrize("level", LEVELS)
def test_krippendorff_2011_published_values(level):
    assert round(alpha(KRIPPENDORFF_2011, level), 3) == PUBLISHED[level]
    counts, domain = value_counts(KRIPPENDORFF_2011)
    assert round(float(coincidence_alpha(counts, domain, level)), 3) == PUBLISHED[level]
    result = alpha_with_ci(KRIPPENDORFF_2011, level, n_boot=200)
    assert round(result.alpha, 3) == PUBLISHED[level]
    # Unit 12 has a single value: not pairable. 11 units hold 40 pairable values.
    assert (result.n_units, result.n_pairable) == (11, 40)


@pytest.mark.parametrize("level", LEVELS)
def test_own_alpha_equals_the_package_on_random_matrices(level):
    rng = np.random.default_rng(7)
    cases = [
        (3, 50, [-2, -1, 0, 1, 2], 0.2),
        (6, 200, [1, 2, 3, 4, 5], 0.6),
        (12, 80, [-1, 0, 1], 0.8),
        (4, 30, [1, 2.5, 4, 7, 10], 0.3),
        (2, 400, [0, 1], 0.1),
    ]
    for raters, units, values, missing in cases:
        matrix = random_matrix(rng, raters, units, values, missing)
        expected = krippendorff.alpha(reliability_data=matrix, level_of_measurement=level)
        counts, domain = value_counts(matrix)
        assert float(coincidence_alpha(counts, domain, level)) == pytest.approx(expected, abs=1e-12)
        assert alpha(matrix, level) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("level", LEVELS)
def test_unit_weights_equal_repeating_units(level):
    """The bootstrap's multinomial weights are exact: weight w = the unit repeated w times."""
    rng = np.random.default_rng(11)
    matrix = random_matrix(rng, 4, 40, [1, 2, 3, 4, 5], 0.3)
    weights = rng.integers(0, 4, size=40)
    repeated = np.repeat(matrix, weights, axis=1)
    counts, domain = value_counts(matrix)
    both = np.stack([weights, np.ones(40)])
    weighted = coincidence_alpha(counts, domain, level, both)
    expected = krippendorff.alpha(reliability_data=repeated, level_of_measurement=level)
    assert weighted[0] == pytest.approx(expected, abs=1e-12)
    assert weighted[1] == pytest.approx(alpha(matrix, level), abs=1e-12)


def test_units_with_fewer_than_two_values_are_dropped():
    base = np.array([[1, 2, 3, 1, 2], [1, 2, 3, 2, 2], [NAN, 2, 1, 1, NAN]])
    single = np.array([[4, NAN], [NAN, NAN], [NAN, NAN]])  # one lone value, one empty unit
    widened = np.concatenate([base, single], axis=1)
    for level in ("nominal", "interval"):
        assert alpha(widened, level) == pytest.approx(alpha(base, level))
    result = alpha_with_ci(widened, "nominal", n_boot=50)
    assert (result.n_units, result.n_pairable) == (5, 13)


def test_alpha_is_nan_when_undefined():
    same = np.ones((3, 10))
    assert np.isnan(alpha(same, "nominal"))
    lonely = np.array([[1.0, NAN], [NAN, 2.0]])
    result = alpha_with_ci(lonely, "ordinal")
    assert np.isnan(result.alpha) and np.isnan(result.low) and result.n_units == 0
    with pytest.raises(ValueError):
        alpha(KRIPPENDORFF_2011, "cardinal")


def test_bootstrap_is_seeded_and_reports_its_level():
    rng = np.random.default_rng(3)
    truth = rng.choice([-2, -1, 0, 1, 2], 300)
    matrix = np.clip(truth + rng.choice([-1, 0, 1], (3, 300), p=[0.2, 0.6, 0.2]), -2, 2)
    first = alpha_with_ci(matrix, "ordinal", seed=5)
    again = alpha_with_ci(matrix, "ordinal", seed=5)
    narrower = alpha_with_ci(matrix, "ordinal", seed=5, ci=0.80)
    assert (first.low, first.high) == (again.low, again.high)
    assert first.low < first.alpha < first.high
    assert first.low < narrower.low < narrower.high < first.high
    assert (first.level, first.ci, first.n_boot) == ("ordinal", 0.95, 1000)
    assert "95% CI" in str(first) and "80% CI" in str(narrower)


def test_bootstrap_interval_covers_the_true_alpha():
    """Known truth: three raters copy a 5-point true value or shift it by one step; the
    population α is taken from 300,000 units. 95% intervals from 300-unit samples cover it in
    about 95% of 150 seeded repetitions."""

    def sample(rng, units):
        truth = rng.choice([-2, -1, 0, 1, 2], units, p=[0.15, 0.25, 0.2, 0.25, 0.15])
        noise = rng.choice([-1, 0, 1], (3, units), p=[0.2, 0.6, 0.2])
        matrix = np.clip(truth + noise, -2, 2).astype(float)
        matrix[0, rng.random(units) < 0.3] = NAN  # some units have two raters only
        return matrix

    population = alpha(sample(np.random.default_rng(0), 300_000), "ordinal")
    covered = 0
    for seed in range(150):
        result = alpha_with_ci(
            sample(np.random.default_rng(1000 + seed), 300), "ordinal", 400, seed
        )
        covered += result.low <= population <= result.high
    assert 0.89 <= covered / 150 <= 0.99, covered


def test_bootstrap_handles_100k_judgments():
    """33,334 units × 3 raters = 100,002 judgments, 1,000 draws (timings: bench/agreement)."""
    rng = np.random.default_rng(1)
    truth = rng.choice([-2, -1, 0, 1, 2], 33_334)
    matrix = np.clip(truth + rng.choice([-1, 0, 1], (3, 33_334), p=[0.2, 0.6, 0.2]), -2, 2)
    for level in ("nominal", "ordinal"):
        result = alpha_with_ci(np.sign(matrix) if level == "nominal" else matrix, level)
        assert result.n_pairable == 100_002 and result.low < result.alpha < result.high


# Keying by the model pair, not the screen side


def keyed_judgments(n_units=200, seed=0):
    """Three annotators agree on the model every time; each sees its own random layout."""
    rng = np.random.default_rng(seed)
    truth = rng.choice([-2, -1, 1, 2], n_units)
    rows = []
    for unit in range(n_units):
        for annotator in ("ann", "bob", "cat"):
            left_is_a = bool(rng.random() < 0.5)
            preference = int(truth[unit])
            rows.append(
                {
                    "comparison": unit,
                    "annotator": annotator,
                    "preference": preference,
                    "screen_preference": preference if left_is_a else -preference,
                    "left_is_a": left_is_a,
                }
            )
    return pd.DataFrame(rows), truth


def test_pair_preference_turns_screen_votes_into_model_votes():
    # "Left much better" with A on the left is "A much better"; with B on the left, "B much".
    assert pair_preference([-2, -2, 1, 0], [True, False, False, True]).tolist() == [-2, 2, -1, 0]


def test_agreement_is_on_the_model_not_the_side():
    judgments, truth = keyed_judgments()
    for label in ("preference5", "winner3"):
        matrix = rating_matrix(judgments, label)
        expected = truth if label == "preference5" else np.sign(truth)
        # Every annotator's row is the pair-keyed truth, whatever side they saw it on.
        assert (matrix.to_numpy() == expected[None, :]).all()
        assert alpha(matrix, label_level(label)) == pytest.approx(1.0)
    # The same votes read as screen sides look like noise.
    screen = rating_matrix(judgments, "screen5")
    assert alpha(screen, "ordinal") < 0.2
    assert percent_agreement(rating_matrix(judgments, "winner3")) == 1.0
    assert percent_agreement(rating_matrix(judgments, "screen3")) < 0.5


def test_preference_is_derived_from_the_layout_when_missing():
    judgments, truth = keyed_judgments(50)
    matrix = rating_matrix(judgments.drop(columns="preference"), "preference5")
    assert (matrix.to_numpy() == truth[None, :]).all()


def test_a_preference_that_does_not_follow_the_layout_is_refused():
    judgments, _ = keyed_judgments(20)
    judgments.loc[3, "preference"] = judgments.loc[3, "screen_preference"] * (
        1 if not judgments.loc[3, "left_is_a"] else -1
    )
    with pytest.raises(ValueError, match="does not follow"):
        rating_matrix(judgments, "preference5")


def test_rating_matrix_shape_and_duplicates():
    judgments = pd.DataFrame(
        {"comparison_id": [10, 10, 11], "annotator": ["x", "y", "x"], "preference": [-1, 2, 0]}
    )
    matrix = rating_matrix(judgments, "preference5")
    assert matrix.index.tolist() == ["x", "y"] and matrix.columns.tolist() == [10, 11]
    assert np.isnan(matrix.loc["y", 11]) and matrix.loc["y", 10] == 2
    with pytest.raises(ValueError, match="more than once"):
        rating_matrix(pd.concat([judgments, judgments.iloc[:1]]), "winner3")


def test_ratings_are_expanded_and_rated_on_the_interval_level():
    judgments = pd.DataFrame(
        {
            "comparison": [1, 1, 2, 2, 3, 3],
            "annotator": ["x", "y"] * 3,
            "preference": [-1, -1, 1, 2, 0, 1],
            "ratings": [
                {"a": {"empathy": 4}, "b": {"empathy": 2}},
                {"a": {"empathy": 5}, "b": {"empathy": 2}},
                {"a": {"empathy": 2}, "b": {"empathy": 4}},
                {"a": {"empathy": 1}, "b": {"empathy": 5}},
                {},
                {"a": {"empathy": 3}},
            ],
        }
    )
    frame = expand_ratings(judgments)
    assert rating_labels(frame) == ["a_empathy", "b_empathy"]
    assert label_level("a_empathy") == "interval"
    matrix = rating_matrix(frame, "a_empathy")
    assert matrix.loc[["x", "y"], 1].tolist() == [4, 5] and np.isnan(matrix.loc["x", 3])
    # A rating's unit is a response: A's and B's ratings of a comparison are a unit pair.
    both = np.hstack([matrix.to_numpy(), rating_matrix(frame, "b_empathy").to_numpy()])
    expected = krippendorff.alpha(reliability_data=both, level_of_measurement="interval")
    summary = label_agreement(frame, n_boot=100)
    assert rating_dimension_labels(frame) == ["rating_empathy"]
    assert summary.loc["rating_empathy", "alpha"] == pytest.approx(expected)
    assert summary.loc["rating_empathy", "level"] == "interval"
    # Comparisons 1 and 2 each have two pairable units; 3 has a single value on each side.
    assert summary.loc["rating_empathy", ["n_units", "n_pairable"]].tolist() == [2, 8]
    assert summary.loc["preference5", "level"] == "ordinal"
    assert summary.loc["winner3", "level"] == "nominal"
    assert (summary["ci"] == 0.95).all()


# Percent agreement, Cohen's and Fleiss' kappa


def test_percent_agreement_by_hand():
    matrix = np.array([[1, 1, 2, 1], [1, 2, 2, NAN], [1, 3, NAN, NAN]])
    # Unit 1: 3 of 3 pairs agree; unit 2: 0 of 3; unit 3: 1 of 1; unit 4 not pairable.
    assert percent_agreement(matrix) == pytest.approx((1 + 0 + 1) / 3)


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_cohen_kappa_matches_sklearn(weights):
    rng = np.random.default_rng(5)
    for _ in range(5):
        x = rng.choice([-2, -1, 0, 1, 2], 120).astype(float)
        y = np.where(rng.random(120) < 0.6, x, rng.choice([-2, -1, 0, 1, 2], 120)).astype(float)
        x[rng.random(120) < 0.1] = NAN
        both = ~np.isnan(x)
        expected = cohen_kappa_score(x[both], y[both], weights=weights)
        assert cohen_kappa(x, y, weights) == pytest.approx(expected, abs=1e-12)


def test_cohen_kappa_pairs_respects_overlap():
    matrix = pd.DataFrame(
        [[1, 0, 1, 0, 1, NAN], [1, 0, 1, 1, NAN, NAN], [NAN, NAN, NAN, 0, 1, 0]],
        index=["x", "y", "z"],
    )
    pairs = cohen_kappa_pairs(matrix, min_overlap=3)
    assert pairs[["rater_1", "rater_2", "n"]].values.tolist() == [["x", "y", 4]]
    assert pairs["kappa"].iloc[0] == pytest.approx(cohen_kappa_score([1, 0, 1, 0], [1, 0, 1, 1]))


def test_fleiss_kappa_wikipedia_example():
    assert round(fleiss_kappa_counts(FLEISS_EXAMPLE), 3) == 0.210
    # The same data as a raters × units matrix (14 ratings per subject, categories 1..5).
    columns = [np.repeat(np.arange(1, 6), row) for row in FLEISS_EXAMPLE]
    result = fleiss_kappa(np.array(columns, dtype=float).T)
    assert (round(result.kappa, 3), result.n_units, result.n_raters) == (0.210, 10, 14)


def test_fleiss_kappa_matches_statsmodels():
    inter_rater = pytest.importorskip("statsmodels.stats.inter_rater")
    rng = np.random.default_rng(9)
    for categories in (2, 3, 5):
        counts = rng.multinomial(4, rng.dirichlet(np.ones(categories)), size=60)
        expected = inter_rater.fleiss_kappa(counts, method="fleiss")
        assert fleiss_kappa_counts(counts) == pytest.approx(expected, abs=1e-12)


def test_fleiss_kappa_uses_units_with_the_common_rater_count():
    matrix = np.array([[1, 2, 1, 1], [1, 2, 2, 2], [1, 2, 1, NAN]])
    result = fleiss_kappa(matrix)
    assert (result.n_units, result.n_raters, result.n_skipped) == (3, 3, 1)
    assert result.kappa == pytest.approx(fleiss_kappa_counts([[3, 0], [0, 3], [2, 1]]))
    with pytest.raises(ValueError):
        fleiss_kappa_counts([[2, 0], [1, 2]])


# Annotators


def test_loo_consensus_leaves_the_annotator_out():
    judgments = pd.DataFrame(
        {
            "comparison": [1, 1, 1, 2, 2, 2],
            "annotator": ["x", "y", "z", "x", "y", "z"],
            "preference": [-2, -1, 1, 0, 1, -1],
        }
    )
    table = loo_consensus(judgments)
    # Unit 1: others of x are (A, B): no consensus; others of z are (A, A): A, and z said B.
    assert np.isnan(table["consensus"].iloc[0]) and table["consensus"].iloc[2] == -1
    assert table["agrees"].iloc[2] == 0 and np.isnan(table["agrees"].iloc[3])
    assert table["distance"].iloc[0] == pytest.approx(abs(-2 - 0))


def test_flags_name_exactly_the_bad_annotators(simulated):
    judgments, _ = simulated
    report = annotator_report(judgments)
    assert set(report.index[report["flagged"]]) == BAD
    assert "position: picks the left side in 100%" in report.loc["left_clicker", "flag"]
    assert report.loc["left_clicker", "left_rate"] == 1.0
    # The adversary agrees with the others far less than the pool.
    assert "consensus: agrees with the others on" in report.loc["adversary", "flag"]
    assert (report.loc[HONEST, "flag"] == "").all()
    # The always-left clicker is random once votes are keyed by the model pair.
    assert abs(report.loc["left_clicker", "gold_accuracy"] - 0.4) < 0.3
    assert report.loc[HONEST, "left_rate"].between(0.35, 0.65).all()


def test_report_reads_the_monitoring_frame(simulated):
    """annotation.monitoring's frame: comparison_id, no left_is_a; same verdicts."""
    judgments, _ = simulated
    frame = judgments.rename(columns={"comparison": "comparison_id"}).drop(columns="left_is_a")
    report = annotator_report(frame)
    assert report["flag"].equals(annotator_report(judgments)["flag"])
    bare = annotator_report(frame[["comparison_id", "annotator", "preference"]])
    # Without the screen side the left clicker only looks like a weak annotator (its votes
    # agree with the others about as often as chance, above the floor in this sample).
    assert set(bare.index[bare["flagged"]]) == {"adversary"}
    assert bare["gold_accuracy"].isna().all() and bare["left_rate"].isna().all()


def test_gold_flags_need_enough_evidence():
    """With ~60 gold votes each, the adversary (≈ 23% right) is confidently below 60%; honest
    annotators, the weakest at 60%, are not flagged for gold."""
    judgments, _ = simulate(seed=1, n_gold=150)
    report = annotator_report(judgments)
    assert report["n_gold"].min() >= 40
    gold_flagged = report.index[report["flag"].str.contains("gold:")]
    assert "adversary" in gold_flagged and not set(gold_flagged) & set(HONEST)
    # Too few gold items: no gold verdict at all, however bad.
    few = annotator_report(judgments, min_gold=1000)
    assert not few["flag"].str.contains("gold:").any()


def test_fast_annotators_are_flagged(simulated):
    judgments, _ = simulated
    judgments = judgments.copy()
    judgments.loc[judgments["annotator"] == "h5", "time_on_task_ms"] = 2_000
    report = annotator_report(judgments)
    assert report.loc["h5", "flag"].startswith("fast: median time 2.0 s")
    assert set(report.index[report["flagged"]]) == BAD | {"h5"}


def _api_client_times(judgments, seed=3):
    """As the simulated study drove the REST API: each item submitted within a fraction of a
    second of being leased (server time), with a realistic visible time reported by the client."""
    rng = np.random.default_rng(seed)
    judgments = judgments.copy()
    judgments["client_time_ms"] = judgments["time_on_task_ms"].astype(float)
    judgments["time_on_task_ms"] = rng.integers(40, 400, len(judgments))
    return judgments


def test_fast_flag_uses_the_client_time_when_reported(simulated):
    """Honest raters with realistic visible times are not flagged fast however short the
    server's lease time was (old code: every rater flagged "fast"); the server time is only the
    fallback for judgments without a client time."""
    judgments = _api_client_times(simulated[0])
    report = annotator_report(judgments)
    assert set(report.index[report["flagged"]]) == BAD
    assert not report["flag"].str.contains("fast").any()
    assert (report["time_source"] == "client").all()
    assert report.loc[HONEST, "median_time_ms"].between(20_000, 45_000).all()
    # A rater whose browser reports 2 s per item is flagged, with the clock named.
    speeder = judgments.copy()
    speeder.loc[speeder["annotator"] == "h5", "client_time_ms"] = 2_000
    report = annotator_report(speeder)
    assert report.loc["h5", "flag"].startswith("fast: median time 2.0 s (visible time in")
    assert set(report.index[report["flagged"]]) == BAD | {"h5"}
    # Without client times the server's lease time decides, and says so.
    server_only = judgments.drop(columns="client_time_ms")
    report = annotator_report(server_only)
    assert report.loc[HONEST, "flagged"].all()
    assert (report["time_source"] == "server").all()
    assert "server lease time" in report.loc["h0", "flag"]
    # Missing client times fall back per judgment.
    mixed = judgments.copy()
    mixed.loc[mixed.index[::2], "client_time_ms"] = np.nan
    report = annotator_report(mixed)
    assert (report["time_source"] == "mixed").all()


def test_flagged_only_for_actionable_reasons(simulated):
    """Quicker than most (but above the absolute floor) is a note, not a flag."""
    judgments = _api_client_times(simulated[0])
    judgments.loc[judgments["annotator"] == "h2", "client_time_ms"] = 6_000
    report = annotator_report(judgments)
    assert not report.loc["h2", "flagged"] and report.loc["h2", "flag"] == ""
    assert report.loc["h2", "note"].startswith("quicker than most: median time 6.0 s")
    assert set(report.index[report["flagged"]]) == BAD
    assert (report.loc[[n for n in HONEST if n != "h2"], "note"] == "").all()


def test_dawid_skene_recovers_the_truth_better_than_majority(simulated):
    judgments, truth = simulated
    aggregation = aggregate_labels(judgments)
    labels = aggregation.labels
    assert labels.index.tolist() == list(range(len(truth)))
    majority_accuracy = (labels["majority"].to_numpy() == truth).mean()
    ds_accuracy = (labels["ds_label"].to_numpy() == truth).mean()
    assert ds_accuracy > majority_accuracy + 0.03, (ds_accuracy, majority_accuracy)
    assert aggregation.disagreement == pytest.approx(labels["disagree"].mean())
    assert 0 < aggregation.disagreement < 0.5
    assert aggregation.n_majority_ties == labels["majority_tied"].sum() > 0
    # It reads the adversary backwards: given a true A, the adversary says B.
    confusion = aggregation.model.confusion_frame("adversary")
    assert confusion.loc[-1, 1] > 0.7 and confusion.loc[1, -1] > 0.7
    # And it learns that the left clicker never says tie and picks A or B at random.
    clicker = aggregation.model.confusion_frame("left_clicker")
    assert clicker[0].max() < 0.01 and (clicker[-1] - 0.5).abs().max() < 0.15


def test_excluding_flagged_annotators_helps_majority(simulated):
    judgments, truth = simulated
    kept = aggregate_labels(judgments, exclude_annotators=BAD).labels
    everyone = aggregate_labels(judgments).labels
    assert (kept["majority"].to_numpy() == truth).mean() > (
        everyone["majority"].to_numpy() == truth
    ).mean()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # crowd-kit on pandas 3
def test_dawid_skene_matches_crowdkit(simulated):
    from crowdkit.aggregation import DawidSkene

    judgments, _ = simulated
    votes = pd.DataFrame(
        {
            "task": judgments["comparison"],
            "worker": judgments["annotator"],
            "label": np.sign(judgments["preference"]).astype(int),
        }
    )
    ours = ds.fit(votes["task"], votes["worker"], votes["label"])
    reference = DawidSkene(n_iter=100).fit(votes)
    theirs = reference.labels_.reindex(ours.units).to_numpy()
    assert (ours.labels == theirs).mean() >= 0.99
    probabilities = reference.probas_.reindex(ours.units)[list(ours.classes)].to_numpy()
    assert np.abs(ours.posterior - probabilities).mean() < 0.01


def test_dawid_skene_with_equal_annotators_is_a_majority_vote():
    units = [1, 1, 1, 2, 2, 2, 3, 3, 3]
    workers = ["x", "y", "z"] * 3
    labels = [0, 0, 1, 1, 1, 0, 2, 2, 2]
    fit = ds.fit(units, workers, labels, classes=[0, 1, 2])
    assert fit.labels.tolist() == [0, 1, 2]
    assert np.allclose(fit.posterior.sum(axis=1), 1)
    assert np.allclose(fit.confusion.sum(axis=2), 1)
    with pytest.raises(ValueError, match="outside"):
        ds.fit(units, workers, labels, classes=[0, 1])


def test_majority_ties_are_broken_by_strength_and_reported():
    judgments = pd.DataFrame(
        {
            "comparison": [1, 1, 2, 2, 3, 3, 4, 4, 4],
            "annotator": ["x", "y", "x", "y", "x", "y", "x", "y", "z"],
            "preference": [-2, 1, -1, 1, -1, 0, 1, 2, -1],
        }
    )
    table = majority_labels(judgments)
    # A much better vs B better → A; A vs B of equal strength → tie; A vs tie → A;
    # a clear majority is not a tie.
    assert table["majority"].tolist() == [-1, 0, -1, 1]
    assert table["majority_tied"].tolist() == [True, True, True, False]
    assert table[["votes_a", "votes_tie", "votes_b"]].loc[4].tolist() == [1, 0, 2]


def test_pairwise_agreement_counts_shared_units_only():
    matrix = pd.DataFrame(
        [[1, 0, -1, np.nan], [1, 1, -1, 0], [np.nan, np.nan, np.nan, 0]],
        index=["ann", "bo", "cy"],
    )
    share, shared = pairwise_agreement(matrix)
    assert shared.loc["ann", "bo"] == 3 and share.loc["ann", "bo"] == pytest.approx(2 / 3)
    assert shared.loc["ann", "cy"] == 0 and np.isnan(share.loc["ann", "cy"])
    assert share.loc["bo", "cy"] == 1.0 and share.loc["bo", "bo"] == 1.0
