"""Leaderboard statistics (h2htalk.stats.leaderboard) on simulations with known truths:
Bradley–Terry recovers the order, its 95% intervals cover the truth about 95% of the time
(votes: multinomial cell bootstrap; judge fractions: scenario bootstrap), ranks agree with the
significance matrix, and PPI covers the anchor win rate where a biased judge does not."""

import json
import math

import numpy as np
import pytest
from scipy.special import expit
from scipy.stats import spearmanr

from h2htalk.stats import bradley_terry as bt
from h2htalk.stats import leaderboard as lb
from tests import simulators


def test_bradley_terry_recovers_known_strengths_at_realistic_vote_counts():
    """12 companions, 4,000 votes (about 670 per companion, 60 per pair): Spearman ≥ 0.95."""
    rng = np.random.default_rng(11)
    truth = np.linspace(-1.2, 1.2, 12) + rng.normal(0, 0.05, 12)
    a, b, outcome = simulators.simulate_ties_exact(truth, 4_000, rng)
    strengths = lb.vote_strengths(a, b, outcome, 12, n_boot=200, seed=1)
    assert spearmanr(strengths.elo, truth).statistic >= 0.95
    assert (strengths.low <= strengths.elo).all() and (strengths.elo <= strengths.high).all()
    # The Elo scale is the fitted θ: differences match the truth's within a few points' noise.
    assert np.abs((strengths.elo - 1000) / bt.ELO_SCALE - (truth - truth.mean())).max() < 0.25


def test_vote_intervals_cover_the_truth_about_95_percent():
    """100 seeded repetitions × 4 companions: per-companion 95% intervals cover the true
    (mean-centred) strength in 90–99% of the cases."""
    truth = np.array([-0.7, -0.1, 0.3, 0.6])
    truth_elo = bt.to_elo(truth - truth.mean())
    covered = total = 0
    for seed in range(100):
        rng = np.random.default_rng(1_000 + seed)
        a, b, outcome = simulators.simulate_ties_exact(truth, 1_200, rng)
        strengths = lb.vote_strengths(a, b, outcome, 4, n_boot=200, seed=seed)
        inside = (strengths.low <= truth_elo) & (truth_elo <= strengths.high)
        covered += int(inside.sum())
        total += inside.size
    assert 0.90 <= covered / total <= 0.99, covered / total


def _judge_world(n_scenarios, rng, truth, noise=1.0):
    """Every pair on every scenario; P(i beats j) = σ(q_si − q_sj), q_s = truth + noise."""
    m = len(truth)
    quality = truth[None, :] + rng.normal(0, noise, (n_scenarios, m))
    i, j = np.triu_indices(m, 1)
    scenario = np.repeat(np.arange(n_scenarios), len(i))
    a, b = np.tile(i, n_scenarios), np.tile(j, n_scenarios)
    return scenario, a, b, expit(quality[scenario, a] - quality[scenario, b])


def test_scenario_bootstrap_covers_the_population_strengths():
    """The judge's fractional outcomes: intervals from resampling scenarios cover the strengths
    of the whole scenario population (fitted on 200,000 scenarios) about 95% of the time."""
    truth = np.array([-0.8, -0.3, 0.0, 0.4, 0.7])
    scenario, a, b, p = _judge_world(200_000, np.random.default_rng(5), truth)
    population = lb.scenario_strengths(scenario, a, b, p, 5, n_boot=2, seed=0).elo
    covered = total = 0
    for seed in range(80):
        rng = np.random.default_rng(2_000 + seed)
        strengths = lb.scenario_strengths(*_judge_world(150, rng, truth), 5, n_boot=200, seed=seed)
        inside = (strengths.low <= population) & (population <= strengths.high)
        covered += int(inside.sum())
        total += inside.size
    assert 0.90 <= covered / total <= 0.99, covered / total


def test_dense_and_sparse_scenario_cells_agree(monkeypatch):
    truth = np.array([-0.4, 0.1, 0.3])
    world = _judge_world(60, np.random.default_rng(3), truth)
    dense = lb.scenario_strengths(*world, 3, n_boot=50, seed=4)
    monkeypatch.setattr(lb, "DENSE_LIMIT", 0)
    sparse = lb.scenario_strengths(*world, 3, n_boot=50, seed=4)
    assert np.allclose(dense.elo, sparse.elo) and np.allclose(dense.draws, sparse.draws)


