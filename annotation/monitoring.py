"""Annotator monitoring for a campaign: speed, gold accuracy, position bias, skips.

The statistics are plain functions over a pandas DataFrame of judgments, one row per judgment,
with the columns of JUDGMENT_COLUMNS (build one with `judgments_frame`); they need no database.
`load_judgments` and `load_skips` read a campaign from the database in a fixed number of
queries, whatever the number of judgments. Only the monitoring table needs this module
(annotation.campaigns imports it there); progress counts are in annotation.campaigns.

Definitions (also stated on the page):
- judgments per hour: over the annotator's *active time*. Their judgments, in time order, are
  split into sessions wherever two submissions are more than SESSION_GAP_MINUTES apart; a
  session lasts from its first submission to its last, plus the time spent on its first item
  (time_on_task_ms, at most one gap). Breaks between sessions do not count.
- median time per item: median of time_on_task_ms (issued → submitted, server clock) and,
  separately, of client_time_ms (visible time in the browser; missing values are left out).
- gold accuracy: on gold comparisons with a known answer, a vote is right when the sign of its
  pair-keyed `preference` equals the sign of `gold_preference` (a tie gold expects a tie).
- left-preference rate: among votes that are not ties, the share with screen_preference < 0.
  Flagged when a two-sided exact binomial test against 50% gives p < LEFT_BIAS_ALPHA.
"""

import math

import numpy as np
import pandas as pd
from scipy.stats import binomtest

from .models import Assignment, Campaign, Judgment

SESSION_GAP_MINUTES = 30
LEFT_BIAS_ALPHA = 0.01

# frame column -> the Judgment lookup `load_judgments` reads it from
_JUDGMENT_LOOKUPS = {
    "annotator": "annotator__username",
    "comparison_id": "comparison_id",
    "screen_preference": "screen_preference",
    "preference": "preference",
    "time_on_task_ms": "time_on_task_ms",
    "client_time_ms": "client_time_ms",
    "created_at": "created_at",
    "is_gold": "comparison__is_gold",
    "gold_preference": "comparison__gold_preference",
}
JUDGMENT_COLUMNS = list(_JUDGMENT_LOOKUPS)
SKIP_COLUMNS = ["annotator", "skip_reason"]
TABLE_COLUMNS = [
    "judgments",
    "active_hours",
    "per_hour",
    "median_time_ms",
    "median_client_ms",
    "gold_n",
    "gold_correct",
    "gold_accuracy",
    "non_tie",
    "left",
    "left_rate",
    "left_p",
    "left_flag",
    "skips",
    "skip_reasons",
]


