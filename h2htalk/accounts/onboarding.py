"""Creating users in bulk: one path for `manage.py create_users`, the upload on /manage/ and
`POST /api/users/`.

A row is a username, an email, one role (admin, researcher, annotator) and campaigns (names or
ids, separated by ";"; a name is looked up first, then an id). An annotator joins the campaigns'
annotator pools and a researcher their members (who help manage them), as the campaign form
does; admins see every campaign, so their campaigns stay empty.

All or nothing. Every row is checked before anything is written and every error names the row
(the CSV line, or the item of an API list) and the field; the writing is one transaction, so a
file with one bad row, or a failure half-way, creates nobody.

Re-running is safe. A username that exists already is not created again; its email and
password stay as they are, and the row's role and campaigns are added to what the user has
(never removed). Running the same file twice therefore changes nothing, and a file that adds a
campaign to existing annotators does only that.

Names that could be confused are refused (`names`): a name is stored NFKC-normalised
(full-width `ａｄｍｉｎ` is `admin`), one that equals an existing one once case-folded is an
error (two accounts "Anna" and "anna" are a typo, not two people), and so is one that looks like
an existing one (`аdmin` with a Cyrillic `а`). The database enforces both (`UsernameKey`'s
unique indexes): when another request created a clashing name at the same moment, the rows that
now clash are reported (`Conflict`, 409 on the API), never a server error.

A file or request holds at most MAX_USERS rows (10,000): larger ones are refused before any
row is checked, with a message naming the limit (split the file).

New users get no usable password: each gets a one-time link to set one (`links`). An existing
user who has not set a password yet gets a fresh link; one who has, or is deactivated, none.
"""

import csv
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.db.models import Q

from annotation.models import Campaign
from h2htalk import csvexport, uploads
from h2htalk.models import UsernameKey
from h2htalk.params import parse_int
from h2htalk.roles import ADMIN, ANNOTATOR, RESEARCHER, ROLES

from . import links, names, users

SEPARATOR = ";"
COLUMNS = ("username", "email", "role", "campaigns")
REQUIRED_COLUMNS = ("username", "email", "role")
EMAIL_MAX = 254
MAX_USERS = 10_000  # rows per file or API request
CHUNK = 500  # names per IN (...) query, under SQLite's variable limit
CREATED, EXISTS = "created", "exists"
# What a role joins in a campaign: (the campaign's field, the user's reverse relation).
POOL = {
    ANNOTATOR: ("annotators", "rating_campaigns"),
    RESEARCHER: ("members", "member_campaigns"),
}


@dataclass
class UserRow:
    where: str  # "line 3" (CSV) or "item 2" (API list, from 0)
    username: str
    email: str
    role: str
    campaigns: list[str] = field(default_factory=list)


@dataclass
class RowError:
    where: str
    field: str
    message: str

    def __str__(self):
        return f"{self.where}, field {self.field}: {self.message}"


class OnboardingError(Exception):
    """The rows could not be taken; nothing was written."""

    status = 400

    def __init__(self, errors: list[RowError]):
        self.errors = errors
        shown = "\n".join(str(error) for error in errors[:50])
        more = f"\n… and {len(errors) - 50} more" if len(errors) > 50 else ""
        super().__init__(f"{len(errors)} error(s), nothing written:\n{shown}{more}")


class Conflict(OnboardingError):
    """Another request created users whose names clash with these rows at the same moment."""

    status = 409


@dataclass
class Outcome:
    username: str
    email: str
    role: str
    status: str  # CREATED or EXISTS
    changes: list[str]  # what was added to an existing user; or "inactive"
    link: str = ""  # the one-time link to set a password ("" when none is needed)
    user: object = field(default=None, repr=False)


# ---------------------------------------------------------------- reading a CSV file


class _Unreadable(Exception):
    def __init__(self, line: int, problem: uploads.LineProblem):
        super().__init__(problem.message)
        self.error = RowError(f"line {line}", problem.field, problem.message)


def _text_lines(stream):
    """The file's lines as text (UTF-8, a BOM dropped, MAX_LINE_BYTES per line)."""
    for number, text in uploads.text_lines(stream):
        if isinstance(text, uploads.LineProblem):
            raise _Unreadable(number, text)
        yield text