def test_ranks_count_significantly_better_models_and_match_the_matrix():
    rng = np.random.default_rng(0)
    # Draws on the Elo scale: A and B far apart, B and C overlapping, D far below.
    centres = np.array([1200.0, 1050.0, 1040.0, 800.0])
    draws = centres + rng.normal(0, 20, (1000, 4))
    p_better, significant, low, high, rank = lb.significance(draws, 0.95)
    assert rank.tolist() == [1, 2, 2, 4]
    assert significant[0, 1] == 1 and significant[1, 0] == -1
    assert significant[1, 2] == 0 and significant[2, 1] == 0
    assert (significant == -significant.T).all()
    assert np.allclose(p_better + p_better.T, 1.0)
    assert p_better[0, 3] == 1.0 and 0.2 < p_better[1, 2] < 0.9
    assert (low <= high).all() and np.allclose(low, -high.T)
    # rank = 1 + number of rows j with significant[j, i] == +1
    assert (rank == 1 + (significant == 1).sum(axis=0)).all()


def test_vote_strengths_report_the_level_and_are_reproducible():
    rng = np.random.default_rng(9)
    a, b, outcome = simulators.simulate_votes(np.array([0.0, 0.5, 1.0]), 600, rng)
    first = lb.vote_strengths(a, b, outcome, 3, n_boot=100, level=0.9, seed=7).as_dict()
    second = lb.vote_strengths(a, b, outcome, 3, n_boot=100, level=0.9, seed=7).as_dict()
    assert json.dumps(first) == json.dumps(second)
    assert first["level"] == 0.9 and "90%" in first["method"]
    other = lb.vote_strengths(a, b, outcome, 3, n_boot=100, level=0.9, seed=8).as_dict()
    assert other["low"] != first["low"]


def _biased_anchor_world(seed, n_labelled=300, n_all=4_000, bias=0.8):
    """X against the anchor on n_all scenarios: P(X wins) = σ(d_s), d_s ~ N(0.4, 1); humans
    label n_labelled random scenarios with 3 votes each (ties allowed, E[vote] = P); the judge
    predicts σ(d_s + bias + noise): it overrates X."""
    rng = np.random.default_rng(seed)
    d = rng.normal(0.4, 1.0, n_all)
    p = expit(d)
    f_all = expit(d + bias + rng.normal(0, 0.3, n_all))
    labelled = rng.choice(n_all, n_labelled, replace=False)
    p_tie = 0.2 * 4 * p[labelled] * (1 - p[labelled])
    u = rng.random((n_labelled, 3))
    lab_p = p[labelled][:, None]
    votes = np.where(
        u < lab_p - p_tie[:, None] / 2, 1.0, np.where(u < lab_p + p_tie[:, None] / 2, 0.5, 0.0)
    )
    return votes.mean(axis=1), f_all[labelled], f_all, p.mean()


def test_ppi_covers_the_anchor_win_rate_where_the_biased_judge_does_not():
    ppi_hits = judge_hits = human_hits = 0
    ppi_width, human_width = [], []
    runs = 100
    for seed in range(runs):
        y, f, f_all, truth = _biased_anchor_world(seed)
        result = lb.anchor_win_rate(y, f, f_all, 0.95)
        assert result["ppi"]["level"] == 0.95 and result["judge"]["level"] == 0.95
        ppi_hits += result["ppi"]["low"] <= truth <= result["ppi"]["high"]
        judge_hits += result["judge"]["low"] <= truth <= result["judge"]["high"]
        human_hits += result["humans"]["low"] <= truth <= result["humans"]["high"]
        ppi_width.append(result["ppi"]["high"] - result["ppi"]["low"])
        human_width.append(result["humans"]["high"] - result["humans"]["low"])
    assert 0.90 <= ppi_hits / runs <= 0.99, ppi_hits / runs
    assert judge_hits / runs <= 0.05, judge_hits / runs  # precise and wrong
    assert 0.88 <= human_hits / runs <= 1.0
    assert np.mean(ppi_width) < np.mean(human_width)  # the judge buys precision


def test_anchor_win_rate_says_why_an_entry_is_missing():
    result = lb.anchor_win_rate([1.0], [0.7], [0.6, 0.7, 0.8])
    assert result["ppi"] is None and "two labelled" in result["ppi_reason"]
    assert result["humans"] is None and result["judge"]["estimate"] == pytest.approx(0.7)
    result = lb.anchor_win_rate([1.0, 0.0, 0.5], [0.6, 0.4, 0.5], [])
    assert result["judge"] is None and result["ppi"] is None
    assert result["humans"]["estimate"] == 0.5 and result["humans"]["significant"] == 0


