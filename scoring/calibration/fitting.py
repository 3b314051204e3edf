"""Fitting a calibrated judge to a campaign's human judgments: inline, or as a background job
when the campaign is large. The feature table and the fit (pandas, scipy, scikit-learn) are
imported by `fit`, so the pages that import this module start without them."""

from annotation.models import Campaign
from h2htalk import jobs
from h2htalk.models import Job
from h2htalk.roles import ADMIN, user_roles
from scoring.calibration.document import DEFAULT_FOLDS, NAME_LENGTH
from scoring.calibration.versions import store_new_version
from scoring.metrics import jobs as metric_jobs
from scoring.models import CalibratedJudge, JudgeConfig

KIND = "calibration_fit"


INLINE_COMPARISONS = 2_000  # larger fits run as a background job


INLINE_MISSING_METRICS = 300  # more responses without metrics than this: a job computes them
JOB_KINDS = (KIND, metric_jobs.KIND)  # the jobs the calibration list shows
RECENT_JOBS = 10


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
    return f"{campaign.name} · {judge.name if judge else 'metrics only'}"[:NAME_LENGTH]


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
    from scoring.calibration.services import build_document
    from scoring.metrics import features as feature_data

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
        metrics_profile=table.profile,
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
    return store_new_version(document, campaign, user)


def recent_jobs(user) -> list[Job]:
    """The latest fit and metrics jobs the user started (all of them for an admin), each with
    its live progress and the calibrated judge it made."""
    rows = Job.objects.filter(kind__in=JOB_KINDS).order_by("-created_at")
    if ADMIN not in user_roles(user):
        rows = rows.filter(created_by=user)
    recent = list(rows[:RECENT_JOBS])
    for job in recent:
        job.progress = jobs.live_progress(job)
        job.judge_id = job.result.get("calibrated_judge") if job.result else None
    return recent