def judgments_frame(records) -> pd.DataFrame:
    """A judgments DataFrame with the expected columns and types, from dicts or tuples."""
    frame = pd.DataFrame.from_records(list(records), columns=JUDGMENT_COLUMNS)
    frame["annotator"] = frame["annotator"].astype(object)
    for column in ("comparison_id", "screen_preference", "preference", "time_on_task_ms"):
        frame[column] = pd.to_numeric(frame[column]).astype("int64")
    for column in ("client_time_ms", "gold_preference"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype("float64")
    frame["created_at"] = pd.to_datetime(frame["created_at"], utc=True)
    frame["is_gold"] = frame["is_gold"].astype(bool)
    return frame


def skips_frame(records) -> pd.DataFrame:
    frame = pd.DataFrame.from_records(list(records), columns=SKIP_COLUMNS)
    frame["annotator"] = frame["annotator"].astype(object)
    frame["skip_reason"] = frame["skip_reason"].astype(object)
    return frame


def active_hours(judgments: pd.DataFrame, gap_minutes: int = SESSION_GAP_MINUTES) -> pd.Series:
    """Hours of active time per annotator (see the module docstring for the session rule)."""
    if judgments.empty:
        return pd.Series(dtype="float64", name="active_hours")
    ordered = judgments.sort_values(["annotator", "created_at"], kind="stable")
    gap_seconds = ordered.groupby("annotator")["created_at"].diff().dt.total_seconds()
    limit = gap_minutes * 60
    starts = gap_seconds.isna() | (gap_seconds > limit)
    within = gap_seconds.where(~starts, 0.0)
    first_item = (ordered["time_on_task_ms"] / 1000).clip(upper=limit).where(starts, 0.0)
    seconds = (within + first_item).groupby(ordered["annotator"]).sum()
    return (seconds / 3600).rename("active_hours")


def gold_accuracy(judgments: pd.DataFrame) -> pd.DataFrame:
    """Per annotator: gold votes with a known answer (gold_n), right ones, and their share."""
    gold = judgments[judgments["is_gold"] & judgments["gold_preference"].notna()]
    right = np.sign(gold["preference"]) == np.sign(gold["gold_preference"])
    table = pd.DataFrame(
        {
            "gold_n": gold.groupby("annotator").size(),
            "gold_correct": right.groupby(gold["annotator"]).sum(),
        }
    )
    table["gold_accuracy"] = table["gold_correct"] / table["gold_n"]
    return table


def binomial_p(successes: int, trials: int) -> float:
    """Two-sided exact binomial test against 50%; NaN without trials."""
    if trials == 0:
        return math.nan
    return float(binomtest(int(successes), int(trials), 0.5).pvalue)


def left_preference(judgments: pd.DataFrame, alpha: float = LEFT_BIAS_ALPHA) -> pd.DataFrame:
    """Per annotator: non-tie votes, those for the left side, their share, p-value and flag."""
    non_tie = judgments[judgments["screen_preference"] != 0]
    table = pd.DataFrame(
        {
            "non_tie": non_tie.groupby("annotator").size(),
            "left": (non_tie["screen_preference"] < 0).groupby(non_tie["annotator"]).sum(),
        }
    )
    table["left_rate"] = table["left"] / table["non_tie"]
    table["left_p"] = [
        binomial_p(k, n) for k, n in zip(table["left"], table["non_tie"], strict=True)
    ]
    table["left_flag"] = table["left_p"] < alpha
    return table


def skip_summary(skips: pd.DataFrame) -> pd.DataFrame:
    """Per annotator: skips, and the reason codes (the part before ':') with their counts."""
    if skips.empty:
        return pd.DataFrame({"skips": pd.Series(dtype="int64"), "skip_reasons": []})
    codes = skips["skip_reason"].fillna("").str.split(":", n=1).str[0].str.strip()
    codes = codes.replace("", "unknown")
    rows = {}
    for annotator, group in codes.groupby(skips["annotator"]):
        counts = sorted(group.value_counts().items(), key=lambda kv: (-kv[1], kv[0]))
        reasons = {str(code): int(n) for code, n in counts}
        rows[annotator] = {"skips": sum(reasons.values()), "skip_reasons": reasons}
    return pd.DataFrame.from_dict(rows, orient="index")


def annotator_table(
    judgments: pd.DataFrame,
    skips: pd.DataFrame | None = None,
    pool=(),
    gap_minutes: int = SESSION_GAP_MINUTES,
    alpha: float = LEFT_BIAS_ALPHA,
) -> pd.DataFrame:
    """One row per annotator (the pool, anyone who judged, anyone who skipped), by name."""
    skips = skips if skips is not None else skips_frame([])
    names = sorted(set(pool) | set(judgments["annotator"]) | set(skips["annotator"]), key=str)
    grouped = judgments.groupby("annotator")
    table = pd.DataFrame(index=pd.Index(names, name="annotator", dtype=object))
    table["judgments"] = grouped.size()
    table["active_hours"] = active_hours(judgments, gap_minutes)
    table["median_time_ms"] = grouped["time_on_task_ms"].median()
    table["median_client_ms"] = grouped["client_time_ms"].median()
    table = table.join(gold_accuracy(judgments)).join(left_preference(judgments, alpha))
    table = table.join(skip_summary(skips))
    for column in ("judgments", "gold_n", "gold_correct", "non_tie", "left", "skips"):
        table[column] = table[column].fillna(0).astype("int64")
    hours = table["active_hours"]
    table["per_hour"] = (table["judgments"] / hours).where(hours > 0)
    table["left_flag"] = table["left_flag"].astype("boolean").fillna(False).astype(bool)
    table["skip_reasons"] = [r if isinstance(r, dict) else {} for r in table["skip_reasons"]]
    return table[TABLE_COLUMNS]


def overall_row(
    judgments: pd.DataFrame, skips: pd.DataFrame | None = None, alpha: float = LEFT_BIAS_ALPHA
) -> dict:
    """The same statistics over everyone at once (active hours summed per annotator)."""
    per_annotator = annotator_table(judgments, skips, alpha=alpha)
    everyone = "(all)"
    merged = annotator_table(
        judgments.assign(annotator=everyone),
        None if skips is None else skips.assign(annotator=everyone),
        pool=[everyone],
        alpha=alpha,
    )
    row = records(merged)[0]
    hours = float(per_annotator["active_hours"].fillna(0).sum())
    row["active_hours"] = hours or None
    row["per_hour"] = row["judgments"] / hours if hours else None
    return row


def records(table: pd.DataFrame) -> list[dict]:
    """Rows as plain dicts for templates: NaN becomes None, numpy scalars Python ones."""
    rows = []
    for name, values in table.iterrows():
        row = {"annotator": name}
        for column, value in values.items():
            if isinstance(value, dict):
                row[column] = value
            elif pd.isna(value):
                row[column] = None
            else:
                row[column] = value.item() if hasattr(value, "item") else value
        rows.append(row)
    return rows


# Database side: a fixed number of queries per campaign.


def load_judgments(campaign: Campaign) -> pd.DataFrame:
    rows = (
        Judgment.objects.filter(comparison__campaign=campaign)
        .order_by("pk")
        .values_list(*_JUDGMENT_LOOKUPS.values())
    )
    return judgments_frame(rows.iterator(chunk_size=5000))


def load_skips(campaign: Campaign) -> pd.DataFrame:
    rows = Assignment.objects.filter(
        comparison__campaign=campaign, state=Assignment.State.SKIPPED
    ).values_list("annotator__username", "skip_reason")
    return skips_frame(rows)
