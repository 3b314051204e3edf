"""LLM judges: their configuration, runs and verdicts."""

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from annotation.models import Campaign
from h2htalk.models import BackgroundRun, EndpointConfig


class JudgeConfig(EndpointConfig):
    """An LLM judge: endpoint, model, rubric, mode and sampling."""

    class Mode(models.TextChoices):
        SINGLE = "single", _("Single-answer grading (1–10 per dimension)")
        PAIRWISE = "pairwise", _("Pairwise (which is better), both orders")

    mode = models.CharField(max_length=10, choices=Mode.choices, default=Mode.SINGLE)
    rubric = models.TextField(help_text=_("The judge's instructions (a default is provided)."))
    temperature = models.FloatField(default=0.0)
    samples = models.PositiveSmallIntegerField(default=1, help_text=_("Verdicts per item."))

    def request_params(self) -> dict:
        """The judge's temperature is part of every request."""
        return {**super().request_params(), "temperature": self.temperature}


class JudgeRun(BackgroundRun):
    """One judge over a set of responses (single) or comparisons (pairwise); resumable."""

    judge = models.ForeignKey(JudgeConfig, on_delete=models.PROTECT, related_name="runs")
    campaign = models.ForeignKey(
        Campaign,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="judge_runs",
        help_text=_("Pairwise runs judge this campaign's comparisons."),
    )
    responses = models.ManyToManyField("scenarios.Response", blank=True, related_name="+")
    imported = models.BooleanField(default=False, help_text=_("Verdicts imported from a file."))
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )


class JudgeVerdict(models.Model):
    """One judge output. Single mode: `response` graded; pairwise: `first` vs `second` in the
    order the judge saw them (both orders are separate rows). Raw output is always kept."""

    class Parse(models.TextChoices):
        STRICT = "strict", _("Strict JSON")
        FALLBACK = "fallback", _("Recovered by the tolerant parser")
        FAILED = "failed", _("Unparseable")
        ERROR = "error", _("Request failed")

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
        default=dict, blank=True, help_text=_("Single: {dimension: 1..10}. Pairwise: {}.")
    )
    winner = models.CharField(
        max_length=6, blank=True, help_text=_("Pairwise: first / second / tie (as seen).")
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
