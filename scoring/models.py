from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from annotation.models import Campaign
from h2htalk import egress


class AgreementReport(models.Model):
    """A computed agreement report, valid while the campaign's judgments are unchanged."""

    campaign = models.ForeignKey(
        Campaign, on_delete=models.CASCADE, related_name="agreement_reports"
    )
    fingerprint = models.CharField(max_length=64, help_text="Judgment count and last id.")
    data = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["campaign", "fingerprint"], name="one_report_per_judgment_state"
            )
        ]

    def __str__(self):
        return f"agreement of {self.campaign} at {self.fingerprint}"


class MetricScore(models.Model):
    """Reference metrics of one response against its scenario's reference answer."""

    response = models.OneToOneField(
        "scenarios.Response", on_delete=models.CASCADE, related_name="metrics"
    )
    values = models.JSONField(
        help_text="rouge1, rouge2, rougeL, bleu1..bleu4, length_tokens, length_chars, "
        "length_ratio, composite (renormalised, see composite_note)"
    )
    composite_note = models.CharField(max_length=400, blank=True)
    computed_at = models.DateTimeField(auto_now=True)

    def __str__(self):
        return f"metrics of response {self.response_id}"


class JudgeConfig(models.Model):
    """An LLM judge: endpoint, model, rubric, mode and sampling."""

    class Mode(models.TextChoices):
        SINGLE = "single", "Single-answer grading (1–10 per dimension)"
        PAIRWISE = "pairwise", "Pairwise (which is better), both orders"

    name = models.CharField(max_length=100, unique=True)
    mode = models.CharField(max_length=10, choices=Mode.choices, default=Mode.SINGLE)
    base_url = models.URLField(blank=True)
    model_id = models.CharField(max_length=200, blank=True)
    api_key_env = models.CharField(max_length=100, blank=True)
    rubric = models.TextField(help_text="The judge's instructions (a default is provided).")
    temperature = models.FloatField(default=0.0)
    samples = models.PositiveSmallIntegerField(default=1, help_text="Verdicts per item.")
    params = models.JSONField(default=dict, blank=True)
    max_concurrency = models.PositiveSmallIntegerField(default=4)
    timeout_seconds = models.PositiveSmallIntegerField(default=60)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name

    def clean(self):
        super().clean()
        try:
            egress.validate_base_url(self.base_url)  # LLM_ALLOWED_ENDPOINTS
        except ValidationError as error:
            raise ValidationError({"base_url": error.messages}) from None


