"""Rating campaigns, their pairwise comparisons, assignments to annotators, and judgments.

Blindness: annotators only ever see an Assignment through its random `key`; which response
is shown on the left is drawn per assignment (`left_is_a`). A judgment is stored both as the
annotator saw it (left/right) and keyed by the model pair (`preference`: negative = response A
of the comparison better, whose companion has the lower id), so votes from different layouts
agree.
"""

import secrets
import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from scenarios.models import CompanionModel, GenerationRun, Response, Scenario

RATING_DIMENSIONS = [
    ("empathy", "Empathy"),
    ("fluency", "Fluency"),
    ("memory_use", "Memory use"),
    ("planning", "Planning"),
    ("persona_consistency", "Persona consistency"),
    ("safety", "Safety (SAP)"),
]
# Screen choice -> label; stored as -2..2 with negative = left better.
PREFERENCE_CHOICES = [
    (-2, "A much better"),
    (-1, "A better"),
    (0, "Tie"),
    (1, "B better"),
    (2, "B much better"),
]


class Campaign(models.Model):
    class State(models.TextChoices):
        DRAFT = "draft", _("Draft")
        OPEN = "open", _("Open")
        PAUSED = "paused", _("Paused")
        CLOSED = "closed", _("Closed")

    class Pairing(models.TextChoices):
        ALL_PAIRS = "all_pairs", _("All pairs per scenario")
        RANDOM_PAIRS = "random_pairs", _("Fixed number of random pairs per scenario (balanced)")
        ADAPTIVE = "adaptive", _("Adaptive: most uncertain model pairs first (Bradley–Terry)")
        FIXED = "fixed", _("Fixed comparisons (routed from a judge; never rebuilt)")

    name = models.CharField(max_length=150, unique=True)
    description = models.TextField(blank=True)
    guidelines = models.TextField(
        blank=True, help_text=_("Markdown, shown (sanitised) to annotators beside every item.")
    )
    # Per-language guidelines (issue 22): an annotator whose interface is in Simplified Chinese
    # sees these when written, everyone else (and they, when empty) the guidelines above.
    guidelines_zh_hans = models.TextField(
        "guidelines in Simplified Chinese",
        blank=True,
        help_text=_(
            "Markdown, optional: shown instead of the guidelines above to annotators "
            "whose interface is in Simplified Chinese."
        ),
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="owned_campaigns"
    )
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        blank=True,
        related_name="member_campaigns",
        help_text=_("Researchers who may see and manage this campaign with the owner."),
    )
    annotators = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="rating_campaigns"
    )
    state = models.CharField(max_length=10, choices=State.choices, default=State.DRAFT)
    scenario_query = models.CharField(max_length=1000, blank=True)
    companions = models.ManyToManyField(CompanionModel, related_name="campaigns")
    runs = models.ManyToManyField(
        GenerationRun, related_name="campaigns", help_text=_("Where the responses come from.")
    )
    pairing = models.CharField(max_length=20, choices=Pairing.choices, default=Pairing.ALL_PAIRS)
    pairs_per_scenario = models.PositiveSmallIntegerField(
        default=1, help_text=_("For random and adaptive pairing.")
    )
    overlap = models.PositiveSmallIntegerField(
        "annotators per comparison (k)", default=3, help_text=_("Judgments each comparison gets.")
    )
    gold_share = models.FloatField(
        default=0.0, help_text=_("Share of items an annotator sees that are gold (0–0.5).")
    )
    lease_minutes = models.PositiveSmallIntegerField(
        default=15, help_text=_("An unanswered item returns to the queue after this long.")
    )
    seed = models.PositiveIntegerField(default=0, help_text=_("Seed for pairing and side draws."))
    reason_choices = models.JSONField(
        _("reasons"),
        default=list,
        blank=True,
        help_text=_(
            'The checklist of why the preferred response is better: [{"key", "label"}] '
            "(annotation.reasons)."
        ),
    )
    ask_confidence = models.BooleanField(
        _("ask for confidence"),
        default=False,
        help_text=_("Annotators may say how sure they are (1 = unsure … 3 = sure)."),
    )
    # Care for raters (annotation.care): a cap on high-risk items per rater per day, a break
    # prompt after this many minutes of continuous rating, and where to find help.
    high_risk_daily_cap = models.PositiveSmallIntegerField(
        _("high-risk items per rater per day"),
        null=True,
        blank=True,
        help_text=_("Empty: no cap. A rater who reached it today gets no high-risk item."),
    )
    break_after_minutes = models.PositiveSmallIntegerField(
        _("break prompt after (minutes)"),
        null=True,
        blank=True,
        help_text=_(
            "Empty: no prompt. After this many minutes of continuous rating the page suggests "
            "a break (the rater may go on)."
        ),
    )
    support_text = models.TextField(
        _("support text"),
        blank=True,
        help_text=_(
            "Markdown: helplines and whom to contact, one click away on every rating page."
        ),
    )
    support_text_zh_hans = models.TextField(
        _("support text in Simplified Chinese"),
        blank=True,
        help_text=_("Markdown, optional: shown instead to raters reading Simplified Chinese."),
    )
    # Qualification (issue 22): read with the campaign, so the admission check costs nothing
    # where it is off; its rule, practice items and phases: annotation.qualification.
    requires_qualification = models.BooleanField(
        _("requires qualification"),
        default=False,
        help_text=_("Annotators pass a practice set before their votes count."),
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # The queue's counts (annotation.progress), so that progress reads no row per comparison:
    # comparisons with fewer than k judgments = open_base - the tallies' `filled`, counted for
    # k = counted_overlap (None: to count again, after comparisons were added or removed).
    comparison_total = models.PositiveIntegerField(default=0, editable=False)
    open_base = models.IntegerField(default=0, editable=False)
    counted_overlap = models.PositiveSmallIntegerField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return self.name

    def guidelines_in(self, language: str) -> tuple[str, str]:
        """The guidelines an annotator reading `language` sees, and their language when they
        are a per-language text ("" for the default guidelines, whose language is not known)."""
        translated = {"zh-hans": self.guidelines_zh_hans}.get(language, "")
        if translated.strip():
            return translated, language
        return self.guidelines, ""

    def support_text_in(self, language: str) -> tuple[str, str]:
        """The support text in `language` when written in it (as `guidelines_in`)."""
        translated = {"zh-hans": self.support_text_zh_hans}.get(language, "")
        if translated.strip():
            return translated, language
        return self.support_text, ""


def random_shuffle_key() -> int:
    return secrets.randbits(31)


class Comparison(models.Model):
    """Two responses to one scenario. response_a's companion has the lower id (canonical order).

    `shuffle_key` is drawn at random when the comparison is made: the queue breaks ties in its
    priority by it (from a random starting point per request), never by id, so the order in which
    items arrive says nothing about which companions they come from.
    """

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="comparisons")
    scenario = models.ForeignKey(Scenario, on_delete=models.PROTECT, related_name="+")
    response_a = models.ForeignKey(Response, on_delete=models.PROTECT, related_name="+")
    response_b = models.ForeignKey(Response, on_delete=models.PROTECT, related_name="+")
    is_gold = models.BooleanField(default=False)
    gold_preference = models.SmallIntegerField(
        null=True,
        blank=True,
        help_text=_("Known answer keyed by the pair: <0 A better, >0 B better"),
    )
    gold_note = models.TextField(blank=True, help_text=_("Why (shown to researchers only)."))
    judgment_count = models.PositiveSmallIntegerField(default=0)
    shuffle_key = models.IntegerField(default=random_shuffle_key, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["campaign", "response_a", "response_b"], name="one_comparison_per_pair"
            )
        ]
        indexes = [
            models.Index(
                fields=["campaign", "is_gold", "judgment_count", "shuffle_key"],
                name="comparison_queue_order",
            ),
        ]

    def __str__(self):
        return f"comparison {self.pk} in {self.campaign}"


