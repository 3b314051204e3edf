"""A judge fitted to human preferences, versioned."""

from django.conf import settings
from django.db import models

from annotation.models import Campaign


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
