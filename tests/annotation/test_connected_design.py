"""Raters who work in step must not form fixed groups (tracker issue 21, point 6).

Six raters (four honest, one always picking the left side, one at random) take strict turns
through the rating API with k = 3. With priority strictly to the most judged comparison, the
one started comparison always went to the next two in turn: two fixed groups of three for the
whole campaign, {h0, h1, h2} and {h3, left, random}, and the random rater's consensus was the
left rater and one honest rater. The queue now hands a rater comparisons whose raters they
share fewest items with (`candidates.co_rating`): every pair of raters shares items, and the
agreement report flags exactly the two bad raters, as it does when the raters arrive in
shuffled order. Every draw (shuffle keys, start points, sides, answers) is seeded.
"""

import json
import random
import secrets
from collections import Counter
from itertools import combinations

import pytest

from annotation import candidates, queue
from annotation.candidates import co_rating
from annotation.models import Assignment, Comparison, Judgment, RaterPair
from scoring.agreement.services import annotator_flags
from tests.annotation import factories
from tests.annotation.test_rating_api import next_url, submit_url, token_client

SCENARIOS = 60  # × 3 companion pairs = 180 comparisons, 540 judgments
HONEST = 0.9  # an honest rater picks the better response this often (then a tie 5%)


@pytest.fixture
def seeded(monkeypatch):
    monkeypatch.setattr(secrets, "randbits", random.Random(61).getrandbits)
    draws = random.Random(62)
    monkeypatch.setattr(queue, "random", draws)
    monkeypatch.setattr(candidates, "random", draws)


def answer(name: str, better_on_left: bool, rng: random.Random) -> int:
    """A screen preference (-2..2, negative = left better) as this rater gives it."""
    if name == "left":
        return -2
    if name == "random":
        return rng.choice([-2, -1, 0, 1, 2])
    draw = rng.random()
    toward_better = rng.choice([1, 2]) * (-1 if better_on_left else 1)
    return toward_better if draw < HONEST else 0 if draw < HONEST + 0.05 else -toward_better


def rate_in_turns(campaign, raters: dict, seed: int) -> int:
    """Each rater in turn asks for an item and answers it, until nobody gets one; returns how
    many judgments were stored."""
    rng = random.Random(seed)
    truth = {pk: rng.random() < 0.5 for pk in campaign.comparisons.values_list("pk", flat=True)}
    clients = {name: token_client(user) for name, user in raters.items()}
    stored, idle = 0, 0
    while idle < len(raters):
        idle = 0
        for name, client in clients.items():
            item = client.post(next_url(campaign.pk))
            if item.status_code == 204:
                idle += 1
                continue
            key = item.json()["key"]
            shown = Assignment.objects.get(key=key)
            a_better = truth[shown.comparison_id]
            body = {
                "preference": answer(name, a_better == shown.left_is_a, rng),
                "client_time_ms": 30_000,
            }
            saved = client.post(submit_url(key), json.dumps(body), "application/json")
            assert saved.status_code == 200, saved.content
            stored += 1
    return stored


def shared_items(campaign) -> Counter:
    """Per pair of annotators (ids, lower first), the comparisons both judged."""
    raters: dict[int, list[int]] = {}
    for comparison, annotator in Judgment.objects.filter(comparison__campaign=campaign).values_list(
        "comparison_id", "annotator_id"
    ):
        raters.setdefault(comparison, []).append(annotator)
    return Counter(pair for judged in raters.values() for pair in combinations(sorted(judged), 2))


def test_six_raters_in_strict_turns_all_share_items_and_the_two_bad_ones_are_flagged(
    seeded, researcher, roles, django_user_model
):
    names = ["h0", "h1", "h2", "h3", "left", "random"]
    users = factories.annotators(django_user_model, len(names), prefix="turns")
    raters = dict(zip(names, users, strict=True))
    campaign = factories.campaign(researcher, users, n_scenarios=SCENARIOS, overlap=3)
    assert rate_in_turns(campaign, raters, seed=63) == 3 * campaign.comparisons.count()
    assert not Comparison.objects.filter(campaign=campaign, judgment_count__lt=3).exists()

    shared = shared_items(campaign)
    kept = {(p.low_id, p.high_id): p.shared for p in RaterPair.objects.filter(campaign=campaign)}
    assert kept == dict(shared)  # the queue's counts are the judgments' own
    by_name = {
        f"{a}-{b}": shared[tuple(sorted((raters[a].pk, raters[b].pk)))]
        for a, b in combinations(names, 2)
    }
    assert min(by_name.values()) > 0, by_name  # every pair shares items: a connected design

    flags = annotator_flags(campaign)
    flagged = sorted(row["annotator"] for row in flags if row["flagged"])
    agreement = {row["annotator"]: round(row["consensus_agreement"], 2) for row in flags}
    assert flagged == [raters["left"].username, raters["random"].username], (agreement, by_name)


def test_a_comparison_drops_only_for_more_than_the_fair_share_of_shared_items():
    # Two raters: everything the requester judged that the other could share is their fair
    # share, so nothing ever drops (the queue orders as before: the hand-out-order tests).
    for mine, theirs in [(1, 1), (10, 3), (3, 10), (50, 50)]:
        for shared in range(min(mine, theirs) + 1):
            assert co_rating(shared, theirs, mine, mine + theirs, overlap=2)[0] == 0
    # Six raters in fixed groups after 90 items each: fair share 90 × 2 × 90 / 450 = 36.
    assert co_rating(90, 90, 90, 540, overlap=3) == (1, 54.0)
    assert co_rating(0, 90, 90, 540, overlap=3) == (0, -36.0)
    assert co_rating(36 + 1 + 3, 90, 90, 540, overlap=3)[0] == 0  # slack: 1 item + 10%
    assert co_rating(36 + 1 + 4, 90, 90, 540, overlap=3)[0] == 1
    # Nobody judged yet, or a candidate nobody holds: nothing to share, no drop.
    assert co_rating(0, 0, 0, 0, overlap=3) == (0, 0.0)
    assert co_rating(0, 0, 40, 200, overlap=3) == (0, 0.0)
