"""A release's per-group fits (dimensions, subtasks, scenario flags) are cut from arrays built
once (computing._JudgeCells, the votes' columns) instead of re-selecting each group's rows; the
numbers must be those of the straightforward computation: each group's rows picked from the
frames and fitted on their own (stats.scenario_strengths, stats.vote_scenario_strengths, the
scenarios keyed by their text hash as the release orders them), bit for bit.
The seeded fixture has judge pairs without a prediction and a companion absent from one
subtask, so groups renumber their companions."""

import numpy as np
import pandas as pd
import pytest

from h2htalk.stats import leaderboard as lb
from scoring.releases import computing
from scoring.releases.computing import _outcome_a
from tests.scoring.test_release_flags import IDS, simulate

ABSENT = 13  # a companion with no votes and no judge pairs on this subtask's scenarios
ABSENT_FROM = "itinerary_basic"
KEYS = ("elo", "low", "high", "rank", "games", "p_better", "significant", "diff_low", "diff_high")


@pytest.fixture(scope="module")
def release():
    data = simulate(seed=5, n_scenarios=240, n_boot=60, with_judge=True, risk_high=30)
    away = {s for s, t in data.subtask.items() if t == ABSENT_FROM}

    def keep(frame):
        involved = (frame["companion_a"] == ABSENT) | (frame["companion_b"] == ABSENT)
        return frame[~(frame["scenario"].isin(away) & involved)].reset_index(drop=True)

    data.votes = keep(data.votes)
    population = keep(data.population)
    p = population["p_a"].to_numpy().copy()
    p[np.random.default_rng(1).choice(len(p), 40, replace=False)] = np.nan
    data.population = population.assign(p_a=p)
    return data, computing.compute_results(data)


def _groups(data):
    """(results key, group, fit-name tag, the group's scenario ids) of every slicing."""
    for scope, labels, label_of, tag in computing._slicings(data, computing._groups(data)):
        for group in labels:
            yield scope, group, tag, {s for s, g in label_of.items() if g == group}


def _expanded(strengths: lb.Strengths, ids: list[int]) -> dict:
    """A fit on `ids` as the results show it: a value per release companion (None: absent)."""
    fitted = strengths.as_dict()
    where = {c: k for k, c in enumerate(ids)}
    out = {}
    for key in KEYS:
        if key in ("p_better", "significant", "diff_low", "diff_high"):
            out[key] = [
                [
                    fitted[key][where[i]][where[j]] if i in where and j in where else None
                    for j in IDS
                ]
                for i in IDS
            ]
        else:
            empty = 0 if key == "games" else None
            out[key] = [fitted[key][where[c]] if c in where else empty for c in IDS]
    out["games"] = [round(g) for g in out["games"]]
    return out


def _companions(frame) -> list[int]:
    return sorted(set(frame["companion_a"]) | set(frame["companion_b"]))


def _local(frame, ids):
    position = {c: k for k, c in enumerate(ids)}
    return frame["companion_a"].map(position), frame["companion_b"].map(position)


def _judge_by_hand(data, scenarios, name):
    rows = data.population[data.population["scenario"].isin(scenarios)]
    usable = rows[np.isfinite(rows["p_a"])]
    ids = _companions(usable)
    a, b = _local(usable, ids)
    strengths = lb.scenario_strengths(
        usable["scenario"].map(data.scenario_key),
        a,
        b,
        usable["p_a"],
        len(ids),
        n_boot=data.n_boot,
        level=data.level,
        seed=lb.derived_seed(data.seed, name),
    )
    counts = {
        "pairs": len(usable),
        "without_prediction": len(rows) - len(usable),
        "scenarios": usable["scenario"].nunique(),
    }
    return counts, _expanded(strengths, ids)


