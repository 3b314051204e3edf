"""Scoring with a calibrated judge: `score` (one pair) and `score_frames` (many) are the only way a
document turns features into a probability; the report page, the API, the import round trip,
routing and releases all use them."""

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.special import expit

from h2htalk.stats.calibration.decision import linear_decision
from scoring.calibration.document import DocumentError, metrics_profile
from scoring.metrics import features as feature_data
from scoring.metrics.catalogue import FeatureError
from scoring.models import JudgeConfig


def score_frames(document: Mapping, a: pd.DataFrame, b: pd.DataFrame) -> np.ndarray:
    """P(A over B) for row i of `a` against row i of `b` (columns: feature names; a missing
    column or value gives Δ = 0)."""
    names = list(document["features"])
    n = len(a)
    X = np.zeros((n, len(names)))
    for k, name in enumerate(names):
        if name in a.columns and name in b.columns:
            X[:, k] = pd.to_numeric(a[name], errors="coerce").to_numpy(dtype=float) - pd.to_numeric(
                b[name], errors="coerce"
            ).to_numpy(dtype=float)
        else:
            X[:, k] = np.nan
    scaling = document["scaling"]
    z = linear_decision(
        X, scaling["mean"], scaling["scale"], document["weights"], document["intercept"]
    )
    return expit(z)


def score(document: Mapping, features_a: Mapping, features_b: Mapping) -> float:
    """P(humans prefer A over B) from two {feature: value} dicts (see MODEL_TEXT)."""
    a = pd.DataFrame([{k: _float(v) for k, v in features_a.items()}])
    b = pd.DataFrame([{k: _float(v) for k, v in features_b.items()}])
    return float(score_frames(document, a, b)[0])


def _float(value) -> float:
    if value is None or isinstance(value, bool):
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def judge_config_of(document: Mapping) -> JudgeConfig | None:
    """The JudgeConfig the document's judge features come from (None: metrics only)."""
    uses_judge = any(f.startswith("judge_") for f in document["features"])
    judge = document.get("judge")
    if not uses_judge:
        return None
    config = JudgeConfig.objects.filter(name=judge["config"]).first() if judge else None
    if config is None:
        raise DocumentError(
            f"the judge config {judge['config'] if judge else '?'} this judge was fitted with is "
            "not in this database: its rubric/pairwise features cannot be computed"
        )
    return config


def check_profile(document: Mapping, names) -> None:
    """DocumentError when stored metrics are of another profile than the judge was fitted on
    (its weights are of that profile's scale)."""
    wanted = metrics_profile(document)
    found = sorted({n for n in names if isinstance(n, str)} - {wanted})
    if found:
        raise DocumentError(
            f"this judge was fitted on reference metrics of the {wanted} profile, but the "
            f"responses' stored metrics are of the {', '.join(found)} profile: compute them "
            f"with the {wanted} profile"
        )


def score_pairs(document: Mapping, pairs) -> tuple[np.ndarray, feature_data.Sides]:
    """P(A over B) for (response a id, response b id) pairs from the database (NaN where a
    feature source is missing: no metrics, or no verdict of the document's judge); DocumentError
    when the stored metrics are of another profile than the document's."""
    try:
        sides = feature_data.side_features(pairs, judge_config_of(document))
    except FeatureError as error:
        raise DocumentError(str(error)) from error
    if sides.complete.any():
        check_profile(document, [sides.profile])
    p = score_frames(document, sides.a, sides.b)
    p[~sides.complete] = np.nan
    return p, sides


@dataclass
class ResponseFeatures:
    """A document's features of each response, read once (for judges whose features belong to
    one response: metrics, length, single-answer rubric scores), so that scoring a pair is two
    row lookups and a difference: the arithmetic of score_frames, row for row."""

    ids: np.ndarray  # sorted response ids
    values: np.ndarray  # len(ids) × the document's features (NaN: missing)
    complete: np.ndarray  # metrics stored, and the judge's verdicts when the document uses them

    def score(self, document: Mapping, response_a, response_b) -> np.ndarray:
        """P(A over B) for each (response_a[i], response_b[i]) as score_pairs gives it (NaN
        where a side lacks a feature source); every id must be one of `ids`."""
        a, b = self._rows(response_a), self._rows(response_b)
        scaling = document["scaling"]
        z = linear_decision(
            self.values[a] - self.values[b],
            scaling["mean"],
            scaling["scale"],
            document["weights"],
            document["intercept"],
        )
        p = expit(z)
        p[~(self.complete[a] & self.complete[b])] = np.nan
        return p

    def absolute(self, document: Mapping, response_ids) -> np.ndarray:
        """Each response's own score on the judge's logit scale, Σ_k w_k·x_k / scale_k (the
        decision of a pair is the difference of its sides' scores plus constants), NaN where
        a feature source is missing; a missing feature value counts 0, as in a pair."""
        rows = self._rows(response_ids)
        scaling = document["scaling"]
        values = np.where(np.isnan(self.values[rows]), 0.0, self.values[rows])
        score = np.zeros(len(rows))
        for k, weight in enumerate(document["weights"]):
            score = score + float(weight) * (values[:, k] / float(scaling["scale"][k]))
        score[~self.complete[rows]] = np.nan
        return score

    def _rows(self, response_ids) -> np.ndarray:
        ids = np.asarray(response_ids, dtype=np.int64)
        rows = np.searchsorted(self.ids, ids)
        if len(ids) and (rows.max() >= len(self.ids) or (self.ids[rows] != ids).any()):
            raise ValueError("a response whose features were not read")
        return rows


def response_features(document: Mapping, response_ids) -> ResponseFeatures | None:
    """The document's features of these responses (None for a pairwise judge, whose
    judge_win_share belongs to a pair: score those with score_pairs)."""
    config = judge_config_of(document)
    if config is not None and config.mode != JudgeConfig.Mode.SINGLE:
        return None
    ids = np.unique(np.asarray(response_ids, dtype=np.int64))
    table = feature_data.metric_table(ids.tolist()).reindex(ids)
    complete = table["rouge1"].notna().to_numpy()
    check_profile(document, table["profile"].to_numpy()[complete])
    if config is not None:
        rubric = feature_data.rubric_table(config, ids.tolist()).reindex(ids)
        table = table.join(rubric[list(feature_data.RUBRIC_FEATURES)])
        complete = complete & rubric["judge_mean"].notna().to_numpy()
    values = np.full((len(ids), len(document["features"])), np.nan)
    for k, name in enumerate(document["features"]):
        if name in table.columns:
            values[:, k] = table[name].to_numpy(dtype=float)
    return ResponseFeatures(ids, values, complete)