class Assignment(models.Model):
    """One comparison handed to one annotator, with the side layout they saw."""

    class State(models.TextChoices):
        OPEN = "open", _("Open")
        SUBMITTED = "submitted", _("Submitted")
        SKIPPED = "skipped", _("Skipped")
        REJECTED = "rejected", _("Rejected (comparison already full)")

    key = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    comparison = models.ForeignKey(Comparison, on_delete=models.CASCADE, related_name="assignments")
    # The comparison's campaign, kept on the row so that an annotator's items in one campaign
    # are one range of the index below, whatever they did in other campaigns (the progress
    # counts and the held item read only these; set from the comparison when saved).
    campaign = models.ForeignKey(
        Campaign, on_delete=models.CASCADE, related_name="+", db_index=False, editable=False
    )
    # No index of its own: (annotator, state) below starts with it, and a lone annotator index
    # tempted the planner, its statistics not yet knowing a new rater, to read every item of
    # theirs instead of the few in one campaign or state.
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="assignments",
        db_index=False,
    )
    left_is_a = models.BooleanField(help_text=_("True when response A was shown on the left."))
    state = models.CharField(max_length=10, choices=State.choices, default=State.OPEN)
    issued_at = models.DateTimeField(auto_now_add=True)
    lease_expires_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    skip_reason = models.CharField(max_length=300, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["comparison", "annotator"], name="annotator_sees_comparison_once"
            )
        ]
        indexes = [
            models.Index(fields=["annotator", "state"]),
            models.Index(
                fields=["campaign", "annotator", "state"], name="assignment_campaign_annotator"
            ),
            models.Index(
                fields=["comparison", "lease_expires_at"],
                condition=Q(state="open"),
                name="open_assignment_lease",
            ),
        ]

    def __str__(self):
        return f"assignment {self.key}"

    def save(self, *args, **kwargs):
        if self.campaign_id is None and self.comparison_id is not None:
            self.campaign_id = self.comparison.campaign_id
        super().save(*args, **kwargs)