def _human_by_hand(data, scenarios, name):
    votes = data.votes[data.votes["scenario"].isin(scenarios)]
    ids = _companions(votes)
    a, b = _local(votes, ids)
    strengths = lb.vote_scenario_strengths(
        votes["scenario"].map(data.scenario_key),
        a,
        b,
        _outcome_a(votes["preference"]),
        len(ids),
        n_boot=data.n_boot,
        level=data.level,
        seed=lb.derived_seed(data.seed, name),
    )
    counts = {"votes": len(votes), "comparisons": votes["comparison"].nunique()}
    counts["scenarios"] = votes["scenario"].nunique()
    return counts, _expanded(strengths, ids)


def _same(block: dict, counts: dict, expected: dict) -> None:
    assert not block.get("skipped")
    for key, value in counts.items():
        assert block[key] == value, key
    for key in KEYS:
        assert block[key] == expected[key], key  # bit for bit: the same draws, the same fits


def test_every_judge_group_equals_its_rows_fitted_on_their_own(release):
    data, results = release
    checked = 0
    for scope, group, tag, scenarios in _groups(data):
        counts, expected = _judge_by_hand(data, scenarios, f"judge/{tag}{group}")
        _same(results["judge"][scope][group], counts, expected)
        checked += 1
    counts, expected = _judge_by_hand(data, set(data.subtask), "judge/overall")
    _same(results["judge"]["overall"], counts, expected)
    assert checked >= 10
    assert results["judge"]["by_subtask"][ABSENT_FROM]["elo"][IDS.index(ABSENT)] is None
    assert sum(b["without_prediction"] for b in results["judge"]["by_subtask"].values()) == 40


def test_every_human_group_equals_its_votes_fitted_on_their_own(release):
    data, results = release
    for scope, group, tag, scenarios in _groups(data):
        block = results["human"][scope][group]
        if block.get("skipped"):  # too few votes: the same rule decides by hand
            votes = data.votes[data.votes["scenario"].isin(scenarios)]
            assert len(votes) < max(
                computing.MIN_GROUP_VOTES,
                computing.MIN_VOTES_PER_COMPANION * len(_companions(votes)),
            )
            continue
        counts, expected = _human_by_hand(data, scenarios, f"human/{tag}{group}")
        _same(block, counts, expected)
    counts, expected = _human_by_hand(data, set(data.subtask), "human/overall")
    _same(results["human"]["overall"], counts, expected)
    assert results["human"]["by_subtask"][ABSENT_FROM]["elo"][IDS.index(ABSENT)] is None


def test_a_part_of_the_cells_is_the_cells_of_its_rows():
    """ScenarioCells.part equals scenario_cells on the rows of those scenarios (dense and
    sparse wholes), models renumbered to those that play there."""
    rng = np.random.default_rng(2)
    rows = pd.DataFrame(
        {"scenario": np.repeat(np.arange(30), 6), "a": rng.integers(0, 3, 180)}
    ).assign(b=lambda f: f["a"] + 1 + rng.integers(0, 2, 180), p=rng.random(180))
    rows.loc[rows["scenario"] < 10, ["a", "b"]] = [[0, 2]]  # model 1 and 3 absent there
    whole = lb.scenario_cells(rows["scenario"], rows["a"], rows["b"], rows["p"], 5)
    for sparse in (False, True):
        cells = whole
        if sparse:
            from scipy import sparse as sp

            cells = lb.ScenarioCells(
                sp.csr_matrix(whole.wins),
                sp.csr_matrix(whole.games),
                whole.low,
                whole.high,
                5,
                scenarios=whole.scenarios,
            )
        part, present = cells.part(np.arange(10))
        alone = rows[rows["scenario"] < 10]
        expected = lb.scenario_cells(
            alone["scenario"], alone["a"] // 2, alone["b"] // 2, alone["p"], 2
        )
        assert present.tolist() == [0, 2]
        assert np.array_equal(part.wins, expected.wins) and np.array_equal(
            part.games, expected.games
        )
        assert (
            part.low.tolist() == expected.low.tolist()
            and part.high.tolist() == expected.high.tolist()
        )
        assert part.scenarios.tolist() == list(range(10)) and part.once == expected.once
