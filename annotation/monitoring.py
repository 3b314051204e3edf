"""Annotator monitoring for a campaign: the agreement report's numbers and flags per annotator,
with the campaign page's own additions (pace per hour, the server's lease time, skips).

Quality and flags come from h2htalk.stats.agreement.annotators.annotator_report, the function
the agreement report uses, on the same judgments: an annotator flagged on the agreement page is
flagged here and in the progress API, for the same reason in the same words (consensus, gold,
position, fast: see that function). Only the additions are defined here:

- per hour: judgments over the hours spent on them, each judgment counting its visible time
  (the browser's client_time_ms, the server's lease time where none was reported: the clock of
  the median and of the "fast" flag). Breaks and time between items do not count, so the pace
  and the median tell the same story: a rater with about 45 s per item does about 80 an hour.
- median lease time: time_on_task_ms (issued → submitted, server clock), which also counts
  network and any wait before the page was shown.

The statistics are plain functions over a pandas DataFrame of judgments (columns
JUDGMENT_COLUMNS; build one with `judgments_frame`); they need no database. `load_judgments`
and `load_skips` read a campaign in a fixed number of queries, whatever its size.
"""

import pandas as pd

from h2htalk.stats.agreement.annotators import annotator_report, visible_time

from .care import RATHER_NOT
from .models import Assignment, Campaign, Judgment

MS_PER_HOUR = 3_600_000

# frame column -> the Judgment lookup `load_judgments` reads it from
_JUDGMENT_LOOKUPS = {
    "annotator": "annotator__username",
    "comparison_id": "comparison_id",
    "screen_preference": "screen_preference",
    "preference": "preference",
    "time_on_task_ms": "time_on_task_ms",
    "client_time_ms": "client_time_ms",
    "is_gold": "comparison__is_gold",
    "gold_preference": "comparison__gold_preference",
}
JUDGMENT_COLUMNS = list(_JUDGMENT_LOOKUPS)
SKIP_COLUMNS = ["annotator", "skip_reason"]
COUNT_COLUMNS = ["judgments", "n_consensus", "gold_n", "gold_correct", "non_tie", "left"]
TABLE_COLUMNS = [
    "judgments",
    "hours_on_items",
    "per_hour",
    "median_time_ms",
    "time_source",
    "median_server_ms",
    "n_consensus",
    "consensus_agreement",
    "gold_n",
    "gold_correct",
    "gold_accuracy",
    "non_tie",
    "left",
    "left_rate",
    "left_p",
    "flagged",
    "flag",
    "note",
    "skips",
    "skip_reasons",
]


