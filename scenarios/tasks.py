"""Celery tasks of scenarios: the scenario and response imports (Jobs) and generation runs."""

from celery import shared_task
from django.core.files.storage import default_storage
from django.db import transaction

from h2htalk import jobs, runner, uploads
from h2htalk.models import State
from scenarios.companions import generation
from scenarios.companions.imports import (
    ResponseImportFailed,
    build_response_plan,
    count_input_lines,
    write_responses,
)
from scenarios.import_files import UploadFailed, import_upload, refused_upload
from scenarios.models import GenerationRun


@shared_task(**jobs.time_limits())
def run_scenario_import(job_id: int) -> None:
    """Preview (dry run) or write one upload (a file, several files or a zip of them); the Job
    row carries the report (scenarios.import_files)."""
    job = jobs.start(job_id)
    params = job.params
    dry_run = params["dry_run"]
    step = "checking rows" if dry_run else "writing"
    try:
        with default_storage.open(params["path"], "rb") as stream:
            report = import_upload(
                stream,
                _stored_name(params),
                job.created_by,
                dry_run=dry_run,
                fmt=params.get("format", "auto"),
                default_subtask=params.get("default_subtask", ""),
                initial_state=params.get("initial_state", "draft"),
                progress=lambda n, total: jobs.report_progress(job_id, n, total, step),
            )
    except UploadFailed as failed:
        report = failed.report
    except uploads.ArchiveRefused as refused:
        report = refused_upload(params["filename"], str(refused))
    except Exception as error:
        jobs.finish(job_id, State.FAILED, jobs.failure_message(error))
        raise
    report["filename"] = params["filename"]
    files = len(report["files"])
    rows = f"{report['rows']} rows" + (f" in {files} files" if files > 1 else "")
    if report["error_count"]:
        state = State.FAILED
        message = f"{report['error_count']} error(s) in {rows}: nothing was written"
    elif dry_run:
        state, message = State.COMPLETED, f"{rows} checked, ready to import"
    else:
        state = State.COMPLETED
        message = f"{report['created']} created, {report['updated']} updated from {rows}"
    jobs.finish(job_id, state, message, report)


def _stored_name(params: dict) -> str:
    """The name the upload is read under: several files were stored as one zip."""
    if params.get("files"):
        return "upload.zip"
    return params["filename"]


@shared_task
def run_generation(run_id: int) -> str:
    return generation.execute(run_id)


# Generation runs that lost their worker are handed on by h2htalk.sweeper (they resume).
runner.register(GenerationRun, run_generation)
# Re-run from the start by h2htalk.sweeper after a lost worker: both imports are atomic and
# idempotent (a re-run writes everything or nothing, and a row already written is unchanged).
jobs.register("scenario_import", run_scenario_import)


def queue_run(run: GenerationRun) -> None:
    """Mark the run queued (new, or after a cancel, pause or crash) and hand it to a worker."""
    runner.mark_queued(GenerationRun, run.pk)
    transaction.on_commit(lambda: run_generation.delay(run.pk))


@shared_task(**jobs.time_limits())
def run_response_import(job_id: int) -> None:
    """Preview (dry run) or write one uploaded response file (.zip or .jsonl) into an import run.

    Job params: path (of the stored upload), filename, run_name (empty: from the file name) and
    dry_run. The Job row carries the report.
    """
    job = jobs.start(job_id)
    params = job.params
    try:
        with default_storage.open(params["path"], "rb") as stream:
            lines = count_input_lines(stream, params["filename"])
            run_name, filename = params.get("run_name") or "", params["filename"]
            if params["dry_run"]:
                report = build_response_plan(
                    stream,
                    run_name,
                    filename=filename,
                    progress=lambda n: jobs.report_progress(job_id, n, lines, "checking rows"),
                ).report
            else:
                try:  # one pass: checked as it is written, nothing written if anything is bad
                    report = write_responses(
                        stream,
                        run_name,
                        job.created_by,
                        progress=lambda n: jobs.report_progress(job_id, n, lines, "writing"),
                        filename=filename,
                    )
                except ResponseImportFailed as failure:
                    report = failure.report
    except Exception as error:
        jobs.finish(job_id, State.FAILED, jobs.failure_message(error))
        raise
    if report.errors:
        state = State.FAILED
        message = f"{report.error_count} error(s) in {report.rows} responses: nothing was written"
    elif params["dry_run"]:
        state = State.COMPLETED
        message = (
            f"{report.rows} responses checked for run {report.run}: {report.created} new, "
            f"{report.updated} changed, {report.unchanged} unchanged, "
            f"{report.companions_created} new companions; ready to import"
        )
    else:
        state = State.COMPLETED
        message = (
            f"{report.created} created, {report.updated} updated, {report.unchanged} unchanged "
            f"in run {report.run}"
        )
    jobs.finish(job_id, state, message, report.as_dict())


jobs.register("response_import", run_response_import)
