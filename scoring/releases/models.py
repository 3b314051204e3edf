"""Frozen benchmark releases and their computed results."""

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from annotation.models import Campaign
from scoring.calibration.models import CalibratedJudge


class Release(models.Model):
    """A benchmark release: its inputs frozen as ids and content hashes (`inputs`, see
    scoring.releases.service) with a sha256 `fingerprint`; its numbers (ReleaseResult) are computed from
    those inputs only, and `manage.py benchmark_report RELEASE --check` reproduces them."""

    class State(models.TextChoices):
        PENDING = "pending", _("Waiting to be frozen and computed")
        COMPUTING = "computing", _("Computing")
        READY = "ready", _("Ready")
        FAILED = "failed", _("Failed")

    name = models.CharField(max_length=150, unique=True)
    description = models.TextField(blank=True)
    campaign = models.ForeignKey(
        Campaign,
        on_delete=models.PROTECT,
        related_name="releases",
        help_text=_("Where the human judgments (and the responses' runs) come from."),
    )
    companions = models.ManyToManyField(
        "scenarios.CompanionModel", related_name="releases", help_text=_("Companions ranked.")
    )
    anchor = models.ForeignKey(
        "scenarios.CompanionModel",
        on_delete=models.PROTECT,
        related_name="+",
        help_text=_("Win rates are reported against this companion."),
    )
    judge = models.ForeignKey(
        CalibratedJudge,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="releases",
        help_text=_("Calibrated judge scoring every pair (none: humans and metrics only)."),
    )
    seed = models.PositiveIntegerField(default=0)
    n_boot = models.PositiveIntegerField("bootstrap draws", default=1000)
    style_control = models.BooleanField(
        default=False,
        help_text=_(
            "Also rank the companions with the responses' presentation (length, Markdown, "
            "persona actions, emoji, question marks) held fixed (scoring.releases.style)."
        ),
    )
    parent = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="versions",
        help_text=_(
            "The release this version extends (same anchor, scale, seed and draws; "
            "scoring.releases.versioning)."
        ),
    )
    added_campaigns = models.ManyToManyField(
        Campaign,
        blank=True,
        related_name="+",
        help_text=_("Campaigns besides the parent's whose new votes a version counts."),
    )
    inputs = models.JSONField(null=True, blank=True, help_text=_("Frozen inputs (ids + hashes)."))
    fingerprint = models.CharField(max_length=64, blank=True, db_index=True)
    is_demo = models.BooleanField(default=False, help_text=_("Built from demo data."))
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
