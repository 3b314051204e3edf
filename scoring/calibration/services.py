"""Calibrated judges: fitting one to a campaign's human judgments, the versioned JSON document
that is its source of truth, scoring with it, import/export, and the fit job.

The statistics are in h2htalk.stats.calibration; the features in scoring.metrics.features. `score`
(one pair) and `score_frames` (many) are the only way a document turns features into a
probability: the report page, the API, the import round trip and routing all use them.
"""

import importlib.metadata
import json
import math
import os
import subprocess
from collections.abc import Mapping
from functools import cache
from html import escape

import numpy as np
import pandas as pd
import sklearn
from celery import shared_task
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max, Q
from django.http import Http404
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe
from scipy.special import expit

from annotation.access import managed_campaigns
from annotation.models import Campaign
from h2htalk import jobs
from h2htalk.models import Job
from h2htalk.roles import ADMIN, user_roles
from h2htalk.stats import agreement as agreement_stats
from h2htalk.stats import calibration as stats
from scenarios.models import CompanionModel
from scoring.metrics import features as feature_data
from scoring.metrics import jobs as metric_jobs
from scoring.models import CalibratedJudge, JudgeConfig

SCHEMA = "h2htalk.calibrated-judge/1"
KIND = "calibration_fit"
MAX_VERSION = 2**31 - 1  # the database column's range
MAX_DEPTH = 64  # nesting of a document
INLINE_COMPARISONS = 2_000  # larger fits run as a background job
INLINE_MISSING_METRICS = 300  # more responses without metrics than this: a job computes them
DEFAULT_FOLDS = 5
MODEL_TEXT = (
    "P(humans prefer A over B) = σ(intercept + Σ_k weights[k] · (Δ_k − scaling.mean[k]) / "
    "scaling.scale[k]) with Δ_k = f_k(A) − f_k(B), and Δ_k = 0 when f_k is missing on either "
    "side. A is the canonical side (the companion with the lower id in the campaign)."
)


class DocumentError(ValueError):
    """A calibrated-judge document that does not follow the schema (said in one sentence)."""


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


# ---------------------------------------------------------------- scoring


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
    z = stats.linear_decision(
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


def score_pairs(document: Mapping, pairs) -> tuple[np.ndarray, feature_data.Sides]:
    """P(A over B) for (response a id, response b id) pairs from the database (NaN where a
    feature source is missing: no metrics, or no verdict of the document's judge)."""
    sides = feature_data.side_features(pairs, judge_config_of(document))
    p = score_frames(document, sides.a, sides.b)
    p[~sides.complete] = np.nan
    return p, sides


# ---------------------------------------------------------------- the document


def _finite_list(value, name: str, length: int) -> list[float]:
    if not isinstance(value, list) or len(value) != length:
        raise DocumentError(f"{name} must be a list of {length} numbers")
    out = []
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int | float):
            raise DocumentError(f"{name} must hold finite numbers only")
        try:
            number = float(item)  # an integer beyond the float range overflows
        except OverflowError:
            number = math.inf
        if not math.isfinite(number):
            raise DocumentError(f"{name} must hold finite numbers only")
        out.append(number)
    return out


