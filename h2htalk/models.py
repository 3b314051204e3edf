"""What every kind of background work shares: its states, the Job row, and the abstract bases
of the run models (generation and judge runs) and of the endpoints they call (companions and
judges), so that each field and its validation is written once."""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils.translation import gettext_lazy as _

from . import egress
from .llm import Endpoint


class State(models.TextChoices):
    """The one set of states of background work (h2htalk.jobs, h2htalk.runner).

    A Job is never a draft nor paused; a run is a draft until it is first queued and paused
    when its token budget is reached.
    """

    DRAFT = "draft", _("Draft")
    QUEUED = "queued", _("Queued")
    RUNNING = "running", _("Running")
    PAUSED = "paused", _("Paused (budget reached)")
    CANCELLED = "cancelled", _("Cancelled")
    COMPLETED = "completed", _("Completed")
    FAILED = "failed", _("Failed")


FINISHED = (State.COMPLETED, State.FAILED, State.CANCELLED)


class Job(models.Model):
    """A long-running background task (import, agreement, metrics, a release...) and its
    visible state.

    While it runs, its executor beats a heartbeat (h2htalk.heartbeat); a job whose heartbeat
    went stale (a killed worker) is re-queued or failed by h2htalk.sweeper.
    """

    State = State
    FINISHED = FINISHED

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
        help_text=_(
            "Times a worker started it; more than 1 after the sweeper restarted it "
            "(its worker was lost: h2htalk.sweeper)."
        ),
    )

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["kind", "state"])]

    def __str__(self):
        return f"{self.kind} #{self.pk} ({self.state})"

    @property
    def is_finished(self) -> bool:
        return self.state in self.FINISHED


class EndpointConfig(models.Model):
    """An OpenAI-compatible chat endpoint and model (a companion, a judge).

    The API key itself is never stored, only the name of the variable holding it; the base
    URL is checked against LLM_ALLOWED_ENDPOINTS on save (`clean`) and again on connect.
    """

    name = models.CharField(max_length=100, unique=True)
    base_url = models.URLField(
        blank=True, help_text=_("Chat-completions base URL, e.g. http://127.0.0.1:8001/v1")
    )
    model_id = models.CharField(max_length=200, blank=True, help_text=_("The `model` sent."))
    api_key_env = models.CharField(
        "API key variable",
        max_length=100,
        blank=True,
        help_text=_(
            "Name of the environment variable holding the key; the key itself is never "
            "stored. Leave empty for local servers that need none."
        ),
    )
    params = models.JSONField(
        default=dict, blank=True, help_text=_('Generation parameters, e.g. {"temperature": 0.7}')
    )
    max_concurrency = models.PositiveSmallIntegerField(
        default=4,
        help_text=_("Requests in flight at once against this endpoint, all runs together."),
    )
    timeout_seconds = models.PositiveSmallIntegerField(default=60)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        abstract = True
        ordering = ["name"]

    def __str__(self):
        return self.name

    def clean(self):
        super().clean()
        try:
            egress.validate_base_url(self.base_url)  # LLM_ALLOWED_ENDPOINTS
        except ValidationError as error:
            raise ValidationError({"base_url": error.messages}) from None

    @property
    def can_call(self) -> bool:
        """Configured enough to send requests (an imported companion has no endpoint)."""
        return bool(self.base_url and self.model_id)

    def request_params(self) -> dict:
        """Parameters sent with every request; a subclass adds its own (a judge's temperature)."""
        return dict(self.params or {})

    def endpoint(self) -> Endpoint:
        return Endpoint(
            base_url=self.base_url,
            model=self.model_id,
            api_key_env=self.api_key_env,
            timeout=float(self.timeout_seconds),
            max_concurrency=self.max_concurrency,
            params=self.request_params(),
        )


class BackgroundRun(models.Model):
    """The state of a resumable run (h2htalk.runner): claimed by one executor at a time
    (`claim_token`), stopped by `cancel_requested` or its token budget, resumed from where it
    stopped."""

    State = State

    name = models.CharField(max_length=120, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    token_budget = models.PositiveBigIntegerField(
        null=True,
        blank=True,
        help_text=_("Stop (pause) once prompt + completion tokens reach this."),
    )
    tokens_used = models.PositiveBigIntegerField(default=0)
    state = models.CharField(max_length=10, choices=State.choices, default=State.DRAFT)
    cancel_requested = models.BooleanField(default=False)
    message = models.TextField(blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    claim_token = models.CharField(max_length=32, blank=True, editable=False)

    class Meta:
        abstract = True
        ordering = ["-created_at"]

    def __str__(self):
        return self.name


class Profile(models.Model):
    """What a user chose for themselves: the interface language (blank: not chosen, the
    browser's Accept-Language decides). Stored by the language switch (h2htalk.language) and
    applied at every login."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True, related_name="profile"
    )
    language = models.CharField(max_length=10, blank=True, choices=settings.LANGUAGES)

    def __str__(self):
        return f"{self.user_id}: {self.language or '-'}"


class UsernameKey(models.Model):
    """A user's name in the two forms no other user's may share (h2htalk.accounts.names): the
    folded name (NFKC + case-folded) and its look-alike skeleton. Kept by a post_save signal of
    the user model; the unique indexes make the database refuse a clash that two requests at
    the same moment could not see in each other."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        primary_key=True,
        on_delete=models.CASCADE,
        related_name="username_key",
    )
    folded = models.CharField(max_length=600, unique=True)
    skeleton = models.CharField(max_length=600, unique=True)

    def __str__(self):
        return self.folded
