"""Issue 23 point 4: excluding an annotator takes their judgments off the counts that drive the
queue and the progress; the comparisons they filled are handed out again until k judgments
count; clearing the exclusion counts them again (a comparison may then hold more than k)."""

import threading
from datetime import timedelta

import pytest
from django.db import connection, connections, transaction
from django.utils import timezone

from annotation import campaigns, exclusions, queue
from annotation.models import AnnotatorTally, Assignment, Campaign, Comparison, Judgment
from annotation.progress import progress_for
from annotation.rating_reads import rating_campaign
from tests.annotation import factories


@pytest.fixture
def raters(roles, django_user_model):
    return factories.annotators(django_user_model, 4)


@pytest.fixture
def campaign(researcher, raters):
    return factories.campaign(researcher, raters, n_scenarios=2, overlap=2)  # 6 comparisons


def rate_all(user, campaign) -> int:
    """Rate until the queue has nothing more for `user`; returns how many were rated."""
    n = 0
    while (item := queue.next_assignment(user, rating_campaign(user, campaign.pk))) is not None:
        queue.submit(user, item.key, queue.Submission(1))
        n += 1
    return n


def counted(comparison: Comparison, excluded: list[int]) -> int:
    return comparison.judgments.exclude(annotator_id__in=excluded).count()


def check_counts(campaign, excluded: list[int]) -> None:
    """Every comparison's judgment count is the number of judgments that count."""
    for comparison in Comparison.objects.filter(campaign=campaign):
        assert comparison.judgment_count == counted(comparison, excluded), comparison.pk


def left(user, campaign) -> int:
    return progress_for(user, Campaign.objects.get(pk=campaign.pk)).left_for_me


def test_excluded_judgments_stop_counting_and_their_comparisons_are_handed_out_again(
    campaign, raters, researcher
):
    bad, good, third, fourth = raters
    assert rate_all(bad, campaign) == 6 and rate_all(good, campaign) == 6  # all complete (k=2)
    overview = campaigns.campaign_overview(campaign)
    assert (overview["judged"], overview["complete"], overview["percent"]) == (12, 6, 100.0)
    assert left(third, campaign) == 0 and queue.next_assignment(third, campaign) is None

    exclusions.exclude(campaign, [bad], "always votes the same", by=researcher)

    check_counts(campaign, [bad.pk])
    overview = campaigns.campaign_overview(campaign)
    assert (overview["judged"], overview["target"]) == (6, 12)
    assert (overview["complete"], overview["partial"], overview["percent"]) == (0, 6, 50.0)
    assert overview["excluded_judgments"] == 6  # shown apart
    progress = progress_for(third, Campaign.objects.get(pk=campaign.pk))
    assert (progress.campaign_done, progress.left_for_me) == (6, 6)
    # The excluded annotator is handed nothing more: nothing is "left" for them.
    assert left(bad, campaign) == 0 and queue.next_assignment(bad, campaign) is None
    assert left(good, campaign) == 0  # they judged every comparison already

    # The 6 comparisons reach k judgments that count again, never more.
    assert rate_all(third, campaign) == 6
    check_counts(campaign, [bad.pk])
    assert rate_all(fourth, campaign) == 0
    overview = campaigns.campaign_overview(campaign)
    assert (overview["judged"], overview["complete"], overview["percent"]) == (12, 6, 100.0)
    assert Comparison.objects.filter(campaign=campaign, judgment_count__gt=2).count() == 0

    # Clearing counts the excluded judgments again: every comparison now holds 3 (> k), all
    # counted, none handed out; the progress passes its target and is shown capped.
    assert exclusions.clear(campaign, [bad]) == 1
    check_counts(campaign, [])
    assert set(
        Comparison.objects.filter(campaign=campaign).values_list("judgment_count", flat=True)
    ) == {3}
    overview = campaigns.campaign_overview(campaign)
    assert (overview["judged"], overview["excluded_judgments"], overview["percent"]) == (
        18,
        0,
        100.0,
    )
    assert queue.next_assignment(fourth, campaign) is None and left(fourth, campaign) == 0
    assert left(bad, campaign) == 0


def test_excluding_twice_or_an_annotator_without_judgments_changes_nothing_twice(
    campaign, raters, researcher
):
    bad, good, *_ = raters
    rate_all(bad, campaign)
    exclusions.exclude(campaign, [bad], "first reason", by=researcher)
    exclusions.exclude(campaign, [bad, good], "second reason", by=researcher)
    check_counts(campaign, [bad.pk, good.pk])
    exclusions.clear(campaign, [good])
    exclusions.clear(campaign, [good])  # nothing to clear: no count changes
    check_counts(campaign, [bad.pk])
    exclusions.clear(campaign)
    check_counts(campaign, [])


