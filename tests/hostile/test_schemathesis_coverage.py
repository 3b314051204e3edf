"""Schemathesis' coverage phase against the REST API (the slow tier, `make test-slow`): every
boundary and wrong-type value of every field, parameter and method of every operation, about
11,000 requests, none answered 5xx. The set-up is test_schemathesis.py's.

Schemathesis makes these cases while collecting (8 s of CPU in each test process), so this
module is collected only when the slow tier is selected (tests/hostile/conftest.py)."""

import pytest

from tests.hostile.test_schemathesis import (  # noqa: F401 (the fixtures)
    FUZZING,
    answers_no_5xx,
    api_world,
    fuzzed_schema,
    keep_the_test_connection,
    module_world,
    world,
)

BOUNDARIES = fuzzed_schema(["coverage"])


@pytest.mark.slow
@BOUNDARIES.parametrize()
@FUZZING
def test_no_operation_answers_5xx_to_boundary_and_wrong_type_values(case, api_world):  # noqa: F811
    answers_no_5xx(case, api_world)
