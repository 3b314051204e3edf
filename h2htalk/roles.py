"""The three roles (admin, researcher, annotator) as groups, and the checks every view uses.

Admins pass every role check. Researchers and annotators are separate: a user in both
groups has both roles.
"""

from functools import cache, wraps

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.db.models import Exists, OuterRef
from django.utils.translation import gettext, gettext_lazy, pgettext
from rest_framework.authentication import TokenAuthentication
from rest_framework.permissions import BasePermission

ADMIN = "admin"
RESEARCHER = "researcher"
ANNOTATOR = "annotator"
ROLES = (ADMIN, RESEARCHER, ANNOTATOR)

# Model permissions granted to each group (app labels, or "app.codename" for single ones).
ROLE_PERMISSIONS = {
    ADMIN: ["auth", "authtoken", "h2htalk", "scenarios", "annotation", "scoring"],
    RESEARCHER: ["scenarios", "annotation", "scoring", "h2htalk.view_job"],
    ANNOTATOR: ["annotation.add_judgment", "annotation.view_assignment"],
}


def user_roles(user) -> frozenset[str]:
    if not getattr(user, "is_authenticated", False):
        return frozenset()
    cached = getattr(user, "_h2h_roles", None)
    if cached is None:
        names = {g.name for g in user.groups.all()}
        cached = frozenset({ADMIN} if user.is_superuser else set()) | (names & set(ROLES))
        user._h2h_roles = cached
    return cached


def with_roles(queryset, user: str = "pk"):
    """`queryset` (of users, or of rows whose field `user` is a user's id) with the user's role
    groups read in the same query; `remember_roles` hands them to `user_roles`."""
    from django.contrib.auth import get_user_model

    member = get_user_model().groups.through.objects.filter(user_id=OuterRef(user))
    return queryset.annotate(
        **{f"role_{role}": Exists(member.filter(group__name=role)) for role in ROLES}
    )


def remember_roles(user, row) -> None:
    """Give `user` the roles `with_roles` read on `row` (the user or a row pointing to them)."""
    names = {role for role in ROLES if getattr(row, f"role_{role}")}
    user._h2h_roles = frozenset({ADMIN} if user.is_superuser else set()) | names


def has_role(user, *roles: str) -> bool:
    mine = user_roles(user)
    return ADMIN in mine or any(role in mine for role in roles)


def role_name(role: str) -> str:
    """A role as pages name it (the code stays in the data, the API and the CSV)."""
    names = {
        ADMIN: pgettext("role", "admin"),
        RESEARCHER: pgettext("role", "researcher"),
        ANNOTATOR: pgettext("role", "annotator"),
    }
    return names.get(role, role)


def needs_role_message(roles) -> str:
    """The 403 page's reason: "This page needs the role: researcher or admin"."""
    joined = gettext(" or ").join(role_name(role) for role in roles)
    return gettext("This page needs the role: %(roles)s") % {"roles": joined}


def role_required(*roles: str):
    """View decorator: anonymous users go to login, users without the role get 403."""

    def decorator(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not has_role(request.user, *roles):
                raise PermissionDenied(needs_role_message(roles))
            return view(request, *args, **kwargs)

        wrapped.required_roles = roles
        return wrapped

    return decorator


class RolesTokenAuthentication(TokenAuthentication):
    """DRF's token authentication, reading the user's roles with the token and the user in one
    hand-written statement (every API request runs it; the ORM took longer to build and compile
    it than PostgreSQL to answer)."""

    def authenticate_credentials(self, key):
        from h2htalk.rows import bound_cursor

        with bound_cursor() as cursor:
            cursor.execute(*token_statement(key))
            row = cursor.fetchone()
        user = token_user(row)
        if user is None or not user.is_active:
            return super().authenticate_credentials(key)  # DRF's answer (and its message)
        token = self.get_model()(key=key, user=user, created=row[0])
        return user, token


@cache
def _user_fields() -> tuple[str, ...]:
    from django.contrib.auth import get_user_model

    return tuple(f.attname for f in get_user_model()._meta.concrete_fields)


def token_statement(key: str) -> tuple[str, list]:
    """The statement reading API token `key` with its user and their roles, and its values
    (`token_user` reads its row, of `token_columns()` columns)."""
    from rest_framework.authtoken.models import Token

    return _token_sql(Token), [*ROLES, key]


def token_columns() -> int:
    """How many columns `token_statement` reads."""
    return 1 + len(_user_fields()) + len(ROLES)


@cache
def _token_sql(token_model) -> str:
    """token.created, the user's columns, whether the user is in each of ROLES' groups."""
    from django.contrib.auth import get_user_model

    from h2htalk.rows import columns

    users = get_user_model()._meta.db_table
    member = get_user_model().groups.through._meta.db_table
    # Only table and column names are formatted in; every value is a parameter.
    role = (
        f"EXISTS(SELECT 1 FROM {member} m JOIN auth_group g ON g.id = m.group_id"  # noqa: S608
        " WHERE m.user_id = u.id AND g.name = %s)"
    )
    return (
        f"SELECT t.created, {columns('u', _user_fields())}, {', '.join([role] * len(ROLES))}"  # noqa: S608
        f" FROM {token_model._meta.db_table} t JOIN {users} u ON u.id = t.user_id"
        " WHERE t.key = %s"
    )


def token_user(row):
    """The user of a `token_statement` row with their roles remembered, or None (no row, or
    NULLs: no such token)."""
    if row is None or row[1] is None:
        return None
    from django.contrib.auth import get_user_model

    from h2htalk.rows import instance

    names = _user_fields()
    user = instance(get_user_model(), names, row[1 : 1 + len(names)])
    flags = dict(zip(ROLES, row[1 + len(names) :], strict=True))
    user._h2h_roles = frozenset({ADMIN} if user.is_superuser else set()) | {
        role for role, member in flags.items() if member
    }
    return user


class HasRole(BasePermission):
    required_roles: tuple[str, ...] = ()
    message = gettext_lazy("Your role does not allow this.")

    def has_permission(self, request, view):
        return has_role(request.user, *self.required_roles)


class IsAdmin(HasRole):
    required_roles = (ADMIN,)


class IsResearcher(HasRole):
    required_roles = (RESEARCHER,)


class IsAnnotator(HasRole):
    required_roles = (ANNOTATOR,)


def roles_context(request):
    roles = user_roles(request.user)
    return {
        "user_roles": roles,
        "is_admin": ADMIN in roles,
        "is_researcher": bool(roles & {ADMIN, RESEARCHER}),
        "is_annotator": bool(roles & {ADMIN, ANNOTATOR}),
    }


def ensure_role_groups(sender=None, using="default", **kwargs):
    """Create the role groups and grant their model permissions (idempotent, after migrate)."""
    from django.contrib.auth.models import Group, Permission

    for role, grants in ROLE_PERMISSIONS.items():
        group, _ = Group.objects.using(using).get_or_create(name=role)
        perms = Permission.objects.using(using).none()
        for grant in grants:
            if "." in grant:
                app_label, codename = grant.split(".", 1)
                perms |= Permission.objects.using(using).filter(
                    content_type__app_label=app_label, codename=codename
                )
            else:
                perms |= Permission.objects.using(using).filter(content_type__app_label=grant)
        group.permissions.set(perms)
