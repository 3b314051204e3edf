"""The calibrated-judge document built from a fit: cross-validated held-out numbers, the final
model on all comparisons, the composite's slope, the tie band, human–human agreement and the
provenance (`h2htalk.provenance.code_version`).

The rest of a calibrated judge's life is in the modules beside this one: `document` (the schema
and its check), `prediction` (scoring pairs with a document), `versions` (storing and
importing), `access` (who sees which), `heldout` (validation on held-out humans), `fitting` (the
fit, inline or as a job), `report` (the pages' tables) and `routing` (sending comparisons to
humans). The statistics are in h2htalk.stats.calibration; the features in
scoring.metrics.features.
"""

import numpy as np
import pandas as pd
import sklearn
from django.utils import timezone

from h2htalk.provenance import code_version
from h2htalk.stats.calibration.data import design_matrix, fingerprint, votes_of
from h2htalk.stats.calibration.metrics import choose_tie_band
from h2htalk.stats.calibration.model import C_GRID, fit_model, fit_slope
from h2htalk.stats.leaderboard import json_safe
from scoring.calibration.document import (
    DEFAULT_FOLDS,
    MODEL_TEXT,
    NAME_LENGTH,
    SCHEMA,
    validate_document,
)
from scoring.calibration.heldout import heldout_validation, human_agreement
from scoring.metrics import catalogue
from scoring.models import JudgeConfig

MIN_COMPARISONS = 10  # fewer comparisons with judgments and features are too few to fit


# ---------------------------------------------------------------- the document of a fit


def build_document(
    frame: pd.DataFrame,
    features: list[str],
    judgments: pd.DataFrame,
    *,
    campaign: dict,
    judge: JudgeConfig | None,
    composite_note: str,
    name: str,
    metrics_profile: str = "platform",
    left_out: dict | None = None,
    folds: int = DEFAULT_FOLDS,
    seed: int = 0,
    progress=None,
) -> dict:
    """The calibrated-judge document (version 0 until stored) from a comparison table (see
    features.comparison_table) and the judgments behind it (comparison, annotator,
    preference): nested GroupKFold cross-validation (held-out numbers of raw, composite and
    calibrated), the final model on all comparisons (C again by GroupKFold CV), the composite's
    slope and the tie band on all comparisons, and human–human agreement."""

    def step(done, total, message):
        if progress:
            progress(done, total, message)

    _check_enough(frame)
    result, heldout = heldout_validation(
        frame, features, folds, seed, lambda done, total, message: step(done, total + 2, message)
    )
    step(result.n_folds, result.n_folds + 2, "final model on all comparisons")
    final_model = _final_model_fields(frame, features, folds, seed)
    step(result.n_folds + 1, result.n_folds + 2, "human–human agreement")
    document = {
        "schema": SCHEMA,
        "name": name.strip()[:NAME_LENGTH],
        "version": 0,  # set when stored
        "created_at": timezone.now().isoformat(),
        "code_version": code_version(),
        "model": MODEL_TEXT,
        "features": list(features),
        "metrics_profile": metrics_profile,
        "feature_labels": {f: catalogue.LABELS.get(f, f) for f in features},
        **final_model,
        "training": _training_fields(frame, judgments, campaign, left_out),
        "composite": _composite_fields(frame, composite_note, "composite" in result.judges),
        "judge": {"config": judge.name, "mode": judge.mode} if judge else None,
        "heldout": heldout,
        "human_agreement": human_agreement(judgments),
    }
    document = json_safe(document)
    validate_document({**document, "version": 1})
    step(result.n_folds + 2, result.n_folds + 2, "saving")
    return document


def _check_enough(frame: pd.DataFrame) -> None:
    """FeatureError (said on the page) when the table is too small to cross-validate."""
    if frame["scenario"].nunique() < 2:
        raise catalogue.FeatureError(
            "cross-validation by scenario needs comparisons from at least two scenarios"
        )
    if len(frame) < MIN_COMPARISONS:
        raise catalogue.FeatureError(
            f"only {len(frame)} comparison(s) with human judgments and features: too few to fit"
        )


def _final_model_fields(frame, features, folds: int, seed: int) -> dict:
    """The final model, fitted on all comparisons (C again by GroupKFold CV), as the document
    holds it: scaling, weights, tie band, regularisation."""
    X = design_matrix(frame, features)
    model, cv_losses = fit_model(
        X, votes_of(frame), frame["scenario"].to_numpy(), features, folds=folds, seed=seed
    )
    return {
        "scaling": {"mean": _floats(model.mean), "scale": _floats(model.scale)},
        "weights": _floats(model.weights),
        "weights_per_unit": _floats(model.raw_weights),
        "intercept": float(model.intercept),
        "tie_band": choose_tie_band(model.predict(X), frame["majority"].to_numpy()),
        "regularisation": {
            "penalty": "l2",
            "C": model.C,
            "grid": list(C_GRID),
            "cv_log_loss": cv_losses,
            "cv": f"{min(folds, frame['scenario'].nunique())}-fold GroupKFold by scenario",
            "fit_intercept": False,
            "library": f"scikit-learn {sklearn.__version__} LogisticRegression (newton-cholesky)",
        },
    }


def _composite_fields(frame: pd.DataFrame, note: str, has_composite: bool) -> dict:
    """The paper composite: its note, and its one slope fitted on all comparisons."""
    slope = (
        fit_slope(frame["composite_diff"].to_numpy(), votes_of(frame)) if has_composite else None
    )
    return {
        "note": note,
        "slope": slope,
        "heldout": "σ(s · (composite A − composite B)), s fitted on the training folds",
    }


def _training_fields(frame, judgments, campaign: dict, left_out: dict | None) -> dict:
    """What the judge was fitted on, with the fingerprint of the judgments used."""
    return {
        "campaign": campaign,
        "judgments": len(judgments),
        "comparisons": len(frame),
        "scenarios": int(frame["scenario"].nunique()),
        "fingerprint": fingerprint(
            judgments[["comparison", "annotator", "preference"]].itertuples(index=False, name=None)
        ),
        "fingerprint_of": "sha256 of the sorted 'comparison id,annotator id,preference' "
        "lines (one per judgment used, newline-terminated)",
        "left_out": left_out or {},
        "targets": "each vote an outcome: A better 1, B better 0, tie 1/2",
    }


def _floats(values) -> list[float]:
    return [float(v) for v in np.asarray(values, dtype=float)]
