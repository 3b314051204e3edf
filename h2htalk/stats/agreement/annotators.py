"""Annotator quality: agreement with the leave-one-out consensus of the others, gold
accuracy, position bias and speed, and the flags a researcher would act on."""

import numpy as np
import pandas as pd
from scipy.stats import beta as beta_distribution
from scipy.stats import binomtest

from .labels import label_values, unit_column


def loo_consensus(
    judgments: pd.DataFrame, unit: str | None = None, min_others: int = 2
) -> pd.DataFrame:
    """Per judgment, the leave-one-out consensus of the *other* annotators on the same unit.

    ``consensus``: their plurality winner3 label (−1/0/1), NaN when fewer than `min_others`
    others voted or their top labels tie; ``agrees``: this vote's winner3 equals it (NaN when no
    consensus); ``distance``: |own 5-point preference − mean of the others'| (NaN with no
    others). Same index as `judgments`.
    """
    unit = unit_column(judgments, unit)
    preference = label_values(judgments, "preference5").to_numpy()
    winner = (np.sign(preference) + 1).astype(np.int64)
    codes, units = pd.factorize(judgments[unit])
    votes = np.zeros((len(units), 3))
    np.add.at(votes, (codes, winner), 1.0)
    others = votes[codes]
    others[np.arange(len(codes)), winner] -= 1
    n_others = others.sum(axis=1)
    top = others.max(axis=1)
    unique_top = (others == top[:, None]).sum(axis=1) == 1
    has = unique_top & (n_others >= min_others)
    consensus = np.where(has, others.argmax(axis=1) - 1.0, np.nan)
    agrees = np.where(has, (winner - 1 == consensus).astype(float), np.nan)
    sums = np.bincount(codes, weights=preference, minlength=len(units))
    counts = np.bincount(codes, minlength=len(units))
    rest = counts[codes] - 1
    with np.errstate(divide="ignore", invalid="ignore"):
        mean_others = (sums[codes] - preference) / rest
    distance = np.where(rest > 0, np.abs(preference - mean_others), np.nan)
    return pd.DataFrame(
        {"consensus": consensus, "agrees": agrees, "distance": distance, "n_others": n_others},
        index=judgments.index,
    )


def _gold_upper_bound(correct: float, total: float, confidence: float) -> float:
    """One-sided Clopper–Pearson upper bound of an accuracy (NaN with no items)."""
    if total == 0:
        return float("nan")
    if correct >= total:
        return 1.0
    return float(beta_distribution.ppf(confidence, correct + 1, total - correct))


def annotator_report(
    judgments: pd.DataFrame,
    unit: str | None = None,
    *,
    min_others: int = 2,
    min_units: int = 20,
    mad_k: float = 2.5,
    min_gap: float = 0.10,
    agreement_floor: float = 0.40,
    min_gold: int = 10,
    gold_floor: float = 0.60,
    gold_confidence: float = 0.99,
    position_alpha: float = 0.01,
    position_band: tuple[float, float] = (0.35, 0.65),
    fast_ms: float = 5000,
    fast_ratio: float = 0.25,
) -> pd.DataFrame:
    """One row per annotator: agreement with the others, gold accuracy, position bias, speed,
    and a ``flag`` text saying why an annotator stands out ("" when nothing does).

    Columns: ``n``; ``n_consensus`` and ``consensus_agreement`` (share of their winner3 votes
    equal to the leave-one-out consensus of the others, see `loo_consensus`);
    ``consensus_distance`` (mean |5-point preference − others' mean|); ``n_gold``,
    ``gold_accuracy`` (sign of the preference equals the sign of gold_preference, a tie gold
    expects a tie); ``n_non_tie``, ``left_rate`` (share of non-tie votes for the left side),
    ``left_p`` (two-sided exact binomial test against 50%); ``median_time_ms`` and
    ``time_source``; ``flagged``; ``flag``; ``note`` (English texts); ``flag_items`` and
    ``note_items`` (the same as dicts: ``kind`` and its numbers, for pages in other languages).

    Flag rules (keyword thresholds):
    - consensus: with at least `min_units` consensus items, agreement below the pool median
      minus max(`mad_k` robust SDs (1.4826 × MAD), `min_gap`) (pool = annotators with
      `min_units`; 2.5 is Leys et al. 2013's moderately conservative outlier cut), or below
      `agreement_floor` (about chance for A/tie/B with few ties);
    - gold: at least `min_gold` gold votes and accuracy confidently below `gold_floor` (its
      one-sided `gold_confidence` Clopper–Pearson upper bound is under the floor);
    - position: `left_p` < `position_alpha` and `left_rate` outside `position_band`;
    - fast: median visible time below `fast_ms` (the browser's client_time_ms where reported,
      the server's lease time only as a fallback, see `visible_time`).

    ``flagged`` is true only for these reasons, the ones a researcher would act on (look at the
    annotator's work, exclude their judgments). Observations that are not reasons on their own
    go to ``note``: a median time above `fast_ms` but below `fast_ratio` × the pool's median of
    medians ("quicker than most"). ``time_source`` says which clock the median comes from
    (client, server, mixed, none).
    """
    table = _annotator_table(judgments, unit_column(judgments, unit), min_others)
    reasons = _consensus_reasons(table, min_units, mad_k, min_gap, agreement_floor)
    for name, row in table.iterrows():
        reasons[name] += _gold_reasons(row, min_gold, gold_floor, gold_confidence)
        reasons[name] += _position_reasons(row, position_alpha, position_band)
    notes = {name: [] for name in table.index}
    _time_reasons(table, reasons, notes, fast_ms, fast_ratio)
    table["flagged"] = [bool(reasons[name]) for name in table.index]
    table["flag"] = ["; ".join(map(english, reasons[name])) for name in table.index]
    table["note"] = ["; ".join(map(english, notes[name])) for name in table.index]
    table["flag_items"] = [reasons[name] for name in table.index]
    table["note_items"] = [notes[name] for name in table.index]
    return table


