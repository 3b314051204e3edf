"""Judgments → reliability data: the pair-keyed preference, the labels and their level of
measurement, raters × units matrices (see the package docstring for columns and labels)."""

import re

import numpy as np
import pandas as pd

LABEL_LEVELS = {
    "preference5": "ordinal",
    "winner3": "nominal",
    "outcome4": "nominal",
    "screen5": "ordinal",
    "screen3": "nominal",
}
RATING_LABEL = re.compile(r"^[ab]_\w+$")
RATING_DIMENSION_LABEL = re.compile(r"^rating_(\w+)$")
PAIR_LABELS = ("preference5", "winner3")  # pair-keyed, symmetric about 0: mirrored as −v
# outcome4: winner3 with "both unacceptable" as a category of its own, coded BOTH_UNACCEPTABLE;
# mirrored as A ↔ B (−1 ↔ 1) with tie and both unacceptable fixed.
BOTH_UNACCEPTABLE = 2.0
MIRRORED_LABELS = (*PAIR_LABELS, "outcome4")


def pair_preference(screen_preference, left_is_a) -> np.ndarray:
    """Screen preference (negative = left better) → pair-keyed (negative = A better)."""
    screen = np.asarray(screen_preference)
    return np.where(np.asarray(left_is_a, dtype=bool), screen, -screen)


def check_keying(judgments: pd.DataFrame) -> None:
    """Raise ValueError when ``preference`` disagrees with ``screen_preference``/``left_is_a``."""
    needed = {"preference", "screen_preference", "left_is_a"}
    if not needed <= set(judgments.columns):
        return
    expected = pair_preference(judgments["screen_preference"], judgments["left_is_a"])
    wrong = np.asarray(judgments["preference"]) != expected
    if wrong.any():
        raise ValueError(
            f"{int(wrong.sum())} of {len(judgments)} judgments have a pair-keyed preference "
            "that does not follow from screen_preference and left_is_a"
        )


def unit_column(judgments: pd.DataFrame, unit: str | None) -> str:
    """The column that names the unit: `unit` if given, else the comparison column (exports
    call it ``comparison``, the database frames ``comparison_id``)."""
    if unit is not None:
        return unit
    for name in ("comparison", "comparison_id"):
        if name in judgments.columns:
            return name
    raise ValueError("judgments need a 'comparison' (or 'comparison_id') column")


def pair_keyed_preference(judgments: pd.DataFrame) -> pd.Series:
    """The ``preference`` column, or the one derived from the screen preference and the side
    of A when a frame has only those (every statistic uses the pair-keyed value)."""
    if "preference" in judgments.columns:
        return judgments["preference"]
    if {"screen_preference", "left_is_a"} <= set(judgments.columns):
        values = pair_preference(judgments["screen_preference"], judgments["left_is_a"])
        return pd.Series(values, index=judgments.index, name="preference")
    raise ValueError("judgments need 'preference' (or 'screen_preference' and 'left_is_a')")


def expand_ratings(judgments: pd.DataFrame, column: str = "ratings") -> pd.DataFrame:
    """Copy with the ``ratings`` dicts spread into ``a_<dim>`` / ``b_<dim>`` float columns."""
    frame = judgments.copy()
    if column not in frame.columns:
        return frame
    values: dict[str, list] = {}
    for row, ratings in enumerate(frame[column]):
        if not isinstance(ratings, dict):
            continue
        for side in ("a", "b"):
            for dimension, value in (ratings.get(side) or {}).items():
                name = f"{side}_{dimension}"
                if name not in values:  # (not setdefault: its default would be built every time)
                    values[name] = [np.nan] * len(frame)
                values[name][row] = value
    for name in sorted(values):
        frame[name] = pd.to_numeric(pd.Series(values[name], index=frame.index), errors="coerce")
    return frame


def rating_labels(judgments: pd.DataFrame) -> list[str]:
    """The rating columns (``a_<dim>``, ``b_<dim>``) present."""
    return [c for c in judgments.columns if RATING_LABEL.match(str(c))]


