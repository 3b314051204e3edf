"""An annotator plays detective: does the sequence of items the rating API hands out link
responses to the companions that wrote them?

The attacker reads only what the API returns to them: the scenario, the left and right texts,
and the order the items arrive in. Attackers:

(a) order: within each scenario, a response's "slot" is the set of arrival positions (among that
    scenario's items) of the items it appears in. Handed out by id, all pairs of three
    companions arrive as (c1,c2), (c1,c3), (c2,c3), so slot {1,2} is always c1.
(b) side: a response's slot is how often it was shown on the left (of how many items).
(d) order and side together: the positions and the side in each.
(c) runs: how often two items in a row come from the same scenario.

Linkage accuracy is that of the best mapping of slots to companions (each slot to the companion
most often in it), which an attacker who knew it could use to favour one model everywhere.
"Chance" is its mean when the order within each scenario is shuffled and the sides are flipped
at random. Each check is an exact Monte Carlo permutation test (p = (1 + #null ≥ observed) /
(1 + DRAWS)); it fails when p < ALPHA = 0.001, so each check raises a false alarm on a blind
queue with probability at most 0.1% (eight checks: at most 0.8%). Every random draw (shuffle
keys, start points, sides, schedule, permutations) is seeded, so the outcome is deterministic.
"""

import json
import random
import secrets
from dataclasses import dataclass

import numpy as np
import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.authtoken.models import Token

from annotation import candidates, queue
from annotation.blinding import scenario_payload
from annotation.models import Assignment, Campaign
from scenarios.models import Response
from tests.annotation import factories

ALPHA = 0.001
DRAWS = 1999
ITEMS = 306  # seen by the attacker in each design


@dataclass(frozen=True)
class Seen:
    """One item as the annotator received it."""

    scenario: str  # the scenario's context as shown (JSON), which tells scenarios apart
    left: str
    right: str


@dataclass
class Finding:
    observed: float
    chance: float
    p: float

    def __str__(self):
        return f"{self.observed:.3f} (chance {self.chance:.3f}, p = {self.p:.4f})"


def _groups(items: list[Seen]) -> list[list[Seen]]:
    by_scenario: dict[str, list[Seen]] = {}
    for item in items:
        by_scenario.setdefault(item.scenario, []).append(item)
    return list(by_scenario.values())


def _verdict(values: np.ndarray) -> Finding:
    """values[0] is the observed statistic, values[1:] its permutation null."""
    observed, null = values[0], values[1:]
    p = (1 + np.sum(null >= observed - 1e-12)) / (1 + len(null))
    return Finding(float(observed), float(null.mean()), float(p))


def linkage(items: list[Seen], truth: dict[str, int], attacker: str, seed: int) -> Finding:
    """Best-mapping accuracy of slots to companions, observed and under the null.

    Row 0 of every array is what the annotator saw; rows 1.. shuffle the order of the items
    within each scenario (attackers using order) and flip each item's sides (using sides).
    """
    rng = np.random.default_rng(seed)
    use_order, use_side = attacker in ("order", "both"), attacker in ("side", "both")
    codes, companions = [], []
    for group in _groups(items):
        texts = sorted({text for item in group for text in (item.left, item.right)})
        index = {text: j for j, text in enumerate(texts)}
        size = len(group)
        on_left = np.zeros((len(texts), size), dtype=np.int64)
        on_right = np.zeros_like(on_left)
        for i, item in enumerate(group):
            on_left[index[item.left], i] = 1
            on_right[index[item.right], i] = 1
        position = np.tile(np.arange(size), (DRAWS + 1, 1))
        if use_order:
            position[1:] = rng.permuted(position[1:], axis=1)
        flip = np.zeros((DRAWS + 1, size), dtype=np.int64)
        if use_side:
            flip[1:] = rng.integers(0, 2, size=(DRAWS, size))
        if attacker == "order":
            slot = (2**position) @ (on_left + on_right).T
        elif attacker == "side":
            lefts = (1 - flip) @ on_left.T + flip @ on_right.T
            slot = lefts * 64 + (on_left + on_right).sum(axis=1)
        else:
            slot = (4**position * 2 ** (1 - flip)) @ on_left.T + (
                4**position * 2**flip
            ) @ on_right.T
        codes.append(slot * 16 + size)  # a slot is read within scenarios of the same size
        companions.extend(truth[text] for text in texts)
    codes = np.concatenate(codes, axis=1)
    labels = np.unique(companions, return_inverse=True)[1]
    slots, slot_index = np.unique(codes, return_inverse=True)
    slot_index = slot_index.reshape(codes.shape)
    n_slots, n_labels = len(slots), labels.max() + 1
    rows = np.arange(DRAWS + 1)[:, None]
    flat = ((rows * n_slots + slot_index) * n_labels + labels[None, :]).ravel()
    counts = np.bincount(flat, minlength=(DRAWS + 1) * n_slots * n_labels)
    counts = counts.reshape(DRAWS + 1, n_slots, n_labels)
    return _verdict(counts.max(axis=2).sum(axis=1) / len(companions))