def english(item: dict) -> str:
    """The English text of one flag or note item (the pages translate the items themselves:
    scoring.agreement.flag_text)."""
    kind = item["kind"]
    if kind == "consensus":
        return (
            f"consensus: agrees with the others on {item['share']:.0%} of {item['n']} items "
            f"(pool median {item['median']:.0%}, flag below {item['threshold']:.0%})"
        )
    if kind == "gold":
        return (
            f"gold: {item['correct']} of {item['n']} gold items right ({item['share']:.0%}; "
            f"{item['confidence']:.0%} upper bound {item['upper']:.0%} < {item['floor']:.0%})"
        )
    if kind == "position":
        return (
            f"position: picks the left side in {item['share']:.0%} of {item['n']} non-tie "
            f"votes (binomial p = {item['p']:.1g}; expected {item['low']:.0%}–{item['high']:.0%})"
        )
    measured = TIME_SOURCES[item["source"]]
    if kind == "fast":
        return (
            f"fast: median time {item['seconds']:.1f} s ({measured}; flag below "
            f"{item['limit']:.1f} s)"
        )
    return (
        f"quicker than most: median time {item['seconds']:.1f} s ({measured}; pool "
        f"median {item['pool']:.1f} s)"
    )


def _annotator_table(judgments: pd.DataFrame, unit: str, min_others: int) -> pd.DataFrame:
    """The measured columns of `annotator_report`, one row per annotator (no flags yet)."""
    annotator = judgments["annotator"]
    table = pd.DataFrame({"n": judgments.groupby(annotator, sort=True).size()})
    table.index.name = "annotator"
    consensus = loo_consensus(judgments, unit, min_others)
    table["n_consensus"] = consensus["agrees"].notna().groupby(annotator).sum()
    table["consensus_agreement"] = consensus["agrees"].groupby(annotator).mean()
    table["consensus_distance"] = consensus["distance"].groupby(annotator).mean()
    _gold_columns(table, judgments)
    _position_columns(table, judgments)
    seconds, source = visible_time(judgments)
    table["median_time_ms"] = seconds.groupby(annotator).median().astype(float)
    table["time_source"] = source.groupby(annotator).agg(_time_source)
    for column in ("n_consensus", "n_gold", "n_non_tie"):
        table[column] = table[column].fillna(0).astype(np.int64)
    return table


def _gold_columns(table: pd.DataFrame, judgments: pd.DataFrame) -> None:
    """n_gold and gold_accuracy (0 and NaN without gold columns)."""
    annotator = judgments["annotator"]
    if {"is_gold", "gold_preference"} <= set(judgments.columns):
        gold = judgments["is_gold"].astype(bool) & judgments["gold_preference"].notna()
        preference = label_values(judgments, "preference5")
        right = (np.sign(preference) == np.sign(judgments["gold_preference"].astype(float)))[gold]
        table["n_gold"] = gold.groupby(annotator).sum()
        table["gold_accuracy"] = right.groupby(annotator[gold]).mean()
    else:
        table["n_gold"] = 0
        table["gold_accuracy"] = np.nan


