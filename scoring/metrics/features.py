"""Judge features of responses and the per-comparison table a calibration is fitted on.

Features of one response (f), all per response except the pairwise judge's:

- reference metrics from MetricScore (scoring.metrics.jobs): ``rouge1``, ``rouge2``, ``rougeL``,
  ``bleu1`` … ``bleu4`` and, when an embedding backend was used, ``embedding_cosine``;
- ``log_length``: log(1 + non-whitespace characters of the response) (MetricScore
  ``length_chars``);
- single-answer LLM judge: ``judge_<dimension>`` for the rating dimensions (empathy, fluency,
  memory_use, planning, persona_consistency, safety), each the mean of the judge's 1–10
  scores over every usable verdict (parse strict or fallback) of every run of that judge
  config; ``judge_mean`` (not a model feature) is the mean over the dimensions it scored;
- pairwise LLM judge: ``judge_win_share``, the share of the judge's verdicts on the pair that
  went to this side (ties half, both presentation orders and all samples together), so
  f(A) − f(B) = 2·share(A) − 1. It depends on the pair, which is why features are computed for
  the two sides of a pair (`side_features`).

A difference f(A) − f(B) with the feature missing on either side is 0 (h2htalk.stats.calibration).
The paper's composite of each side is recomputed from the metric columns present for every
response of the table (scoring.metrics.composite.composite_columns), so one renormalisation holds for
all rows; under the paper metrics profile nothing is renormalised. The metrics of one table are
of one profile (scoring.metrics.profiles): mixed profiles are a FeatureError.
"""

import math
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.special import expit

from annotation import exclusions
from annotation.models import Campaign, Comparison, Judgment
from h2htalk.stats.calibration.data import votes_frame
from scoring import stored_columns
from scoring.frames import finite_number, id_subquery
from scoring.metrics import composite as paper
from scoring.metrics import profiles
from scoring.metrics.catalogue import (
    LENGTH_FEATURES,
    METRIC_FEATURES,
    RUBRIC_DIMENSIONS,
    RUBRIC_FEATURES,
    FeatureError,
    check_features,
    default_features,
)
from scoring.models import JudgeConfig, JudgeVerdict

USABLE = stored_columns.USABLE


# ---------------------------------------------------------------- per response


def metric_table(response_ids) -> pd.DataFrame:
    """Stored metrics per response (index: response id, sorted); responses without metrics are
    absent. Besides the features: ``bertscore`` (a composite term only) and the encoder names of
    the model terms (``embedding_backend``, ``bertscore_backend``: text, None when absent).
    Read by scoring.stored_columns (once per release computation)."""
    columns = stored_columns.metric_columns(response_ids)
    rows = columns.rows(sorted(set(int(pk) for pk in response_ids)))
    index = pd.Index(columns.ids[rows], name="response")
    names = [*stored_columns.FEATURE_NUMBERS, "log_length"]
    frame = pd.DataFrame(columns.features[rows], index=index, columns=names)
    for key, values in columns.encoders.items():
        frame[key] = pd.Series([values[r] for r in rows.tolist()], index=index, dtype=object)
    frame["profile"] = pd.Series(
        [columns.profiles[r] for r in rows.tolist()], index=index, dtype=object
    )
    return frame


def single_profile(names) -> str:
    """The one metrics profile of these rows (the default when there are none); FeatureError
    when they were computed with different profiles, which no composite or judge may mix."""
    found = sorted({n for n in names if isinstance(n, str)})
    if len(found) > 1:
        raise FeatureError(
            f"the reference metrics of these responses were computed with different profiles "
            f"({', '.join(found)}): compute them again with one profile"
        )
    return found[0] if found else profiles.DEFAULT


def _mean(values: list[float]) -> float:
    """np.mean of a short list, bit for bit: below 8 values numpy adds them one after the other
    as sum() does (pairwise summation starts at 8), without numpy's cost per call."""
    return sum(values) / len(values) if len(values) < 8 else float(np.mean(values))


def _rubric_means(verdicts) -> list[float] | None:
    """[judge_<dim>…, judge_mean] of one response's verdict scores (None: no usable score)."""
    record = []
    for dimension in RUBRIC_DIMENSIONS:
        values = [finite_number((scores or {}).get(dimension)) for scores in verdicts]
        values = [v for v in values if not math.isnan(v) and 1 <= v <= 10]
        record.append(_mean(values) if values else math.nan)
    present = [v for v in record if not math.isnan(v)]
    return [*record, _mean(present)] if present else None


