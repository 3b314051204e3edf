"""Celery tasks of scoring: agreement, reference metrics, LLM judge runs and verdict imports,
calibration fits and release numbers (every scoring task is here; the work is in the services).

The kinds h2htalk.sweeper may re-run from the start after a lost worker are registered at the
end; judge runs resume where they stopped.
"""

from celery import shared_task
from django.core.files.storage import default_storage
from django.db import transaction

from annotation.models import Campaign
from h2htalk import jobs, runner, uploads
from h2htalk.models import Job, State
from scoring.agreement import services as agreement
from scoring.calibration import fitting
from scoring.judges import judging
from scoring.judges.imports import JudgeImportFailed, import_verdicts
from scoring.metrics import jobs as metric_jobs
from scoring.metrics.catalogue import FeatureError
from scoring.models import JudgeConfig, JudgeRun, Release
from scoring.planning import services as planning
from scoring.releases import service as releases


@shared_task
def compute_agreement(job_id: int) -> None:
    job = jobs.start(job_id)
    campaign = Campaign.objects.get(pk=job.params["campaign"])
    state = agreement.fingerprint(campaign)
    try:
        data = agreement.compute_report(
            campaign,
            progress=lambda done, total, step: jobs.report_progress(job_id, done, total, step),
        )
    except Exception as error:
        jobs.finish(job_id, State.FAILED, f"{type(error).__name__}: {error}")
        raise
    report = agreement.store_report(campaign, data, state)
    jobs.finish(job_id, State.COMPLETED, "agreement computed", {"report": report.pk})


@shared_task
def run_plan(job_id: int) -> None:
    """A large study-size plan (scoring.planning.services.make_plan queues it)."""
    job = jobs.start(job_id)
    try:
        result = planning.compute_plan(
            job, progress=lambda done, total: jobs.report_progress(job_id, done, total, "sizes")
        )
    except planning.PlanRefused as refused:
        jobs.finish(job_id, State.FAILED, str(refused))
        return
    except Exception as error:
        jobs.finish(job_id, State.FAILED, f"{type(error).__name__}: {error}")
        raise
    jobs.finish(job_id, State.COMPLETED, planning.summary_text(result), result)


# ---------------------------------------------------------------- reference metrics


@shared_task
def run_metrics_job(job_id: int) -> None:
    job = jobs.start(job_id)
    params = job.params
    try:
        counts = metric_jobs.compute(
            metric_jobs.select(params),
            recompute=bool(params.get("recompute")),
            embedding=params.get("embedding"),
            profile=params.get("profile"),
            progress=lambda done, total, step: jobs.report_progress(job_id, done, total, step),
        )
    except Exception as error:
        jobs.finish(job_id, State.FAILED, f"{type(error).__name__}: {error}")
        raise
    message = f"reference metrics ({counts['profile']} profile) for {counts['scored']} response(s)"
    jobs.finish(job_id, State.COMPLETED, message, counts)


def queue_metrics_job(
    user, *, campaign: Campaign | None = None, recompute=False, embedding=None, profile=None
) -> Job:
    """A compute_metrics Job (for a campaign's responses, or all), started after the commit.
    profile None: the profile of the metrics already stored (scoring.metrics.jobs.compute)."""
    params = {"recompute": recompute, "embedding": embedding}
    if profile:
        params["profile"] = profile
    if campaign is not None:
        params.update(campaign=campaign.pk, campaign_name=campaign.name)
    job = Job.objects.create(kind=metric_jobs.KIND, created_by=user, params=params)
    transaction.on_commit(lambda: run_metrics_job.delay(job.pk))
    return job


# ---------------------------------------------------------------- LLM judge runs and imports


@shared_task
def run_judge(run_id: int) -> str:
    return judging.execute(run_id)


def queue_judge_run(run) -> None:
    """Mark the judge run queued (new, or after a cancel, pause, failure or crash) and hand it
    to a worker once the transaction commits."""
    runner.mark_queued(JudgeRun, run.pk)
    transaction.on_commit(lambda: run_judge.delay(run.pk))


