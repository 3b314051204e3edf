"""The rating queue: fairness, k, leases, skips, idempotent submission, pair keying."""

from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from annotation import queue
from annotation.models import Assignment, Campaign, Comparison, Judgment
from annotation.pairing import choose_pairs
from annotation.progress import progress_for
from tests.annotation import factories


@pytest.fixture
def raters(roles, django_user_model):
    return factories.annotators(django_user_model, 5)


@pytest.fixture
def campaign(researcher, raters):
    return factories.campaign(researcher, raters, n_scenarios=4, overlap=3)


def test_all_pairs_builds_every_model_pair_per_scenario(campaign):
    assert campaign.comparisons.count() == 4 * 3
    for comparison in campaign.comparisons.select_related("response_a", "response_b"):
        assert comparison.response_a.companion_id < comparison.response_b.companion_id
        assert comparison.response_a.scenario_id == comparison.response_b.scenario_id


def test_random_pairing_is_balanced_over_model_pairs():
    by_scenario = {s: [1, 2, 3, 4] for s in range(60)}
    triples = choose_pairs(by_scenario, Campaign.Pairing.RANDOM_PAIRS, 1, seed=7)
    counts = {}
    for _, a, b in triples:
        counts[(a, b)] = counts.get((a, b), 0) + 1
    assert len(triples) == 60 and len(counts) == 6
    assert set(counts.values()) == {10}
    assert choose_pairs(by_scenario, Campaign.Pairing.RANDOM_PAIRS, 1, seed=7) == triples


def test_each_annotator_sees_a_comparison_once_and_prefers_started_ones(campaign, raters):
    first = queue.next_assignment(raters[0], campaign)
    queue.submit(raters[0], first.key, queue.Submission(-1))
    second = queue.next_assignment(raters[1], campaign)
    assert second.comparison_id == first.comparison_id  # finish what is started
    queue.submit(raters[1], second.key, queue.Submission(1))
    seen = set()
    while (item := queue.next_assignment(raters[0], campaign)) is not None:
        assert item.comparison_id not in seen
        seen.add(item.comparison_id)
        queue.submit(raters[0], item.key, queue.Submission(0))
    assert len(seen) == 11  # all 12 but the one already judged


def test_never_more_than_k_even_after_an_expired_lease(campaign, raters):
    campaign.overlap = 1
    campaign.save()
    late = queue.next_assignment(raters[0], campaign)
    Assignment.objects.filter(pk=late.pk).update(lease_expires_at=timezone.now() - timedelta(1))
    other = queue.next_assignment(raters[1], campaign)
    while other.comparison_id != late.comparison_id:  # items come in random order
        queue.skip(raters[1], other.key, "other")
        other = queue.next_assignment(raters[1], campaign)  # None if the slot stayed taken
    assert other.comparison_id == late.comparison_id  # the expired lease freed the slot
    queue.submit(raters[1], other.key, queue.Submission(2))
    with pytest.raises(queue.QueueError, match="enough votes"):
        queue.submit(raters[0], late.key, queue.Submission(-2))
    comparison = Comparison.objects.get(pk=late.comparison_id)
    assert comparison.judgment_count == comparison.judgments.count() == 1
    assert Assignment.objects.get(pk=late.pk).state == Assignment.State.REJECTED


def test_a_live_lease_holds_the_slot(campaign, raters):
    campaign.overlap = 1
    campaign.save()
    held = queue.next_assignment(raters[0], campaign)
    for rater in raters[1:]:
        item = queue.next_assignment(rater, campaign)
        assert item.comparison_id != held.comparison_id


def test_reload_returns_the_same_item_until_answered(campaign, raters):
    item = queue.next_assignment(raters[0], campaign)
    assert queue.next_assignment(raters[0], campaign).pk == item.pk


def test_replayed_submission_stores_one_judgment(campaign, raters):
    item = queue.next_assignment(raters[0], campaign)
    first = queue.submit(raters[0], item.key, queue.Submission(-2, rationale="clear"))
    again = queue.submit(raters[0], item.key, queue.Submission(2, rationale="changed my mind"))
    assert again.pk == first.pk and again.screen_preference == -2
    assert Judgment.objects.count() == 1
    assert Comparison.objects.get(pk=item.comparison_id).judgment_count == 1


def test_another_user_cannot_submit_or_skip_my_item(campaign, raters):
    item = queue.next_assignment(raters[0], campaign)
    with pytest.raises(queue.NotYours):
        queue.submit(raters[1], item.key, queue.Submission(0))
    with pytest.raises(queue.NotYours):
        queue.skip(raters[1], item.key, "other")
    assert not Judgment.objects.exists()


def test_skip_is_recorded_and_does_not_count(campaign, raters):
    item = queue.next_assignment(raters[0], campaign)
    queue.skip(raters[0], item.key, "language", "Chinese")
    skipped = Assignment.objects.get(pk=item.pk)
    assert skipped.state == Assignment.State.SKIPPED and skipped.skip_reason == "language: Chinese"
    assert Comparison.objects.get(pk=item.comparison_id).judgment_count == 0
    assert queue.next_assignment(raters[0], campaign).comparison_id != item.comparison_id
    with pytest.raises(queue.QueueError):
        queue.submit(raters[0], item.key, queue.Submission(0))


