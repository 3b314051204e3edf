"""Platform tasks: the sweeper of lost background work (see h2htalk.sweeper) and when it runs.

- On every worker start: a sweep at once that also re-sends long-queued jobs (a killed
  worker's prefetched messages stay unacknowledged in Redis for the visibility timeout), and
  one more once the jobs and runs the dead worker was running have gone stale
  (JOB_STALE_SECONDS + 1).
- Every JOB_SWEEP_SECONDS (default 30; 0 turns it off): a timer thread in each worker's main
  process sends a sweep, at most one per interval across all workers (a cache lock). The
  thread touches only Redis; the sweep itself runs as an ordinary task. It re-sends the jobs
  queued for longer than JOB_STALE_SECONDS too (each at most once per JOB_STALE_SECONDS): their
  message may be lost (Redis restarted empty, a prefetching worker killed), and a duplicate of
  a message that was not lost is ignored (`jobs.start`).
"""

import logging
import threading

from celery import shared_task
from celery.signals import worker_ready, worker_shutdown
from django.conf import settings
from django.core.cache import cache

from . import heartbeat, sweeper, uploads

logger = logging.getLogger(__name__)

_timer_stop = threading.Event()


@shared_task
def sweep_stale_jobs(resend_queued: bool = False) -> dict:
    """Restart (or fail) the jobs whose worker died, resume the runs whose worker died;
    optionally re-send long-queued jobs."""
    outcome = sweeper.sweep()
    outcome["runs_resumed"] = sweeper.resume_runs()
    if resend_queued:
        outcome["resent"] = sweeper.resend_queued()
    outcome["uploads_deleted"] = uploads.purge()  # files of ended jobs, past their retention
    return outcome


def _sweep_lock_key() -> str:
    return f"job-sweep-lock:{heartbeat.namespace()}"


def _periodic_sweeps(interval: float) -> None:
    while not _timer_stop.wait(interval):
        try:
            if cache.add(_sweep_lock_key(), 1, timeout=max(1, int(interval))):
                sweep_stale_jobs.delay(resend_queued=True)
        except Exception:  # Redis away for a moment: try again next time
            logger.warning("could not send the periodic job sweep", exc_info=True)


@worker_ready.connect(weak=False)
def _sweep_after_worker_start(**kwargs):
    sweep_stale_jobs.delay(resend_queued=True)
    sweep_stale_jobs.apply_async(countdown=heartbeat.stale_seconds() + 1)
    interval = settings.JOB_SWEEP_SECONDS
    if interval > 0:
        _timer_stop.clear()
        threading.Thread(
            target=_periodic_sweeps, args=(interval,), name="job-sweeper", daemon=True
        ).start()


@worker_shutdown.connect(weak=False)
def _stop_periodic_sweeps(**kwargs):
    _timer_stop.set()
