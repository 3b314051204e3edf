"""The qualification's rows: a campaign's rule and practice items, each annotator's attempts
and answers, their phase (one row, the admission check) and its history.

Practice answers live here and only here: agreement, calibration and releases read
`annotation.Judgment`, so a practice answer can never enter them. Foreign keys name the
annotation models by string, so `annotation.models` can import this module at its end.
"""

import uuid

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

SHARE = [MinValueValidator(0.0), MaxValueValidator(1.0)]


class PracticeSet(models.TextChoices):
    QUALIFICATION = "qualification", _("Qualification")
    REFRESHER = "refresher", _("Refresher")


class Phase(models.TextChoices):
    """Where an annotator stands in a campaign (`phases.phase`)."""

    NOT_REQUIRED = "not_required", _("No qualification needed")
    QUALIFYING = "qualifying", _("Qualifying")
    FAILED = "failed", _("Not admitted")
    ADMITTED = "admitted", _("Admitted")
    REFRESHER = "refresher", _("Refresher")


class QualificationRule(models.Model):
    """How a campaign admits annotators and watches them while they rate.

    Used while `Campaign.requires_qualification` is set (that flag is read with the campaign,
    so campaigns without a qualification pay nothing for it)."""

    campaign = models.OneToOneField(
        "annotation.Campaign",
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="qualification_rule",
    )
    min_accuracy = models.FloatField(
        _("accuracy to pass"),
        default=0.8,
        validators=SHARE,
        help_text=_("Share of practice items answered exactly as the known answer (0–1)."),
    )
    min_direction = models.FloatField(
        _("direction agreement to pass"),
        null=True,
        blank=True,
        validators=SHARE,
        help_text=_(
            "Optional: share of practice items whose answer points the same way as the known "
            "one (A better, tie, B better), 0–1."
        ),
    )
    attempts = models.PositiveSmallIntegerField(
        _("attempts allowed"),
        default=1,
        validators=[MinValueValidator(1), MaxValueValidator(20)],
        help_text=_("Tries at each practice set; 1 = no retry."),
    )
    window = models.PositiveSmallIntegerField(
        _("moving window"),
        default=20,
        validators=[MinValueValidator(2), MaxValueValidator(500)],
        help_text=_("The annotator's latest judgments the drift watch looks at."),
    )
    min_in_window = models.PositiveSmallIntegerField(
        _("judgments before the watch decides"),
        default=5,
        validators=[MinValueValidator(1), MaxValueValidator(500)],
        help_text=_("Gold or consensus judgments needed in the window before it can pause."),
    )
    min_gold_accuracy = models.FloatField(
        _("gold accuracy to keep rating"),
        null=True,
        blank=True,
        validators=SHARE,
        help_text=_("Optional: below this over the window, the annotator goes to the refresher."),
    )
    min_consensus = models.FloatField(
        _("consensus agreement to keep rating"),
        null=True,
        blank=True,
        validators=SHARE,
        help_text=_("Optional: below this over the window, the annotator goes to the refresher."),
    )

    def __str__(self):
        return f"qualification of {self.campaign_id}"


class PracticeItem(models.Model):
    """A comparison with a known answer and the researcher's explanation, shown after the
    annotator answered. `response_a`'s companion has the lower id, as in Comparison;
    `known_preference` is keyed by the pair (negative: response A better)."""

    campaign = models.ForeignKey(
        "annotation.Campaign", on_delete=models.CASCADE, related_name="practice_items"
    )
    practice_set = models.CharField(
        _("set"), max_length=20, choices=PracticeSet.choices, default=PracticeSet.QUALIFICATION
    )
    scenario = models.ForeignKey("scenarios.Scenario", on_delete=models.PROTECT, related_name="+")
    response_a = models.ForeignKey("scenarios.Response", on_delete=models.PROTECT, related_name="+")
    response_b = models.ForeignKey("scenarios.Response", on_delete=models.PROTECT, related_name="+")
    known_preference = models.SmallIntegerField(
        _("known answer"),
        validators=[MinValueValidator(-2), MaxValueValidator(2)],
        help_text=_("Keyed by the pair: -2 response A much better … 2 response B much better."),
    )
    explanation = models.TextField(
        _("explanation"), help_text=_("Shown to the annotator after they answered.")
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["campaign", "practice_set", "pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["campaign", "practice_set", "response_a", "response_b"],
                name="one_practice_item_per_pair_and_set",
            )
        ]

    def __str__(self):
        return f"{self.practice_set} item {self.pk} of {self.campaign_id}"


class PracticeAttempt(models.Model):
    """One run of an annotator through a practice set, its items in an order drawn for it."""

    campaign = models.ForeignKey("annotation.Campaign", on_delete=models.CASCADE, related_name="+")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    practice_set = models.CharField(max_length=20, choices=PracticeSet.choices)
    number = models.PositiveSmallIntegerField(help_text="1 for the first try at this set.")
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    total = models.PositiveSmallIntegerField(default=0)
    correct = models.PositiveSmallIntegerField(default=0)
    same_direction = models.PositiveSmallIntegerField(default=0)
    passed = models.BooleanField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["campaign", "annotator", "started_at"])]

    def __str__(self):
        return f"{self.practice_set} attempt {self.number} of {self.annotator_id}"


class PracticeAnswer(models.Model):
    """One practice item in an attempt: shown blind by its random `key` with the side layout
    drawn for it; the answer once given (screen terms and keyed by the pair)."""

    attempt = models.ForeignKey(PracticeAttempt, on_delete=models.CASCADE, related_name="answers")
    item = models.ForeignKey(PracticeItem, on_delete=models.CASCADE, related_name="+")
    key = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    order = models.PositiveSmallIntegerField()
    left_is_a = models.BooleanField()
    screen_preference = models.SmallIntegerField(null=True, blank=True)
    preference = models.SmallIntegerField(null=True, blank=True)
    answered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["attempt", "order"]
        constraints = [
            models.UniqueConstraint(fields=["attempt", "order"], name="one_practice_slot"),
        ]

    def __str__(self):
        return f"practice answer {self.key}"


class QualificationStatus(models.Model):
    """An annotator's phase in a campaign that requires qualification: the one indexed row the
    rating page and API read before handing out an item. No row: not started (qualifying)."""

    campaign = models.ForeignKey("annotation.Campaign", on_delete=models.CASCADE, related_name="+")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    phase = models.CharField(max_length=20, choices=Phase.choices, default=Phase.QUALIFYING)
    since = models.DateTimeField(help_text="When the annotator entered this phase.")
    reason = models.CharField(max_length=300, blank=True, help_text="Why, in English (log).")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["campaign", "annotator"], name="one_qualification_status"
            )
        ]

    def __str__(self):
        return f"{self.annotator_id} in {self.campaign_id}: {self.phase}"


class QualificationEvent(models.Model):
    """The history of an annotator's phase: attempts started, passed, failed; pauses."""

    class Kind(models.TextChoices):
        STARTED = "started", _("Started a practice set")
        PASSED = "passed", _("Passed")
        FAILED = "failed", _("Failed")
        PAUSED = "paused", _("Paused: sent to the refresher")

    campaign = models.ForeignKey("annotation.Campaign", on_delete=models.CASCADE, related_name="+")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    kind = models.CharField(max_length=10, choices=Kind.choices)
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "pk"]
        indexes = [models.Index(fields=["campaign", "annotator", "created_at"])]

    def __str__(self):
        return f"{self.kind} of {self.annotator_id} in {self.campaign_id}"