@pytest.mark.parametrize("left_is_a", [True, False])
def test_preference_and_ratings_are_keyed_by_the_pair_not_the_side(campaign, raters, left_is_a):
    item = queue.next_assignment(raters[0], campaign)
    Assignment.objects.filter(pk=item.pk).update(left_is_a=left_is_a)
    judgment = queue.submit(
        raters[0],
        item.key,
        queue.Submission(-2, ratings={"left": {"empathy": 5}, "right": {"empathy": 1}}),
    )
    # "left much better": the left response is A when left_is_a, else B.
    assert judgment.preference == (-2 if left_is_a else 2)
    assert judgment.ratings == (
        {"a": {"empathy": 5}, "b": {"empathy": 1}}
        if left_is_a
        else {"b": {"empathy": 5}, "a": {"empathy": 1}}
    )


def test_bad_submissions_are_refused_with_a_reason(campaign, raters):
    item = queue.next_assignment(raters[0], campaign)
    for bad in (
        queue.Submission(3),
        queue.Submission(0, ratings={"left": {"empathy": 9}}),
        queue.Submission(0, ratings={"left": {"charm": 3}}),
        queue.Submission(0, rationale="x" * 5001),
    ):
        with pytest.raises(queue.QueueError):
            queue.submit(raters[0], item.key, bad)
    assert not Judgment.objects.exists()


def test_gold_items_come_at_the_set_share_and_ignore_k(researcher, raters):
    campaign = factories.campaign(researcher, raters, n_scenarios=6, overlap=1, gold_share=1.0)
    gold = list(campaign.comparisons.all()[:2])
    Comparison.objects.filter(pk__in=[g.pk for g in gold]).update(is_gold=True, gold_preference=-1)
    for rater in raters[:3]:
        first = queue.next_assignment(rater, campaign)
        assert first.comparison.is_gold  # share 1.0: gold first while there is unseen gold
        queue.submit(rater, first.key, queue.Submission(-1))
    counts = sorted(
        Comparison.objects.filter(is_gold=True).values_list("judgment_count", flat=True)
    )
    assert counts == [1, 2]  # 3 votes on 2 gold items although k = 1: gold ignores k


def test_closed_campaign_hands_out_nothing(campaign, raters):
    campaign.state = Campaign.State.PAUSED
    with pytest.raises(queue.QueueError, match="not open"):
        queue.next_assignment(raters[0], campaign)


def test_progress_counts_only_what_can_be_handed_out(campaign, raters):
    """A scenario sent back to review leaves the queue, so it leaves "left for me" too."""
    assert progress_for(raters[0], campaign).left_for_me == 12
    scenario = campaign.comparisons.first().scenario
    scenario.state = scenario.State.IN_REVIEW
    scenario.save()
    assert progress_for(raters[0], campaign).left_for_me == 9


def test_rebuild_with_random_pairing_only_pairs_new_scenarios(researcher, raters):
    from annotation.pairing import build_comparisons
    from scenarios.models import Response
    from tests.scenarios import factories as scenario_factories

    campaign = factories.campaign(
        researcher, raters, n_scenarios=10, pairing=Campaign.Pairing.RANDOM_PAIRS
    )
    before = set(campaign.comparisons.values_list("pk", flat=True))
    assert len(before) == 10
    newcomer = scenario_factories.scenario(researcher, state="approved", tags=["campaign"])
    run = campaign.runs.get()
    for model in campaign.companions.all():
        Response.objects.create(run=run, scenario=newcomer, companion=model, text="new")
    assert build_comparisons(campaign) == 1
    assert (
        set(campaign.comparisons.exclude(scenario=newcomer).values_list("pk", flat=True)) == before
    )


def test_adaptive_campaign_sends_new_comparisons_to_the_uncertain_pair(
    researcher, roles, django_user_model
):
    """Truth: Zephyr ≪ Quokka ≈ Marlin. After the burn-in, votes should go to Quokka–Marlin.
    (Enough scenarios that no pair runs out of them within the 120 votes.)"""
    raters = factories.annotators(django_user_model, 3, prefix="adaptive")
    models = factories.companions()
    campaign = factories.campaign(
        researcher,
        raters,
        n_scenarios=150,
        overlap=1,
        pairing=Campaign.Pairing.ADAPTIVE,
        companions=models,
    )
    assert campaign.comparisons.count() == 6  # burn-in: 2 per model pair
    strength = {models[0].pk: -3.0, models[1].pk: 0.0, models[2].pk: 0.05}
    import random

    for _ in range(40):
        for rater in raters:
            item = queue.next_assignment(rater, campaign)
            if item is None:
                continue
            a = item.comparison.response_a.companion_id
            b = item.comparison.response_b.companion_id
            # Each comparison's vote is drawn from its own texts, so the study's outcome does not
            # depend on the (random) order the queue hands the comparisons out in.
            draw = random.Random(
                f"{item.comparison.response_a.text}|{item.comparison.response_b.text}"
            )
            a_wins = draw.random() < 1 / (1 + 2.718 ** (strength[b] - strength[a]))
            left_wins = a_wins == item.left_is_a
            queue.submit(rater, item.key, queue.Submission(-1 if left_wins else 1))
    pairs = Counter(
        campaign.comparisons.values_list("response_a__companion_id", "response_b__companion_id")
    )
    close = pairs[(models[1].pk, models[2].pk)]
    assert close > pairs[(models[0].pk, models[1].pk)] + pairs[(models[0].pk, models[2].pk)]
