"""The numbers of a release, from its data (scoring.releases.data) alone: Bradley–Terry
strengths of the human votes and of the calibrated judge (overall, per dimension, per subtask,
per scenario flag, and each companion's explicit − implicit and stable − evolving difference),
the win rate against the anchor (humans, judge, PPI++), the composite and the win matrix.

Pure and deterministic for the same data and seed (the check recomputes them bit for bit);
no database access, no HTTP: errors are ReleaseError."""

import math

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from h2htalk.stats import leaderboard as stats
from scenarios.taxonomy import Dimension, Subtask, dimension_of
from scoring.metrics.composite import separation
from scoring.releases import flags, shared_shift, style
from scoring.releases.data import NO_JUDGE, ReleaseData

RESULTS_SCHEMA = "h2htalk.release-results/2"  # /2: human intervals resample scenarios
MIN_GROUP_VOTES = 30  # a dimension or subtask with fewer human votes is skipped, with a note
MIN_VOTES_PER_COMPANION = 10  # … or with fewer than this many votes per companion in it
MIN_GROUP_SCENARIOS = 5  # the judge's scenario bootstrap needs a few scenarios per group


def _outcome_a(preference) -> np.ndarray:
    preference = np.asarray(preference, dtype=float)
    return np.where(preference < 0, 1.0, np.where(preference == 0, 0.5, 0.0))


def _masked(strengths: stats.Strengths, present: np.ndarray, n: int) -> dict:
    """A Strengths fitted on the present companions, expanded to all n (None elsewhere)."""
    fitted = strengths.as_dict()
    out = {key: fitted[key] for key in ("level", "n_boot", "method")}
    index = {int(k): pos for pos, k in enumerate(present)}
    for key in ("elo", "low", "high", "rank"):
        out[key] = [fitted[key][index[k]] if k in index else None for k in range(n)]
    out["games"] = [round(fitted["games"][index[k]]) if k in index else 0 for k in range(n)]
    for key in ("p_better", "significant", "diff_low", "diff_high"):
        out[key] = [
            [
                fitted[key][index[i]][index[j]] if i in index and j in index else None
                for j in range(n)
            ]
            for i in range(n)
        ]
    return out


class _Canonical:
    """The order every fit computes in, from content and not from database ids: companions by
    name (unique), scenarios by the sha256 of their text (ids only break ties, as when a
    release's data carry no hashes), so that a release whose companions or scenarios are
    renumbered draws the same bootstrap weights and sums in the same order: the same numbers
    bit for bit. `code[position]` is a companion's place in name order, `position[code]` back;
    `scenario_ids[rank]` the scenario of each rank."""

    def __init__(self, data: ReleaseData, index: pd.Index):
        names = dict(data.companions)
        order = sorted(range(len(index)), key=lambda k: (names[index[k]], index[k]))
        self.index = index
        self.position = np.array(order, dtype=np.int64)
        self.code = np.empty(len(order), dtype=np.int64)
        self.code[self.position] = np.arange(len(order))
        keys = data.scenario_key or {}
        self.scenario_ids = np.array(sorted(data.subtask, key=lambda s: (keys.get(s, ""), s)))
        self._rank = pd.Index(self.scenario_ids)

    def companions(self, column) -> np.ndarray:
        return self.code[self.index.get_indexer(column)]

    def scenarios(self, column) -> np.ndarray:
        """The rank of each entry's scenario (a column sorted by id, as a release's judge pairs
        come, is looked up once per scenario, not per row)."""
        column = np.asarray(column)
        if len(column) and (column[1:] >= column[:-1]).all():
            starts = np.flatnonzero(np.r_[True, column[1:] != column[:-1]])
            ranks = self._rank.get_indexer(column[starts])
            ranks = np.repeat(ranks, np.diff(np.r_[starts, len(column)]))
        else:
            ranks = self._rank.get_indexer(column)
        if (ranks < 0).any():
            raise ValueError("a row's scenario is not one of the release's scenarios")
        return ranks


