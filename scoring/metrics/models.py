"""Reference-metric scores per response."""

from django.db import models

from scoring.metrics import profiles


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
    profile = models.CharField(
        max_length=16,
        choices=profiles.CHOICES,
        default=profiles.DEFAULT,
        help_text="The metrics profile the values were computed with (scoring.metrics.profiles); "
        "values of a profile other than the default also say it under values['profile'].",
    )
    computed_at = models.DateTimeField(auto_now=True)

    def __str__(self):
        return f"metrics of response {self.response_id}"
