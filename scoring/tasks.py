from celery import shared_task

from annotation.models import Campaign
from h2htalk import jobs
from h2htalk.models import Job
from scoring.agreement import services as agreement
from scoring.calibration import fitting
from scoring.metrics import jobs as metric_jobs
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
        jobs.finish(job_id, Job.State.FAILED, f"{type(error).__name__}: {error}")
        raise
    report = agreement.store_report(campaign, data, state)
    jobs.finish(job_id, Job.State.SUCCEEDED, "agreement computed", {"report": report.pk})


# ---------------------------------------------------------------- LLM judge runs and imports


@shared_task
def run_judge(run_id: int) -> str:
    from scoring.judges import judging

    return judging.execute(run_id)


@shared_task
def resume_stale_judge_runs() -> list[int]:
    """Hand judge runs whose worker died (stale heartbeat) to a live worker."""
    from scoring.judges import judging

    stale = judging.stale_runs()
    for run_id in stale:
        run_judge.delay(run_id)
    return stale


def _resume_judge_runs_after_worker_start(**kwargs):
    from django.conf import settings

    resume_stale_judge_runs.apply_async(countdown=settings.GENERATION_STALE_SECONDS + 1)


def _connect_worker_start_hook() -> None:
    from celery.signals import worker_ready

    worker_ready.connect(_resume_judge_runs_after_worker_start, weak=False)


_connect_worker_start_hook()


def queue_judge_run(run) -> None:
    """Mark the judge run queued (new, or after a cancel, pause, failure or crash) and hand it
    to a worker once the transaction commits."""
    from django.db import transaction

    from h2htalk import runner
    from scoring.models import JudgeRun

    runner.mark_queued(JudgeRun, run.pk)
    transaction.on_commit(lambda: run_judge.delay(run.pk))


@shared_task(**jobs.time_limits())
def run_judge_import(job_id: int) -> None:
    """Check (dry run) or write one uploaded JSONL of judge verdicts. Job params: path,
    filename, judge (configuration name), run_name, dry_run. The Job row carries the report."""
    from django.core.files.storage import default_storage

    from h2htalk import uploads
    from scoring.judges.imports import JudgeImportFailed, import_verdicts

    job = jobs.start(job_id)
    params = job.params
    try:
        with default_storage.open(params["path"], "rb") as stream:
            total = uploads.count_lines(stream)
            report = None
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
        jobs.finish(job_id, Job.State.FAILED, jobs.failure_message(error))
        raise
    if report.error_count:
        state = Job.State.FAILED
        message = f"{report.error_count} error(s) in {report.lines} lines: nothing was written"
    elif params["dry_run"]:
        state = Job.State.SUCCEEDED
        message = (
            f"{report.rows} verdicts checked for judge run {report.run}: {report.created} new, "
            f"{report.updated} changed, {report.unchanged} unchanged; ready to import"
        )
    else:
        state = Job.State.SUCCEEDED
        message = (
            f"{report.created} created, {report.updated} updated, {report.unchanged} unchanged "
            f"in judge run {report.run}"
        )
    jobs.finish(job_id, state, message, report.as_dict())


# Kinds h2htalk.sweeper re-runs from the start after a lost worker: the verdict import is atomic
# and idempotent; agreement, reference metrics (upserts), calibration fits and release numbers
# (computed from frozen inputs, stored with update_or_create) are recomputations.
jobs.register("agreement", compute_agreement)
jobs.register("judge_import", run_judge_import)
jobs.register(metric_jobs.KIND, metric_jobs.run_metrics_job)
jobs.register(fitting.KIND, fitting.run_fit_job)
jobs.register(releases.KIND, releases.run_release_job)
