"""The sweeper: background work whose worker died is restarted, resumed or failed, clearly.

Why. A task runs with acks_late, so a killed worker leaves its message unacknowledged, and
Celery's Redis transport only hands it out again after the visibility timeout (one hour by
default). Until then the Job would read "running" with frozen progress.

How a lost worker is noticed. Running work beats a heartbeat (`h2htalk.heartbeat`, from a
thread of the executing process, so long phases without progress and open transactions do not
matter); `heartbeat.is_stale` is the one takeover rule: no beat for JOB_STALE_SECONDS (default
60), counted from `started_at` before the first beat (for Jobs only of restartable kinds: they
all go through `jobs.start`).

Runs (generation and judge runs, `h2htalk.runner`) resume from where they stopped, so a run
that lost its worker is always handed on: `sweep` sends the task its app registered with
`runner.register`, and `runner.claim` lets the new executor take the run over.

What happens to it (`sweep`), in one conditional UPDATE per job so that two sweepers never
act twice:
- its kind is registered as restartable (`jobs.register(kind, task)` in the app's tasks
  module: atomic idempotent imports, idempotent campaign builds, recomputations) and it has
  had fewer than JOB_MAX_ATTEMPTS attempts (default 3): queued again with the message
  "worker lost; restarted (attempt N)" and its task sent again; `jobs.start` counts the
  attempt and `jobs.finish` notes it in the final message;
- otherwise: failed, with a message that says so (and whether it was given up after N
  attempts or is a kind that is never re-run automatically).

When. `h2htalk.tasks`: on every worker start (at once for queued jobs whose message was lost
with a killed worker's prefetch, and again once the dead worker's heartbeats are stale), and
every JOB_SWEEP_SECONDS (default 30) from a timer thread in each worker's main process,
deduplicated across workers by a cache lock. Every sweep also re-sends the jobs queued for
longer than JOB_STALE_SECONDS (`resend_queued`): a message lost with a Redis that restarted
empty would otherwise leave its job queued for ever. A sweep is one query on running jobs,
one on queued ones and one cache read.

Duplicates are harmless: `jobs.start` claims only a queued job, so a redelivered or re-sent
message for a job that is running or finished is ignored.

Time limits. A job whose task has a Celery time limit (the imports: JOB_TIME_LIMIT_SECONDS) and
that is still "running" past that limit plus JOB_STALE_SECONDS was killed at the hard limit (or
its worker died meanwhile): it is failed with a message naming the limit, never re-run.

Without a worker (eager mode: the job ran inside a web request, and the web server may have
killed that process) nothing sweeps in the background: the job page calls `settle` for the job
it shows, which fails a stale job (a re-run would again run inside a web request).
"""

import logging
import time
from datetime import timedelta

from django.core.cache import cache
from django.db.models import Q
from django.utils import timezone
from django.utils.module_loading import autodiscover_modules

from . import heartbeat, jobs, outage, runner, signals, uploads
from .models import Job, State

logger = logging.getLogger(__name__)


def _load_registry() -> None:
    """Import every app's tasks module: that is where job kinds are registered."""
    autodiscover_modules("tasks")


def restarted_message(attempt: int) -> str:
    return f"worker lost; restarted (attempt {attempt})"


def given_up_message(attempts: int) -> str:
    return (
        f"worker lost during attempt {attempts} of {attempts}: not restarted again. "
        "Nothing of an all-or-nothing job was kept; start it again."
    )


def not_restartable_message(kind: str) -> str:
    return (
        f"worker lost while running: a {kind} job is not restarted automatically; "
        "check what it wrote and start it again."
    )


def lost_in_web_process_message() -> str:
    return (
        "the process running this job was lost (no Celery worker: it ran inside a web request, "
        "and that process was stopped or killed). Nothing of an all-or-nothing job was kept; "
        "start it again."
    )


def _time_limit(kind: str) -> float | None:
    task = jobs.restart_task(kind)
    return getattr(task, "soft_time_limit", None) if task is not None else None


def _verdict(job: Job, last_beat: float | None, now: float) -> str | None:
    """Why this running job is dead: "overdue" (past its time limit), "stale" (no heartbeat
    for JOB_STALE_SECONDS), or None (alive, or not ours to judge)."""
    started = job.started_at.timestamp() if job.started_at else 0.0
    limit = _time_limit(job.kind)
    if limit and started < now - limit - heartbeat.stale_seconds():
        return "overdue"
    if last_beat is None and jobs.restart_task(job.kind) is None:
        return None  # no heartbeat and not ours: maybe run by code that does not beat
    return "stale" if heartbeat.is_stale(last_beat, job.started_at, now) else None


def stale_jobs(now: float | None = None) -> list[Job]:
    """Running jobs whose heartbeat is older than JOB_STALE_SECONDS (their worker is gone), or
    that ran past their time limit."""
    _load_registry()
    now = time.time() if now is None else now
    running = list(
        Job.objects.filter(state=State.RUNNING).only(
            "pk", "kind", "state", "attempts", "started_at"
        )
    )
    beats = heartbeat.last_beats(jobs.heartbeat_of(job.pk) for job in running)
    stale = []
    for job in running:
        verdict = _verdict(job, beats.get(jobs.heartbeat_of(job.pk)), now)
        if verdict:
            job.verdict = verdict
            stale.append(job)
    return stale


