"""Roles and activity of existing users: the one place the manage page, the onboarding and
the API change them.

Deactivating a user (is_active=False) deletes nothing: their judgments stay, and agreement,
releases and leaderboards count them as before. They can no longer log in (the backend refuses
inactive users), and their sessions and API tokens are deleted (`end_sessions`): reactivating
them gives back their account and judgments, never an old session or token (they log in again
and get a new token).
"""

from importlib import import_module

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models import Prefetch
from django.utils.translation import gettext

from annotation.models import Campaign
from h2htalk.roles import ADMIN, ROLES

from . import names


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
    if not active:
        end_sessions(user)


def end_sessions(user) -> int:
    """Log the user out everywhere: delete their sessions (database and cache) and their API
    tokens, so reactivating them gives back no old session or token. Sessions name their user
    only inside their encoded data, so every unexpired one is read: a rare action, O(sessions).
    Returns the number of sessions ended."""
    from django.conf import settings
    from django.contrib.auth import SESSION_KEY
    from django.contrib.sessions.models import Session
    from django.utils import timezone
    from rest_framework.authtoken.models import Token

    Token.objects.filter(user=user).delete()
    store = import_module(settings.SESSION_ENGINE).SessionStore
    theirs = [
        session.session_key
        for session in Session.objects.filter(expire_date__gt=timezone.now()).iterator()
        if str(session.get_decoded().get(SESSION_KEY)) == str(user.pk)
    ]
    for key in theirs:
        store(session_key=key).delete()  # the cached copy too
    return len(theirs)


def keep_username_key(sender, instance, created=False, update_fields=None, **kwargs):
    """post_save of the user model: the user's `UsernameKey` follows their name. A clash with
    another user's key raises IntegrityError inside the save's transaction: the database, not
    only the checks before it, refuses two names that could be confused."""
    from h2htalk.models import UsernameKey

    if update_fields is None and not created and not kwargs.get("raw") and not instance.is_active:
        end_sessions(instance)  # deactivated by a full save (the Django admin's user form)
    if update_fields is not None and "username" not in update_fields:
        return  # last_login, is_active, the password: the name did not change
    if getattr(instance, "username_key_by_caller", False):
        return  # the onboarding writes its new users' keys in bulk
    folded, skeleton = names.keys(instance.username)
    rows = UsernameKey.objects.filter(user_id=instance.pk)
    if created or not rows.update(folded=folded, skeleton=skeleton):
        UsernameKey.objects.create(user_id=instance.pk, folded=folded, skeleton=skeleton)


def name_clash(username: str, exclude=None) -> str | None:
    """Why `username` may not be given (to a user other than `exclude`, a pk), or None: its
    folded name or its look-alike skeleton is another user's (h2htalk.accounts.names)."""
    from django.db.models import Q

    from h2htalk.models import UsernameKey

    folded, skeleton = names.keys(username)
    other = (
        UsernameKey.objects.filter(Q(folded=folded) | Q(skeleton=skeleton))
        .exclude(user_id=exclude)
        .select_related("user")
        .first()
    )
    if other is None:
        return None
    if other.folded == folded:
        return gettext("The same name as the user %(name)s once case and width are ignored.") % {
            "name": other.user.username
        }
    return gettext("Looks like the user %(name)s (letters of another script).") % {
        "name": other.user.username
    }
