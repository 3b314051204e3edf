from django.conf import settings
from django.db import models


class Job(models.Model):
    """A long-running background task (import, generation, judging) and its visible state.

    While it runs, its executor beats a heartbeat in the cache (h2htalk.jobs); a job whose
    heartbeat went stale (a killed worker) is re-queued or failed by h2htalk.sweeper.
    """

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        CANCELLED = "cancelled"

    FINISHED = (State.SUCCEEDED, State.FAILED, State.CANCELLED)

    kind = models.CharField(max_length=50)
    state = models.CharField(max_length=12, choices=State.choices, default=State.QUEUED)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    done = models.PositiveIntegerField(default=0)
    total = models.PositiveIntegerField(default=0)
    message = models.TextField(blank=True)
    params = models.JSONField(default=dict, blank=True)
    result = models.JSONField(default=dict, blank=True)
    cancel_requested = models.BooleanField(default=False)
    attempts = models.PositiveSmallIntegerField(
        default=0,
        help_text="Times a worker started it; more than 1 after the sweeper restarted it "
        "(its worker was lost: h2htalk.sweeper).",
    )

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["kind", "state"])]

    def __str__(self):
        return f"{self.kind} #{self.pk} ({self.state})"

    @property
    def is_finished(self) -> bool:
        return self.state in self.FINISHED
