"""Many annotators asking and submitting at once on PostgreSQL: never over k, nothing lost."""

import threading
from collections import Counter

import pytest
from django.db import connection, connections, transaction
from rest_framework.test import APIClient

from annotation import progress, queue
from annotation.models import Assignment, Comparison, Judgment
from annotation.rating_reads import rating_campaign
from tests.annotation import factories
from tests.annotation.locks import campaign_row_held

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


def test_a_held_campaign_lock_lets_hand_outs_commit(researcher, roles, django_user_model):
    """An exclusion or a progress recount holds the campaign row; a hand-out committing
    meanwhile (its rows' foreign keys check the campaign row) does not wait for it."""
    rater = factories.annotators(django_user_model, 1, prefix="held")[0]
    campaign = factories.campaign(researcher, [rater], n_scenarios=2)
    errors: list[BaseException] = []

    def hand_out():
        try:
            with transaction.atomic():
                assert queue.next_assignment(rater, rating_campaign(rater, campaign.pk))
        except BaseException as error:
            errors.append(error)
        finally:
            connections.close_all()

    taker = threading.Thread(target=hand_out)
    with campaign_row_held(campaign):
        taker.start()
        taker.join(5)
        committed_while_held = not taker.is_alive()
    taker.join(10)
    assert not errors, errors
    assert committed_while_held, "the hand-out waited for the campaign lock"
    assert Assignment.objects.filter(annotator=rater).count() == 1


def test_raters_arriving_at_once_on_a_new_campaign_all_get_items(
    researcher, roles, django_user_model
):
    """The first requests on a campaign all find its progress to be counted (a new campaign,
    or one whose comparisons changed): one counts, none fails (they deadlocked with the
    hand-outs committing meanwhile)."""
    raters = factories.annotators(django_user_model, THREADS, prefix="arrive")
    campaign = factories.campaign(researcher, raters, n_scenarios=30, overlap=3)
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS)
    rounds = 3

    def arrive(user):
        try:
            client = APIClient()
            client.force_authenticate(user)
            start.wait()
            for _ in range(rounds):
                item = client.post(f"/api/rate/campaigns/{campaign.pk}/next/")
                assert item.status_code == 200, item.content
                key = item.json()["key"]
                answer = client.post(f"/api/rate/assignments/{key}/submit/", {"preference": 1})
                assert answer.status_code == 200, answer.content
        except BaseException as error:
            errors.append(error)
        finally:
            connections.close_all()

    for attempt in range(3):  # each attempt on a campaign to be counted again
        progress.recount_later(campaign)
        threads = [threading.Thread(target=arrive, args=(user,)) for user in raters]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert not errors, (attempt, errors[:3])
    assert Judgment.objects.filter(comparison__campaign=campaign).count() == 3 * rounds * THREADS