def same_scenario_runs(items: list[Seen], seed: int) -> Finding:
    """Items in a row from the same scenario, observed and under random orders of the items."""
    rng = np.random.default_rng(seed)
    labels = np.unique([item.scenario for item in items], return_inverse=True)[1]
    orders = np.tile(labels, (DRAWS + 1, 1))
    orders[1:] = rng.permuted(orders[1:], axis=1)
    return _verdict(np.sum(orders[:, 1:] == orders[:, :-1], axis=1).astype(float))


ATTACKERS = ("order", "side", "both")


def attack(items: list[Seen], truth: dict[str, int], seed: int = 5) -> dict[str, Finding]:
    found = {name: linkage(items, truth, name, seed + i) for i, name in enumerate(ATTACKERS)}
    found["runs"] = same_scenario_runs(items, seed + len(ATTACKERS))
    return found


# ---------------------------------------------------------------- the attackers have teeth


def _by_id_order(n_scenarios: int, companions: int, rng: random.Random):
    """What a queue handing out by id shows: each scenario's pairs back to back, (c1,c2)...
    with random sides."""
    items, truth = [], {}
    for s in range(n_scenarios):
        text = {c: f"s{s} reply {rng.getrandbits(40):x}" for c in range(companions)}
        truth.update({t: c for c, t in text.items()})
        for a in range(companions):
            for b in range(a + 1, companions):
                left, right = (a, b) if rng.random() < 0.5 else (b, a)
                items.append(Seen(f"scenario {s}", text[left], text[right]))
    return items, truth


def test_the_attackers_catch_an_id_ordered_queue_and_pass_a_shuffled_one():
    rng = random.Random(1)
    items, truth = _by_id_order(102, 3, rng)
    found = attack(items, truth)
    assert found["order"].observed == found["both"].observed == 1.0
    assert found["order"].p < ALPHA and found["both"].p < ALPHA and found["runs"].p < ALPHA
    assert found["side"].p >= ALPHA  # the sides were drawn at random
    rng.shuffle(items)
    shuffled = attack(items, truth)
    assert all(finding.p >= ALPHA for finding in shuffled.values()), shuffled
    # Left is always the lower companion: the side attacker sees it.
    always_a_left = [
        Seen(item.scenario, *sorted((item.left, item.right), key=truth.get)) for item in items
    ]
    assert attack(always_a_left, truth)["side"].p < ALPHA


# ---------------------------------------------------------------- the queue as it runs


def token_client(user) -> Client:
    token, _ = Token.objects.get_or_create(user=user)
    return Client(headers={"Authorization": f"Token {token.key}"})


@pytest.fixture
def seeded(monkeypatch):
    """Shuffle keys and start points (secrets.randbits) and screen sides, from fixed seeds."""
    monkeypatch.setattr(secrets, "randbits", random.Random(11).getrandbits)
    draws = random.Random(12)  # gold or not (the queue), then the side (the claim)
    monkeypatch.setattr(queue, "random", draws)
    monkeypatch.setattr(candidates, "random", draws)


class Screen:
    """Lays out items as the rating API shows them (scenario context, left and right text);
    test_what_the_attacker_sees_is_the_api_payload checks that it does."""

    def __init__(self, campaign: Campaign):
        comparisons = campaign.comparisons.select_related("scenario__persona")
        self.scenarios = {
            c.scenario_id: json.dumps(scenario_payload(c.scenario), sort_keys=True)
            for c in comparisons
        }
        responses = Response.objects.filter(run__in=campaign.runs.all())
        self.texts = dict(responses.values_list("pk", "text"))

    def __call__(self, assignment: Assignment) -> Seen:
        comparison = assignment.comparison
        a, b = self.texts[comparison.response_a_id], self.texts[comparison.response_b_id]
        left, right = (a, b) if assignment.left_is_a else (b, a)
        return Seen(self.scenarios[comparison.scenario_id], left, right)


