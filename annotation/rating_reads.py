"""What the rating page and API read before they act, each in one hand-written statement.

`rating_campaign`: the campaign an annotator asks an item of (only one they rate in), with its
blind names, whether they hold an item there and their progress counts. `rated_assignment`: an
item they answer, with its comparison, campaign and scenario — the assignment, comparison and
scenario rows locked until the transaction ends (PostgreSQL) — whether its scenario changed
since it was handed out and the revision shown then, whether they still rate in the campaign,
the same names and counts, and the rater's care state (`care.CARE_SQL`). Written out rather
than built with the ORM: building and compiling these subqueries took more server CPU than
PostgreSQL took to run them; the statements are prepared once per connection
(`h2htalk.rows.bound_cursor`).
"""

from functools import cache, lru_cache

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import connection
from django.utils import timezone

from h2htalk.roles import token_statement
from h2htalk.rows import bound_cursor, columns, db_value, instance
from scenarios.models import Scenario
from scenarios.services import CONTENT_FIELDS

from .care import CARE_SQL, care_params
from .models import Assignment, Campaign, Comparison
from .progress import _COUNTS_SQL, progress_params

CAMPAIGN = tuple(f.attname for f in Campaign._meta.concrete_fields)
ASSIGNMENT = tuple(f.attname for f in Assignment._meta.concrete_fields)
COMPARISON = ("id", "campaign_id", "scenario_id", "response_a_id", "response_b_id", "is_gold")
COMPARISON += ("judgment_count", "shuffle_key")
SCENARIO = ("id", "subtask", "language", "persona_id", "history", "memory", "schedule")
SCENARIO += ("user_message", "state", "content_hash", "risk_level")
NAME_LISTS = ("companion_names", "companion_model_ids", "run_names")
User = get_user_model()

_NAMES = """(SELECT {json_list} FROM annotation_campaign_companions cc
        JOIN scenarios_companionmodel m ON m.id = cc.companionmodel_id
        WHERE cc.campaign_id = annotation_campaign.id),
    (SELECT {json_list_model_ids} FROM annotation_campaign_companions cc
        JOIN scenarios_companionmodel m ON m.id = cc.companionmodel_id
        WHERE cc.campaign_id = annotation_campaign.id),
    (SELECT {json_list_runs} FROM annotation_campaign_runs cr
        JOIN scenarios_generationrun r ON r.id = cr.generationrun_id
        WHERE cr.campaign_id = annotation_campaign.id)"""


# Whether the user holds an open item with a live lease in the campaign (`other`: besides `a`);
# the state is written in, as in `progress._COUNTS_SQL`.
_HOLDS = f"""EXISTS(SELECT 1 FROM annotation_assignment o
        WHERE o.campaign_id = annotation_campaign.id AND o.annotator_id = %s
        AND o.state = '{Assignment.State.OPEN.value}' AND o.lease_expires_at > %s {{other}})"""  # noqa: S608


def _json_list(expression: str) -> str:
    if connection.vendor == "postgresql":
        return f"json_agg({expression})::text"
    return f"json_group_array({expression})"


def _names_sql() -> str:
    return _NAMES.format(
        json_list=_json_list("m.name"),
        json_list_model_ids=_json_list("m.model_id"),
        json_list_runs=_json_list("r.name"),
    )


def _has_content_change(alias: str) -> tuple[str, list]:
    """Whether revision `alias` changed what the annotator is shown (Django's has_any_keys)."""
    if connection.vendor == "postgresql":
        return f"{alias}.changes ?| %s::text[]", [list(CONTENT_FIELDS)]
    tests = [f"JSON_TYPE({alias}.changes, %s) IS NOT NULL" for _ in CONTENT_FIELDS]
    return "(" + " OR ".join(tests) + ")", [f'$."{name}"' for name in CONTENT_FIELDS]


