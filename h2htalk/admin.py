"""The Django admin (/django-admin/, staff = admins only) over the platform's models.

Most models are shown read-only: their rows are written by services that keep invariants the
admin's plain forms would not (votes and assignments, frozen releases, revisions, run state).
Only configuration is edited here (personas, companion and judge endpoints), through the same
forms as the platform's own pages.
"""

from django.contrib import admin

from .models import Job


class ReadOnlyAdmin(admin.ModelAdmin):
    """Browse and search only: no add, change or delete."""

    show_full_result_count = False  # no second COUNT(*) on the large tables

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Job)
class JobAdmin(ReadOnlyAdmin):
    list_display = ("id", "kind", "state", "done", "total", "created_by", "created_at")
    list_filter = ("kind", "state")
    list_select_related = ("created_by",)