class Judgment(models.Model):
    """A submitted vote. `preference` is keyed by the pair (positive = response B better)."""

    assignment = models.OneToOneField(Assignment, on_delete=models.CASCADE, related_name="judgment")
    comparison = models.ForeignKey(Comparison, on_delete=models.CASCADE, related_name="judgments")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="judgments"
    )
    screen_preference = models.SmallIntegerField(
        choices=PREFERENCE_CHOICES, help_text=_("As seen: negative = left better.")
    )
    preference = models.SmallIntegerField(
        help_text=_("Keyed by the pair: negative = response A better, positive = response B.")
    )
    both_unacceptable = models.BooleanField(
        default=False,
        help_text=_(
            "Its own outcome, given instead of a preference: both preference columns are then "
            "0, the tie point (annotation.outcomes)."
        ),
    )
    reasons = models.JSONField(
        default=list,
        blank=True,
        help_text=_(
            "Keys of the campaign's reasons, said of the preferred response (never a side or a "
            "companion); empty on a tie or when both are unacceptable."
        ),
    )
    confidence = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text=_("1 = unsure, 2 = fairly sure, 3 = sure.")
    )
    ratings = models.JSONField(
        default=dict,
        blank=True,
        help_text=_('Optional 1–5 ratings keyed by the pair: {"a": {dim: n}, "b": {dim: n}}'),
    )
    rationale = models.TextField(blank=True)
    time_on_task_ms = models.PositiveIntegerField(
        help_text=_("Issued → submitted, measured by us.")
    )
    client_time_ms = models.PositiveIntegerField(
        null=True, blank=True, help_text=_("Visible time on the page, measured in the browser.")
    )
    scenario_revision = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text=_("Number of the scenario revision the annotator was shown."),
    )
    scenario_hash = models.CharField(
        max_length=64, blank=True, help_text=_("Scenario.content_hash of the text that was shown.")
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["annotator", "created_at"])]

    def __str__(self):
        return f"judgment on {self.comparison_id} by {self.annotator_id}"

    @property
    def prefers_left(self) -> bool:
        return self.screen_preference < 0


