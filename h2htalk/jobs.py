"""Job lifecycle and live progress, shared by every background task that is a Job row.

Live progress goes through the cache (Redis when a broker is configured) because an atomic
import holds its writes in one transaction: progress written to the database inside it would
stay invisible to the page until the very end.

Claim. `start` moves a job from queued to running in one conditional UPDATE and counts the
attempt (`Job.attempts`). A job that is not queued (finished, cancelled, or running elsewhere)
is not claimed: `start` raises `NotClaimed`, a Celery `Ignore`, so a duplicate message (Redis
redelivers an unacknowledged one after its visibility timeout; the sweeper may send another)
is dropped without running the job twice and without an error in the worker log.

Heartbeat. `start` starts the job's heartbeat (`h2htalk.heartbeat`, the one every kind of
background work beats) and `finish` stops it. A killed worker stops beating, and
`h2htalk.sweeper` re-queues the job (kinds registered here with `register`) or fails it once its
heartbeat is older than JOB_STALE_SECONDS.
"""

import logging
import threading
from pathlib import Path

from celery.exceptions import Ignore, SoftTimeLimitExceeded
from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.db.models import F
from django.http import Http404
from django.utils import timezone
from django.utils.formats import number_format
from django.utils.translation import gettext, ngettext, pgettext_lazy
from django.utils.translation import gettext as _

from . import heartbeat, outage, signals, uploads
from .models import Job, State
from .roles import ADMIN, user_roles

logger = logging.getLogger(__name__)

PROGRESS_TTL = 24 * 3600


def max_attempts() -> int:
    """Attempts (the first run included) before a job that keeps losing its worker fails."""
    return max(1, settings.JOB_MAX_ATTEMPTS)


def time_limit_seconds() -> float:
    """An import job running longer than this is stopped (JOB_TIME_LIMIT_SECONDS, 1 h)."""
    return settings.JOB_TIME_LIMIT_SECONDS


def time_limits() -> dict:
    """Celery task options for a job task: the soft limit ends it as failed with a message;
    the hard limit (30 s later) kills a task that ignores it, and the sweeper fails the job."""
    soft = time_limit_seconds()
    return {"soft_time_limit": soft, "time_limit": soft + 30}


def timed_out_message(seconds: float | None = None) -> str:
    seconds = time_limit_seconds() if seconds is None else seconds
    return (
        f"stopped: it ran longer than the time limit of {seconds:,.0f} s (JOB_TIME_LIMIT_SECONDS)"
    )


def failure_message(error: BaseException) -> str:
    """What a job that ended with this exception says."""
    if isinstance(error, SoftTimeLimitExceeded):
        return timed_out_message()
    return _missing_upload(error) or f"{type(error).__name__}: {error}"


def _missing_upload(error: BaseException) -> str | None:
    """An uploaded file the worker cannot find in MEDIA_ROOT: saved by a web host on another
    machine whose media folder is not shared with this one (see the README, *Deploying on
    several hosts*)."""
    if not isinstance(error, FileNotFoundError) or not error.filename:
        return None
    media = Path(settings.MEDIA_ROOT).resolve()
    path = Path(str(error.filename)).resolve()
    if media not in path.parents:
        return None
    return (
        f"the uploaded file {path.relative_to(media)} is not in MEDIA_ROOT where this job ran: "
        "with several hosts, MEDIA_ROOT must be one folder shared by every web host and worker"
    )


# ---------------------------------------------------------------- kinds the sweeper may re-run

_restartable: dict[str, object] = {}


def register(kind: str, task) -> None:
    """Declare that a job of `kind` may be run again from the start after its worker was lost.

    `task` is the Celery task taking the job id. Only for kinds whose re-run is safe: atomic
    (all or nothing) and idempotent, or a recomputation. Called from each app's tasks module.
    """
    _restartable[kind] = task


def restart_task(kind: str):
    """The task that runs a job of this kind again, or None (not safe to re-run)."""
    return _restartable.get(kind)


def restartable_kinds() -> list[str]:
    return sorted(_restartable)


# ---------------------------------------------------------------- cache keys


def _key(job_id: int) -> str:
    return f"job-progress:{heartbeat.namespace()}:{job_id}"


def heartbeat_of(job_id: int) -> str:
    """The heartbeat subject of a job."""
    return heartbeat.subject(Job, job_id)


# ---------------------------------------------------------------- progress