def test_an_open_item_of_the_excluded_annotator_is_closed_and_its_slot_freed(
    researcher, roles, django_user_model
):
    bad, other = factories.annotators(django_user_model, 2, prefix="slot")
    campaign = factories.campaign(researcher, [bad, other], n_scenarios=1, overlap=1)
    items = [queue.next_assignment(bad, campaign)]
    exclusions.exclude(campaign, [bad], "left the study", by=researcher)
    items[0].refresh_from_db()
    assert items[0].state == "rejected"
    with pytest.raises(queue.QueueError, match="already rejected"):
        queue.submit(bad, items[0].key, queue.Submission(1))
    assert rate_all(other, campaign) == 3  # all three comparisons, the freed one included


def test_an_item_handed_out_while_the_exclusion_was_made_is_stored_but_not_counted(
    researcher, roles, django_user_model
):
    """An item the queue handed out in the moment the exclusion was being made (it was not
    there to be closed) is answered after it: the judgment is stored, not counted."""
    bad, other = factories.annotators(django_user_model, 2, prefix="late")
    campaign = factories.campaign(researcher, [bad, other], n_scenarios=1, overlap=1)
    exclusions.exclude(campaign, [bad], "left the study", by=researcher)
    comparison = Comparison.objects.filter(campaign=campaign).first()
    late = Assignment.objects.create(
        comparison=comparison,
        annotator=bad,
        left_is_a=True,
        lease_expires_at=timezone.now() + timedelta(minutes=5),
    )
    judgment = queue.submit(bad, late.key, queue.Submission(1))
    assert Judgment.objects.filter(pk=judgment.pk).exists()
    comparison.refresh_from_db()
    assert comparison.judgment_count == 0
    assert AnnotatorTally.objects.get(campaign=campaign, annotator=bad).filled == 0
    assert rate_all(other, campaign) == 3


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("first", ["answer", "exclusion"])
def test_an_answer_racing_the_exclusion_is_counted_consistently(
    researcher, roles, django_user_model, first
):
    """An answer of the annotator being excluded is in flight: whichever transaction takes the
    annotator's row first, no judgment of theirs stays counted."""
    if connection.vendor != "postgresql":
        pytest.skip("row locks are what is tested: run with DATABASE_URL=postgres")
    bad, other = factories.annotators(django_user_model, 2, prefix="race")
    campaign = factories.campaign(researcher, [bad, other], n_scenarios=1, overlap=2)
    done = [queue.next_assignment(bad, campaign)]
    queue.submit(bad, done[0].key, queue.Submission(1))
    item = queue.next_assignment(bad, campaign)
    holding, go = threading.Event(), threading.Event()
    errors = []

    def answer():
        try:
            with transaction.atomic():
                assignment, _ = queue.rated_item(bad, item.key)  # locks the user row
                holding.set()
                go.wait(10)
                queue.submit(bad, item.key, queue.Submission(-1), item=assignment)
        except Exception as error:
            errors.append(error)
        finally:
            connections.close_all()

    def exclude():
        try:
            with transaction.atomic():
                exclusions.exclude(campaign, [bad], "raced", by=researcher)
                holding.set()
                go.wait(10)
        except Exception as error:
            errors.append(error)
        finally:
            connections.close_all()

    starts = {"answer": answer, "exclusion": exclude}
    firsts = threading.Thread(target=starts[first])
    firsts.start()
    assert holding.wait(10)
    holding.clear()
    second = threading.Thread(target=starts["exclusion" if first == "answer" else "answer"])
    second.start()
    second.join(0.5)
    assert second.is_alive(), "the second did not wait for the first"
    go.set()
    firsts.join(10)
    second.join(10)
    if first == "answer":  # stored and counted, then taken off by the exclusion
        assert errors == [] and Judgment.objects.filter(annotator=bad).count() == 2
    else:  # the exclusion closed the item before the answer could lock it
        assert [str(e) for e in errors] == [queue.already_message("rejected")]
        assert Judgment.objects.filter(annotator=bad).count() == 1
    check_counts(campaign, [bad.pk])
    assert set(
        Comparison.objects.filter(campaign=campaign).values_list("judgment_count", flat=True)
    ) == {0}
    progress = progress_for(other, Campaign.objects.get(pk=campaign.pk))
    assert (progress.campaign_done, progress.left_for_me) == (0, 3)
