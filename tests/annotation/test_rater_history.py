"""A rater's history elsewhere costs nothing in a campaign (issue 24): the progress counts, the
held item and the statements of next and submit read only the rater's rows in the campaign
asked about, and answer as a recount from the rows does.

The history: the rater's submitted, skipped and open items in other campaigns (closed and
open), some of them on comparisons still open there, which the old count visited one by one.
"""

import json

import pytest
from django.db import connection

from annotation import queue
from annotation.models import Assignment, Campaign
from annotation.progress import progress_for
from annotation.rating_reads import assignment_statement, campaign_statement, rating_campaign
from tests.annotation import factories
from tests.annotation.test_queue_guarantees import recounted
from tests.annotation.test_rating_api import next_url, submit_url, token_client
from tests.annotation.test_rating_queries import NEXT, SUBMIT  # the budgets without history

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def raters(roles, django_user_model):
    return factories.annotators(django_user_model, 3)


def _history(researcher, raters, name: str, state: str, n_items: int) -> Campaign:
    """A campaign in which raters[0] answered (submitted, then skipped) and still holds items,
    left in `state`."""
    elsewhere = factories.campaign(researcher, raters, n_scenarios=n_items, overlap=3, name=name)
    for turn in range(n_items * 3):
        item = queue.next_assignment(raters[0], rating_campaign(raters[0], elsewhere.pk))
        if item is None:
            break
        if turn % 5 == 4:
            break  # this one stays open: held in that campaign
        if turn % 3 == 2:
            queue.skip(raters[0], item.key, "other")
        else:
            queue.submit(raters[0], item.key, queue.Submission(1))
    Campaign.objects.filter(pk=elsewhere.pk).update(state=state)
    return elsewhere


@pytest.fixture
def with_history(researcher, raters):
    """raters[0] with items in a closed and in an open campaign, then a new campaign."""
    _history(researcher, raters, "closed before", Campaign.State.CLOSED, 4)
    _history(researcher, raters, "still open", Campaign.State.OPEN, 4)
    assert Assignment.objects.filter(annotator=raters[0]).count() >= 8
    return factories.campaign(researcher, raters, n_scenarios=3, overlap=2, name="this one")


def test_progress_with_history_elsewhere_equals_a_recount_after_every_action(with_history, raters):
    campaign = with_history
    recounted(raters[0], campaign)
    assert progress_for(raters[0], rating_campaign(raters[0], campaign.pk)).done_total == 0
    for turn in range(9):
        user = raters[turn % 3]
        read = rating_campaign(user, campaign.pk)
        assert progress_for(user, read) == recounted(user, campaign)
        assert not read.has_open_item  # their open item elsewhere is not held here
        item = queue.next_assignment(user, read)
        if item is None:
            continue
        assert item.campaign_id == campaign.pk == item.comparison.campaign_id
        assignment, carried = queue.rated_item(user, item.key)
        queue.submit(user, item.key, queue.Submission(-1), item=assignment)
        assert progress_for(user, carried) == recounted(user, campaign)


def test_every_assignment_carries_its_comparisons_campaign(with_history, raters):
    """Made by the queue's claim (hand-written INSERT) or saved through the ORM alike."""
    queue.next_assignment(raters[1], rating_campaign(raters[1], with_history.pk))
    made = Assignment.objects.create(
        comparison=with_history.comparisons.exclude(assignments__annotator=raters[2]).first(),
        annotator=raters[2],
        left_is_a=True,
        lease_expires_at="2030-01-01T00:00:00Z",
    )
    assert made.campaign_id == with_history.pk
    for assignment in Assignment.objects.select_related("comparison"):
        assert assignment.campaign_id == assignment.comparison.campaign_id


def test_next_and_submit_send_as_many_statements_with_history_as_without(
    with_history, raters, django_assert_max_num_queries
):
    api = token_client(raters[0])
    api.get("/api/rate/campaigns/")  # the first progress read counts the new comparisons
    for _ in range(2):
        with django_assert_max_num_queries(NEXT):
            item = api.post(next_url(with_history.pk))
        assert item.status_code == 200
        writes = 0 if connection.vendor == "postgresql" else 4
        with django_assert_max_num_queries(SUBMIT + writes):
            stored = api.post(
                submit_url(item.json()["key"]), json.dumps({"preference": 1}), "application/json"
            )
        assert stored.status_code == 200
        assert stored.json()["progress"] == vars(recounted(raters[0], with_history))


def _assignment_rows_read(sql: str, params: list) -> int:
    """Rows PostgreSQL read from annotation_assignment running `sql` (EXPLAIN ANALYZE), with
    sequential scans off: on tables this small the planner would rather read them whole, as it
    would not on a store of millions; what is checked is the access path there is."""
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        try:
            cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", params)
            (plan,) = cursor.fetchone()
        finally:
            cursor.execute("RESET enable_seqscan")
    plan = json.loads(plan) if isinstance(plan, str) else plan

    def rows(node) -> int:
        own = 0
        if node.get("Relation Name") == "annotation_assignment":
            own = node["Actual Rows"] * node["Actual Loops"]
            own += node.get("Rows Removed by Filter", 0) * node["Actual Loops"]
        return own + sum(rows(child) for child in node.get("Plans", []))

    return rows(plan[0]["Plan"])


def test_the_campaign_and_item_reads_visit_none_of_the_raters_rows_elsewhere(with_history, raters):
    """PostgreSQL: the statements next and submit read with (the campaign with the progress
    counts and the held item; the item answered with the same) read no assignment row of the
    rater's history elsewhere: none before their first item here, then only their rows here."""
    if connection.vendor != "postgresql":
        pytest.skip("EXPLAIN ANALYZE's row counts are PostgreSQL's: run with DATABASE_URL")
    rater = raters[0]
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    assert _assignment_rows_read(*campaign_statement(rater, with_history.pk)) == 0
    for _ in range(2):
        item = queue.next_assignment(rater, rating_campaign(rater, with_history.pk))
        queue.submit(rater, item.key, queue.Submission(1))
    mine_here = Assignment.objects.filter(annotator=rater, campaign=with_history).count()
    assert mine_here == 2
    assert _assignment_rows_read(*campaign_statement(rater, with_history.pk)) <= 2 * mine_here
    read_item = assignment_statement(rater, item.key)
    assert _assignment_rows_read(*read_item) <= 2 * mine_here + 1  # and the item itself
