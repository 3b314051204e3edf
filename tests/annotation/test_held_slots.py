"""Comparisons whose last slots others hold with live leases are passed over inside the
candidate statement, not handed back to be passed over one batch at a time."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotation import queue
from tests.annotation import factories

ANSWER = queue.Submission(
    screen_preference=1,
    both_unacceptable=False,
    ratings={},
    rationale="",
    client_time_ms=None,
    reasons=[],
    confidence=None,
)


def _candidate_statements(sent) -> int:
    return sum("before_wrap" in query["sql"] for query in sent.captured_queries)


@pytest.mark.django_db
def test_comparisons_held_to_k_by_others_cost_no_extra_statement(researcher, django_user_model):
    raters = factories.annotators(django_user_model, 10)
    campaign = factories.campaign(researcher, raters, n_scenarios=6, overlap=2)  # 18 comparisons
    for _ in range(8):  # 8 comparisons one judgment short of k
        item = queue.next_assignment(raters[0], campaign)
        queue.submit(raters[0], item.key, ANSWER)
    held = set()
    for rater in raters[1:9]:  # each of them holds the last slot of one of those
        item = queue.next_assignment(rater, campaign)
        # Before: the held ones came back in the batch and a new comparison beside them was
        # handed out while others one judgment short were still free.
        assert item.comparison.judgment_count == 1
        held.add(item.comparison_id)
    assert len(held) == 8
    with CaptureQueriesContext(connection) as sent:
        item = queue.next_assignment(raters[9], campaign)
    assert item.comparison_id not in held and item.comparison.judgment_count == 0
    assert _candidate_statements(sent) == 1  # the held ones are passed in the scan