def _cells(values: list[str]) -> list[str]:
    return [csvexport.unquote_cell(value.strip()) for value in values]


def _check_header(header: list[str]) -> list[RowError]:
    errors = [
        RowError("line 1", column, "required column is missing from the header")
        for column in REQUIRED_COLUMNS
        if column not in header
    ]
    errors += [
        RowError("line 1", column or '""', f"unknown column (columns: {', '.join(COLUMNS)})")
        for column in header
        if column not in COLUMNS
    ]
    errors += [
        RowError("line 1", column, "column appears twice")
        for column in sorted(set(header))
        if header.count(column) > 1
    ]
    return errors


def too_many(limit: int, where: str) -> RowError:
    message = (
        f"more than {limit:,} users: at most {limit:,} per file or request (MAX_USERS); "
        "split it into smaller ones"
    )
    return RowError(where, "(rows)", message)


def read_csv(stream, limit: int | None = MAX_USERS) -> list[UserRow]:
    """The rows of a users CSV (a binary stream), at most `limit` of them (None: no limit);
    raises OnboardingError naming line and field."""
    reader = csv.reader(_text_lines(stream))
    try:
        header = _cells(next(reader, []))
        if errors := _check_header(header):
            raise OnboardingError(errors)
        rows, errors = [], []
        for values in reader:
            where = f"line {reader.line_num}"
            if not any(value.strip() for value in values):
                continue  # a blank line
            if limit is not None and len(rows) >= limit:
                raise OnboardingError([too_many(limit, where)])  # before checking 100,000 rows
            if len(values) > len(header):
                errors.append(RowError(where, "(csv)", "more cells than columns"))
                continue
            rows.append(_row(where, dict(zip(header, _cells(values), strict=False))))
    except _Unreadable as problem:
        raise OnboardingError([problem.error]) from None
    except csv.Error as error:
        raise OnboardingError([RowError(f"line {reader.line_num}", "(csv)", str(error))]) from None
    if errors:
        raise OnboardingError(errors)
    return rows


def _row(where: str, cells: dict) -> UserRow:
    campaigns = cells.get("campaigns", "").split(SEPARATOR)
    return make_row(
        where, cells.get("username", ""), cells.get("email", ""), cells.get("role", ""), campaigns
    )


def make_row(where: str, username: str, email: str, role: str, campaigns: list[str]) -> UserRow:
    """A row with its cells trimmed (and the role in lower case), from a file or the API."""
    keys = [key.strip() for key in campaigns if key.strip()]
    return UserRow(where, username.strip(), email.strip(), role.strip().lower(), keys)


# ---------------------------------------------------------------- checking


def _field_errors(row: UserRow) -> list[RowError]:
    User = get_user_model()
    errors = []

    def bad(name, message):
        errors.append(RowError(row.where, name, message))

    limit = User._meta.get_field("username").max_length
    cells = {"username": row.username, "email": row.email, "role": row.role}
    cells["campaigns"] = SEPARATOR.join(row.campaigns)
    if nul := [name for name, value in cells.items() if "\x00" in value]:
        return [RowError(row.where, name, "contains a NUL character (\\0)") for name in nul]
    if not row.username:
        bad("username", "required")
    elif len(row.username) > limit:
        bad("username", f"longer than {limit} characters")
    else:
        try:
            User.username_validator(row.username)
        except ValidationError as error:
            bad("username", " ".join(error.messages))
    try:
        if len(row.email) > EMAIL_MAX:
            raise ValidationError(f"longer than {EMAIL_MAX} characters")
        validate_email(row.email)
    except ValidationError as error:
        bad("email", " ".join(error.messages) if row.email else "required")
    if row.role not in ROLES:
        bad("role", f"{row.role!r} is not a role; use one of {', '.join(ROLES)}")
    elif row.campaigns and row.role == ADMIN:
        bad("campaigns", "admins see every campaign: leave this empty")
    return errors


def _chunks(items: list, size: int = CHUNK):
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _clean(values) -> list[str]:
    """Values a query may carry (PostgreSQL refuses a NUL; such a row is already an error)."""
    return sorted({value for value in values if "\x00" not in value})


@dataclass
class _Existing:
    """Existing users whose folded name or skeleton is one of the rows'."""

    by_folded: dict = field(default_factory=dict)
    by_skeleton: dict = field(default_factory=dict)


