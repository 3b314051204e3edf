"""The queue's promises checked as invariants: progress counters equal a recount after every
hand-out and answer, rating and rationale bounds, what a judgment and a skip store, the
hand-out after an adaptive top-up, and (PostgreSQL) waiting out rows other requests hold."""

import random
import threading
from datetime import timedelta

import pytest
from django.db import connection, connections, transaction
from django.utils import timezone

from annotation import progress, queue
from annotation.models import Assignment, Campaign, Comparison, Judgment
from annotation.progress import progress_for
from annotation.rating_reads import rating_campaign
from scenarios.models import Scenario
from tests.annotation import factories
from tests.annotation.locks import campaign_row_held


@pytest.fixture
def raters(roles, django_user_model):
    return factories.annotators(django_user_model, 3)


@pytest.fixture
def campaign(researcher, raters):
    return factories.campaign(researcher, raters, n_scenarios=2, overlap=2)


def recounted(user, campaign):
    """The user's progress counted afresh from the database, checked against what the
    counters mean, counted here from the rows."""
    progress = progress_for(user, Campaign.objects.get(pk=campaign.pk))
    regular = Comparison.objects.filter(campaign=campaign, is_gold=False)
    votes = Judgment.objects.filter(comparison__campaign=campaign)
    left = regular.filter(
        judgment_count__lt=campaign.overlap, scenario__state=Scenario.State.APPROVED
    ).exclude(assignments__annotator=user)
    assert progress.left_for_me == left.count()
    assert progress.done_total == votes.filter(annotator=user).count()
    assert progress.campaign_done == votes.filter(comparison__is_gold=False).count()
    assert progress.campaign_target == regular.count() * campaign.overlap
    return progress


def test_progress_counters_follow_every_hand_out_and_answer(campaign, raters):
    """The counts read with the campaign and carried through a request (as the rating page
    does) equal a recount after each hand-out, submission and skip, gold included."""
    gold = campaign.comparisons.order_by("pk").first()
    Comparison.objects.filter(pk=gold.pk).update(is_gold=True, gold_preference=1)
    campaign.gold_share = 0.5
    campaign.save()
    recounted(raters[0], campaign)  # the stored counts are current from here
    # Who draws gold when is random (gold_share): seeded, so that a gold item is answered
    # (left to chance, none was in about one run of 500).
    random.seed(3)
    actions = 0
    for turn in range(12):
        user = raters[turn % 3]
        read = rating_campaign(user, campaign.pk)
        item = queue.next_assignment(user, read)
        assert progress_for(user, read) == recounted(user, campaign)
        if item is None:
            continue
        assignment, carried = queue.rated_item(user, item.key)
        if turn % 4 == 3:
            queue.skip(user, item.key, "other", item=assignment)
        else:
            queue.submit(user, item.key, queue.Submission(1), item=assignment)
        assert progress_for(user, carried) == recounted(user, campaign)
        actions += 1
    assert actions >= 8 and Judgment.objects.filter(comparison=gold).exists()


def test_ratings_are_whole_numbers_from_1_to_5(campaign, raters):
    item = queue.next_assignment(raters[0], campaign)
    for bad in (0, 6, -1, True, 2.5, "3"):
        with pytest.raises(queue.QueueError, match="1–5"):
            queue.submit(
                raters[0], item.key, queue.Submission(0, ratings={"left": {"empathy": bad}})
            )
    with pytest.raises(queue.QueueError, match="left or right"):
        queue.submit(raters[0], item.key, queue.Submission(0, ratings={"middle": {"empathy": 3}}))
    with pytest.raises(queue.QueueError, match="left or right"):
        queue.submit(raters[0], item.key, queue.Submission(0, ratings={"left": 3}))
    assert not Judgment.objects.exists()
    ratings = {"left": {"empathy": 1, "safety": 5, "fluency": None}, "right": {"empathy": ""}}
    stored = queue.submit(raters[0], item.key, queue.Submission(0, ratings=ratings))
    side = "a" if item.left_is_a else "b"
    assert stored.ratings == {side: {"empathy": 1, "safety": 5}}  # blanks are no rating


def test_rationale_up_to_5000_characters_is_stored_stripped(campaign, raters):
    item = queue.next_assignment(raters[0], campaign)
    with pytest.raises(queue.QueueError, match="5,000"):
        queue.submit(raters[0], item.key, queue.Submission(0, rationale="y" * 5001))
    stored = queue.submit(raters[0], item.key, queue.Submission(0, rationale=" " + "y" * 4999))
    assert stored.rationale == "y" * 4999