class _VoteCells:
    """The human votes as per-scenario cells over every companion (stats.scenario_cells in the
    canonical order), built once; a group's fit cuts its scenarios' rows from them, as the
    judge's do. The votes' own columns stay for the counts."""

    def __init__(self, frame: pd.DataFrame, canon: _Canonical):
        self.canon = canon
        self.comparison = frame["comparison"].to_numpy()
        self.cells = stats.scenario_cells(
            canon.scenarios(frame["scenario"]),
            canon.companions(frame["companion_a"]),
            canon.companions(frame["companion_b"]),
            _outcome_a(frame["preference"]),
            len(canon.code),
        )
        self.scenarios = canon.scenario_ids[self.cells.scenarios]  # per cell row


def _vote_block(votes: _VoteCells, parts, n, data, name, minimum, draws=None) -> dict:
    """The Bradley–Terry fit of the votes in parts[0] (a mask over the votes) with intervals
    from resampling their scenarios (parts[1], a mask over the cells' rows)."""
    rows, cell_rows = parts[0], np.flatnonzero(parts[1])
    count = int(np.count_nonzero(rows))
    block = {"votes": count, "comparisons": len(np.unique(votes.comparison[rows]))}
    block["scenarios"] = len(cell_rows)
    if count == 0:
        return {**block, "skipped": "no human votes"}
    cells, present = votes.cells.part(cell_rows)
    if len(present) < 2:
        return {**block, "skipped": "fewer than two companions with votes"}
    if minimum and count < max(minimum, MIN_VOTES_PER_COMPANION * len(present)):
        needed = max(minimum, MIN_VOTES_PER_COMPANION * len(present))
        return {
            **block,
            "skipped": f"only {count} human votes (a fit needs {needed}: at least {minimum} "
            f"and {MIN_VOTES_PER_COMPANION} per companion)",
        }
    least = MIN_GROUP_SCENARIOS if minimum else 2
    if len(cell_rows) < least:
        return {
            **block,
            "skipped": f"human votes on {len(cell_rows)} scenario(s) (the scenario bootstrap "
            f"needs at least {least})",
        }
    strengths = stats.cell_strengths(
        cells,
        n_boot=data.n_boot,
        level=data.level,
        seed=stats.derived_seed(data.seed, name),
        source=stats.VOTES,
    )
    present = votes.canon.position[present]  # companions' positions, in the fit's order
    if draws is not None:  # kept for the flag differences (scoring.releases.flags)
        draws[name] = flags.expanded_draws(strengths.draws, present, n)
    return {**block, **_masked(strengths, present, n)}


class _JudgeCells:
    """The judge's usable pairs (finite P) as per-scenario cells over every companion, built
    once in the canonical order; a group's fit cuts its scenarios' rows from them
    (stats.ScenarioCells.part)."""

    def __init__(self, population: pd.DataFrame, canon: _Canonical):
        p = population["p_a"].to_numpy(dtype=float)
        finite = np.isfinite(p)
        usable, p = (population, p) if finite.all() else (population[finite], p[finite])
        self.canon = canon
        self.cells = stats.scenario_cells(
            canon.scenarios(usable["scenario"]),
            canon.companions(usable["companion_a"]),
            canon.companions(usable["companion_b"]),
            p,
            len(canon.code),
        )
        self.scenarios = canon.scenario_ids[self.cells.scenarios]  # per cell row
        self.pairs = np.asarray(self.cells.games.sum(axis=1)).ravel()  # usable pairs per row
        self.missing = population["scenario"].to_numpy()[~finite]  # a row per missing P


