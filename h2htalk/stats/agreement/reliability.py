"""The agreement table of every report: one row per label, α with its interval, percent
agreement and Fleiss' κ, all on the mirrored reliability data (package docstring, "Orientation")."""

import numpy as np
import pandas as pd

from .coefficients import fleiss_kappa, percent_agreement
from .krippendorff_alpha import alpha_with_ci, paired_alpha_with_ci
from .labels import (
    MIRRORED_LABELS,
    PAIR_LABELS,
    label_level,
    preference_reliability,
    rating_dimension_labels,
)


def label_agreement(
    judgments: pd.DataFrame,
    labels: list[str] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    ci: float = 0.95,
) -> pd.DataFrame:
    """The agreement figures of every report (agreement page, API, command, calibration
    document): one row per label with level, α and its `ci` bootstrap interval, units,
    pairable values, percent agreement and Fleiss' κ, all on the mirrored reliability data
    (`preference_reliability`, `paired_alpha_with_ci`). Default labels: preference5, winner3
    and ``rating_<dim>`` for every rated dimension."""
    if labels is None:
        labels = ["preference5", "winner3", *rating_dimension_labels(judgments)]
    rows = []
    for label in labels:
        first, second = preference_reliability(judgments, label)
        level = label_level(label)
        if second is None:
            matrix = first.to_numpy(dtype=float)
            result = alpha_with_ci(matrix, level, n_boot=n_boot, seed=seed, ci=ci)
        else:
            pair = (first.to_numpy(dtype=float), second.to_numpy(dtype=float))
            mirror = label in PAIR_LABELS
            matrix = np.hstack(pair)
            result = paired_alpha_with_ci(
                pair[0],
                None if mirror else pair[1],
                level=level,
                n_boot=n_boot,
                seed=seed,
                ci=ci,
                mirrored=label in MIRRORED_LABELS,
            )
        fleiss = fleiss_kappa(matrix) if np.isfinite(matrix).any() else None
        fleiss_units = fleiss.n_units if fleiss else 0
        if second is not None and label in MIRRORED_LABELS:
            fleiss_units //= 2  # a comparison and its mirror
        rows.append(
            {
                "label": label,
                "level": level,
                "alpha": result.alpha,
                "low": result.low,
                "high": result.high,
                "ci": ci,
                "n_units": result.n_units,
                "n_pairable": result.n_pairable,
                "n_boot": result.n_boot,
                "percent_agreement": percent_agreement(matrix)
                if np.isfinite(matrix).any()
                else float("nan"),
                "fleiss_kappa": fleiss.kappa if fleiss else float("nan"),
                "fleiss_units": fleiss_units,
            }
        )
    return pd.DataFrame(rows).set_index("label")