def _existing_users(rows: list[UserRow]) -> _Existing:
    found = _Existing()
    wanted = [names.keys(row.username) for row in rows]
    folded, skeletons = _clean(f for f, _ in wanted), _clean(s for _, s in wanted)
    for chunk_f, chunk_s in zip(_chunks(folded), _chunks(skeletons), strict=True):
        keys = UsernameKey.objects.filter(Q(folded__in=chunk_f) | Q(skeleton__in=chunk_s))
        query = get_user_model().objects.filter(username_key__in=keys)
        for user in query.select_related("username_key").prefetch_related(
            "groups", "rating_campaigns", "member_campaigns"
        ):
            found.by_folded[user.username_key.folded] = user
            found.by_skeleton[user.username_key.skeleton] = user
    return found


def _campaign_lookup(rows: list[UserRow]) -> dict[str, Campaign]:
    """Each campaign key of the rows -> the campaign named so, or else with that id."""
    keys = _clean(key for row in rows for key in row.campaigns)
    found = {}
    for chunk in _chunks(keys):
        found |= {c.name: c for c in Campaign.objects.filter(name__in=chunk)}
    ids = {key: parse_int(key) for key in keys if key not in found}
    by_id = Campaign.objects.in_bulk([number for number in ids.values() if number is not None])
    found |= {key: by_id[number] for key, number in ids.items() if number in by_id}
    return found


@dataclass
class _Planned:
    row: UserRow
    user: object  # the existing user, or None
    campaigns: list[Campaign]


def _name_errors(row: UserRow, existing: _Existing, seen: dict) -> tuple[list, object]:
    """A row's name against the earlier rows and the existing users: (errors, the user it
    names). Same folded name as an existing user: that user (an error unless it is spelled
    exactly so); same skeleton only: a look-alike, refused."""
    folded, skeleton = names.keys(row.username)
    user = existing.by_folded.get(folded)
    errors = []

    def bad(message):
        errors.append(RowError(row.where, "username", message))

    clean = names.clean(row.username)
    if user is not None and user.username != row.username:
        if user.username.casefold() == row.username.casefold():
            bad(f"differs only in case from the existing user {user.username!r}")
        else:
            bad(f"is the existing user {user.username!r} once normalised (Unicode NFKC, case)")
    elif user is None and skeleton in existing.by_skeleton:
        other = existing.by_skeleton[skeleton].username
        bad(f"looks like the existing user {other!r} (letters of another script)")
    elif ("folded", folded) in seen:
        bad(f"repeats {seen['folded', folded]}")
    elif ("skeleton", skeleton) in seen:
        bad(f"looks like the name of {seen['skeleton', skeleton]} (letters of another script)")
    elif row.username != clean:
        bad(f"has compatibility characters (full-width or similar): write {clean!r}")
    seen.setdefault(("folded", folded), row.where)
    seen.setdefault(("skeleton", skeleton), row.where)
    return errors, user


def check(rows: list[UserRow]) -> list[_Planned]:
    """Every row checked against the others and the database; raises OnboardingError."""
    errors, plan, seen = [], [], {}
    existing = _existing_users(rows)
    campaigns = _campaign_lookup(rows)
    for row in rows:
        row_errors = _field_errors(row)
        name_errors, user = _name_errors(row, existing, seen)
        if not any(error.field == "username" for error in row_errors):
            row_errors += name_errors
        missing = [key for key in row.campaigns if key not in campaigns]
        if missing and "\x00" not in "".join(row.campaigns):
            message = "no campaign with this name or id: " + ", ".join(map(repr, missing))
            row_errors.append(RowError(row.where, "campaigns", message))
        errors += row_errors
        plan.append(_Planned(row, user, [campaigns[k] for k in row.campaigns if k in campaigns]))
    if errors:
        raise OnboardingError(errors)
    return plan


# ---------------------------------------------------------------- writing


def _create(row: UserRow):
    user = get_user_model()(username=row.username, email=row.email, is_staff=row.role == ADMIN)
    user.set_unusable_password()
    user.username_key_by_caller = True  # written in bulk by `_keys`, not one by one
    user.save()
    return user