def _judge_block(judge: _JudgeCells, parts, n, data, name, minimum_scenarios, draws=None):
    """The scenario-bootstrap fit of the judge on the scenarios in `parts` (masks over the
    cells' rows and over the pairs without a prediction)."""
    rows, missing = np.flatnonzero(parts[0]), parts[1]
    block = {
        "pairs": int(judge.pairs[rows].sum()),
        "without_prediction": int(np.count_nonzero(missing)),
        "scenarios": len(rows),
    }
    if block["scenarios"] < minimum_scenarios:
        return {
            **block,
            "skipped": f"the judge scored pairs on {block['scenarios']} scenario(s) "
            f"(fewer than {minimum_scenarios})",
        }
    cells, present = judge.cells.part(rows)
    if len(present) < 2:
        return {**block, "skipped": "fewer than two companions with judge predictions"}
    strengths = stats.cell_strengths(
        cells, n_boot=data.n_boot, level=data.level, seed=stats.derived_seed(data.seed, name)
    )
    present = judge.canon.position[present]
    if draws is not None:
        draws[name] = flags.expanded_draws(strengths.draws, present, n)
    return {**block, **_masked(strengths, present, n)}


def _pair_rows(frame: pd.DataFrame, x: int, anchor: int) -> pd.DataFrame:
    """The rows of a frame with companion_a / companion_b about companion x and the anchor."""
    return frame[
        ((frame["companion_a"] == x) & (frame["companion_b"] == anchor))
        | ((frame["companion_a"] == anchor) & (frame["companion_b"] == x))
    ]


def _anchor_row(data: ReleaseData, x: int, labelled_p: dict, with_anchor) -> dict:
    """P(x beats the anchor): humans only, judge only and PPI++ (humans and judge)."""
    pair = _pair_rows(data.votes, x, data.anchor)
    outcome_a = _outcome_a(pair["preference"])
    outcome_x = np.where(pair["companion_a"].to_numpy() == x, outcome_a, 1 - outcome_a)
    per_comparison = (
        pd.DataFrame({"comparison": pair["comparison"].to_numpy(), "y": outcome_x})
        .groupby("comparison", sort=True)["y"]
        .mean()
    )
    row = {"companion": x}
    if data.population is None:
        y = per_comparison.to_numpy()
        row.update(stats.anchor_win_rate(y, y, [], data.level))
        row["judge"] = row["ppi"] = None
        row["judge_reason"] = row["ppi_reason"] = NO_JUDGE
        return row
    x_is_a = {c: a == x for c, a in zip(pair["comparison"], pair["companion_a"], strict=True)}
    f = np.array(
        [
            labelled_p.get(c, np.nan) if x_is_a[c] else 1 - labelled_p.get(c, np.nan)
            for c in per_comparison.index
        ],
        dtype=float,
    )
    keep = np.isfinite(f)
    mine = _pair_rows(with_anchor, x, data.anchor)
    p = mine["p_a"].to_numpy(dtype=float)
    f_all = np.where(mine["companion_a"].to_numpy() == x, p, 1 - p)
    f_all = f_all[np.isfinite(f_all)]
    row.update(stats.anchor_win_rate(per_comparison.to_numpy()[keep], f[keep], f_all, data.level))
    row["labelled_without_prediction"] = int((~keep).sum())
    if len(f_all) and keep.sum() >= len(f_all):
        row["note"] = (
            "every scenario of this pair has human labels, so PPI reduces to the humans' "
            "mean (the judge adds nothing where humans already answered)"
        )
    return row


def _anchor_rows(data: ReleaseData, ids: list[int]) -> list[dict]:
    labelled_p = (
        dict(zip(data.labelled["comparison"], data.labelled["p_a"], strict=True))
        if data.labelled is not None
        else {}
    )
    with_anchor = None  # the judge's rows with the anchor on one side, picked out once
    if data.population is not None:
        population = data.population
        with_anchor = population[
            (population["companion_a"].to_numpy() == data.anchor)
            | (population["companion_b"].to_numpy() == data.anchor)
        ]
    return [_anchor_row(data, x, labelled_p, with_anchor) for x in ids if x != data.anchor]