@shared_task(**jobs.time_limits())
def run_judge_import(job_id: int) -> None:
    """Check (dry run) or write one uploaded JSONL of judge verdicts. Job params: path,
    filename, judge (configuration name), run_name, dry_run. The Job row carries the report."""
    job = jobs.start(job_id)
    params = job.params
    try:
        with default_storage.open(params["path"], "rb") as stream:
            total = uploads.count_lines(stream)
            try:
                report = import_verdicts(
                    stream,
                    params["filename"],
                    params.get("judge", ""),
                    params.get("run_name", ""),
                    dry_run=params["dry_run"],
                    user=job.created_by,
                    progress=lambda n: jobs.report_progress(job_id, n, total, "reading verdicts"),
                )
            except JudgeImportFailed as failed:
                report = failed.report
    except Exception as error:
        jobs.finish(job_id, State.FAILED, jobs.failure_message(error))
        raise
    if report.error_count:
        state = State.FAILED
        message = f"{report.error_count} error(s) in {report.lines} lines: nothing was written"
    elif params["dry_run"]:
        state = State.COMPLETED
        message = (
            f"{report.rows} verdicts checked for judge run {report.run}: {report.created} new, "
            f"{report.updated} changed, {report.unchanged} unchanged; ready to import"
        )
    else:
        state = State.COMPLETED
        message = (
            f"{report.created} created, {report.updated} updated, {report.unchanged} unchanged "
            f"in judge run {report.run}"
        )
    jobs.finish(job_id, state, message, report.as_dict())


# ---------------------------------------------------------------- calibration fits and releases


@shared_task
def run_fit_job(job_id: int) -> None:
    job = jobs.start(job_id)
    params = job.params
    try:
        campaign = Campaign.objects.get(pk=params["campaign"])
        judge = JudgeConfig.objects.get(pk=params["judge"]) if params.get("judge") else None
        calibrated = fitting.fit(
            campaign,
            judge=judge,
            features=params.get("features") or None,
            name=params.get("name") or None,
            folds=params.get("folds", fitting.DEFAULT_FOLDS),
            seed=params.get("seed", 0),
            user=job.created_by,
            progress=lambda done, total, step: jobs.report_progress(job_id, done, total, step),
        )
    except FeatureError as error:
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


def queue_fit_job(
    user, campaign, *, judge=None, features=None, name=None, folds=fitting.DEFAULT_FOLDS, seed=0
) -> Job:
    job = Job.objects.create(
        kind=fitting.KIND,
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


@shared_task
def run_release_job(job_id: int) -> None:
    job = jobs.start(job_id)
    release = Release.objects.select_related("campaign", "anchor", "judge").get(
        pk=job.params["release"]
    )

    def progress(done, total, message=releases.JUDGE_STAGE):
        jobs.report_progress(job_id, done, total, message)

    try:
        message = releases.compute_or_check(release, progress)
    except Exception as error:
        jobs.finish(job_id, Job.State.FAILED, f"{type(error).__name__}: {error}")
        raise
    release.refresh_from_db()
    ok = release.state == Release.State.READY and release.check_ok is not False
    jobs.finish(
        job_id,
        Job.State.COMPLETED if ok else Job.State.FAILED,
        message,
        {"release": release.pk},
    )


def queue_release_job(release: Release, user) -> Job:
    """A background job that computes (or verifies) the release, started after the commit."""
    job = Job.objects.create(
        kind=releases.KIND,
        created_by=user,
        params={"release": release.pk, "release_name": release.name},
    )
    Release.objects.filter(pk=release.pk).update(
        job=job,
        state=(Release.State.COMPUTING if release.state != Release.State.READY else release.state),
    )
    transaction.on_commit(lambda: run_release_job.delay(job.pk))
    return job


# Judge runs that lost their worker are handed on by h2htalk.sweeper (they resume).
runner.register(JudgeRun, run_judge)
# Kinds h2htalk.sweeper re-runs from the start after a lost worker: the verdict import is atomic
# and idempotent; agreement, reference metrics (upserts), calibration fits and release numbers
# (computed from frozen inputs, stored with update_or_create) and study-size plans are
# recomputations.
jobs.register("agreement", compute_agreement)
jobs.register("judge_import", run_judge_import)
jobs.register(metric_jobs.KIND, run_metrics_job)
jobs.register(fitting.KIND, run_fit_job)
jobs.register(releases.KIND, run_release_job)
jobs.register(planning.KIND, run_plan)