def _settle(job: Job, outcome: dict, restart: bool = True) -> None:
    """Restart or fail one dead running job (one conditional UPDATE: nobody acts twice)."""
    task = jobs.restart_task(job.kind)
    mine = Job.objects.filter(pk=job.pk, state=State.RUNNING, attempts=job.attempts)
    overdue = getattr(job, "verdict", "") == "overdue"
    if restart and not overdue and task is not None and job.attempts < jobs.max_attempts():
        message = restarted_message(job.attempts + 1)
        if mine.update(state=State.QUEUED, message=message, finished_at=None):
            heartbeat.stop(jobs.heartbeat_of(job.pk))
            jobs.set_progress(job.pk, 0, 0, message)
            _forget_heartbeat(job.pk)
            task.delay(job.pk)
            outcome["restarted"].append(job.pk)
            logger.warning("job %s (%s): %s", job.pk, job.kind, message)
        return
    if overdue:
        message = jobs.timed_out_message(_time_limit(job.kind))
    elif not restart:
        message = lost_in_web_process_message()
    elif task:
        message = given_up_message(job.attempts)
    else:
        message = not_restartable_message(job.kind)
    if mine.update(state=State.FAILED, message=message, finished_at=timezone.now()):
        _forget_heartbeat(job.pk)
        signals.job_failed.send(Job, job_id=job.pk)
        outcome["failed"].append(job.pk)
        logger.warning("job %s (%s): %s", job.pk, job.kind, message)
        try:
            uploads.release(job.pk)
        except Exception:
            logger.warning("job %s: could not release its upload", job.pk, exc_info=True)


def sweep(now: float | None = None) -> dict:
    """Restart or fail every stale job; returns {"restarted": [ids], "failed": [ids]}."""
    outcome = {"restarted": [], "failed": []}
    for job in stale_jobs(now):
        _settle(job, outcome)
    return outcome


def resume_runs() -> dict[str, list[int]]:
    """Hand every run that lost its worker to a live one; returns {model label: [run ids]}."""
    _load_registry()
    resumed = {}
    for model, task in runner.resume_tasks().items():
        stale = runner.stale_runs(model)
        for run_id in stale:
            task.delay(run_id)
            logger.warning("%s %s: worker lost; handed to a live worker", model.__name__, run_id)
        if stale:
            resumed[model._meta.label] = stale
    return resumed


def settle(job: Job, now: float | None = None) -> Job:
    """Check the one job a page shows; a dead one is restarted or failed as `sweep` would,
    except that without a worker (eager mode) it is failed: its re-run would run inside the
    web request that happened to look at it. Returns the job as it is now."""
    if job.state != State.RUNNING:
        return job
    _load_registry()
    now = time.time() if now is None else now
    name = jobs.heartbeat_of(job.pk)
    beats = outage.call(heartbeat, "last_beats", [name])
    if beats is None:  # Redis is down: no heartbeat to judge by; the page shows the job as is
        return job
    verdict = _verdict(job, beats.get(name), now)
    if verdict is None:
        return job
    job.verdict = verdict
    _settle(job, {"restarted": [], "failed": []}, restart=not _eager())
    job.refresh_from_db()
    return job


def _eager() -> bool:
    from .celery import app

    return bool(app.conf.task_always_eager)


def _resent_key(job_id: int) -> str:
    return f"job-resent:{heartbeat.namespace()}:{job_id}"


def resend_queued(older_than: float | None = None) -> list[int]:
    """Send again the queued jobs of restartable kinds that have waited longer than
    `older_than` seconds (default JOB_STALE_SECONDS): their message may be lost (prefetched by
    a worker that was then killed, or in a Redis that restarted empty). Each job at most once
    per that many seconds (a cache mark), so a long queue is not flooded with copies; a
    duplicate is ignored by `jobs.start`. Every periodic sweep calls this."""
    _load_registry()
    waited = heartbeat.stale_seconds() if older_than is None else older_than
    cutoff = timezone.now() - timedelta(seconds=waited)
    sent = []
    queued = Job.objects.filter(state=State.QUEUED, kind__in=jobs.restartable_kinds())
    for pk, kind in queued.filter(
        Q(created_at__lt=cutoff) & (Q(started_at__isnull=True) | Q(started_at__lt=cutoff))
    ).values_list("pk", "kind"):
        if waited > 0 and not cache.add(_resent_key(pk), 1, timeout=max(1, int(waited))):
            continue  # re-sent less than JOB_STALE_SECONDS ago
        jobs.restart_task(kind).delay(pk)
        sent.append(pk)
    if sent:
        logger.warning("re-sent %d queued job(s) whose message may be lost: %s", len(sent), sent)
    return sent


def _forget_heartbeat(job_id: int) -> None:
    heartbeat.forget(jobs.heartbeat_of(job_id))