def judgments_frame(records) -> pd.DataFrame:
    """A judgments DataFrame with the expected columns and types, from dicts or tuples."""
    frame = pd.DataFrame.from_records(list(records), columns=JUDGMENT_COLUMNS)
    frame["annotator"] = frame["annotator"].astype(object)
    for column in ("comparison_id", "screen_preference", "preference"):
        frame[column] = pd.to_numeric(frame[column]).astype("int64")
    for column in ("time_on_task_ms", "client_time_ms", "gold_preference"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype("float64")
    frame["is_gold"] = frame["is_gold"].astype(bool)
    return frame


def skips_frame(records) -> pd.DataFrame:
    frame = pd.DataFrame.from_records(list(records), columns=SKIP_COLUMNS)
    frame["annotator"] = frame["annotator"].astype(object)
    frame["skip_reason"] = frame["skip_reason"].astype(object)
    return frame


def pace(judgments: pd.DataFrame) -> pd.DataFrame:
    """Per annotator: hours spent on items (the sum of visible times) and judgments per hour
    of them (NaN without a time); the median of the server's lease time."""
    annotator = judgments["annotator"]
    ms, _source = visible_time(judgments)
    timed = ms.notna().groupby(annotator).sum()
    hours = (ms.fillna(0) / MS_PER_HOUR).groupby(annotator).sum()
    return pd.DataFrame(
        {
            "hours_on_items": hours.where(timed > 0),
            "per_hour": (timed / hours).where(hours > 0),
            "median_server_ms": judgments["time_on_task_ms"].groupby(annotator).median(),
        }
    )


def quality(judgments: pd.DataFrame) -> pd.DataFrame:
    """Per annotator: the agreement report's columns and flags (annotator_report), under the
    monitoring table's names."""
    report = annotator_report(judgments)
    return pd.DataFrame(
        {
            "judgments": report["n"],
            "median_time_ms": report["median_time_ms"],
            "time_source": report["time_source"],
            "n_consensus": report["n_consensus"],
            "consensus_agreement": report["consensus_agreement"],
            "gold_n": report["n_gold"],
            "gold_correct": (report["gold_accuracy"] * report["n_gold"]).round(),
            "gold_accuracy": report["gold_accuracy"],
            "non_tie": report["n_non_tie"],
            "left": (report["left_rate"] * report["n_non_tie"]).round(),
            "left_rate": report["left_rate"],
            "left_p": report["left_p"],
            "flagged": report["flagged"],
            "flag": report["flag"],
            "note": report["note"],
            "flag_items": report["flag_items"],
            "note_items": report["note_items"],
        }
    )


def skip_summary(skips: pd.DataFrame) -> pd.DataFrame:
    """Per annotator: skips, and the reason codes (the part before ':') with their counts.
    "I'd rather not" (annotation.care) is no skip: it never counts against a rater, and the
    exposure table counts it."""
    codes = skips["skip_reason"].fillna("").str.split(":", n=1).str[0].str.strip()
    skips, codes = skips[codes != RATHER_NOT], codes[codes != RATHER_NOT]
    if skips.empty:
        return pd.DataFrame({"skips": pd.Series(dtype="int64"), "skip_reasons": []})
    codes = codes.replace("", "unknown")
    rows = {}
    for annotator, group in codes.groupby(skips["annotator"]):
        counts = sorted(group.value_counts().items(), key=lambda kv: (-kv[1], kv[0]))
        reasons = {str(code): int(n) for code, n in counts}
        rows[annotator] = {"skips": sum(reasons.values()), "skip_reasons": reasons}
    return pd.DataFrame.from_dict(rows, orient="index")


def annotator_table(
    judgments: pd.DataFrame, skips: pd.DataFrame | None = None, pool=()
) -> pd.DataFrame:
    """One row per annotator (the pool, anyone who judged, anyone who skipped), by name."""
    skips = skips if skips is not None else skips_frame([])
    names = sorted(set(pool) | set(judgments["annotator"]) | set(skips["annotator"]), key=str)
    table = pd.DataFrame(index=pd.Index(names, name="annotator", dtype=object))
    if len(judgments):
        table = table.join(quality(judgments)).join(pace(judgments))
    table = table.join(skip_summary(skips)).reindex(columns=TABLE_COLUMNS)
    for column in (*COUNT_COLUMNS, "skips"):
        table[column] = table[column].fillna(0).astype("int64")
    table["flagged"] = table["flagged"].astype("boolean").fillna(False).astype(bool)
    for column in ("flag", "note"):
        table[column] = table[column].astype(object).fillna("")
    table["time_source"] = table["time_source"].astype(object).fillna("none")
    table["skip_reasons"] = [r if isinstance(r, dict) else {} for r in table["skip_reasons"]]
    return table


def overall_row(judgments: pd.DataFrame, skips: pd.DataFrame | None = None) -> dict:
    """The same numbers over everyone's judgments at once (hours on items summed; the pooled
    consensus agreement is the share of all votes that match the others'). No flags: a flag
    is about one annotator against the pool."""
    everyone = "(all)"
    merged = annotator_table(
        judgments.assign(annotator=everyone),
        None if skips is None else skips.assign(annotator=everyone),
        pool=[everyone],
    )
    return records(merged)[0] | {"flagged": False, "flag": "", "note": ""}


def records(table: pd.DataFrame) -> list[dict]:
    """Rows as plain dicts for templates: NaN becomes None, numpy scalars Python ones."""
    rows = []
    for name, values in table.iterrows():
        row = {"annotator": name}
        for column, value in values.items():
            if isinstance(value, dict | str):
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
