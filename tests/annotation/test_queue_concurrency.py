"""Many annotators asking and submitting at once on PostgreSQL: never over k, nothing lost."""

import threading
from collections import Counter

import pytest
from django.db import connection, connections

from annotation import queue
from annotation.models import Assignment, Comparison, Judgment
from tests.annotation import factories

pytestmark = pytest.mark.django_db(transaction=True)

THREADS = 24


@pytest.fixture(autouse=True)
def postgres_only():
    if connection.vendor != "postgresql":
        pytest.skip("row locks with SKIP LOCKED are what is tested: run with DATABASE_URL=postgres")


def test_twenty_four_annotators_at_once_never_exceed_k(researcher, roles, django_user_model):
    raters = factories.annotators(django_user_model, THREADS)
    campaign = factories.campaign(researcher, raters, n_scenarios=10, overlap=3)
    comparisons = campaign.comparisons.count()  # 10 scenarios × 3 model pairs
    accepted: list[int] = []
    refused: Counter = Counter()
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS)
    lock = threading.Lock()

    def rate(user):
        try:
            start.wait()
            while True:
                item = queue.next_assignment(user, campaign)
                if item is None:
                    return
                for attempt in range(2):  # the second press is a double-click: same judgment
                    try:
                        judgment = queue.submit(user, item.key, queue.Submission(attempt - 1))
                    except queue.QueueError as error:
                        with lock:
                            refused[str(error)] += 1
                        break
                    with lock:
                        if attempt == 0:
                            accepted.append(judgment.pk)
                        else:
                            assert judgment.pk == accepted[-1] or judgment.pk in accepted
        except BaseException as error:  # surfaced below
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=rate, args=(user,)) for user in raters]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors

    counts = Counter(Judgment.objects.values_list("comparison_id", flat=True))
    assert max(counts.values()) == 3 and len(counts) == comparisons
    assert sorted(accepted) == sorted(Judgment.objects.values_list("pk", flat=True))
    assert len(accepted) == comparisons * 3
    for comparison in Comparison.objects.all():
        assert comparison.judgment_count == counts[comparison.pk]
    assert not Assignment.objects.filter(state=Assignment.State.OPEN).exists()
    assert refused == Counter()  # leases never expired here, so nothing had to be refused
