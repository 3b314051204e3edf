import json

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from scenarios.taxonomy import DEFAULT_SAP_BLOCK, LANGUAGES, Dimension, RiskLevel, Subtask


class UnicodeJSONEncoder(json.JSONEncoder):
    """Store CJK text as UTF-8, not \\uXXXX escapes (smaller, and cheaper to send to PostgreSQL)."""

    def __init__(self, *args, **kwargs):
        kwargs["ensure_ascii"] = False
        super().__init__(*args, **kwargs)


class Persona(models.Model):
    """The companion character a scenario is played with, with its switchable SAP block."""

    name = models.CharField(max_length=120, unique=True)
    summary = models.CharField(
        max_length=500, blank=True, help_text=_("One or two sentences shown to annotators.")
    )
    character = models.TextField(
        blank=True,
        help_text=_("Who the companion is: background, voice, relationship to the user."),
    )
    language = models.CharField(max_length=10, choices=LANGUAGES, default="zh")
    sap_enabled = models.BooleanField(
        "SAP block on", default=True, help_text=_("Switch off for ablation runs.")
    )
    sap_block = models.TextField("SAP block", default=DEFAULT_SAP_BLOCK)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name

    def system_prompt(self, sap: bool | None = None) -> str:
        """The persona part of a companion's system prompt; `sap` overrides the stored switch."""
        use_sap = self.sap_enabled if sap is None else sap
        parts = [f"You are {self.name}.", self.character.strip()]
        if use_sap and self.sap_block.strip():
            parts.append(self.sap_block.strip())
        return "\n\n".join(part for part in parts if part)


class Tag(models.Model):
    name = models.CharField(max_length=60, unique=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name


class Scenario(models.Model):
    class State(models.TextChoices):
        DRAFT = "draft", _("Draft")
        IN_REVIEW = "in_review", _("In review")
        APPROVED = "approved", _("Approved")
        RETIRED = "retired", _("Retired")

    external_id = models.CharField(max_length=100, blank=True)
    dimension = models.CharField(max_length=20, choices=Dimension.choices, editable=False)
    subtask = models.CharField(max_length=40, choices=Subtask.choices)
    persona = models.ForeignKey(
        Persona, null=True, blank=True, on_delete=models.PROTECT, related_name="scenarios"
    )
    history = models.JSONField(
        encoder=UnicodeJSONEncoder,
        default=list,
        blank=True,
        help_text=_('Turns before the final message: [{"role", "content"}]'),
    )
    memory = models.JSONField(
        encoder=UnicodeJSONEncoder,
        default=list,
        blank=True,
        help_text=_('Memory entries: [{"content", "category", "importance": 0|1|2}]'),
    )
    schedule = models.JSONField(
        encoder=UnicodeJSONEncoder,
        default=list,
        blank=True,
        help_text=_('Today\'s plan: [{"time": "HH:MM", "activity"}]'),
    )
    user_message = models.TextField(blank=True)
    reference_response = models.TextField(blank=True)
    implicit_need = models.BooleanField(default=False)
    evolving_need = models.BooleanField(
        default=False, help_text=_("The user's need changes during the conversation.")
    )
    risk_level = models.CharField(max_length=10, choices=RiskLevel.choices, default=RiskLevel.NONE)
    language = models.CharField(max_length=10, choices=LANGUAGES, default="zh")
    tags = models.ManyToManyField(Tag, blank=True, related_name="scenarios")
    source = models.CharField(max_length=200, blank=True)
    content_hash = models.CharField(max_length=64, editable=False, db_index=True)
    search_text = models.TextField(editable=False, default="")
    state = models.CharField(max_length=12, choices=State.choices, default=State.DRAFT)
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="reviewed_scenarios",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="created_scenarios",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["subtask", "external_id"],
                condition=~Q(external_id=""),
                name="unique_external_id_per_subtask",
            )
        ]
        indexes = [
            models.Index(fields=["state", "dimension", "subtask"]),
            models.Index(fields=["language"]),
        ]

    def __str__(self):
        return f"{self.subtask}/{self.external_id or self.pk}"

    def save(self, *args, **kwargs):
        self.refresh_derived()
        super().save(*args, **kwargs)

    def refresh_derived(self) -> None:
        """Set the fields computed from content; bulk_create skips save(), so importers call this."""
        from scenarios.services import content_hash, search_text
        from scenarios.taxonomy import dimension_of

        self.dimension = dimension_of(self.subtask)
        self.content_hash = content_hash(self)
        self.search_text = search_text(self)


class Revision(models.Model):
    """One change to a scenario: who, when, what (a full snapshot plus the changed fields)."""

    class Action(models.TextChoices):
        CREATED = "created", _("Created")
        EDITED = "edited", _("Edited")
        IMPORTED = "imported", _("Imported")
        STATE = "state", _("State change")

    scenario = models.ForeignKey(Scenario, on_delete=models.CASCADE, related_name="revisions")
    number = models.PositiveIntegerField()
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)
    action = models.CharField(max_length=10, choices=Action.choices)
    note = models.CharField(max_length=300, blank=True)
    snapshot = models.JSONField(encoder=UnicodeJSONEncoder)
    changes = models.JSONField(
        encoder=UnicodeJSONEncoder, default=dict, help_text=_("{field: [old, new]}")
    )

    class Meta:
        ordering = ["scenario", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["scenario", "number"], name="unique_revision_number")
        ]

    def __str__(self):
        return f"{self.scenario} r{self.number}"


class ReviewComment(models.Model):
    class Kind(models.TextChoices):
        COMMENT = "comment", _("Comment")
        APPROVE = "approve", _("Approved")
        REQUEST_CHANGES = "request_changes", _("Requested changes")

    scenario = models.ForeignKey(Scenario, on_delete=models.CASCADE, related_name="comments")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.COMMENT)
    body = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]

    def __str__(self):
        return f"{self.get_kind_display()} on {self.scenario}"