def _named(campaign: Campaign, values) -> None:
    """The name lists (when read) and the progress counts on the campaign, as
    `blinding.blind_names` and `progress.progress_for` read them."""
    *names, campaign.progress = values
    if names:  # else `blind_names` reads them, should anything ask
        for name, value in zip(NAME_LISTS, names, strict=True):
            setattr(campaign, name, value)


def rating_campaign(user, pk) -> Campaign | None:
    """The campaign `pk` if `user` rates in it, read as `access.rating_campaign_or_404` says."""
    with bound_cursor() as cursor:
        cursor.execute(*campaign_statement(user, pk))
        return campaign_from_row(cursor.fetchone())


def campaign_from_row(row) -> Campaign | None:
    """The campaign of a `campaign_statement` row (None: no row, or NULLs)."""
    if row is None or row[0] is None:
        return None
    n = len(CAMPAIGN)
    campaign = instance(Campaign, CAMPAIGN, row[:n])
    campaign.has_open_item, campaign.care = bool(row[n]), row[n + 1]  # care: annotation.care
    _named(campaign, row[n + 2 :])
    return campaign


def campaign_statement(user, pk) -> tuple[str, list]:
    """`rating_campaign`'s statement and its parameters."""
    params = [*_holds_params(user), *care_params(user), *progress_params(user), pk, user.pk]
    return _campaign_sql(connection.vendor), params


# The statements' texts depend on the database only: written once (a rating cycle rebuilt
# them on every request).
@cache
def _campaign_sql(vendor: str) -> str:
    return f"""SELECT {columns("annotation_campaign", CAMPAIGN)},
        {_HOLDS.format(other="")}, {CARE_SQL}, {_names_sql()}, {_COUNTS_SQL}
        FROM annotation_campaign
        JOIN annotation_campaign_annotators ca ON ca.campaign_id = annotation_campaign.id
        WHERE annotation_campaign.id = %s AND ca.user_id = %s"""  # noqa: S608 - names only


def rated_assignment(user, key) -> Assignment | None:
    """The assignment with this key, its comparison, campaign and scenario (rows locked), and:
    `scenario_changed` and `shown_revision` (see `queue._own_assignment`), `rates` (the user
    still rates in the campaign), and on the campaign its name lists, the user's progress
    counts and `has_open_item`: whether they hold another item there (after this one is
    answered, `queue.next_assignment` need not look for one). None when there is no such assignment."""
    try:
        statement = assignment_statement(user, key)
    except ValidationError:
        return None
    with bound_cursor() as cursor:
        cursor.execute(*statement)
        return assignment_from_row(cursor.fetchone())


def assignment_from_row(row) -> Assignment | None:
    """The assignment of an `assignment_statement` (or `answer_statement`) row, as
    `rated_assignment` returns it (None: no row, or NULLs)."""
    if row is None or row[0] is None:
        return None
    parts, start = [], 0
    for names in (ASSIGNMENT, COMPARISON, CAMPAIGN, SCENARIO):
        parts.append(row[start : start + len(names)])
        start += len(names)
    assignment = instance(Assignment, ASSIGNMENT, parts[0])
    comparison = instance(Comparison, COMPARISON, parts[1])
    campaign = instance(Campaign, CAMPAIGN, parts[2])
    comparison.campaign, comparison.scenario = campaign, instance(Scenario, SCENARIO, parts[3])
    assignment.comparison = comparison
    assignment.scenario_changed, assignment.shown_revision, assignment.rates = (
        bool(row[start]),
        row[start + 1],
        bool(row[start + 2]),
    )
    campaign.has_open_item = bool(row[start + 3])  # another one: the next item is a new one
    campaign.care = row[start + 4]  # the rater's opt-outs and high-risk count (annotation.care)
    _named(campaign, row[start + 5 :])
    return assignment