def play(campaign: Campaign, attacker, other, seed: int, other_items: int) -> list[Seen]:
    """The attacker takes and answers items until nothing is left, while another annotator
    takes and answers `other_items` items at random moments in between (so the attacker also
    gets items someone else started); returns what the attacker saw, in order."""
    rng = random.Random(seed)
    screen = Screen(campaign)
    seen: list[Seen] = []
    while True:
        preference = rng.choice([-2, -1, 0, 1, 2])
        if other_items and rng.random() < 0.25:
            assignment = queue.next_assignment(other, campaign)
            queue.submit(other, assignment.key, queue.Submission(preference))
            other_items -= 1
            continue
        assignment = queue.next_assignment(attacker, campaign)
        if assignment is None:
            return seen
        seen.append(screen(assignment))
        queue.submit(attacker, assignment.key, queue.Submission(preference))


def blind_texts(campaign: Campaign, seed: int) -> dict[str, int]:
    """Give every response a random text (nothing in it says who wrote it); text -> companion."""
    rng = random.Random(seed)
    responses = list(Response.objects.filter(run__in=campaign.runs.all()))
    for response in responses:
        response.text = f"reply {rng.getrandbits(48):012x}"
    Response.objects.bulk_update(responses, ["text"])
    return {response.text: response.companion_id for response in responses}


NAMES = ("Zephyr-Alpha-77", "Quokka-Beta-13", "Marlin-Gamma-42", "Ibis-Delta-08", "Okapi-Eps-5")
DESIGNS = {
    # 4 companions, all 6 pairs of each of 51 scenarios
    "all_pairs": dict(pairing=Campaign.Pairing.ALL_PAIRS, n_companions=4, seed=21),
    # 5 companions, 6 of the 10 pairs of each of 51 scenarios (balanced over pairs)
    "random_pairs": dict(
        pairing=Campaign.Pairing.RANDOM_PAIRS, n_companions=5, pairs_per_scenario=6, seed=22
    ),
}


def test_what_the_attacker_sees_is_the_api_payload(seeded, researcher, roles, django_user_model):
    attacker, other = factories.annotators(django_user_model, 2)
    campaign = factories.campaign(researcher, [attacker, other], n_scenarios=2, overlap=2)
    client = token_client(attacker)
    next_url = reverse("rate-campaign-next", kwargs={"pk": campaign.pk})
    screen = Screen(campaign)
    for _ in range(campaign.comparisons.count()):
        item = client.post(next_url).json()
        assignment = Assignment.objects.get(key=item["key"])
        shown = Seen(json.dumps(item["scenario"], sort_keys=True), item["left"], item["right"])
        assert screen(assignment) == shown
        submit_url = reverse("rate-assignment-submit", kwargs={"key": item["key"]})
        client.post(submit_url, {"preference": 1}, "application/json")
    assert client.post(next_url).status_code == 204


@pytest.mark.parametrize("gold", [False, True])
def test_ties_are_broken_at_random_for_each_annotator(
    gold, seeded, researcher, roles, django_user_model
):
    """Twelve annotators ask at once (none answers yet): all candidates tie on their judgment
    count, so each should start somewhere else, not all at the same (lowest id) comparison."""
    raters = factories.annotators(django_user_model, 12)
    campaign = factories.campaign(
        researcher, raters, n_scenarios=4, overlap=12, gold_share=1.0 if gold else 0.0
    )
    campaign.comparisons.update(is_gold=gold, gold_preference=-1 if gold else None)
    firsts = [queue.next_assignment(rater, campaign).comparison_id for rater in raters]
    assert len(set(firsts)) >= 5, firsts  # of 12 comparisons; by id: 1


@pytest.mark.parametrize("design", DESIGNS)
def test_the_handout_order_does_not_link_responses_to_companions(
    design, seeded, researcher, roles, django_user_model
):
    settings = dict(DESIGNS[design])
    seed = settings.pop("seed")
    models = factories.companions(NAMES[: settings.pop("n_companions")])
    attacker, other = factories.annotators(django_user_model, 2, prefix=design)
    campaign = factories.campaign(
        researcher, [attacker, other], n_scenarios=51, overlap=2, companions=models, **settings
    )
    keys = campaign.comparisons.values_list("shuffle_key", flat=True)
    assert len(set(keys)) == len(keys) == ITEMS  # drawn for each comparison of the bulk insert
    truth = blind_texts(campaign, seed)
    seen = play(campaign, attacker, other, seed, other_items=24)
    assert len(seen) == campaign.comparisons.count() == ITEMS
    found = attack(seen, truth, seed)
    report = ", ".join(f"{name}: {finding}" for name, finding in found.items())
    print(f"{design}: {report}")
    leaks = {name: finding for name, finding in found.items() if finding.p < ALPHA}
    assert not leaks, f"the hand-out order links responses to companions ({design}): {report}"
