"""The calibrated-judge document built from a fit: cross-validated held-out numbers, the final
model on all comparisons, the composite's slope, the tie band, human–human agreement and the
provenance (`code_version`); and the report's reliability diagram.

The rest of a calibrated judge's life is in the modules beside this one: `document` (the schema
and its check), `prediction` (scoring pairs with a document), `versions` (storing and
importing), `access` (who sees which), `heldout` (validation on held-out humans), `fitting` (the
fit, inline or as a job), `report` (the pages' tables) and `routing` (sending comparisons to
humans). The statistics are in h2htalk.stats.calibration; the features in
scoring.metrics.features.
"""

import importlib.metadata
import os
import subprocess
from collections.abc import Mapping
from functools import cache
from html import escape

import numpy as np
import pandas as pd
import sklearn
from django.conf import settings
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe

from h2htalk.stats.calibration.data import design_matrix, fingerprint, votes_of
from h2htalk.stats.calibration.metrics import choose_tie_band
from h2htalk.stats.calibration.model import C_GRID, fit_model, fit_slope
from h2htalk.stats.leaderboard import json_safe
from scoring.calibration.document import MODEL_TEXT, NAME_LENGTH, SCHEMA, validate_document
from scoring.calibration.heldout import DEFAULT_FOLDS, heldout_validation, human_agreement
from scoring.metrics import features as feature_data
from scoring.models import JudgeConfig

MIN_COMPARISONS = 10  # fewer comparisons with judgments and features are too few to fit


# ---------------------------------------------------------------- provenance


def code_version() -> str:
    """H2HTALK_CODE_VERSION if set, else `git describe` of the checkout, else the package
    version."""
    return os.environ.get("H2HTALK_CODE_VERSION") or _git_or_package_version()


@cache
def _git_or_package_version() -> str:
    try:
        described = subprocess.run(
            ["git", "describe", "--tags", "--always", "--dirty"],  # noqa: S607
            cwd=settings.BASE_DIR,
            capture_output=True,
            text=True,
            timeout=3,
            check=True,
        ).stdout.strip()
        if described:
            return f"git {described}"
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        return "h2htalk-platform " + importlib.metadata.version("h2htalk-platform")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


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
        "feature_labels": {f: feature_data.LABELS.get(f, f) for f in features},
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
        raise feature_data.FeatureError(
            "cross-validation by scenario needs comparisons from at least two scenarios"
        )
    if len(frame) < MIN_COMPARISONS:
        raise feature_data.FeatureError(
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


# ---------------------------------------------------------------- report helpers

JUDGE_LABELS = {
    "raw": "Raw LLM judge",
    "composite": "Paper composite (slope fitted)",
    "calibrated": "Calibrated judge",
}
JUDGE_COLOURS = {"raw": "#c2571a", "composite": "#6b7785", "calibrated": "#2c5d8f"}


def reliability_svg(judges: Mapping[str, Mapping | None], size: int = 360) -> SafeString:
    """Reliability diagram: observed share of votes for A against the mean predicted p per
    bin, one line per judge; the diagonal is perfect calibration. Every text is escaped."""
    margin = 44
    plot = size - margin - 14

    def x(value):
        return margin + value * plot

    def y(value):
        return 10 + (1 - value) * plot

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {size} {size + 70}" '
        f'width="{size}" height="{size + 70}" role="img" aria-label="reliability diagram">',
        f'<rect x="{x(0)}" y="{y(1)}" width="{plot}" height="{plot}" fill="#fff" '
        'stroke="#ccd3db"/>',
        f'<line x1="{x(0)}" y1="{y(0)}" x2="{x(1)}" y2="{y(1)}" stroke="#bbb" '
        'stroke-dasharray="4 3"><title>perfect calibration</title></line>',
    ]
    for tick in (0, 0.25, 0.5, 0.75, 1):
        parts.append(
            f'<text x="{x(tick)}" y="{y(0) + 14}" font-size="10" text-anchor="middle">'
            f"{tick:g}</text>"
        )
        parts.append(
            f'<text x="{x(0) - 5}" y="{y(tick) + 3}" font-size="10" text-anchor="end">'
            f"{tick:g}</text>"
        )
    parts.append(
        f'<text x="{x(0.5)}" y="{y(0) + 28}" font-size="11" text-anchor="middle">'
        "predicted P(A preferred)</text>"
    )
    parts.append(
        f'<text x="12" y="{y(0.5)}" font-size="11" text-anchor="middle" '
        f'transform="rotate(-90 12 {y(0.5)})">observed share for A</text>'
    )
    legend_y = size + 4
    legend_x = margin
    for name, metrics in judges.items():
        if not metrics:
            continue
        colour = JUDGE_COLOURS.get(name, "#000")
        label = escape(JUDGE_LABELS.get(name, name))
        points = [row for row in metrics.get("reliability", []) if row.get("mean_p") is not None]
        if points:
            path = " ".join(f"{x(r['mean_p']):.1f},{y(r['observed']):.1f}" for r in points)
            parts.append(
                f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>'
            )
        for row in points:
            title = escape(
                f"{JUDGE_LABELS.get(name, name)}: bin {row['lo']:.1f}–{row['hi']:.1f}, "
                f"{row['comparisons']} comparisons, mean p {row['mean_p']:.3f}, "
                f"observed {row['observed']:.3f}"
            )
            parts.append(
                f'<circle cx="{x(row["mean_p"]):.1f}" cy="{y(row["observed"]):.1f}" r="3.5" '
                f'fill="{colour}"><title>{title}</title></circle>'
            )
        parts.append(
            f'<rect x="{legend_x}" y="{legend_y}" width="10" height="10" fill="{colour}"/>'
            f'<text x="{legend_x + 14}" y="{legend_y + 9}" font-size="11">{label}</text>'
        )
        legend_y += 16
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 - every text in it went through escape()
