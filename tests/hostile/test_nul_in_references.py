"""A NUL character in a field that names another object is a 400, not a database error
(PostgreSQL refuses NUL in text; schemathesis found this on POST /api/judges/runs/)."""

import pytest
from rest_framework.test import APIClient


@pytest.mark.parametrize(
    "url, body, field",
    [
        ("/api/judges/runs/", {"name": "r", "mode": "single", "judge": "a\x00b"}, "judge"),
        ("/api/runs/", {"name": "r", "companions": ["a\x00b"]}, "companions"),
        ("/api/scenarios/", {"subtask": "dialogue_base", "persona": "a\x00b"}, "persona"),
    ],
)
def test_a_nul_in_a_reference_is_a_field_error(researcher, url, body, field):
    client = APIClient()
    client.force_authenticate(researcher)
    response = client.post(url, body, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()