def _composite_block(data: ReleaseData, ids: list[int], groups: dict) -> dict:
    frame = data.composite
    overall = []
    for c in ids:
        values = frame.loc[frame["companion"] == c, "composite"].to_numpy(dtype=float)
        overall.append({"companion": c, **stats.mean_interval(values, data.level)})
    by_group = {}
    for scope, labels, label_of, _ in _slicings(data, groups):
        by_group[scope] = {}
        if frame.empty:
            continue
        codes = _group_codes(frame["scenario"], label_of, labels)
        companion = frame["companion"].to_numpy()
        composite = frame["composite"].to_numpy(dtype=float)
        for k, group in enumerate(labels):
            means = []
            for c in ids:
                values = composite[(companion == c) & (codes == k)]
                values = values[np.isfinite(values)]
                means.append(float(values.mean()) if len(values) else None)
            by_group[scope][group] = means
    why = separation(overall)  # "" when some pair of companions is told apart
    # The profile is named when it is not the default (results of releases computed before
    # profiles existed stay bit for bit the same).
    named = {"profile": data.metrics_profile} if data.metrics_profile != "platform" else {}
    return {
        **named,
        "overall": overall,
        **by_group,
        "separates": not why,
        "separation": why,
        "note": (
            f"{data.composite_note} Mean over each companion's responses to the release's "
            f"scenarios (one per scenario); {data.level:.0%} normal-approximation intervals over "
            "responses." + (f" The composite cannot separate the companions: {why}." if why else "")
        ),
    }


def _groups(data: ReleaseData) -> dict:
    """The dimensions and subtasks present in the release, in taxonomy order."""
    dimension_of_scenario = {s: dimension_of(t) for s, t in data.subtask.items()}
    present_subtasks = set(data.subtask.values())
    present_dimensions = {dimension_of(t) for t in present_subtasks}
    return {
        "dimension": [d for d in Dimension.values if d in present_dimensions],
        "subtask": [t for t in Subtask.values if t in present_subtasks],
        "dimension_of_scenario": dimension_of_scenario,
    }


def _group_codes(scenario, label_of: dict, labels: list) -> np.ndarray:
    """Per row, the position in `labels` of the label of the row's scenario (−1: none), so that
    a group is picked by comparing integers, not millions of strings."""
    # The last entry answers get_indexer's −1 (a scenario without a label).
    code_of = np.array([labels.index(v) if v in labels else -1 for v in label_of.values()] + [-1])
    return code_of[pd.Index(list(label_of)).get_indexer(np.asarray(scenario))]


def _slicings(data: ReleaseData, groups: dict) -> list[tuple[str, list, dict, str]]:
    """(results key, group labels, {scenario: label}, fit-name tag) of every slicing: the
    dimensions, the subtasks and, when frozen, the scenario flags (scoring.releases.flags)."""
    return [
        ("by_dimension", groups["dimension"], groups["dimension_of_scenario"], ""),
        ("by_subtask", groups["subtask"], data.subtask, ""),
        *flags.slicings(data.flags),
    ]


def _by_group(columns: tuple, data: ReleaseData, groups: dict, fit, prefix, minimum) -> dict:
    """`fit(parts, name, minimum)` for each group of every slicing, `parts` masking the
    entries of each array of scenario ids in `columns` that are in the group: the arrays are
    coded once per slicing, and a fit selects from arrays already built."""
    out = {}
    for scope, labels, label_of, tag in _slicings(data, groups):
        codes = [_group_codes(column, label_of, labels) for column in columns]
        out[scope] = {
            g: fit([c == k for c in codes], f"{prefix}/{tag}{g}", minimum)
            for k, g in enumerate(labels)
        }
    return out


def _human_section(data: ReleaseData, canon: _Canonical, groups: dict, draws: dict) -> dict:
    votes = _VoteCells(data.votes, canon)
    n = len(canon.code)

    def fit(parts, name, minimum):
        return _vote_block(votes, parts, n, data, name, minimum, draws)

    columns = (data.votes["scenario"].to_numpy(), votes.scenarios)
    return {
        "overall": fit([np.ones(len(c), dtype=bool) for c in columns], "human/overall", 0),
        **_by_group(columns, data, groups, fit, "human", MIN_GROUP_VOTES),
    }


