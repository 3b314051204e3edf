"""On PostgreSQL the rating cycle's hand-written statements are prepared once per connection
(DB_PREPARE_THRESHOLD, default 2) and run on their generic plan, and Django's query log still
reads their text once psycopg runs them prepared."""

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.annotation import factories
from tests.annotation.test_rating_api import next_url, submit_url, token_client

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def postgres_only():
    if connection.vendor != "postgresql":
        pytest.skip("prepared statements are PostgreSQL's: run with DATABASE_URL=postgres")


def _prepared() -> dict[str, tuple[int, int]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements")
        return {" ".join(text.split())[:40]: (generic, custom) for text, generic, custom in cursor}


def test_the_rating_cycle_runs_prepared_on_generic_plans(researcher, roles, django_user_model):
    rater = factories.annotators(django_user_model, 1)[0]
    campaign = factories.campaign(researcher, [rater], n_scenarios=4, overlap=2)
    api = token_client(rater)
    with CaptureQueriesContext(connection) as log:
        for _ in range(4):
            key = api.post(next_url(campaign.pk)).json()["key"]
            answer = api.post(submit_url(key), json.dumps({"preference": 1}), "application/json")
            assert answer.status_code == 200
    prepared = _prepared()
    for start in (
        "SELECT t.created, u.id",  # the API token
        "SELECT annotation_campaign.id",  # rating_reads.rating_campaign
        "WITH before_wrap AS",  # candidates.locked_batch
        "WITH claimed AS",  # candidates.claim
        "SELECT a.id, a.key",  # rating_reads.rated_assignment
        "WITH judgment AS",  # recording.store
    ):
        plans = [counts for text, counts in prepared.items() if text.startswith(start)]
        assert plans, f"{start!r} is not prepared: {sorted(prepared)}"
        generic, custom = plans[0]
        assert generic >= 1 and custom == 0, (start, generic, custom)
    assert all(query["sql"] for query in log.captured_queries)