def test_the_judgment_stores_time_on_task_and_what_was_shown(campaign, raters):
    item = queue.next_assignment(raters[0], campaign)
    issued = timezone.now() - timedelta(hours=3)  # long enough that 0.1% of it shows
    Assignment.objects.filter(pk=item.pk).update(issued_at=issued)
    before = timezone.now()
    stored = queue.submit(raters[0], item.key, queue.Submission(None, both_unacceptable=True))
    after = timezone.now()
    milliseconds = lambda moment: (moment - issued).total_seconds() * 1000  # noqa: E731
    assert milliseconds(before) - 1 <= stored.time_on_task_ms <= milliseconds(after)
    assert stored.both_unacceptable and stored.client_time_ms is None
    assert stored.screen_preference == 0 and stored.preference == 0  # its own outcome: tie point
    assert stored.scenario_hash == item.comparison.scenario.content_hash
    answered = Assignment.objects.get(pk=item.pk)
    assert answered.state == Assignment.State.SUBMITTED and answered.finished_at is not None
    second = queue.next_assignment(raters[0], campaign)
    timed = queue.submit(raters[0], second.key, queue.Submission(1, client_time_ms=4321))
    assert timed.client_time_ms == 4321 and timed.time_on_task_ms < 60_000
    assert not timed.both_unacceptable and timed.rationale == "" and timed.ratings == {}
    assert timed.screen_preference == 1 and timed.preference == (1 if second.left_is_a else -1)


def test_an_item_whose_scenario_left_review_is_not_shown_again(campaign, raters):
    """Withdrawn for review (no edit): the open item is closed as rejected and another comes."""
    item = queue.next_assignment(raters[0], campaign)
    Scenario.objects.filter(pk=item.comparison.scenario_id).update(state=Scenario.State.IN_REVIEW)
    other = queue.next_assignment(raters[0], campaign)
    assert other is not None and other.pk != item.pk
    assert other.comparison.scenario_id != item.comparison.scenario_id
    assert Assignment.objects.get(pk=item.pk).state == Assignment.State.REJECTED


def test_a_skip_stores_its_reason_and_a_note_cut_at_300_characters(campaign, raters):
    item = queue.next_assignment(raters[0], campaign)
    queue.skip(raters[0], item.key, "broken", "  " + "z" * 400 + "  ")
    stored = Assignment.objects.get(pk=item.pk)
    assert stored.skip_reason == ("broken: " + "z" * 400)[:300] and len(stored.skip_reason) == 300
    assert stored.finished_at is not None
    other = queue.next_assignment(raters[0], campaign)
    queue.skip(raters[0], other.key, "language", "   ")
    assert Assignment.objects.get(pk=other.pk).skip_reason == "language"
    with pytest.raises(queue.QueueError, match="why"):
        queue.skip(raters[0], queue.next_assignment(raters[0], campaign).key, "bored")


def test_an_adaptive_top_up_is_handed_out_at_once(researcher, roles, django_user_model):
    """When the burn-in runs dry, the annotator who asks gets one of the new comparisons in
    the same request, not an empty page."""
    raters = factories.annotators(django_user_model, 1, prefix="dry")
    campaign = factories.campaign(
        researcher, raters, n_scenarios=30, overlap=1, pairing=Campaign.Pairing.ADAPTIVE
    )
    burn_in = campaign.comparisons.count()
    for _ in range(burn_in):
        item = queue.next_assignment(raters[0], campaign)
        queue.submit(raters[0], item.key, queue.Submission(1))
    item = queue.next_assignment(raters[0], campaign)
    assert item is not None and campaign.comparisons.count() > burn_in
    assert item.annotator == raters[0] and item.state == Assignment.State.OPEN


