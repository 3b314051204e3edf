"""Roles and activity of existing users: the one place the manage page, the onboarding and
the API change them.

Deactivating a user (is_active=False) deletes nothing: their judgments stay, and agreement,
releases and leaderboards count them as before. They can no longer log in (the backend refuses
inactive users), a session they still hold is no longer accepted, and their API token answers
401 (DRF's TokenAuthentication refuses inactive users); reactivating gives all of it back.
"""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models import Prefetch

from annotation.models import Campaign
from h2htalk.roles import ADMIN, ROLES


class AccountError(ValueError):
    """A change refused, with a sentence to show."""


def listing():
    """Every user with their role groups and the campaigns they rate in (no query per row)."""
    return (
        get_user_model()
        .objects.order_by("username")
        .prefetch_related(
            Prefetch("groups", queryset=Group.objects.filter(name__in=ROLES)),
            Prefetch("rating_campaigns", queryset=Campaign.objects.order_by("name").only("name")),
        )
    )


def role_names(user) -> list[str]:
    """The user's roles in the order of ROLES (superusers count as admins)."""
    names = {group.name for group in user.groups.all()}
    if user.is_superuser:
        names.add(ADMIN)
    return [role for role in ROLES if role in names]


def _sync_staff(user, is_admin: bool) -> None:
    """Admins use the Django admin too, which needs is_staff (superusers keep theirs)."""
    if not user.is_superuser and user.is_staff != is_admin:
        user.is_staff = is_admin
        user.save(update_fields=["is_staff"])


def set_roles(user, wanted) -> None:
    """Give the user exactly these roles (unknown names are ignored)."""
    wanted = [role for role in wanted if role in ROLES]
    user.groups.remove(*Group.objects.filter(name__in=ROLES))
    user.groups.add(*Group.objects.filter(name__in=wanted))
    _sync_staff(user, ADMIN in wanted)


def add_role(user, role: str) -> None:
    """Give the user one more role (their others stay)."""
    user.groups.add(Group.objects.get(name=role))
    if role == ADMIN:
        _sync_staff(user, True)


def set_active(user, active: bool, by) -> None:
    """Deactivate (or reactivate) a user; nobody deactivates themselves (no admin locks the
    last door behind them)."""
    if not active and user.pk == by.pk:
        raise AccountError("You cannot deactivate yourself.")
    if user.is_active != active:
        user.is_active = active
        user.save(update_fields=["is_active"])
