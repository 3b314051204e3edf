"""Scoring in the Django admin. Judge configurations are edited here through the platform's
JudgeConfigForm (which fixes the fields of a judge that has runs); everything computed (metrics, verdicts, calibrated judges, agreement reports) and the
frozen releases with their results are read-only."""

from django.contrib import admin

from h2htalk.admin import ReadOnlyAdmin
from scoring.judges.forms import JudgeConfigForm
from scoring.models import (
    AgreementReport,
    CalibratedJudge,
    JudgeConfig,
    JudgeRun,
    JudgeVerdict,
    MetricScore,
    Release,
    ReleaseResult,
)


@admin.register(JudgeConfig)
class JudgeConfigAdmin(admin.ModelAdmin):
    form = JudgeConfigForm
    list_display = ("name", "mode", "model_id", "base_url", "samples", "created_at")
    list_filter = ("mode",)
    search_fields = ("name", "model_id")


@admin.register(JudgeRun)
class JudgeRunAdmin(ReadOnlyAdmin):
    list_display = ("id", "name", "judge", "state", "imported", "tokens_used", "created_at")
    list_filter = ("state", "imported")
    list_select_related = ("judge",)
    search_fields = ("name",)


@admin.register(JudgeVerdict)
class JudgeVerdictAdmin(ReadOnlyAdmin):
    list_display = ("id", "run", "response_id", "sample", "parse", "winner", "created_at")
    list_filter = ("parse",)
    list_select_related = ("run",)


@admin.register(MetricScore)
class MetricScoreAdmin(ReadOnlyAdmin):
    list_display = ("response_id", "composite_note", "computed_at")


@admin.register(CalibratedJudge)
class CalibratedJudgeAdmin(ReadOnlyAdmin):
    list_display = ("name", "version", "campaign", "created_by", "created_at")
    list_select_related = ("campaign", "created_by")


@admin.register(AgreementReport)
class AgreementReportAdmin(ReadOnlyAdmin):
    list_display = ("campaign", "fingerprint", "created_at")
    list_select_related = ("campaign",)


@admin.register(Release)
class ReleaseAdmin(ReadOnlyAdmin):
    list_display = ("id", "name", "campaign", "state", "is_demo", "check_ok", "frozen_at")
    list_filter = ("state", "is_demo")
    list_select_related = ("campaign",)
    search_fields = ("name",)


@admin.register(ReleaseResult)
class ReleaseResultAdmin(ReadOnlyAdmin):
    list_display = ("release", "code_version", "computed_at", "seconds")
    list_select_related = ("release",)