def _judge_section(data: ReleaseData, canon: _Canonical, groups: dict, draws: dict) -> dict | None:
    if data.population is None:
        return None
    judge = _JudgeCells(data.population, canon)

    def fit(parts, name, minimum):
        return _judge_block(judge, parts, len(canon.code), data, name, minimum, draws)

    columns = (judge.scenarios, judge.missing)
    return {
        **data.judge,
        "overall": fit([np.ones(len(c), dtype=bool) for c in columns], "judge/overall", 2),
        **_by_group(columns, data, groups, fit, "judge", MIN_GROUP_SCENARIOS),
    }


def _shared_shifts(data: ReleaseData, canon: _Canonical) -> dict:
    """{flag: the field's shared shift} from absolute scores per response (shared_shift): the
    calibrated judge's own scores when it has them, else the composite."""
    if data.judge_scores is not None:
        frame, source, column = data.judge_scores, "judge", "score"
    else:
        frame, source, column = data.composite, "composite", "composite"
    if frame.empty:
        return {flag: {"skipped": "no absolute score of any response"} for flag in flags.CONTRASTS}
    scenario = canon.scenarios(frame["scenario"])
    companion = canon.companions(frame["companion"])
    score = frame[column].to_numpy(dtype=float)
    out = {}
    slicings = zip(flags.FLAGS, flags.slicings(data.flags), strict=True)
    for flag, (_, _, label_of, _) in slicings:
        if flag in flags.CONTRASTS:
            group = _group_codes(frame["scenario"], label_of, list(flags.CONTRASTS[flag]))
            seed = stats.derived_seed(data.seed, f"shared/{flag}")
            args = (len(canon.code), source, data.n_boot, data.level, seed)
            out[flag] = shared_shift.shift(scenario, companion, score, group, *args)
    return out


def _win_matrix(votes: pd.DataFrame, index: pd.Index) -> dict:
    n = len(index)
    if not len(votes):
        return {"wins": np.zeros((n, n)), "games": np.zeros((n, n))}
    wins, games = stats.win_matrix(
        index.get_indexer(votes["companion_a"]),
        index.get_indexer(votes["companion_b"]),
        _outcome_a(votes["preference"]),
        n,
    )
    return {"wins": wins, "games": games}


def _counts(data: ReleaseData) -> dict:
    votes = data.votes
    return {
        "companions": len(data.companions),
        "scenarios": len(data.subtask),
        "responses_scored": len(data.composite),
        "comparisons": int(votes["comparison"].nunique()) if len(votes) else 0,
        "votes": len(votes),
        "annotators": int(votes["annotator"].nunique()) if len(votes) else 0,
        "judge_pairs": len(data.population) if data.population is not None else 0,
    }


def _agreement(human: dict, judge: dict | None, composite: dict, n: int) -> dict:
    """Spearman correlations of the judge's and the composite's ranking with the humans'."""

    def nan(values):
        return [math.nan if v is None else v for v in values]

    human_elo = human["overall"].get("elo") or [None] * n
    judge_elo = (judge["overall"].get("elo") if judge else None) or [None] * n
    composite_mean = [row["mean"] for row in composite["overall"]]
    return {
        "judge_vs_human_spearman": stats.rank_correlation(nan(judge_elo), nan(human_elo)),
        "composite_vs_human_spearman": stats.rank_correlation(nan(composite_mean), nan(human_elo)),
    }


def _anchor_note(level: float) -> str:
    return (
        f"P(companion beats the anchor). Humans only: mean over the labelled comparisons "
        f"of the mean human outcome (tie = ½), {level:.0%} normal interval. Judge "
        "only: the calibrated judge's mean P over every release scenario (uncorrected, "
        f"so any bias of the judge stays in it). PPI++: prediction-powered inference "
        f"(power-tuned λ) combining the judge on every scenario with the humans on the "
        f"labelled subset, {level:.0%} interval; unbiased when the labelled "
        "comparisons are a random sample of the scenarios."
    )


