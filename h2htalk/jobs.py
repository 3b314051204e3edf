"""Job lifecycle and live progress shared by every background task.

Live progress goes through the cache (Redis when a broker is configured) because an atomic
import holds its writes in one transaction: progress written to the database inside it would
stay invisible to the page until the very end.
"""

from django.core.cache import cache
from django.db import connection
from django.utils import timezone

from .models import Job

PROGRESS_TTL = 24 * 3600


def _key(job_id: int) -> str:
    return f"job-progress:{job_id}"


def report_progress(job_id: int, done: int, total: int, message: str = "") -> None:
    cache.set(_key(job_id), {"done": done, "total": total, "message": message}, PROGRESS_TTL)
    if not connection.in_atomic_block:
        Job.objects.filter(pk=job_id).update(done=done, total=total, message=message)


def live_progress(job: Job) -> dict:
    """Done/total/message/percent for a job, preferring the live value while it runs."""
    values = {"done": job.done, "total": job.total, "message": job.message}
    if not job.is_finished:
        values.update(cache.get(_key(job.pk)) or {})
    total = values["total"]
    values["percent"] = round(100 * values["done"] / total) if total else 0
    return values


def start(job_id: int) -> Job:
    Job.objects.filter(pk=job_id).update(
        state=Job.State.RUNNING, started_at=timezone.now(), finished_at=None
    )
    return Job.objects.get(pk=job_id)


def finish(job_id: int, state: str, message: str = "", result: dict | None = None) -> None:
    fields = {"state": state, "finished_at": timezone.now(), "message": message}
    if result is not None:
        fields["result"] = result
    progress = cache.get(_key(job_id))
    if progress:
        fields.update(done=progress["done"], total=progress["total"])
    Job.objects.filter(pk=job_id).update(**fields)
    cache.delete(_key(job_id))
