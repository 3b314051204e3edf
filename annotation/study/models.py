"""A campaign's study link and the participants who joined through it (see the package)."""

import secrets

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from annotation.models import Campaign


def new_token() -> str:
    return secrets.token_urlsafe(18)


class StudyLink(models.Model):
    """How a campaign recruits on a crowd platform: the link's token, the names of its URL
    parameters, the codes and addresses participants are sent back with, and their limits."""

    class Platform(models.TextChoices):
        PROLIFIC = "prolific", "Prolific"
        MTURK = "mturk", "Amazon Mechanical Turk"
        GENERIC = "generic", _("Other (URL parameters)")

    campaign = models.OneToOneField(Campaign, on_delete=models.CASCADE, related_name="study_link")
    token = models.CharField(max_length=64, unique=True, default=new_token, editable=False)
    is_open = models.BooleanField(_("link open"), default=True)
    platform = models.CharField(
        _("platform"), max_length=10, choices=Platform.choices, default=Platform.PROLIFIC
    )
    participant_param = models.CharField(
        _("participant id parameter"), max_length=40, default="PROLIFIC_PID"
    )
    study_param = models.CharField(
        _("study id parameter"), max_length=40, blank=True, default="STUDY_ID"
    )
    session_param = models.CharField(
        _("session id parameter"),
        max_length=40,
        blank=True,
        default="SESSION_ID",
        help_text=_("Needed, with the same value, to resume from another browser."),
    )
    completion_code = models.CharField(_("completion code"), max_length=100)
    completion_url = models.URLField(_("completion URL"), max_length=500, blank=True)
    screenout_code = models.CharField(_("screen-out code"), max_length=100, blank=True)
    screenout_url = models.URLField(_("screen-out URL"), max_length=500, blank=True)
    quota = models.PositiveIntegerField(
        _("items per participant"), default=20, help_text=_("Judgments each participant makes.")
    )
    time_limit_minutes = models.PositiveIntegerField(
        _("time limit (minutes)"),
        default=60,
        help_text=_("From joining; 0 for none. No item is handed out after it."),
    )
    consent = models.TextField(_("consent"), help_text=_("Markdown, shown before anything else."))
    consent_zh_hans = models.TextField(_("consent in Simplified Chinese"), blank=True)
    instructions = models.TextField(_("instructions"), blank=True, help_text=_("Markdown."))
    instructions_zh_hans = models.TextField(_("instructions in Simplified Chinese"), blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    rotated_at = models.DateTimeField(null=True, blank=True, editable=False)

    def __str__(self):
        return f"study link of {self.campaign}"

    def texts_in(self, language: str) -> tuple[str, str, str]:
        """The consent and instructions a participant reading `language` sees, and their
        language when they are a per-language text ("" for the default ones)."""
        if language == "zh-hans" and self.consent_zh_hans.strip():
            return self.consent_zh_hans, self.instructions_zh_hans, language
        return self.consent, self.instructions, ""


class Participant(models.Model):
    """A crowd worker in one campaign, with their own account (`user`), and the platform's
    ids as given. Finished once they got a code (`finish_reason`)."""

    class Finish(models.TextChoices):
        QUOTA = "quota", _("quota reached")
        NO_ITEMS = "no_items", _("nothing left to rate")
        TIME_LIMIT = "time_limit", _("time limit reached")
        SCREENED_OUT = "screened_out", _("screened out")

    link = models.ForeignKey(StudyLink, on_delete=models.CASCADE, related_name="participants")
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="+")
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="study_participant"
    )
    participant_id = models.CharField(max_length=100)
    study_id = models.CharField(max_length=100, blank=True)
    session_id = models.CharField(max_length=100, blank=True)
    address = models.CharField(max_length=64, blank=True, help_text="Where they joined from.")
    joined_at = models.DateTimeField(auto_now_add=True)
    consented_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    finish_reason = models.CharField(max_length=20, choices=Finish.choices, blank=True)

    class Meta:
        ordering = ["joined_at", "pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["campaign", "participant_id"], name="one_participant_per_id"
            )
        ]

    def __str__(self):
        return f"participant {self.pk} in {self.campaign_id}"
