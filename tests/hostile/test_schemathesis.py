"""Schemathesis against the REST API's OpenAPI schema: no operation answers 5xx.

The schema is drf-spectacular's, generated from the app itself (the same document as
/api/schema/), and every request goes through Django's WSGI application in-process (so the
test database and its transaction are shared). The client is an admin with a token (admins
pass every role check), and a `world` (tests/test_permissions.py) gives every kind of object:
path parameters point at those objects, so the fuzzed bodies and query strings reach real
ones rather than 404s. Any 5xx is a bug.

Host names in fuzzed base URLs are not looked up in DNS (tests/hostile/conftest.py).

Two depths. `make test` runs the examples and the fuzzing phases (HOSTILE_API_EXAMPLES generated
cases per operation, default 8). `make test-slow` (which CI runs too) adds schemathesis' coverage
phase (test_schemathesis_coverage.py), every boundary and wrong-type value of every field,
parameter and method of every operation: about 11,000 requests, which took 96% of this module's
three minutes of test time.
"""

import functools
import json
import os
import re

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, settings
from rest_framework.authtoken.models import Token
from schemathesis.checks import not_a_server_error

from scoring.models import Release
from tests.test_permissions import ADMIN, module_world, world  # noqa: F401 (the fixtures)

EXAMPLES = int(os.environ.get("HOSTILE_API_EXAMPLES", "8"))
APP = get_wsgi_application()


@functools.cache
def _schema_text() -> str:
    """The app's OpenAPI document, generated once per process (seconds each time)."""
    return json.dumps(SchemaGenerator().get_schema(request=None, public=True), default=str)


def _schema() -> dict:
    return json.loads(_schema_text())


def fuzzed_schema(phases: list[str]):
    schema = schemathesis.openapi.from_dict(_schema())
    schema.config.phases.update(phases=phases)
    return schema


SCHEMA = fuzzed_schema(["examples", "fuzzing"])

# Which world object an `{id}` of a path refers to (first match wins).
PATH_OBJECTS = [
    (r"^/api/calibration/judges/\{id\}", "calibrated_judge"),
    (r"^/api/companions/\{id\}", "companion"),
    (r"^/api/judges/configs/\{id\}", "judge"),
    (r"^/api/judges/runs/\{id\}/cancel", "active_judge_run"),
    (r"^/api/judges/runs/\{id\}", "judge_run"),
    (r"^/api/judges/verdicts/\{id\}", "verdict"),
    (r"^/api/personas/\{id\}", "persona"),
    (r"^/api/rate/campaigns/\{id\}", "campaign"),
    (r"^/api/releases/\{id\}", "release"),
    (r"^/api/responses/\{id\}", "response"),
    (r"^/api/runs/\{id\}/cancel", "active_run"),
    (r"^/api/runs/\{id\}", "run"),
    (r"^/api/scenarios/\{id\}", "scenario"),
]


@pytest.fixture(autouse=True)
def keep_the_test_connection():
    """As Django's test client does: a request through the WSGI app must not close the
    connection that holds the test's transaction (on PostgreSQL it would)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def api_world(world):  # noqa: F811 (the fixture imported above)
    world.release = Release.objects.create(
        name="fuzzed release",
        campaign=world.campaign,
        anchor=world.companion,
        created_by=world.users[ADMIN],
    )
    world.token = Token.objects.create(user=world.users[ADMIN]).key
    # One open item for every example: once answered, later examples meet 409, not a 404.
    world.item_key = world.assignment_key(ADMIN)
    return world


def point_at_world(case, target) -> None:
    """Path parameters name the world's objects (every other part stays as generated)."""
    path = case.path
    params = case.path_parameters or {}
    if "id" in params:
        for pattern, name in PATH_OBJECTS:
            if re.match(pattern, path):
                params["id"] = getattr(target, name).pk
                break
    if "campaign_id" in params:
        params["campaign_id"] = target.campaign.pk
    if "key" in params:
        params["key"] = target.item_key


FUZZING = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)


def answers_no_5xx(case, target) -> None:
    point_at_world(case, target)
    response = case.call(app=APP, headers={"Authorization": f"Token {target.token}"})
    case.validate_response(response, checks=[not_a_server_error])


@SCHEMA.parametrize()
@FUZZING
def test_no_operation_answers_5xx(case, api_world):
    answers_no_5xx(case, api_world)


def test_the_schema_covers_the_api():
    """The fuzzed schema is the app's: every router and hand-written endpoint is in it."""
    paths = set(_schema()["paths"])
    for expected in (
        "/api/scenarios/{id}/transition/",
        "/api/rate/assignments/{key}/submit/",
        "/api/calibration/judges/import/",
        "/api/campaigns/{campaign_id}/agreement/",
        "/api/releases/",
    ):
        assert expected in paths
    assert len(paths) >= 30