def _keys(outcomes: list[Outcome]) -> None:
    """The new users' `UsernameKey` rows, in bulk (their unique indexes refuse a clash)."""
    created = [o.user for o in outcomes if o.status == CREATED]
    UsernameKey.objects.bulk_create(
        [
            UsernameKey(
                user=user,
                **dict(zip(("folded", "skeleton"), names.keys(user.username), strict=True)),
            )
            for user in created
        ],
        batch_size=CHUNK,
    )


def _additions(planned: _Planned) -> tuple[bool, list[Campaign]]:
    """What the row adds to an existing user: (role is new, campaigns they are not in yet)."""
    user, role = planned.user, planned.row.role
    new_role = role not in users.role_names(user)
    if role not in POOL:
        return new_role, []
    current = {campaign.pk for campaign in getattr(user, POOL[role][1]).all()}
    return new_role, [c for c in planned.campaigns if c.pk not in current]


def _write_one(planned: _Planned, joins: dict) -> Outcome:
    """Create or update one user; the group and campaign memberships go into `joins`
    ((object, relation) -> users), added in bulk afterwards."""
    row = planned.row
    if planned.user is None:
        user, status, changes, campaigns = _create(row), CREATED, [], planned.campaigns
        joins[(row.role, "user_set")].append(user)
    else:
        user, status, changes = planned.user, EXISTS, []
        new_role, campaigns = _additions(planned)
        if new_role:
            users.add_role(user, row.role)
            changes.append(f"role {row.role} added")
        changes += [f"joined campaign {c.name!r}" for c in campaigns]
        if not user.is_active:
            changes.append("deactivated: no link")
    for campaign in campaigns:
        joins[(campaign, POOL[row.role][0])].append(user)
    return Outcome(row.username, user.email, row.role, status, changes, user=user)


def _join(joins: dict) -> None:
    groups = {group.name: group for group in Group.objects.filter(name__in=ROLES)}
    for (target, relation), members in joins.items():
        target = groups[target] if isinstance(target, str) else target
        getattr(target, relation).add(*members)


def create_users(
    rows: list[UserRow],
    base_url: str,
    track: Callable[[Iterable], Iterable] = iter,
) -> list[Outcome]:
    """Check every row, then create the new users and add roles and campaigns, all in one
    transaction; the outcomes carry the one-time links. `track` wraps the rows being written
    (a progress bar). Raises OnboardingError (nothing written), Conflict when another request
    created clashing names meanwhile (the database's unique indexes refused ours)."""
    plan = []
    try:
        with transaction.atomic():
            plan = check(rows)
            joins = defaultdict(list)
            outcomes = [_write_one(planned, joins) for planned in track(plan)]
            _keys(outcomes)
            _join(joins)
            for outcome in outcomes:
                if links.needs_link(outcome.user):
                    # a new user's password was just made unusable; an existing one's link
                    # cancels the links they were given before
                    fresh = outcome.status == CREATED
                    outcome.link = links.password_link(outcome.user, base_url, rotate=not fresh)
    except IntegrityError:
        raise _conflict(rows, {p.row.where for p in plan if p.user is None}) from None
    return outcomes


def _conflict(rows: list[UserRow], new: set[str]) -> Conflict:
    """What clashes now that the other request's users exist (read after our rollback): look-
    alikes as `check` says, and names it created that these rows would have created."""
    try:
        plan = check(rows)
    except OnboardingError as error:
        return Conflict(error.errors)
    message = (
        "was created by another request at the same moment; nothing was written: send the "
        "rows again (existing users are then updated, not created twice)"
    )
    taken = [
        RowError(p.row.where, "username", message)
        for p in plan
        if p.user is not None and p.row.where in new
    ]
    return Conflict(taken or [RowError("(rows)", "username", message)])


LINK_COLUMNS = ["username", "email", "role", "status", "changes", "link"]


def links_csv(outcomes: list[Outcome]) -> str:
    """The outcomes as CSV (the page's download and the command's --links-out file)."""
    rows = (
        {
            "username": o.username,
            "email": o.email,
            "role": o.role,
            "status": o.status,
            "changes": "; ".join(o.changes),
            "link": o.link,
        }
        for o in outcomes
    )
    return csvexport.text(LINK_COLUMNS, rows)