def assignment_statement(user, key, names: bool = True) -> tuple[str, list]:
    """`rated_assignment`'s statement and its parameters (ValidationError: not a key)."""
    _, changed_params = _has_content_change("r")
    key = db_value(Assignment, "key", key)
    params = [*changed_params, user.pk, *_holds_params(user), *care_params(user)]
    locks = connection.features.has_select_for_update_skip_locked
    sql = _assignment_sql(connection.vendor, locks, names)
    return sql, [*params, *progress_params(user), key]


def answer_statement(user, key) -> tuple[str, list]:
    """`assignment_statement` without the campaign's name lists: what the API's submit reads,
    whose answer shows no text to blind (three subqueries fewer, a tenth of its cost to
    PostgreSQL). Should anything ask for the names after all, `blinding.blind_names` reads them."""
    return assignment_statement(user, key, names=False)


@cache
def _assignment_sql(vendor: str, locks: bool, names: bool) -> str:
    changed, _ = _has_content_change("r")
    # The annotator's user row FOR KEY SHARE, until the transaction ends: an exclusion from
    # the campaign (annotation.counting) waits for this answer, or this answer for it.
    lock = "FOR UPDATE OF a, c, s FOR KEY SHARE OF u" if locks else ""
    return f"""SELECT {columns("a", ASSIGNMENT)}, {columns("c", COMPARISON)},
        {columns("annotation_campaign", CAMPAIGN)}, {columns("s", SCENARIO)},
        EXISTS(SELECT 1 FROM scenarios_revision r WHERE r.scenario_id = s.id
            AND r.created_at >= a.issued_at AND {changed}),
        (SELECT r.number FROM scenarios_revision r WHERE r.scenario_id = s.id
            AND r.created_at <= a.issued_at ORDER BY r.number DESC LIMIT 1),
        EXISTS(SELECT 1 FROM annotation_campaign_annotators ca
            WHERE ca.campaign_id = annotation_campaign.id AND ca.user_id = %s),
        {_HOLDS.format(other="AND o.id <> a.id")}, {CARE_SQL},
        {_names_sql() + "," if names else ""} {_COUNTS_SQL}
        FROM annotation_assignment a
        JOIN annotation_comparison c ON c.id = a.comparison_id
        JOIN annotation_campaign ON annotation_campaign.id = c.campaign_id
        JOIN scenarios_scenario s ON s.id = c.scenario_id
        JOIN {User._meta.db_table} u ON u.id = a.annotator_id
        WHERE a.key = %s {lock}"""  # noqa: S608 - names only


def _holds_params(user) -> list:
    now = db_value(Assignment, "lease_expires_at", timezone.now())
    return [user.pk, now]


class _TokenUser:
    """Stands for the user of an API token in a statement's values (`beside_token`)."""

    pk = object()


@lru_cache(maxsize=16)
def _beside_token(sql: str, users: tuple[bool, ...]) -> str:
    token_sql, _ = token_statement("")
    pieces = sql.split("%s")
    merged = [pieces[0]]
    for is_user, piece in zip(users, pieces[1:], strict=True):
        merged += ["tu.id" if is_user else "%s", piece]
    return f"SELECT tu.*, r.* FROM ({token_sql}) tu LEFT JOIN LATERAL ({''.join(merged)}) r ON true"  # noqa: S608 - statements only


def beside_token(key: str, statement, *args) -> tuple[str, list]:
    """`statement(user, *args)` (`campaign_statement`, `assignment_statement`) read beside the
    user of API token `key` in one statement, the user's id taken from the token's row: the
    token's columns (`roles.token_statement`, `token_columns()` of them), then the statement's
    row or NULLs. No row: no such token. The API's hot path (`hot_api`) sends one statement
    fewer per request than authenticating first."""
    sql, params = statement(_TokenUser, *args)
    users = tuple(value is _TokenUser.pk for value in params)
    _, token_params = token_statement(key)
    rest = [value for value in params if value is not _TokenUser.pk]
    return _beside_token(sql, users), [*token_params, *rest]
