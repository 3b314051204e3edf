"""Aggregated labels per comparison: the plurality of the votes and Dawid–Skene."""

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import dawid_skene
from .labels import label_values, unit_column

WINNER_CLASSES = np.array([-1, 0, 1])


def majority_labels(judgments: pd.DataFrame, unit: str | None = None) -> pd.DataFrame:
    """Per unit: votes for A / tie / B, the plurality winner3 label, and whether it was tied.

    A tied top is broken deterministically by the sign of the summed 5-point preferences of all
    the unit's votes (so one "A much better" outweighs one "B better", and an even split is a
    tie); ``majority_tied`` marks these units.
    """
    unit = unit_column(judgments, unit)
    preference = label_values(judgments, "preference5").to_numpy()
    winner = (np.sign(preference) + 1).astype(np.int64)
    codes, units = pd.factorize(judgments[unit], sort=True)
    votes = np.zeros((len(units), 3), dtype=np.int64)
    np.add.at(votes, (codes, winner), 1)
    top = votes.max(axis=1)
    tied = (votes == top[:, None]).sum(axis=1) > 1
    strength = np.sign(np.bincount(codes, weights=preference, minlength=len(units)))
    label = np.where(tied, strength, votes.argmax(axis=1) - 1).astype(np.int64)
    return pd.DataFrame(
        {
            "n_votes": votes.sum(axis=1),
            "votes_a": votes[:, 0],
            "votes_tie": votes[:, 1],
            "votes_b": votes[:, 2],
            "majority": label,
            "majority_tied": tied,
        },
        index=pd.Index(units, name=unit),
    )


@dataclass
class Aggregation:
    """Labels per comparison by majority and by Dawid–Skene (winner3: −1 A, 0 tie, 1 B)."""

    labels: pd.DataFrame  # majority_labels columns + ds_label, p_a, p_tie, p_b, disagree
    disagreement: float  # share of units where the majority and Dawid–Skene labels differ
    n_majority_ties: int  # units whose majority was tied and broken (see majority_labels)
    model: dawid_skene.DawidSkeneFit


def aggregate_labels(
    judgments: pd.DataFrame,
    unit: str | None = None,
    exclude_annotators=(),
    max_iter: int = 100,
    tol: float = 1e-7,
) -> Aggregation:
    """Majority and Dawid–Skene labels per comparison on pair-keyed winner3 votes, and the share
    of comparisons where they disagree. `exclude_annotators` drops (e.g. flagged) raters.

    Dawid–Skene is fitted on the mirrored votes (module docstring, "Orientation"): unit 2i is
    the i-th comparison (sorted by id), unit 2i + 1 its mirror with every vote negated, so the
    prior and the confusion matrices do not depend on which companion is A."""
    unit = unit_column(judgments, unit)
    kept = judgments[~judgments["annotator"].isin(list(exclude_annotators))]
    if kept.empty:
        raise ValueError("no judgments left to aggregate")
    table = majority_labels(kept, unit)
    winner = label_values(kept, "winner3").astype(np.int64).to_numpy()
    codes, _ = pd.factorize(kept[unit], sort=True)
    annotators = kept["annotator"].to_numpy()
    model = dawid_skene.fit(
        np.concatenate([2 * codes, 2 * codes + 1]),
        np.concatenate([annotators, annotators]),
        np.concatenate([winner, -winner]),
        WINNER_CLASSES,
        max_iter,
        tol,
        mirrored=True,
    )
    position = 2 * np.arange(len(table))
    posterior = model.posterior[position]
    labels = model.labels[position].astype(np.int64)
    # A and B exactly as likely (and more than a tie): no side wins, whichever companion is A.
    even = (np.abs(posterior[:, 0] - posterior[:, 2]) < 1e-12) & (posterior[:, 0] > posterior[:, 1])
    labels[even] = 0
    table["ds_label"] = labels
    for column, index in (("p_a", 0), ("p_tie", 1), ("p_b", 2)):
        table[column] = model.posterior[position, index]
    table["disagree"] = table["majority"] != table["ds_label"]
    return Aggregation(
        labels=table,
        disagreement=float(table["disagree"].mean()),
        n_majority_ties=int(table["majority_tied"].sum()),
        model=model,
    )
