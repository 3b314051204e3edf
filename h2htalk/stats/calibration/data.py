"""The comparison table a judge is calibrated on: votes per comparison, the soft targets, the
feature-difference matrix, and the fingerprint of the judgments behind it."""

import hashlib
from collections.abc import Iterable

import numpy as np
import pandas as pd

from ..agreement.aggregation import majority_labels


def votes_frame(judgments: pd.DataFrame, unit: str = "comparison") -> pd.DataFrame:
    """Per comparison from per-judgment rows (``comparison``, ``preference`` −2..2 pair-keyed):
    votes_a / votes_tie / votes_b, n_votes, mean_preference, majority (−1 A, 0 tie, 1 B) and
    majority_tied, as agreement.majority_labels counts them."""
    table = majority_labels(judgments, unit)
    mean = judgments.groupby(unit)["preference"].mean()
    table["mean_preference"] = mean.reindex(table.index).to_numpy(dtype=float)
    return table


def soft_target(votes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(share of votes for A with ties half, number of votes) from an n × 3 (A, tie, B) table."""
    votes = np.asarray(votes, dtype=float)
    n = votes.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        y = (votes[:, 0] + 0.5 * votes[:, 1]) / n
    return y, n


def votes_of(frame: pd.DataFrame) -> np.ndarray:
    return frame[["votes_a", "votes_tie", "votes_b"]].to_numpy(dtype=float)


def design_matrix(frame: pd.DataFrame, features: list[str]) -> np.ndarray:
    """The n × d matrix of feature differences (columns ``d_<feature>``), NaN → 0."""
    columns = [f"d_{name}" for name in features]
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"no column for {', '.join(missing)}")
    matrix = frame[columns].to_numpy(dtype=float) if columns else np.zeros((len(frame), 0))
    return np.where(np.isnan(matrix), 0.0, matrix)


def fingerprint(triples: Iterable[tuple[int, int, int]]) -> str:
    """sha256 of the sorted (comparison, annotator, preference) triples, one
    "comparison,annotator,preference" line each (integers, "\\n" after every line)."""
    digest = hashlib.sha256()
    for comparison, annotator, preference in sorted(
        (int(c), int(a), int(p)) for c, a, p in triples
    ):
        digest.update(f"{comparison},{annotator},{preference}\n".encode())
    return digest.hexdigest()
