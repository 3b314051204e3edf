"""Campaigns and votes in the Django admin, read-only: the campaign state machine, the queue and
the vote counts are kept by annotation.services / queue, not by admin forms."""

from django.contrib import admin

from h2htalk.admin import ReadOnlyAdmin

from .models import AnnotatorExclusion, Assignment, Campaign, Comparison, Judgment
from .study.models import Participant, StudyLink


@admin.register(Campaign)
class CampaignAdmin(ReadOnlyAdmin):
    list_display = ("id", "name", "state", "pairing", "overlap", "owner", "created_at")
    list_filter = ("state", "pairing")
    list_select_related = ("owner",)
    search_fields = ("name",)


@admin.register(Comparison)
class ComparisonAdmin(ReadOnlyAdmin):
    list_display = ("id", "campaign", "scenario_id", "is_gold", "judgment_count")
    list_filter = ("is_gold",)
    list_select_related = ("campaign",)


@admin.register(Assignment)
class AssignmentAdmin(ReadOnlyAdmin):
    list_display = ("key", "comparison_id", "annotator", "state", "issued_at", "finished_at")
    list_filter = ("state",)
    list_select_related = ("annotator",)


@admin.register(Judgment)
class JudgmentAdmin(ReadOnlyAdmin):
    list_display = ("id", "comparison_id", "annotator", "preference", "created_at")
    list_select_related = ("annotator",)


@admin.register(AnnotatorExclusion)
class AnnotatorExclusionAdmin(ReadOnlyAdmin):
    list_display = ("campaign", "annotator", "reason", "created_by", "created_at")
    list_select_related = ("campaign", "annotator", "created_by")


@admin.register(StudyLink)
class StudyLinkAdmin(ReadOnlyAdmin):
    list_display = ("campaign", "platform", "is_open", "quota", "created_at", "rotated_at")
    list_filter = ("platform", "is_open")
    list_select_related = ("campaign",)


@admin.register(Participant)
class ParticipantAdmin(ReadOnlyAdmin):
    list_display = ("participant_id", "campaign", "user", "joined_at", "finished_at")
    list_display += ("finish_reason",)
    list_filter = ("finish_reason",)
    list_select_related = ("campaign", "user")
    search_fields = ("participant_id", "study_id", "session_id")
