"""`h2htalk.rows.instance` builds model instances from hand-written statements' rows without
`Model.__init__`: they must be what the ORM builds from the same rows."""

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import signals

from annotation import candidates, rating_reads
from annotation.models import Assignment, Campaign, Comparison
from h2htalk.roles import token_statement
from h2htalk.rows import columns, instance
from scenarios.models import Persona, Response, Scenario
from tests.annotation.test_queue import campaign, raters  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db


def read(model, names, pk):
    """The row as a hand-written statement reads it, and the ORM's instance of it."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {columns('t', names)} FROM {model._meta.db_table} t WHERE t.id = %s",  # noqa: S608
            [pk],
        )
        row = cursor.fetchone()
    return row, model.objects.only(*names).get(pk=pk)


def same(built, orm, names):
    assert type(built) is type(orm)
    assert built.pk == orm.pk and built == orm
    assert not built._state.adding and built._state.db == orm._state.db
    assert built.get_deferred_fields() == orm.get_deferred_fields()
    for name in names:
        assert getattr(built, name) == getattr(orm, name), name
        assert type(getattr(built, name)) is type(getattr(orm, name)), name


@pytest.mark.parametrize(
    ("model", "names"),
    [
        (Campaign, rating_reads.CAMPAIGN),
        (Comparison, rating_reads.COMPARISON),
        (Assignment, rating_reads.ASSIGNMENT),
        (Assignment, candidates.ASSIGNMENT),
        (Scenario, rating_reads.SCENARIO),
        (Scenario, candidates.SCENARIO),
        (Response, candidates.RESPONSE),
    ],
    ids=lambda value: getattr(value, "__name__", ""),
)
def test_an_instance_from_a_row_is_the_orms(campaign, raters, model, names):  # noqa: F811
    from annotation.queue import next_assignment

    assignment = next_assignment(raters[0], campaign)
    pk = {
        Campaign: campaign.pk,
        Comparison: assignment.comparison_id,
        Assignment: assignment.pk,
        Scenario: assignment.comparison.scenario_id,
        Response: assignment.comparison.response_a_id,
    }[model]
    row, orm = read(model, names, pk)
    built = instance(model, names, row)
    same(built, orm, names)
    # A field not read loads on access, as on the ORM's deferred instance.
    unread = [f.attname for f in model._meta.concrete_fields if f.attname not in names]
    if unread:
        assert getattr(built, unread[0]) == getattr(model.objects.get(pk=pk), unread[0])


def test_a_persona_and_the_tokens_user(raters):  # noqa: F811
    persona = Persona.objects.create(name="p", summary="a persona")
    row, orm = read(Persona, candidates.PERSONA, persona.pk)
    same(instance(Persona, candidates.PERSONA, row), orm, candidates.PERSONA)
    from rest_framework.authtoken.models import Token

    from h2htalk.roles import token_user

    key = Token.objects.create(user=raters[0]).key
    with connection.cursor() as cursor:
        cursor.execute(*token_statement(key))
        user = token_user(cursor.fetchone())
    assert user == raters[0] and user.username == raters[0].username
    assert type(user) is get_user_model() and not user._state.adding


def test_the_models_read_from_rows_have_no_init_hooks():
    """What `Model.__init__` would have run and `instance` skips: an `__init__` or `from_db`
    of the model's own, or a receiver of the init signals."""
    from django.db.models import Model

    for model in (Campaign, Comparison, Assignment, Scenario, Persona, Response, get_user_model()):
        assert model.__init__ is Model.__init__, model
        assert model.from_db.__func__ is Model.from_db.__func__, model
        for signal in (signals.pre_init, signals.post_init):
            assert not signal.has_listeners(model), (model, signal)
