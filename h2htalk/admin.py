"""The Django admin (/django-admin/, staff = admins only) over the platform's models.

Most models are shown read-only: their rows are written by services that keep invariants the
admin's plain forms would not (votes and assignments, frozen releases, revisions, run state).
Only configuration is edited here (personas, companion and judge endpoints), through the same
forms as the platform's own pages.
"""

from django.contrib import admin
from django.contrib.auth import admin as auth_admin
from django.contrib.auth import forms as auth_forms
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError

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


# ---------------------------------------------------------------- users: names that cannot clash


def _clean_username(form):
    """The Django admin's user forms check the name as the onboarding does (h2htalk.accounts
    .names): one folded the same as another user's, or a look-alike of one, is refused (the
    database's unique keys would otherwise answer with an IntegrityError)."""
    from .accounts import users

    username = form.cleaned_data.get("username")
    if username and (clash := users.name_clash(username, exclude=form.instance.pk)):
        raise ValidationError(clash)
    return username


class UserCreationForm(auth_forms.AdminUserCreationForm):
    def clean_username(self):
        super().clean_username()
        return _clean_username(self)


class UserChangeForm(auth_forms.UserChangeForm):
    def clean_username(self):
        return _clean_username(self)


class UserAdmin(auth_admin.UserAdmin):
    form = UserChangeForm
    add_form = UserCreationForm


admin.site.unregister(get_user_model())
admin.site.register(get_user_model(), UserAdmin)
