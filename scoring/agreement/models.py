"""A campaign's stored agreement report."""

from django.db import models

from annotation.models import Campaign


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