def _check_storable(document) -> None:
    """Every text storable and every number finite, anywhere in the document (extra fields
    too): PostgreSQL's jsonb refuses NUL, lone surrogates, NaN and Infinity. Nesting is
    bounded (the comparison in import_document recurses)."""
    stack = [(document, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list) and depth >= MAX_DEPTH:
            raise DocumentError(f"the document is nested more than {MAX_DEPTH} levels deep")
        if isinstance(item, dict):
            stack.extend((part, depth + 1) for pair in item.items() for part in pair)
        elif isinstance(item, list):
            stack.extend((part, depth + 1) for part in item)
        elif isinstance(item, str):
            if "\x00" in item:
                raise DocumentError("the document contains a NUL character")
            if not item.isascii():
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError as error:
                    raise DocumentError("the document contains a lone surrogate") from error
        elif isinstance(item, float) and not math.isfinite(item):
            raise DocumentError("the document contains NaN or Infinity: numbers must be finite")


def validate_document(document) -> dict:
    """The document if it follows the schema (README "Calibrated judge weights"), else
    DocumentError saying what is wrong."""
    if not isinstance(document, dict):
        raise DocumentError("the document must be a JSON object")
    if document.get("schema") != SCHEMA:
        raise DocumentError(f"schema must be {SCHEMA!r}, not {document.get('schema')!r}")
    name = document.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > 120:
        raise DocumentError("name must be a non-empty string of at most 120 characters")
    version = document.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= MAX_VERSION:
        raise DocumentError(f"version must be a positive integer (at most {MAX_VERSION})")
    names = document.get("features")
    if not isinstance(names, list) or not all(isinstance(f, str) for f in names):
        raise DocumentError("features must be a list of feature names")
    unknown = [f for f in names if f not in feature_data.ALL_FEATURES]
    if unknown:
        raise DocumentError(f"unknown feature(s): {', '.join(unknown)}")
    if len(set(names)) != len(names):
        raise DocumentError("features must not repeat")
    scaling = document.get("scaling")
    if not isinstance(scaling, dict):
        raise DocumentError("scaling must be an object with mean and scale")
    _finite_list(scaling.get("mean"), "scaling.mean", len(names))
    scale = _finite_list(scaling.get("scale"), "scaling.scale", len(names))
    if any(s <= 0 for s in scale):
        raise DocumentError("scaling.scale must be positive")
    _finite_list(document.get("weights"), "weights", len(names))
    _finite_list([document.get("intercept")], "intercept", 1)
    judge = document.get("judge")
    if judge is not None:
        if not isinstance(judge, dict) or not isinstance(judge.get("config"), str):
            raise DocumentError("judge must be null or an object with config and mode")
        if judge.get("mode") not in JudgeConfig.Mode.values:
            raise DocumentError(f"judge.mode must be one of {JudgeConfig.Mode.values}")
    allowed = set(feature_data.METRIC_FEATURES + feature_data.LENGTH_FEATURES)
    if judge is not None:
        allowed |= set(
            feature_data.RUBRIC_FEATURES
            if judge["mode"] == JudgeConfig.Mode.SINGLE
            else feature_data.PAIRWISE_FEATURES
        )
    wrong = [f for f in names if f not in allowed]
    if wrong:
        raise DocumentError(f"{', '.join(wrong)} do(es) not fit the judge {judge!r}")
    _check_storable(document)
    return document


def export_json(judge: CalibratedJudge) -> str:
    return json.dumps(judge.document, ensure_ascii=False, indent=2, allow_nan=False) + "\n"


def _canonical(document) -> str:
    """The document as comparable text: keys sorted, every number as a float (PostgreSQL's
    jsonb gives 1e16 back as 10000000000000000 and -0.0 as 0)."""
    return json.dumps(_as_floats(document), sort_keys=True, ensure_ascii=False)


def _as_floats(value):
    if isinstance(value, dict):
        return {key: _as_floats(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_as_floats(item) for item in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return float(value) + 0.0  # (-0.0 + 0.0 is 0.0)
        except OverflowError:
            return value
    return value


def next_version(name: str) -> int:
    top = CalibratedJudge.objects.filter(name=name).aggregate(top=Max("version"))["top"]
    return (top or 0) + 1


def _store_new_version(document: dict, campaign, user) -> CalibratedJudge:
    """Save under the next free version of its name (retried if two saves race)."""
    for _ in range(5):
        document["version"] = next_version(document["name"])
        try:
            with transaction.atomic():
                return CalibratedJudge.objects.create(
                    name=document["name"],
                    version=document["version"],
                    document=document,
                    campaign=campaign,
                    created_by=user,
                )
        except IntegrityError:
            continue
    raise IntegrityError("could not find a free version number")


def import_document(document, *, name: str | None = None, user=None):
    """Store a document; returns (judge, created).

    Without `name` it keeps its name and version: the same document already stored is not
    stored again (created False); another document under that name and version is refused.
    With `name` it is stored as the next version of that name, recording where it came from.
    """
    document = validate_document(json.loads(json.dumps(document)))
    if name:
        document["imported_from"] = {"name": document["name"], "version": document["version"]}
        document["name"] = name.strip()
        return _store_new_version(document, None, user), True
    existing = CalibratedJudge.objects.filter(
        name=document["name"], version=document["version"]
    ).first()
    if existing is not None:
        if _canonical(existing.document) == _canonical(document):
            return existing, False
        raise DocumentError(
            f"{document['name']} v{document['version']} already exists with different weights: "
            "import it under another name"
        )
    try:
        with transaction.atomic():
            judge = CalibratedJudge.objects.create(
                name=document["name"],
                version=document["version"],
                document=document,
                created_by=user,
            )
    except IntegrityError as error:  # stored meanwhile by someone else
        raise DocumentError(
            f"{document['name']} v{document['version']} was just stored by someone else"
        ) from error
    return judge, True


# ---------------------------------------------------------------- access


def visible_judges(user):
    """Calibrated judges the user may see: those of campaigns they manage (owner or member),
    those they fitted or imported, and those with neither a campaign nor a creator (imported
    by `manage.py import_judge_weights`). Admins see all."""
    if ADMIN in user_roles(user):
        return CalibratedJudge.objects.all()
    return CalibratedJudge.objects.filter(
        Q(campaign__in=managed_campaigns(user))
        | Q(created_by=user)
        | Q(campaign__isnull=True, created_by__isnull=True)
    )


def judge_or_404(user, pk) -> CalibratedJudge:
    judge = visible_judges(user).select_related("campaign", "created_by").filter(pk=pk).first()
    if judge is None:
        raise Http404("No such calibrated judge.")
    return judge


# ---------------------------------------------------------------- fitting


def human_agreement(judgments: pd.DataFrame, n_boot: int = 1000) -> dict:
    """Human–human agreement on the calibration's comparisons (agreement module, the same
    `label_agreement` as the agreement report, so the same mirrored definition and the same α
    on the same judgments): α (ordinal 5-point, nominal A/tie/B) with 95% CIs, Fleiss' κ,
    percent agreement, and the agreement of
    an annotator's A/tie/B vote with the leave-one-out consensus of the others (mean over
    annotators, and over votes)."""
    out = {"labels": {}, "annotators": int(judgments["annotator"].nunique())}
    if judgments.empty:
        return out
    table = agreement_stats.label_agreement(
        judgments, labels=["preference5", "winner3"], n_boot=n_boot
    )
    for label, row in table.iterrows():
        out["labels"][label] = {
            key: row[key]
            for key in (
                "level",
                "alpha",
                "low",
                "high",
                "ci",
                "n_units",
                "percent_agreement",
                "fleiss_kappa",
            )
        }
    annotators = agreement_stats.annotator_report(judgments)
    with_consensus = annotators[annotators["n_consensus"] > 0]
    out["annotator_consensus_agreement"] = (
        float(with_consensus["consensus_agreement"].mean()) if len(with_consensus) else None
    )
    consensus = agreement_stats.loo_consensus(judgments)
    agrees = consensus["agrees"].dropna()
    out["vote_consensus_agreement"] = float(agrees.mean()) if len(agrees) else None
    out["consensus_votes"] = len(agrees)
    out["note"] = (
        "Human–human agreement on the same comparisons, computed as on the agreement page: "
        "Krippendorff's α with 95% bootstrap intervals, every comparison counted once as its "
        "votes and once mirrored (A and B swapped), so it does not depend on companion ids; "
        "consensus agreement = share of an annotator's A/tie/B votes equal to the "
        "plurality of the other annotators (at least two others, no tied plurality), comparable "
        "to the judges' accuracy with ties against the human majority."
    )
    return stats.json_safe(out)


def missing_metric_count(campaign: Campaign) -> int:
    return metric_jobs.missing(metric_jobs.campaign_responses(campaign)).count()


def needs_job(campaign: Campaign) -> bool:
    """True when a fit of this campaign is too big for the request (run it as a job)."""
    judged = campaign.comparisons.filter(is_gold=False, judgments__isnull=False).distinct()
    return (
        judged.count() > INLINE_COMPARISONS
        or missing_metric_count(campaign) > INLINE_MISSING_METRICS
    )


def default_name(campaign: Campaign, judge: JudgeConfig | None) -> str:
    return f"{campaign.name} · {judge.name if judge else 'metrics only'}"[:120]


def fit(
    campaign: Campaign,
    *,
    judge: JudgeConfig | None = None,
    features=None,
    name: str | None = None,
    folds: int = DEFAULT_FOLDS,
    seed: int = 0,
    user=None,
    progress=None,
) -> CalibratedJudge:
    """Fit a calibrated judge to the campaign's human judgments and store it as a new version.

    Steps: reference metrics for responses that lack them; the comparison table
    (scoring.metrics.features); then `build_document`; then the next version of the name.
    """
    if progress:
        progress(0, 1, "reference metrics of responses that lack them")
    metric_jobs.compute(metric_jobs.campaign_responses(campaign))
    if progress:
        progress(0, 1, "building the comparison table")
    table = feature_data.comparison_table(campaign, judge, features)
    document = build_document(
        table.frame,
        table.features,
        table.judgments,
        campaign={"id": campaign.pk, "name": campaign.name},
        judge=judge,
        composite_note=table.composite_note,
        left_out={
            k: table.info.get(k, 0)
            for k in (
                "without_metrics",
                "without_judge_verdicts",
                "excluded_annotators",
                "excluded_judgments",
            )
        },
        name=name or default_name(campaign, judge),
        folds=folds,
        seed=seed,
        progress=progress,
    )
    return _store_new_version(document, campaign, user)


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

    if frame["scenario"].nunique() < 2:
        raise feature_data.FeatureError(
            "cross-validation by scenario needs comparisons from at least two scenarios"
        )
    if len(frame) < 10:
        raise feature_data.FeatureError(
            f"only {len(frame)} comparison(s) with human judgments and features: too few to fit"
        )
    result = stats.cross_validate(
        frame,
        features,
        folds=folds,
        seed=seed,
        progress=lambda done, total, message: step(done, total + 2, message),
    )
    step(result.n_folds, result.n_folds + 2, "final model on all comparisons")
    X = stats.design_matrix(frame, features)
    votes = stats.votes_of(frame)
    groups = frame["scenario"].to_numpy()
    model, cv_losses = stats.fit_model(X, votes, groups, features, folds=folds, seed=seed)
    slope = None
    if "composite" in result.judges:
        slope = stats.fit_slope(frame["composite_diff"].to_numpy(), votes)
    tie_band = stats.choose_tie_band(model.predict(X), frame["majority"].to_numpy())
    step(result.n_folds + 1, result.n_folds + 2, "human–human agreement")
    humans = human_agreement(judgments)
    heldout = stats.heldout_summary(result)
    names = dict(
        CompanionModel.objects.filter(pk__in=result.system["companions"]).values_list("pk", "name")
    )
    heldout["system"]["companions"] = [
        {"id": int(c), "name": names.get(int(c), str(c))} for c in result.system["companions"]
    ]
    document = {
        "schema": SCHEMA,
        "name": name.strip()[:120],
        "version": 0,  # set when stored
        "created_at": timezone.now().isoformat(),
        "code_version": code_version(),
        "model": MODEL_TEXT,
        "features": list(features),
        "feature_labels": {f: feature_data.LABELS.get(f, f) for f in features},
        "scaling": {"mean": _floats(model.mean), "scale": _floats(model.scale)},
        "weights": _floats(model.weights),
        "weights_per_unit": _floats(model.raw_weights),
        "intercept": float(model.intercept),
        "tie_band": tie_band,
        "regularisation": {
            "penalty": "l2",
            "C": model.C,
            "grid": list(stats.C_GRID),
            "cv_log_loss": cv_losses,
            "cv": f"{min(folds, frame['scenario'].nunique())}-fold GroupKFold by scenario",
            "fit_intercept": False,
            "library": f"scikit-learn {sklearn.__version__} LogisticRegression (newton-cholesky)",
        },
        "training": {
            "campaign": campaign,
            "judgments": len(judgments),
            "comparisons": len(frame),
            "scenarios": int(frame["scenario"].nunique()),
            "fingerprint": stats.fingerprint(
                judgments[["comparison", "annotator", "preference"]].itertuples(
                    index=False, name=None
                )
            ),
            "fingerprint_of": "sha256 of the sorted 'comparison id,annotator id,preference' "
            "lines (one per judgment used, newline-terminated)",
            "left_out": left_out or {},
            "targets": "each vote an outcome: A better 1, B better 0, tie 1/2",
        },
        "composite": {
            "note": composite_note,
            "slope": slope,
            "heldout": "σ(s · (composite A − composite B)), s fitted on the training folds",
        },
        "judge": {"config": judge.name, "mode": judge.mode} if judge else None,
        "heldout": heldout,
        "human_agreement": humans,
    }
    document = stats.json_safe(document)
    validate_document({**document, "version": 1})
    step(result.n_folds + 2, result.n_folds + 2, "saving")
    return document


def _floats(values) -> list[float]:
    return [float(v) for v in np.asarray(values, dtype=float)]


@shared_task
def run_fit_job(job_id: int) -> None:
    job = jobs.start(job_id)
    params = job.params
    try:
        campaign = Campaign.objects.get(pk=params["campaign"])
        judge = JudgeConfig.objects.get(pk=params["judge"]) if params.get("judge") else None
        calibrated = fit(
            campaign,
            judge=judge,
            features=params.get("features") or None,
            name=params.get("name") or None,
            folds=params.get("folds", DEFAULT_FOLDS),
            seed=params.get("seed", 0),
            user=job.created_by,
            progress=lambda done, total, step: jobs.report_progress(job_id, done, total, step),
        )
    except feature_data.FeatureError as error:
        jobs.finish(job_id, Job.State.FAILED, str(error))
        return
    except Exception as error:
        jobs.finish(job_id, Job.State.FAILED, f"{type(error).__name__}: {error}")
        raise
    jobs.finish(
        job_id,
        Job.State.COMPLETED,
        f"{calibrated} fitted on {calibrated.document['training']['comparisons']} comparisons",
        {"calibrated_judge": calibrated.pk},
    )


def queue_fit(
    user, campaign, *, judge=None, features=None, name=None, folds=DEFAULT_FOLDS, seed=0
) -> Job:
    job = Job.objects.create(
        kind=KIND,
        created_by=user,
        params={
            "campaign": campaign.pk,
            "campaign_name": campaign.name,
            "judge": judge.pk if judge else None,
            "features": list(features or []),
            "name": name or "",
            "folds": folds,
            "seed": seed,
        },
    )
    transaction.on_commit(lambda: run_fit_job.delay(job.pk))
    return job


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
