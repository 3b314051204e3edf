"""Celery tasks of scoring: agreement, reference metrics, LLM judge runs and verdict imports.

The kinds h2htalk.sweeper may re-run from the start after a lost worker are registered at the
end (the release job registers in scoring.releases); judge runs resume where they stopped.
"""

from celery import shared_task
from django.core.files.storage import default_storage
from django.db import transaction

from annotation.models import Campaign
from h2htalk import jobs, runner, uploads
from h2htalk.models import Job, State
from scoring.agreement import services as agreement
from scoring.calibration import services as calibration
from scoring.judges import judging
from scoring.judges.imports import JudgeImportFailed, import_verdicts
from scoring.metrics import jobs as metric_jobs
from scoring.models import JudgeRun
from scoring.releases import service as releases  # importing registers their tasks


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


# ---------------------------------------------------------------- reference metrics


@shared_task
def run_metrics_job(job_id: int) -> None:
    job = jobs.start(job_id)
    params = job.params
    try:
        counts = metric_jobs.compute(
            metric_jobs.select(params),
            recompute=bool(params.get("recompute")),
            embedding=params.get("embedding", "none"),
            progress=lambda done, total, step: jobs.report_progress(job_id, done, total, step),
        )
    except Exception as error:
        jobs.finish(job_id, State.FAILED, f"{type(error).__name__}: {error}")
        raise
    jobs.finish(
        job_id, State.COMPLETED, f"reference metrics for {counts['scored']} response(s)", counts
    )


def queue_metrics_job(
    user, *, campaign: Campaign | None = None, recompute=False, embedding="none"
) -> Job:
    """A compute_metrics Job (for a campaign's responses, or all), started after the commit."""
    params = {"recompute": recompute, "embedding": embedding}
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


# Judge runs that lost their worker are handed on by h2htalk.sweeper (they resume).
runner.register(JudgeRun, run_judge)
# Kinds h2htalk.sweeper re-runs from the start after a lost worker: the verdict import is atomic
# and idempotent; agreement, reference metrics (upserts), calibration fits and release numbers
# (computed from frozen inputs, stored with update_or_create) are recomputations.
jobs.register("agreement", compute_agreement)
jobs.register("judge_import", run_judge_import)
jobs.register(metric_jobs.KIND, run_metrics_job)
jobs.register(calibration.KIND, calibration.run_fit_job)
jobs.register(releases.KIND, releases.run_release_job)