def rating_dimension_labels(judgments: pd.DataFrame) -> list[str]:
    """``rating_<dim>`` for every dimension with both ``a_<dim>`` and ``b_<dim>`` columns."""
    columns = set(judgments.columns)
    return [
        f"rating_{c[2:]}"
        for c in rating_labels(judgments)
        if c.startswith("a_") and f"b_{c[2:]}" in columns
    ]


def label_level(label: str) -> str:
    """Level of measurement α uses for a label (see the module docstring)."""
    if label in LABEL_LEVELS:
        return LABEL_LEVELS[label]
    if RATING_LABEL.match(label) or RATING_DIMENSION_LABEL.match(label):
        return "interval"
    raise ValueError(f"unknown label {label!r}")


def label_values(judgments: pd.DataFrame, label: str) -> pd.Series:
    """One value per judgment for `label` (NaN where a rating was not given)."""
    if label == "preference5":
        check_keying(judgments)
        return pair_keyed_preference(judgments).astype(float)
    if label == "winner3":
        check_keying(judgments)
        return np.sign(pair_keyed_preference(judgments).astype(float))
    if label == "outcome4":
        winner = label_values(judgments, "winner3")
        if "both_unacceptable" not in judgments.columns:
            return winner
        return winner.where(~judgments["both_unacceptable"].astype(bool), BOTH_UNACCEPTABLE)
    if label == "screen5":
        return judgments["screen_preference"].astype(float)
    if label == "screen3":
        return np.sign(judgments["screen_preference"].astype(float))
    label_level(label)  # raises on unknown labels
    if label not in judgments.columns:
        raise ValueError(f"no rating column {label!r} (see expand_ratings)")
    return pd.to_numeric(judgments[label], errors="coerce").astype(float)


def rating_matrix(
    judgments: pd.DataFrame, label: str, unit: str | None = None, rater: str = "annotator"
) -> pd.DataFrame:
    """Raters × units matrix of `label` (NaN = not rated), rows and columns sorted by id.

    The preference labels are keyed by the model pair (see the module docstring). A rater
    judging a unit twice is an error.
    """
    unit = unit_column(judgments, unit)
    values = label_values(judgments, label).to_numpy()
    rater_codes, raters = pd.factorize(judgments[rater], sort=True)
    unit_codes, units = pd.factorize(judgments[unit], sort=True)
    cell = rater_codes.astype(np.int64) * len(units) + unit_codes
    if len(np.unique(cell)) != len(cell):
        raise ValueError(f"some {rater} judged the same {unit} more than once")
    matrix = np.full((len(raters), len(units)), np.nan)
    matrix[rater_codes, unit_codes] = values
    return pd.DataFrame(
        matrix, index=pd.Index(raters, name=rater), columns=pd.Index(units, name=unit)
    )


def preference_reliability(
    judgments: pd.DataFrame, label: str, unit: str | None = None
) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """The reliability data of `label` as (units, their mirrors), raters × comparisons each.

    preference5 / winner3: (v, −v); outcome4: A and B swapped, the rest kept; ``rating_<dim>``: (rating of A, rating of B). Labels with a
    natural orientation (the screen labels) or a single side (``a_<dim>``) have no mirror:
    (matrix, None).
    """
    if label in PAIR_LABELS:
        matrix = rating_matrix(judgments, label, unit)
        return matrix, -matrix
    if label == "outcome4":
        matrix = rating_matrix(judgments, label, unit)
        return matrix, matrix.where(matrix == BOTH_UNACCEPTABLE, -matrix)
    match = RATING_DIMENSION_LABEL.match(label)
    if match:
        dimension = match.group(1)
        return (
            rating_matrix(judgments, f"a_{dimension}", unit),
            rating_matrix(judgments, f"b_{dimension}", unit),
        )
    return rating_matrix(judgments, label, unit), None