def test_json_safe_gives_values_that_survive_a_json_database_round_trip():
    value = lb.json_safe(
        {"a": np.float64(-0.0), "b": [np.nan, np.inf, 1.5], "c": np.arange(3), "d": np.bool_(1)}
    )
    assert value == {"a": 0.0, "b": [None, None, 1.5], "c": [0, 1, 2], "d": True}
    assert math.copysign(1.0, value["a"]) == 1.0  # no negative zero (jsonb has none)
    assert json.loads(json.dumps(value)) == value


def test_derived_seeds_are_stable_and_distinct():
    assert lb.derived_seed(0, "human/overall") == lb.derived_seed(0, "human/overall")
    assert lb.derived_seed(0, "human/overall") != lb.derived_seed(0, "human/dialogue")
    assert lb.derived_seed(0, "human/overall") != lb.derived_seed(1, "human/overall")
    assert lb.derived_seed(0, "x") == 1509418806  # the same in every process (no salted hash)


def test_win_matrix_counts_ties_half():
    wins, games = lb.win_matrix([0, 0, 1, 2], [1, 1, 0, 0], [1.0, 0.5, 1.0, 0.0], 3)
    assert wins[0, 1] == 1.5 and wins[1, 0] == 1.5 and games[0, 1] == 3
    assert wins[0, 2] == 1 and games[2, 0] == 1


@pytest.mark.parametrize(("models", "votes"), [(3, 300), (8, 2_000), (4, 30)])
def test_batched_bootstrap_equals_bradley_terry_bootstrap(models, votes):
    """vote_strengths draws the same multinomial weights as bradley_terry.bootstrap for a seed
    and fits them in batches (fit_batch): the same draws to a small fraction of an Elo point
    (bradley_terry.fit stops at a relative likelihood change of 1e-10; fit_batch iterates until
    every step is below 1e-10, including draws where a model won everything)."""
    rng = np.random.default_rng(models)
    a, b, outcome = simulators.simulate_votes(rng.normal(0, 0.8, models), votes, rng)
    mine = lb.vote_strengths(a, b, outcome, models, n_boot=200, seed=5)
    reference = bt.bootstrap(bt.aggregate(a, b, outcome, models), n_boot=200, seed=5)
    assert np.allclose(mine.elo, reference.elo)
    assert np.abs(mine.draws - reference.draws).max() < 0.01
    assert np.allclose(mine.low, reference.low, atol=0.01)


def test_fit_batch_converges_from_far_and_on_separated_data():
    rng = np.random.default_rng(4)
    wins = rng.integers(0, 30, (20, 6, 6)).astype(float)
    wins[:, np.arange(6), np.arange(6)] = 0
    wins[3, 0, :] = 40  # model 0 wins everything in draw 3
    wins[3, :, 0] = 0
    fitted = lb.fit_batch(wins, np.full(6, 5.0))
    for k in range(20):
        assert np.allclose(fitted[k], bt.fit(wins[k]), atol=1e-6)


def test_anchor_ppi_matches_ppi_py_at_the_stated_level():
    """The release's PPI++ column is ppi_py's ppi_mean_ci with alpha=0.05 (95%; ppi_py's own
    default alpha=0.1 would be a 90% interval)."""
    ppi_py = pytest.importorskip("ppi_py")
    y, f, f_all, _ = _biased_anchor_world(7)
    mine = lb.anchor_win_rate(y, f, f_all, 0.95)["ppi"]
    low, high = ppi_py.ppi_mean_ci(y, f, f_all, alpha=0.05)
    point = ppi_py.ppi_mean_pointestimate(y, f, f_all)
    assert mine["estimate"] == pytest.approx(float(np.ravel(point)[0]), abs=2e-3)
    assert mine["low"] == pytest.approx(float(np.ravel(low)[0]), abs=2e-3)
    assert mine["high"] == pytest.approx(float(np.ravel(high)[0]), abs=2e-3)
    default_low, default_high = ppi_py.ppi_mean_ci(y, f, f_all)  # alpha=0.1: narrower
    assert float(np.ravel(default_high)[0]) - float(np.ravel(default_low)[0]) < (
        mine["high"] - mine["low"]
    )
