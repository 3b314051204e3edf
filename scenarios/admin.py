"""The scenario bank and the companions in the Django admin. Personas and companion endpoints
are edited here, through the same forms as the platform's pages (PersonaForm, CompanionForm);
scenarios and tags are read-only (an edit must go through scenarios.services to get its revision
and content hash, and a renamed tag would change which scenarios a campaign's query selects),
and so are generation runs and responses (written by the runner)."""

from django.contrib import admin

from h2htalk.admin import ReadOnlyAdmin
from scenarios.companions.forms import CompanionForm
from scenarios.forms import PersonaForm
from scenarios.models import (
    CompanionModel,
    GenerationRun,
    Persona,
    Response,
    ReviewComment,
    Revision,
    Scenario,
    Tag,
)


@admin.register(Persona)
class PersonaAdmin(admin.ModelAdmin):
    form = PersonaForm
    list_display = ("name", "language", "sap_enabled", "updated_at")
    search_fields = ("name",)


@admin.register(Tag)
class TagAdmin(ReadOnlyAdmin):
    search_fields = ("name",)


@admin.register(CompanionModel)
class CompanionModelAdmin(admin.ModelAdmin):
    form = CompanionForm
    list_display = ("name", "provider", "model_id", "base_url", "max_concurrency")
    list_filter = ("provider",)
    search_fields = ("name", "model_id")


@admin.register(Scenario)
class ScenarioAdmin(ReadOnlyAdmin):
    list_display = ("id", "external_id", "dimension", "subtask", "state", "persona", "updated_at")
    list_filter = ("state", "dimension", "language")
    list_select_related = ("persona",)
    search_fields = ("external_id", "user_message")


@admin.register(Revision)
class RevisionAdmin(ReadOnlyAdmin):
    list_display = ("scenario_id", "number", "action", "author", "created_at")
    list_select_related = ("author",)


@admin.register(ReviewComment)
class ReviewCommentAdmin(ReadOnlyAdmin):
    list_display = ("scenario_id", "kind", "author", "created_at")
    list_select_related = ("author",)


@admin.register(GenerationRun)
class GenerationRunAdmin(ReadOnlyAdmin):
    list_display = ("id", "name", "kind", "state", "tokens_used", "created_at")
    list_filter = ("kind", "state")
    search_fields = ("name",)


@admin.register(Response)
class ResponseAdmin(ReadOnlyAdmin):
    list_display = ("id", "run", "scenario_id", "companion", "status", "created_at")
    list_filter = ("status",)
    list_select_related = ("run", "companion")