def rubric_table(judge: JudgeConfig, response_ids) -> pd.DataFrame:
    """Mean 1–10 score per dimension (judge_<dim>) and judge_mean per response graded by the
    judge (single mode); responses without a usable verdict are absent (index sorted). Each
    response's verdicts are averaged in verdict id order (read by scoring.stored_columns)."""
    verdicts = stored_columns.verdict_rows(judge, response_ids)
    wanted = np.asarray(sorted(set(int(pk) for pk in response_ids)), dtype=np.int64)
    mine = np.isin(verdicts.response, wanted)
    order = np.argsort(verdicts.response[mine], kind="stable")  # by response, then verdict id
    response, scores = verdicts.response[mine][order], verdicts.scores[mine][order]
    columns = [*RUBRIC_FEATURES, "judge_mean"]
    if not len(response):
        return pd.DataFrame(columns=columns, index=pd.Index([], name="response"), dtype=float)
    starts = np.flatnonzero(np.r_[True, response[1:] != response[:-1]])
    sizes = np.diff(np.r_[starts, len(response)])
    single = sizes == 1
    table = np.full((len(starts), len(columns)), np.nan)
    table[single] = _single_verdict_means(scores[starts[single]])
    for k in np.flatnonzero(~single):  # several verdicts of one response: averaged in order
        group = scores[starts[k] : starts[k] + sizes[k]]
        record = _rubric_means([dict(zip(RUBRIC_DIMENSIONS, row, strict=True)) for row in group])
        if record is not None:
            table[k] = record
    keep = ~np.isnan(table[:, -1])
    return pd.DataFrame(
        table[keep], index=pd.Index(response[starts][keep], name="response"), columns=columns
    )


def _single_verdict_means(scores: np.ndarray) -> np.ndarray:
    """_rubric_means of responses with one verdict each, for all of them at once: a dimension's
    mean is its score (NaN outside 1–10), judge_mean the mean of the scored dimensions added
    left to right as sum() does (NaN when none is scored)."""
    valid = (scores >= 1) & (scores <= 10)  # NaN compares False
    record = np.where(valid, scores, np.nan)
    total = np.zeros(len(scores))
    for column in range(scores.shape[1]):
        total = total + np.where(valid[:, column], record[:, column], 0.0)
    count = valid.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(count > 0, total / count, np.nan)
    return np.column_stack([record, mean])


def pairwise_shares(judge: JudgeConfig, pairs) -> dict[tuple[int, int], tuple[float, int]]:
    """(share of verdicts for the first response of each (a, b) pair, ties half; verdicts)
    over both presentation orders; pairs without a usable verdict are absent."""
    wanted = {(int(a), int(b)) for a, b in pairs}
    ids = sorted({r for pair in wanted for r in pair})
    tally: dict[tuple[int, int], list[float]] = defaultdict(lambda: [0.0, 0])
    verdicts = JudgeVerdict.objects.filter(
        run__judge=judge,
        first_id__in=id_subquery(ids),
        parse__in=USABLE,
        winner__in=("first", "second", "tie"),
    ).values_list("first_id", "second_id", "winner")
    for first, second, winner in verdicts.iterator(chunk_size=5000):
        if (first, second) in wanted:
            a_is_first, key = True, (first, second)
        elif (second, first) in wanted:
            a_is_first, key = False, (second, first)
        else:
            continue
        credit = 0.5 if winner == "tie" else float((winner == "first") == a_is_first)
        tally[key][0] += credit
        tally[key][1] += 1
    return {key: (won / n, int(n)) for key, (won, n) in tally.items() if n}


@dataclass
class Sides:
    """Features of the two sides of many pairs: row i of `a` and of `b` is pair i."""

    a: pd.DataFrame
    b: pd.DataFrame
    composite_a: np.ndarray
    composite_b: np.ndarray
    raw: np.ndarray  # the judge's own P(A) (NaN without a judge or a verdict)
    composite_note: str
    complete: np.ndarray  # bool: metrics on both sides, and judge data when a judge is used
    reasons: dict = field(default_factory=dict)  # why rows are incomplete: counts
    profile: str = profiles.DEFAULT  # the metrics profile of the rows used