def _notes(data: ReleaseData) -> list[str]:
    return [
        f"Every interval is a {data.level:.0%} interval (ppi_py's own default would be 90%).",
        "Rank = 1 + the number of companions significantly better (the bootstrap "
        f"{data.level:.0%} interval of the Elo difference excludes 0); the significance "
        "matrix shows every pair.",
        "Elo scale: 1000 + 400·log10(e)·θ with Bradley–Terry log-strengths θ of mean 0; a "
        "difference of 100 means P(win) ≈ 0.64.",
        "Human votes count as win (1), tie (½) or loss (0); the 5-point strength is not "
        "used. Every human interval, rank, significance mark and flag difference comes from "
        "a bootstrap that resamples scenarios (every vote of a drawn scenario with it), the "
        "unit the judge's bootstrap resamples too: votes on one scenario share its responses, "
        "so they are not independent draws. Per dimension and subtask the same fit on that "
        f"part's votes; parts with fewer than {MIN_GROUP_VOTES} votes, fewer than "
        f"{MIN_VOTES_PER_COMPANION} per companion or fewer than {MIN_GROUP_SCENARIOS} "
        "scenarios are skipped (a few votes per model give unstable fits).",
        *([flags.slice_note(), shared_shift.note()] if data.flags is not None else []),
        *data.notes,
    ]


def compute_results(data: ReleaseData) -> dict:
    """The numbers of a release, JSON-ready and deterministic for the same data and seed.

    BLAS runs on one thread here: a multithreaded matrix product adds in an order that depends
    on the number of threads, so the last bits of the numbers (and `--check`) would depend on
    the machine's cores; one thread also spends no CPU waiting on a busy machine."""
    with threadpool_limits(limits=1, user_api="blas"):
        return _compute_results(data)


def _compute_results(data: ReleaseData) -> dict:
    ids = [c for c, _ in data.companions]
    index = pd.Index(ids)
    groups = _groups(data)
    draws = {}  # bootstrap draws of every group fit, by fit name (for the flag differences)
    canon = _Canonical(data, index)
    human = _human_section(data, canon, groups, draws)
    judge = _judge_section(data, canon, groups, draws)
    composite = _composite_block(data, ids, groups)
    results = {
        "schema": RESULTS_SCHEMA,
        "level": data.level,
        "seed": data.seed,
        "n_boot": data.n_boot,
        "companions": [{"id": c, "name": name} for c, name in data.companions],
        "anchor": data.anchor,
        "dimensions": groups["dimension"],
        "subtasks": groups["subtask"],
        "counts": _counts(data),
        "human": human,
        "judge": judge,
        "judge_note": None if judge else NO_JUDGE,
        "anchor_win_rate": {
            "anchor": data.anchor,
            "rows": _anchor_rows(data, ids),
            "note": _anchor_note(data.level),
        },
        "composite": composite,
        "win_matrix": _win_matrix(data.votes, index),
        "agreement": _agreement(human, judge, composite, len(ids)),
        "reliability": data.reliability,
        "notes": _notes(data),
    }
    if data.exclusions is not None:
        results["exclusions"] = data.exclusions
    if data.on_other_text is not None:  # releases frozen before it was counted: absent
        results["judgments_on_other_text"] = data.on_other_text
    if data.flags is not None:  # releases frozen without flags (inputs /1): absent
        results["flags"] = flags.present_groups(data.flags)
        shared = _shared_shifts(data, canon)
        results["flag_differences"] = flags.differences(human, judge, draws, data.level, shared)
    if data.style is not None:  # releases frozen without style control: absent
        results["style_control"] = style.section(data, index, _outcome_a(data.votes["preference"]))
    return stats.json_safe(results)
