"""Statements per rating call: the API's next and submit, the rating page and its htmx submit.

Each request runs in one transaction (pytest's transactional database, so the view's atomic
block is a real transaction, as under gunicorn, and not a savepoint): what is counted is the
statements sent (BEGIN and COMMIT included), whatever the size of the campaign or of the
database. On PostgreSQL a submission's six writes are one statement; SQLite, which has no
data-modifying WITH, sends them in turn (five more).
"""

import json
import re

import pytest
from django.db import connection
from django.urls import reverse

from annotation.models import Judgment
from tests.annotation import factories
from tests.annotation.test_rating_api import next_url, submit_url, token_client

pytestmark = pytest.mark.django_db(transaction=True)

# BEGIN, token or session, the campaign or the item read, the queue's statements, COMMIT;
# on SQLite, which has no data-modifying WITH, a hand-out counts the item in the annotator's
# handed tally in a statement of its own (one more where an item is handed out)
HAND_OUT = int(connection.vendor != "postgresql")
NEXT, HELD, SUBMIT, PAGE, HTMX_ANSWER = 6 + HAND_OUT, 5, 5, 6 + HAND_OUT, 8 + HAND_OUT
HTMX = {"HX-Request": "true", "HX-Target": "item"}


def _writes() -> int:
    """The statements a stored judgment adds to the PostgreSQL budget on this database."""
    return 0 if connection.vendor == "postgresql" else 5


@pytest.fixture
def raters(roles, django_user_model):
    return factories.annotators(django_user_model, 2)


@pytest.fixture
def campaign(researcher, raters):
    made = factories.campaign(researcher, raters, n_scenarios=3, overlap=2)
    factories.campaign(researcher, raters, n_scenarios=2, overlap=2, name="elsewhere")
    return made


def test_api_next_and_submit_each_send_at_most_six_statements(
    campaign, raters, django_assert_max_num_queries
):
    api = token_client(raters[0])
    api.get("/api/rate/campaigns/")  # the first progress read counts the new comparisons
    for _ in range(3):
        with django_assert_max_num_queries(NEXT):
            item = api.post(next_url(campaign.pk))
        assert item.status_code == 200
        with django_assert_max_num_queries(HELD):
            assert api.post(next_url(campaign.pk)).json()["key"] == item.json()["key"]
        with django_assert_max_num_queries(SUBMIT + _writes()):  # the first makes the tally too
            stored = api.post(
                submit_url(item.json()["key"]), json.dumps({"preference": 1}), "application/json"
            )
        assert stored.status_code == 200
        assert (
            stored.json()["progress"]["done_total"]
            == Judgment.objects.filter(annotator=raters[0]).count()
        )


def test_the_rating_page_and_its_htmx_submit_stay_within_their_budgets(
    campaign, raters, client, django_assert_max_num_queries
):
    client.force_login(raters[1])
    client.get(reverse("annotation:home"))  # the first progress read counts the comparisons
    for _ in range(3):
        with django_assert_max_num_queries(PAGE):
            page = client.get(reverse("annotation:rate", args=[campaign.pk]))
        key = re.search(r"/a/([0-9a-f-]{36})/submit/", page.content.decode()).group(1)
        with django_assert_max_num_queries(HTMX_ANSWER + _writes()):
            answer = client.post(
                reverse("annotation:submit", args=[key]), {"preference": "1"}, headers=HTMX
            )
        assert answer.status_code == 200 and b"Saved." in answer.content
