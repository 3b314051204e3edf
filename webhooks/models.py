"""Webhook endpoints, their deliveries and each attempt; the outbox of filled comparisons and
the record of what was announced once (a completion, a flag)."""

import secrets
import uuid

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from annotation.models import Campaign

from .events import EVENTS


def new_secret() -> str:
    return "whsec_" + secrets.token_hex(32)


class Endpoint(models.Model):
    """Where events are posted. `campaign` empty: every campaign its owner manages (owner or
    member) at the time of the event, and the owner's jobs that belong to no campaign."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="webhook_endpoints"
    )
    campaign = models.ForeignKey(
        Campaign,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="webhook_endpoints",
        verbose_name=_("campaign"),
        help_text=_("Empty: every campaign you manage."),
    )
    url = models.URLField(_("URL"), max_length=500)
    description = models.CharField(_("description"), max_length=200, blank=True)
    # Needed to sign every delivery, so stored; shown once at creation and afterwards only to
    # the owner who asks for it (never in lists, the API's reads or the logs).
    secret = models.CharField(max_length=80, default=new_secret, editable=False)
    events = models.JSONField(_("events"), default=list)
    active = models.BooleanField(_("active"), default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return self.url

    def event_labels(self) -> list[str]:
        labels = dict(EVENTS)
        return [str(labels.get(name, name)) for name in self.events]


class Delivery(models.Model):
    """One event for one endpoint; sent again (a new attempt) until it succeeds or the attempts
    run out. `event_id` is the same on every attempt (receivers deduplicate with it)."""

    class State(models.TextChoices):
        PENDING = "pending", _("pending")
        SUCCEEDED = "succeeded", _("succeeded")
        FAILED = "failed", _("failed")

    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=40, choices=EVENTS)
    event_id = models.UUIDField(default=uuid.uuid4, editable=False)
    payload = models.JSONField()
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self):
        return f"{self.event} → {self.endpoint_id} ({self.state})"


class Attempt(models.Model):
    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="attempt_log")
    number = models.PositiveSmallIntegerField()
    by_hand = models.BooleanField(default=False)
    started_at = models.DateTimeField()
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    response_excerpt = models.TextField(blank=True)

    class Meta:
        ordering = ["-started_at", "-pk"]

    def __str__(self):
        return f"attempt {self.number} of delivery {self.delivery_id}"

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


class FilledComparison(models.Model):
    """The outbox of the rating path: one row per comparison that reached k while someone was
    subscribed; the campaign's batch task turns the rows into one event and deletes them."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="+")
    comparison_id = models.BigIntegerField()
    filled_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return f"comparison {self.comparison_id} filled"


class Announcement(models.Model):
    """What is announced once per campaign: its completion, an annotator's flag."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["campaign", "key"], name="webhooks_announced_once")
        ]

    def __str__(self):
        return self.key