def report_progress(job_id: int, done: int, total: int, message: str = "") -> None:
    cache.set(_key(job_id), {"done": done, "total": total, "message": message}, PROGRESS_TTL)
    if not connection.in_atomic_block:
        Job.objects.filter(pk=job_id).update(done=done, total=total, message=message)


def set_progress(job_id: int, done: int, total: int, message: str) -> None:
    """Live progress only (the cache), e.g. the sweeper's note until the next attempt reports."""
    cache.set(_key(job_id), {"done": done, "total": total, "message": message}, PROGRESS_TTL)


def live_progress(job: Job) -> dict:
    """Done/total/message/percent for a job, preferring the live value while it runs."""
    values = {"done": job.done, "total": job.total, "message": job.message}
    if not job.is_finished:  # while Redis is down: what the database last heard (outage)
        values.update(outage.call(cache, "get", _key(job.pk)) or {})
    if values["message"]:  # stages marked with gettext_noop are shown in the page's language
        values["message"] = _(values["message"])
    if not job.is_finished and job.state == State.RUNNING and job.attempts > 1:
        note = _("attempt %(n)s, after the worker was lost") % {"n": job.attempts}
        values["message"] = f"{values['message']} ({note})" if values["message"] else note
    total = values["total"]
    if job.state == State.COMPLETED:  # done is done, whatever the last report counted
        values["done"] = values["total"] = total = max(total, values["done"], 1)
    values["percent"] = round(100 * values["done"] / total) if total else 0
    values["failed"] = job.state in (State.FAILED, State.CANCELLED)
    values["outcome"] = outcome(job)
    return values


# Upload jobs (h2htalk.uploads) whose result is an import report, and how their rows are counted
# (in the page's language).
UPLOAD_KINDS = {
    "scenario_import": lambda n: ngettext("%(n)s row", "%(n)s rows", n),
    "response_import": lambda n: ngettext("%(n)s response", "%(n)s responses", n),
    "judge_import": lambda n: ngettext("%(n)s verdict", "%(n)s verdicts", n),
}


# What each kind of job is called on its pages (never the kind's code).
KIND_NAMES = {
    "scenario_import": pgettext_lazy("job", "Scenario import"),
    "response_import": pgettext_lazy("job", "Response import"),
    "judge_import": pgettext_lazy("job", "Verdict import"),
    "campaign_build": pgettext_lazy("job", "Building a campaign's comparisons"),
    "campaign_plan": pgettext_lazy("job", "Study-size plan"),
    "compute_metrics": pgettext_lazy("job", "Reference metrics"),
    "release_compute": pgettext_lazy("job", "Computing a release"),
    "calibration_fit": pgettext_lazy("job", "Calibration fit"),
    "agreement": pgettext_lazy("job", "Agreement report"),
}


def kind_name(kind: str) -> str:
    return str(KIND_NAMES.get(kind, pgettext_lazy("job", "Background job")))


def _count(n: int, words) -> str:
    return words(n) % {"n": number_format(n, force_grouping=True)}


def _errors(n: int) -> str:
    return ngettext("%(n)s error", "%(n)s errors", n) % {"n": number_format(n, force_grouping=True)}


def outcome(job: Job) -> dict:
    """What a job's pages say about it: `heading`, `badge` (its state in words) and `tone` (a
    css state). An upload's preview that found errors did its work, so it is "Preview · 5
    errors" with "nothing was imported", not "Failed"; a job that broke stays "Failed"."""
    plain = {
        "heading": f"{kind_name(job.kind)} · #{job.pk}",
        "badge": job.get_state_display(),
        "tone": job.state,
        "upload": False,
    }
    report = job.result if isinstance(job.result, dict) else {}
    if job.kind not in UPLOAD_KINDS or not job.is_finished or "rows" not in report:
        return plain
    errors = report.get("error_count", len(report.get("errors") or ()))
    found = {"rows": _count(report["rows"], UPLOAD_KINDS[job.kind]), "errors": _errors(errors)}
    if job.params.get("dry_run"):
        if job.params.get("confirmed_job"):
            heading = gettext("Preview: %(rows)s, no errors — confirmed: imported by job #%(job)s")
            heading %= {"rows": found["rows"], "job": job.params["confirmed_job"]}
            return _upload(heading, gettext("Preview · confirmed"))
        if errors:
            heading = _("Preview: %(rows)s, %(errors)s — nothing was imported") % found
            return _upload(heading, _("Preview · %(errors)s") % found, "preview-errors")
        heading = _("Preview: %(rows)s, no errors — ready to import") % found
        return _upload(heading, _("Preview · ready"))
    if errors:
        heading = _("Not imported: %(rows)s, %(errors)s — nothing was written") % found
        return _upload(heading, _("Not imported · %(errors)s") % found, "failed")
    if report.get("written"):
        return _upload(_("Imported: %(rows)s") % found, _("Imported"))
    return plain


