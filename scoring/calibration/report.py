"""The tables of the calibration pages, read from a judge's stored document (the pages show
what the document says; nothing is recomputed)."""

from django.utils.translation import gettext_lazy as _

from h2htalk.meanings import MEANINGS
from scoring.calibration.forms import feature_label
from scoring.charts import RELIABILITY_SERIES
from scoring.metrics import catalogue

# (key in the held-out numbers of a judge, row label in the page's language, decimals)
METRIC_ROWS = [
    ("accuracy_without_ties", _("Accuracy vs human majority, ties left out"), 3),
    ("accuracy_with_ties", _("Accuracy vs human majority, with ties (tie band)"), 3),
    ("kappa", _("Cohen's κ vs human majority (A / tie / B)"), 3),
    ("log_loss", _("Log-loss over votes (lower is better)"), 3),
    ("brier", _("Brier score over votes (lower is better)"), 3),
    ("ece", _("Expected calibration error (10 bins; lower is better)"), 3),
    ("spearman", _("System level: Spearman ρ with the human ranking"), 3),
    ("kendall", _("System level: Kendall τ with the human ranking"), 3),
]


# The report's columns, in this order (labels as in the reliability diagram).
JUDGE_LABELS = {name: RELIABILITY_SERIES[name][0] for name in ("raw", "composite", "calibrated")}


def elo_label(name: str) -> str:
    """A column of the system-level ranking ("human", or a judge) in the page's language."""
    return _("Humans") if name == "human" else JUDGE_LABELS.get(name, name)


def heldout_judges(document: dict) -> dict:
    """The held-out numbers per judge (raw, composite, calibrated; {} when there are none)."""
    return (document.get("heldout") or {}).get("judges") or {}


def worse_than_composite(document: dict) -> bool:
    """True when the calibrated judge lost to the paper's composite held out."""
    comparison = (document.get("heldout") or {}).get("comparison") or {}
    return bool(comparison.get("composite", {}).get("worse"))


def metric_rows(document: dict) -> list[dict]:
    """The side-by-side rows of the report: one per metric, a cell per judge."""
    judges = heldout_judges(document)
    rows = []
    for key, label, digits in METRIC_ROWS:
        cells = []
        for name in JUDGE_LABELS:
            metrics = judges.get(name)
            value = metrics.get(key) if metrics else None
            text = "—" if value is None else f"{value:.{digits}f}"
            if key == "accuracy_with_ties" and metrics and value is not None:
                text += f" (δ {metrics.get('tie_band', 0):.2f})"
            cells.append(text)
        rows.append({"key": key, "label": label, "cells": cells, "meaning": MEANINGS[key][1]})
    return rows


def companion_rows(document: dict) -> list[dict]:
    """Per companion, its Elo strength from the humans and from each judge."""
    system = (document.get("heldout") or {}).get("system") or {}
    return [
        {
            "name": companion["name"],
            "elo": {name: values[i] for name, values in (system.get("elo") or {}).items()},
        }
        for i, companion in enumerate(system.get("companions") or [])
    ]


def weight_rows(document: dict) -> list[dict]:
    """Per feature, its label in the page's language (the document's `feature_labels` stay
    English), weight (standardised and per unit) and scale."""
    features = document["features"]
    return [
        {
            "feature": feature,
            "label": feature_label(feature) if feature in catalogue.LABELS else feature,
            "weight": weight,
            "per_unit": per_unit,
            "scale": scale,
        }
        for feature, weight, per_unit, scale in zip(
            features,
            document["weights"],
            document.get("weights_per_unit") or [None] * len(features),
            document["scaling"]["scale"],
            strict=True,
        )
    ]


def detail_context(judge, visible) -> dict:
    """The report page of one judge (without its diagram); `visible` are the calibrated judges
    the user may see, for the list of versions of the same name."""
    document = judge.document
    heldout = document.get("heldout") or {}
    versions = visible.filter(name=judge.name).order_by("-version")
    return {
        "judge": judge,
        "document": document,
        "heldout": heldout,
        "rows": metric_rows(document),
        "labels": list(JUDGE_LABELS.values()),
        "worse": worse_than_composite(document),
        "versus": heldout.get("comparison") or {},
        "humans": document.get("human_agreement") or {},
        "companions": companion_rows(document),
        "elo_labels": [elo_label(name) for name in (heldout.get("system") or {}).get("elo") or {}],
        "weights": weight_rows(document),
        "versions": list(versions.values("pk", "version", "created_at")),
    }


def list_rows(visible) -> list:
    """The calibrated judges of the list page, each with its held-out summary and whether it
    lost to the composite."""
    judges = list(visible.select_related("campaign", "created_by").order_by("name", "-version"))
    for judge in judges:
        judge.summary = heldout_judges(judge.document)
        judge.worse = worse_than_composite(judge.document)
    return judges