class AnnotatorTally(models.Model):
    """One annotator's counts in one campaign, kept by the queue as judgments are stored:
    `judged` (all their judgments there), `filled` (comparisons their judgment brought to k)
    and `today` (their judgments on the local date `day`). One row per annotator, so
    concurrent submissions never wait on a shared counter."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="tallies")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    judged = models.PositiveIntegerField(default=0)
    filled = models.PositiveIntegerField(default=0)
    day = models.DateField(null=True, blank=True)
    today = models.PositiveIntegerField(default=0)
    # High-risk items handed to them on the local date `high_day` (annotation.care: the cap).
    high_day = models.DateField(null=True, blank=True)
    high_today = models.PositiveIntegerField(default=0, db_default=0)  # raw inserts leave it out

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["campaign", "annotator"], name="one_tally_per_annotator"
            )
        ]

    def __str__(self):
        return f"{self.annotator_id} in {self.campaign_id}: {self.judged}"


class HandedTally(models.Model):
    """One annotator's items in one campaign, kept by the queue so their progress reads no row
    per item: `handed` (their assignments there, in any state) and `on_full` (those whose
    comparison has reached k counted judgments). Counted up as items are handed out
    (`candidates.claim`) and as comparisons fill (`recording.store`: every holder of the
    comparison, rows taken in annotator order); counted again from the rows, in annotator order,
    when k changes, comparisons are removed or annotators excluded (`progress.recount_locked`).
    A table of its own, not the `AnnotatorTally`: a submission that fills a comparison writes
    its co-raters' rows, and writing their tallies, which their own submissions hold, could
    deadlock."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="+")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    handed = models.PositiveIntegerField(default=0)
    on_full = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["campaign", "annotator"], name="one_handed_tally_per_annotator"
            )
        ]

    def __str__(self):
        return f"{self.annotator_id} in {self.campaign_id}: {self.handed} handed"


class RaterPair(models.Model):
    """Two annotators of a campaign (`low` has the lower id) and how many of its regular
    comparisons both judged (`shared`), kept as judgments are stored (`recording.store`). The
    queue reads it to hand an annotator comparisons whose raters they share fewest items with,
    so every pair of annotators shares items (a connected design; `candidates`)."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="+")
    low = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    high = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    shared = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["campaign", "low", "high"], name="one_row_per_pair")
        ]

    def __str__(self):
        return f"{self.low_id} and {self.high_id} in {self.campaign_id}: {self.shared}"


class AnnotatorExclusion(models.Model):
    """An annotator whose judgments a researcher left out of a campaign's numbers, and why.

    Agreement, calibration fits and releases skip the judgments of excluded annotators; the
    judgments themselves stay stored (clearing the exclusion brings them back).
    """

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="exclusions")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="exclusions"
    )
    reason = models.CharField(max_length=300)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["campaign", "annotator"]
        constraints = [
            models.UniqueConstraint(
                fields=["campaign", "annotator"], name="one_exclusion_per_annotator"
            )
        ]

    def __str__(self):
        return f"{self.annotator} excluded from {self.campaign}"


class RaterCare(models.Model):
    """A rater's own choices about the content they read (annotation.care), in every campaign:
    the risk levels they opted out of, as their values joined by commas in level order."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="care"
    )
    opted_out = models.CharField(max_length=40, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self):
        return f"{self.user_id} opted out of: {self.opted_out or 'nothing'}"


# Study links and their participants (issue 22 point 3), a concern of its own; imported here so
# that Django finds the models.
from annotation.study.models import Participant, StudyLink  # noqa: E402, F401

# The qualification's models, in their own package (Django finds them through this module).
from .qualification.models import (  # noqa: E402
    PracticeAnswer,
    PracticeAttempt,
    PracticeItem,
    QualificationEvent,
    QualificationRule,
    QualificationStatus,
)

__all__ = [  # re-exported: the qualification package's models
    "PracticeAnswer",
    "PracticeAttempt",
    "PracticeItem",
    "QualificationEvent",
    "QualificationRule",
    "QualificationStatus",
]