def _upload(heading: str, badge: str, tone: str = "completed") -> dict:
    return {"heading": heading, "badge": badge, "tone": tone, "upload": True}


_attempt = threading.local()  # job id -> the attempt this thread claimed


# ---------------------------------------------------------------- lifecycle


class NotClaimed(Ignore):
    """The job is not queued (finished, cancelled or running elsewhere): this message is a
    duplicate and the task does nothing."""


def start(job_id: int) -> Job:
    """Claim a queued job for this executor (one attempt more) and start its heartbeat."""
    claimed = Job.objects.filter(pk=job_id, state=State.QUEUED).update(
        state=State.RUNNING,
        started_at=timezone.now(),
        finished_at=None,
        attempts=F("attempts") + 1,
    )
    if not claimed:
        state = Job.objects.filter(pk=job_id).values_list("state", flat=True).first()
        logger.info("job %s not claimed (state %s): duplicate message ignored", job_id, state)
        raise NotClaimed(f"job {job_id} is {state or 'gone'}")
    heartbeat.start(heartbeat_of(job_id))
    job = Job.objects.get(pk=job_id)
    if not hasattr(_attempt, "claimed"):
        _attempt.claimed = {}
    _attempt.claimed[job_id] = job.attempts
    return job


def finish(job_id: int, state: str, message: str = "", result: dict | None = None) -> None:
    """Record the outcome of this executor's attempt (a no-op if a later attempt owns the job)."""
    heartbeat.stop(heartbeat_of(job_id))
    attempt = getattr(_attempt, "claimed", {}).pop(job_id, None)
    if attempt and attempt > 1:
        message = f"{message} (attempt {attempt}: restarted after the worker was lost)".lstrip()
    fields = {"state": state, "finished_at": timezone.now(), "message": message}
    if result is not None:
        fields["result"] = result
    progress = cache.get(_key(job_id))
    if progress:
        fields.update(done=progress["done"], total=progress["total"])
    rows = Job.objects.filter(pk=job_id)
    if attempt is not None:
        rows = rows.filter(attempts=attempt)
    if rows.update(**fields):
        if state == State.FAILED:
            signals.job_failed.send(Job, job_id=job_id)
        cache.delete_many([_key(job_id), heartbeat.key(heartbeat_of(job_id))])
        try:
            uploads.release(job_id)  # its uploaded file, once no job needs it
        except Exception:  # the outcome is recorded; a later purge deletes the file
            logger.warning("job %s: could not release its upload", job_id, exc_info=True)
    else:
        logger.warning(
            "job %s: attempt %s finished after a later attempt took over", job_id, attempt
        )


# ---------------------------------------------------------------- who may see a job


def campaign_of(job: Job) -> int | None:
    """The campaign a job works on, if any (its params name it, or its release's)."""
    params = job.params or {}
    for key in ("campaign_id", "campaign"):
        value = params.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    release = params.get("release")
    if isinstance(release, int) and not isinstance(release, bool):
        from scoring.models import Release  # (the project package knows no app at import)

        return Release.objects.filter(pk=release).values_list("campaign_id", flat=True).first()
    return None


def can_see_job(user, job: Job) -> bool:
    """A job (its page, progress, preview, confirmation) is its creator's and the admins';
    a job of a campaign also of those who manage that campaign (owner and members)."""
    if not getattr(user, "is_authenticated", False):
        return False
    if ADMIN in user_roles(user):
        return True
    if job.created_by_id is not None and job.created_by_id == user.pk:
        return True
    campaign_id = campaign_of(job)
    if campaign_id is None:
        return False
    from annotation.access import managed_campaigns

    return managed_campaigns(user).filter(pk=campaign_id).exists()


def job_or_404(user, pk, **filters) -> Job:
    """The job if this user may see it; else 404, as if it did not exist."""
    job = Job.objects.filter(pk=pk, **filters).first()
    if job is None or not can_see_job(user, job):
        raise Http404("No such job.")
    return job
