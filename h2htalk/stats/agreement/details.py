"""What goes with a vote beside its preference: the reasons given for the preferred response,
per companion, and how often a vote agrees with the others at each confidence level.

Reasons are stored of the preferred response (never a screen side), so the companion they go
with is the preferred one: companion A when the pair-keyed preference is negative, B when
positive; a tie or "both unacceptable" has none. Swapping the screen sides or renumbering the
companions changes nothing here (`preferred_companion` reads the pair-keyed preference with the
companions' names, so both swap together).

Columns: ``preference``, ``companion_a``, ``companion_b``, ``reasons`` (lists of keys),
``both_unacceptable`` (optional); ``confidence`` (1–3 or NaN) and the unit column for
`agreement_by_confidence`.
"""

import numpy as np
import pandas as pd

from .annotators import loo_consensus
from .labels import pair_keyed_preference


def preferred_companion(judgments: pd.DataFrame) -> pd.Series:
    """The companion each vote preferred (None on a tie or with "both unacceptable")."""
    preference = pair_keyed_preference(judgments).to_numpy()
    chosen = np.where(
        preference < 0,
        judgments["companion_a"].to_numpy(object),
        np.where(preference > 0, judgments["companion_b"].to_numpy(object), None),
    )
    if "both_unacceptable" in judgments.columns:
        chosen = np.where(judgments["both_unacceptable"].astype(bool), None, chosen)
    return pd.Series(chosen, index=judgments.index, name="preferred")


def reasons_by_companion(judgments: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per companion (rows, sorted by name): ``preferred`` (votes preferring it),
    ``with_reasons`` (of those, votes that gave a reason) and per reason key (columns, in the
    order of `keys`, then any other key found) the number of those votes that gave it."""
    preferred = preferred_companion(judgments)
    kept = preferred.notna()
    rows = pd.DataFrame(
        {
            "companion": preferred[kept].astype(str),
            "reasons": judgments.loc[kept, "reasons"].map(lambda r: list(r or [])),
        }
    )
    found = sorted({key for given in rows["reasons"] for key in given} - set(keys))
    columns = [*keys, *found]
    counts = pd.DataFrame(
        [[int(key in given) for key in columns] for given in rows["reasons"]],
        index=rows.index,
        columns=columns,
        dtype=np.int64,
    )
    counts["companion"] = rows["companion"]
    counts["preferred"] = 1
    counts["with_reasons"] = rows["reasons"].map(bool).astype(np.int64)
    table = counts.groupby("companion").sum()
    return table[["preferred", "with_reasons", *columns]].sort_index()


def agreement_by_confidence(judgments: pd.DataFrame, unit: str | None = None) -> pd.DataFrame:
    """Per confidence level given (1–3; rows): ``n`` votes, ``n_consensus`` of them on a unit
    where the others have a consensus (`annotators.loo_consensus`), and ``agreement``, the
    share of those that agree with it (NaN with none)."""
    if "confidence" not in judgments.columns:
        return pd.DataFrame(columns=["n", "n_consensus", "agreement"])
    consensus = loo_consensus(judgments, unit)
    frame = pd.DataFrame(
        {"confidence": pd.to_numeric(judgments["confidence"], errors="coerce")},
        index=judgments.index,
    ).join(consensus[["agrees"]])
    frame = frame[frame["confidence"].notna()]
    grouped = frame.groupby(frame["confidence"].astype(int))
    table = pd.DataFrame(
        {
            "n": grouped.size(),
            "n_consensus": grouped["agrees"].count(),
            "agreement": grouped["agrees"].mean(),
        }
    )
    table.index.name = "confidence"
    return table