class JudgeRun(models.Model):
    """One judge over a set of responses (single) or comparisons (pairwise); resumable."""

    class State(models.TextChoices):
        DRAFT = "draft"
        QUEUED = "queued"
        RUNNING = "running"
        PAUSED = "paused", "Paused (budget reached)"
        CANCELLED = "cancelled"
        COMPLETED = "completed"
        FAILED = "failed"

    name = models.CharField(max_length=120, unique=True)
    judge = models.ForeignKey(JudgeConfig, on_delete=models.PROTECT, related_name="runs")
    campaign = models.ForeignKey(
        Campaign,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="judge_runs",
        help_text="Pairwise runs judge this campaign's comparisons.",
    )
    responses = models.ManyToManyField("scenarios.Response", blank=True, related_name="+")
    imported = models.BooleanField(default=False, help_text="Verdicts imported from a file.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    token_budget = models.PositiveBigIntegerField(null=True, blank=True)
    tokens_used = models.PositiveBigIntegerField(default=0)
    state = models.CharField(max_length=10, choices=State.choices, default=State.DRAFT)
    cancel_requested = models.BooleanField(default=False)
    message = models.TextField(blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    claim_token = models.CharField(max_length=32, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return self.name


class JudgeVerdict(models.Model):
    """One judge output. Single mode: `response` graded; pairwise: `first` vs `second` in the
    order the judge saw them (both orders are separate rows). Raw output is always kept."""

    class Parse(models.TextChoices):
        STRICT = "strict", "Strict JSON"
        FALLBACK = "fallback", "Recovered by the tolerant parser"
        FAILED = "failed", "Unparseable"
        ERROR = "error", "Request failed"

    run = models.ForeignKey(JudgeRun, on_delete=models.CASCADE, related_name="verdicts")
    response = models.ForeignKey(
        "scenarios.Response", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    first = models.ForeignKey(
        "scenarios.Response", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    second = models.ForeignKey(
        "scenarios.Response", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    sample = models.PositiveSmallIntegerField(default=0)
    parse = models.CharField(max_length=10, choices=Parse.choices)
    scores = models.JSONField(
        default=dict, blank=True, help_text="Single: {dimension: 1..10}. Pairwise: {}."
    )
    winner = models.CharField(
        max_length=6, blank=True, help_text="Pairwise: first / second / tie (as seen)."
    )
    rationale = models.TextField(blank=True)
    raw_output = models.TextField(blank=True)
    error = models.TextField(blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["run", "response", "sample"],
                condition=models.Q(response__isnull=False),
                name="one_single_verdict_per_sample",
            ),
            models.UniqueConstraint(
                fields=["run", "first", "second", "sample"],
                condition=models.Q(first__isnull=False),
                name="one_pairwise_verdict_per_order_and_sample",
            ),
        ]
        indexes = [models.Index(fields=["run", "parse"])]

    def __str__(self):
        return f"verdict {self.pk} of {self.run}"


class CalibratedJudge(models.Model):
    """A versioned calibrated judge: the exported JSON document is the source of truth."""

    name = models.CharField(max_length=120)
    version = models.PositiveIntegerField()
    document = models.JSONField()
    campaign = models.ForeignKey(
        Campaign, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["name", "version"], name="one_judge_version")
        ]

    def __str__(self):
        return f"{self.name} v{self.version}"


class Release(models.Model):
    """A benchmark release: its inputs frozen as ids and content hashes (`inputs`, see
    scoring.releases) with a sha256 `fingerprint`; its numbers (ReleaseResult) are computed from
    those inputs only, and `manage.py benchmark_report RELEASE --check` reproduces them."""

    class State(models.TextChoices):
        PENDING = "pending", "Waiting to be frozen and computed"
        COMPUTING = "computing", "Computing"
        READY = "ready", "Ready"
        FAILED = "failed", "Failed"

    name = models.CharField(max_length=150, unique=True)
    description = models.TextField(blank=True)
    campaign = models.ForeignKey(
        Campaign,
        on_delete=models.PROTECT,
        related_name="releases",
        help_text="Where the human judgments (and the responses' runs) come from.",
    )
    companions = models.ManyToManyField(
        "scenarios.CompanionModel", related_name="releases", help_text="Companions ranked."
    )
    anchor = models.ForeignKey(
        "scenarios.CompanionModel",
        on_delete=models.PROTECT,
        related_name="+",
        help_text="Win rates are reported against this companion.",
    )
    judge = models.ForeignKey(
        CalibratedJudge,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="releases",
        help_text="Calibrated judge scoring every pair (none: humans and metrics only).",
    )
    seed = models.PositiveIntegerField(default=0)
    n_boot = models.PositiveIntegerField("bootstrap draws", default=1000)
    inputs = models.JSONField(null=True, blank=True, help_text="Frozen inputs (ids + hashes).")
    fingerprint = models.CharField(max_length=64, blank=True, db_index=True)
    is_demo = models.BooleanField(default=False, help_text="Built from demo data.")
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    message = models.TextField(blank=True)
    job = models.ForeignKey(
        "h2htalk.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    checked_at = models.DateTimeField(null=True, blank=True)
    check_ok = models.BooleanField(null=True, blank=True)
    check_message = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    frozen_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return self.name


class ReleaseResult(models.Model):
    """The numbers of a release (deterministic JSON) and how they were computed."""

    release = models.OneToOneField(Release, on_delete=models.CASCADE, related_name="result")
    data = models.JSONField()
    data_sha256 = models.CharField(max_length=64)
    code_version = models.CharField(max_length=200)
    computed_at = models.DateTimeField()
    seconds = models.FloatField()

    def __str__(self):
        return f"results of {self.release}"