def _position_columns(table: pd.DataFrame, judgments: pd.DataFrame) -> None:
    """n_non_tie, left_rate and left_p (0 and NaN without the screen preference)."""
    annotator = judgments["annotator"]
    if "screen_preference" in judgments.columns:
        screen = judgments["screen_preference"]
        non_tie = screen != 0
        table["n_non_tie"] = non_tie.groupby(annotator).sum()
        table["left_rate"] = (screen[non_tie] < 0).groupby(annotator[non_tie]).mean()
        left = (screen[non_tie] < 0).groupby(annotator[non_tie]).sum()
        table["left_p"] = [
            binomtest(int(left.get(name, 0)), int(n), 0.5).pvalue if n else np.nan
            for name, n in table["n_non_tie"].items()
        ]
    else:
        table["n_non_tie"] = 0
        table["left_rate"] = np.nan
        table["left_p"] = np.nan


def _consensus_reasons(
    table: pd.DataFrame, min_units: int, mad_k: float, min_gap: float, agreement_floor: float
) -> dict:
    """Per annotator, the consensus flag (a list with at most one text) of `annotator_report`."""
    reasons = {name: [] for name in table.index}
    pool = table.loc[table["n_consensus"] >= min_units, "consensus_agreement"].dropna()
    if not len(pool):
        return reasons
    median = float(pool.median())
    spread = 1.4826 * float((pool - median).abs().median())
    threshold = max(median - max(mad_k * spread, min_gap), agreement_floor)
    for name in pool.index:
        value = pool[name]
        if value < threshold:
            reasons[name].append(
                {
                    "kind": "consensus",
                    "share": float(value),
                    "n": int(table.at[name, "n_consensus"]),
                    "median": median,
                    "threshold": threshold,
                }
            )
    return reasons


def _gold_reasons(row: pd.Series, min_gold: int, floor: float, confidence: float) -> list[str]:
    n_gold = int(row["n_gold"])
    if n_gold < min_gold or np.isnan(row["gold_accuracy"]):
        return []
    correct = round(row["gold_accuracy"] * n_gold)
    upper = _gold_upper_bound(correct, n_gold, confidence)
    if not upper < floor:
        return []
    return [
        {
            "kind": "gold",
            "correct": int(correct),
            "n": n_gold,
            "share": float(row["gold_accuracy"]),
            "confidence": confidence,
            "upper": float(upper),
            "floor": floor,
        }
    ]


def _position_reasons(row: pd.Series, position_alpha: float, band: tuple) -> list[str]:
    low, high = band
    rate = row["left_rate"]
    if not (row["left_p"] < position_alpha and not low <= rate <= high):
        return []
    return [
        {
            "kind": "position",
            "share": float(rate),
            "n": int(row["n_non_tie"]),
            "p": float(row["left_p"]),
            "low": low,
            "high": high,
        }
    ]


def _time_reasons(
    table: pd.DataFrame, reasons: dict, notes: dict, fast_ms: float, fast_ratio: float
) -> None:
    """Add the "fast" flag to `reasons` and the "quicker than most" observation to `notes`."""
    medians = table["median_time_ms"].dropna()
    if not len(medians):
        return
    pool_median = float(medians.median())
    relative = fast_ratio * pool_median
    for name, value in medians.items():
        item = {"seconds": value / 1000, "source": table.at[name, "time_source"]}
        if value < fast_ms:
            reasons[name].append({"kind": "fast", **item, "limit": fast_ms / 1000})
        elif value < relative:
            notes[name].append({"kind": "quicker", **item, "pool": pool_median / 1000})


TIME_SOURCES = {
    "client": "visible time in the browser",
    "server": "server lease time, no browser time reported",
    "mixed": "browser time, server lease time where none was reported",
    "none": "no time recorded",
}


def visible_time(judgments: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Per judgment: the time the item was on screen (client_time_ms, measured in the browser)
    where reported, else the server's lease time (time_on_task_ms, issued → submitted, which
    also counts network and any wait before the page was shown); and which one it is."""
    nan = pd.Series(np.nan, index=judgments.index, dtype=float)
    client = pd.to_numeric(judgments.get("client_time_ms", nan), errors="coerce").astype(float)
    server = pd.to_numeric(judgments.get("time_on_task_ms", nan), errors="coerce").astype(float)
    source = pd.Series(
        np.where(client.notna(), "client", np.where(server.notna(), "server", "none")),
        index=judgments.index,
    )
    return client.fillna(server), source


def _time_source(sources: pd.Series) -> str:
    present = set(sources) - {"none"}
    if not present:
        return "none"
    return present.pop() if len(present) == 1 else "mixed"