def test_any_free_counts_judgments_and_live_leases(campaign, raters):
    """`_any_free` (asked when every candidate row is locked by others) says whether waiting
    can help: a slot is free while judgments + live leases < k; expired leases free it."""
    now = timezone.now()
    comparisons = list(campaign.comparisons.order_by("pk"))
    assert queue._any_free(raters[0], campaign, False, [], now)
    assert not queue._any_free(raters[0], campaign, False, [c.pk for c in comparisons], now)
    Comparison.objects.filter(pk__in=[c.pk for c in comparisons[1:]]).update(judgment_count=2)
    assert queue._any_free(raters[0], campaign, False, [], now)
    lease = queue.next_assignment(raters[1], campaign)
    assert lease.comparison_id == comparisons[0].pk
    assert queue._any_free(raters[0], campaign, False, [], now)  # 0 judgments + 1 lease < 2
    Comparison.objects.filter(pk=comparisons[0].pk).update(judgment_count=1)
    assert not queue._any_free(raters[0], campaign, False, [], now)  # 1 + 1 lease = k
    assert queue._any_free(raters[0], campaign, False, [], now + timedelta(days=2))  # expired
    assert not queue._any_free(raters[1], campaign, False, [], now + timedelta(days=2))  # seen
    assert not queue._any_free(raters[0], campaign, True, [], now)  # no gold
    Comparison.objects.filter(pk=comparisons[1].pk).update(is_gold=True, gold_preference=1)
    assert queue._any_free(raters[0], campaign, True, [], now)  # gold ignores k


# ---------------------------------------------------------------- PostgreSQL: row locks


@pytest.mark.django_db(transaction=True)
def test_a_request_waits_out_rows_others_hold_and_keeps_k(researcher, roles, django_user_model):
    """Every candidate row is locked by another request for a moment: next_assignment retries
    with a backoff instead of giving up, gets an item once the rows are free, and k holds."""
    if connection.vendor != "postgresql":
        pytest.skip("row locks with SKIP LOCKED are what is tested: run with DATABASE_URL=postgres")
    raters = factories.annotators(django_user_model, 2, prefix="locked")
    campaign = factories.campaign(researcher, raters, n_scenarios=1, overlap=1)
    locked, release = threading.Event(), threading.Event()

    def hold_every_row():
        try:
            with transaction.atomic():
                list(Comparison.objects.select_for_update().filter(campaign=campaign))
                locked.set()
                release.wait(10)
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold_every_row)
    holder.start()
    assert locked.wait(10)
    threading.Timer(0.8, release.set).start()  # within the backoff's 6 s, after 50 quick tries
    with transaction.atomic():
        item = queue.next_assignment(raters[0], campaign)
    holder.join(10)
    assert item is not None, "gave up while the rows were only locked for a moment"
    queue.submit(raters[0], item.key, queue.Submission(1))
    for comparison in Comparison.objects.filter(campaign=campaign):
        assert comparison.judgment_count == comparison.judgments.count() <= 1


def test_changing_k_counts_again_which_items_are_on_full_comparisons(
    campaign, raters, researcher_client
):
    """Raising k after comparisons filled makes them open again: each rater's items on them
    count as held below k again, and "left for me" follows at once."""
    for user in raters[:2]:
        rate_everything(user, campaign)
    assert Comparison.objects.filter(campaign=campaign, judgment_count=2).exists()
    response = researcher_client.patch(
        f"/api/campaigns/{campaign.pk}/", {"overlap": 3}, content_type="application/json"
    )
    assert response.status_code == 200, response.json()
    campaign.refresh_from_db()
    for user in raters:
        recounted(user, campaign)
    rated = rating_campaign(raters[2], campaign.pk)
    assert queue.next_assignment(raters[2], rated) is not None


@pytest.mark.django_db(transaction=True)
def test_progress_is_read_from_the_rows_while_another_request_counts_it(
    researcher, roles, django_user_model
):
    """A rating request finding the campaign to be counted while another request holds its
    row does not wait: it reads the base from the rows, the same as counted."""
    if connection.vendor != "postgresql":
        pytest.skip("row locks are what is tested: run with DATABASE_URL=postgres")
    raters = factories.annotators(django_user_model, 2, prefix="base")
    campaign = factories.campaign(researcher, raters, n_scenarios=3, overlap=2)
    rate_everything(raters[0], campaign)
    expected = recounted(raters[1], campaign)
    progress.recount_later(campaign)
    with campaign_row_held(campaign):
        with transaction.atomic():
            read = rating_campaign(raters[1], campaign.pk)
            assert progress_for(raters[1], read) == expected
        assert Campaign.objects.get(pk=campaign.pk).counted_overlap is None  # not counted
    assert progress_for(raters[1], Campaign.objects.get(pk=campaign.pk)) == expected
    assert Campaign.objects.get(pk=campaign.pk).counted_overlap == 2  # counted now


def rate_everything(user, campaign) -> None:
    while (item := queue.next_assignment(user, rating_campaign(user, campaign.pk))) is not None:
        queue.submit(user, item.key, queue.Submission(1))