def side_features(pairs, judge: JudgeConfig | None = None) -> Sides:
    """Every feature (ALL_FEATURES that the data has) for each side of (response a, response b)
    pairs, the composite of each side and the raw judge probability."""
    pairs = [(int(a), int(b)) for a, b in pairs]
    ids = sorted({r for pair in pairs for r in pair})
    metrics = metric_table(ids)
    frame_a = metrics.reindex([a for a, _ in pairs])
    frame_b = metrics.reindex([b for _, b in pairs])
    has_metrics = frame_a["rouge1"].notna().to_numpy() & frame_b["rouge1"].notna().to_numpy()
    raw = np.full(len(pairs), np.nan)
    has_judge = np.ones(len(pairs), dtype=bool)
    if judge is not None and judge.mode == JudgeConfig.Mode.SINGLE:
        rubric = rubric_table(judge, ids)
        rubric_a = rubric.reindex([a for a, _ in pairs])
        rubric_b = rubric.reindex([b for _, b in pairs])
        for column in RUBRIC_FEATURES:
            frame_a[column] = rubric_a[column].to_numpy()
            frame_b[column] = rubric_b[column].to_numpy()
        mean_a, mean_b = rubric_a["judge_mean"].to_numpy(), rubric_b["judge_mean"].to_numpy()
        raw = expit(mean_a - mean_b)
        has_judge = ~np.isnan(mean_a) & ~np.isnan(mean_b)
    elif judge is not None:
        shares = pairwise_shares(judge, pairs)
        share = np.array([shares.get(pair, (math.nan, 0))[0] for pair in pairs], dtype=float)
        frame_a["judge_win_share"] = share
        frame_b["judge_win_share"] = 1 - share
        raw = share
        has_judge = ~np.isnan(share)
    frame_a = frame_a.reset_index(drop=True)
    frame_b = frame_b.reset_index(drop=True)
    profile = single_profile(
        np.concatenate([frame_a["profile"].to_numpy(), frame_b["profile"].to_numpy()])[
            np.concatenate([has_metrics, has_metrics])
        ]
    )
    composite_a, composite_b, note = _composites(frame_a, frame_b, has_metrics, profile)
    return Sides(
        a=frame_a,
        b=frame_b,
        composite_a=composite_a,
        composite_b=composite_b,
        raw=raw,
        composite_note=note,
        complete=has_metrics & has_judge,
        reasons={
            "without_metrics": int((~has_metrics).sum()),
            "without_judge_verdicts": int((has_metrics & ~has_judge).sum()),
        },
        profile=profile,
    )


def _composites(frame_a, frame_b, rows, profile) -> tuple[np.ndarray, np.ndarray, str]:
    """The paper's composite of both sides over the metric terms present in every used row
    (under the paper profile a model term present in some rows counts 0 in the others)."""
    n = len(frame_a)
    out_a, out_b = np.full(n, np.nan), np.full(n, np.nan)
    if not rows.any():
        return out_a, out_b, ""
    columns = {}
    for term in paper.PAPER_WEIGHTS:
        if term not in frame_a.columns:
            continue
        both = np.concatenate([frame_a[term].to_numpy()[rows], frame_b[term].to_numpy()[rows]])
        if not np.isnan(both).any() or (profile == profiles.PAPER and not np.isnan(both).all()):
            columns[term] = both
    for key in paper.PROVENANCE.values():
        columns[key] = np.concatenate(
            [frame_a[key].to_numpy()[rows], frame_b[key].to_numpy()[rows]]
        )
    result = paper.composite_columns(columns, profile=profile)
    used = int(rows.sum())
    out_a[rows], out_b[rows] = result.score[:used], result.score[used:]
    return out_a, out_b, result.note


# ---------------------------------------------------------------- per comparison


@dataclass
class Table:
    """The per-comparison table of a campaign (see `comparison_table`)."""

    frame: pd.DataFrame
    features: list[str]
    judgments: pd.DataFrame  # comparison, annotator, preference of the comparisons kept
    composite_note: str
    info: dict
    profile: str = profiles.DEFAULT  # the metrics profile of its features and composite


def comparison_table(campaign: Campaign, judge: JudgeConfig | None = None, features=None) -> Table:
    """One row per regular (non-gold) comparison of the campaign with human judgments.

    Columns: comparison, scenario, subtask, companion_a, companion_b, response_a, response_b,
    votes_a, votes_tie, votes_b, n_votes, mean_preference, majority (−1 A, 0 tie, 1 B),
    majority_tied, composite_a, composite_b, composite_diff, raw (the judge's P(A); NaN without
    a judge), and a_<f>, b_<f>, d_<f> = a_<f> − b_<f> for every feature. Comparisons without
    metrics on both sides, or (with a judge) without its verdicts, are left out and counted
    in info. Gold comparisons are left out, as in the agreement report, and so are the
    judgments of annotators excluded from the campaign (annotation.exclusions; counted in info
    as excluded_judgments and excluded_annotators).
    """
    if features is None:
        features = default_features(judge)
    features = check_features(features, judge)
    judgments, info = _human_judgments(campaign)
    votes = votes_frame(judgments)
    frame = _regular_comparisons(campaign).merge(
        votes, left_on="comparison", right_index=True, how="inner"
    )
    frame = frame.reset_index(drop=True)
    sides = side_features(zip(frame["response_a"], frame["response_b"], strict=True), judge)
    _require_metrics(sides, features)
    info.update(sides.reasons)
    for name in features:
        frame[f"a_{name}"] = sides.a[name].to_numpy()
        frame[f"b_{name}"] = sides.b[name].to_numpy()
        frame[f"d_{name}"] = frame[f"a_{name}"] - frame[f"b_{name}"]
    frame["composite_a"], frame["composite_b"] = sides.composite_a, sides.composite_b
    frame["composite_diff"] = frame["composite_a"] - frame["composite_b"]
    frame["raw"] = sides.raw
    frame = frame[sides.complete].reset_index(drop=True)
    used = judgments[judgments["comparison"].isin(frame["comparison"])].reset_index(drop=True)
    info.update(comparisons=len(frame), judgments=len(used), scenarios=frame["scenario"].nunique())
    return Table(frame, features, used, sides.composite_note, info, sides.profile)


def _human_judgments(campaign: Campaign) -> tuple[pd.DataFrame, dict]:
    """The kept judgments of the regular comparisons (excluded annotators left out, counted in
    the info dict); FeatureError when none are left."""
    regular = Judgment.objects.filter(comparison__campaign=campaign, comparison__is_gold=False)
    excluded = exclusions.excluded_annotator_ids(campaign)
    judgments = pd.DataFrame.from_records(
        list(
            regular.exclude(annotator_id__in=excluded).values_list(
                "comparison_id", "annotator_id", "preference"
            )
        ),
        columns=["comparison", "annotator", "preference"],
    )
    info = {"judged_comparisons": int(judgments["comparison"].nunique()) if len(judgments) else 0}
    info["excluded_annotators"] = len(excluded)
    info["excluded_judgments"] = (
        regular.filter(annotator_id__in=excluded).count() if excluded else 0
    )
    if judgments.empty:
        left_out = (
            f" ({info['excluded_judgments']} judgment(s) of excluded annotators left out)"
            if info["excluded_judgments"]
            else ""
        )
        raise FeatureError(f"campaign {campaign.name} has no human judgments yet{left_out}")
    return judgments, info


def _regular_comparisons(campaign: Campaign) -> pd.DataFrame:
    """The campaign's non-gold comparisons: ids of scenario, companions and responses."""
    return pd.DataFrame.from_records(
        list(
            Comparison.objects.filter(campaign=campaign, is_gold=False)
            .values_list(
                "pk",
                "scenario_id",
                "scenario__subtask",
                "response_a__companion_id",
                "response_b__companion_id",
                "response_a_id",
                "response_b_id",
            )
            .order_by("pk")
        ),
        columns=[
            "comparison",
            "scenario",
            "subtask",
            "companion_a",
            "companion_b",
            "response_a",
            "response_b",
        ],
    )


def _require_metrics(sides, features: list[str]) -> None:
    """FeatureError when a metric or length feature is missing on a comparison that is otherwise
    complete: a partial table would silently compare different sets of comparisons."""
    missing = [
        f
        for f in features
        if f in METRIC_FEATURES + LENGTH_FEATURES
        and (sides.a[f].isna() | sides.b[f].isna()).to_numpy()[sides.complete].any()
    ]
    if missing:
        hint = (
            " (compute metrics with an embedding backend)" if "embedding_cosine" in missing else ""
        )
        raise FeatureError(f"{', '.join(missing)} is missing for some responses{hint}")
