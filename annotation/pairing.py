"""Which comparisons a campaign holds: all pairs, or balanced random pairs per scenario."""

import itertools
import random
from collections import Counter

from django.db.models import QuerySet
from django.http import QueryDict

from scenarios.filters import ScenarioFilter
from scenarios.models import Response, Scenario

from .models import Campaign, Comparison


def campaign_scenarios(campaign: Campaign) -> QuerySet:
    query = campaign.scenario_query or "state=approved"
    return ScenarioFilter(QueryDict(query), queryset=Scenario.objects.all()).qs


def available_responses(campaign: Campaign) -> dict[int, dict[int, int]]:
    """scenario id -> {companion id: response id}, the latest successful one from the runs."""
    rows = (
        Response.objects.filter(
            run__in=campaign.runs.all(),
            companion__in=campaign.companions.all(),
            scenario__in=campaign_scenarios(campaign),
            status=Response.Status.OK,
        )
        .order_by("run__created_at", "pk")
        .values_list("scenario_id", "companion_id", "pk")
    )
    found: dict[int, dict[int, int]] = {}
    for scenario_id, companion_id, response_id in rows.iterator(chunk_size=5000):
        found.setdefault(scenario_id, {})[companion_id] = response_id
    return found


def choose_pairs(
    companions_by_scenario: dict[int, list[int]],
    pairing: str,
    pairs_per_scenario: int,
    seed: int,
) -> list[tuple[int, int, int]]:
    """(scenario, companion low, companion high) triples.

    Random pairing is balanced: each scenario takes the model pairs used least so far
    (ties broken at random), so every pair of companions is compared about equally often.
    """
    rng = random.Random(seed)
    chosen = []
    usage: Counter = Counter()
    scenario_ids = sorted(companions_by_scenario)
    if pairing != Campaign.Pairing.ALL_PAIRS:
        rng.shuffle(scenario_ids)
    for scenario_id in scenario_ids:
        pairs = list(itertools.combinations(sorted(companions_by_scenario[scenario_id]), 2))
        if pairing == Campaign.Pairing.ALL_PAIRS:
            chosen.extend((scenario_id, a, b) for a, b in pairs)
            continue
        rng.shuffle(pairs)
        pairs.sort(key=lambda pair: usage[pair])
        for pair in pairs[:pairs_per_scenario]:
            usage[pair] += 1
            chosen.append((scenario_id, *pair))
    return chosen


def build_comparisons(campaign: Campaign) -> int:
    """Create the campaign's comparisons (idempotent: existing pairs are kept). Returns new count."""
    responses = available_responses(campaign)
    by_scenario = {s: sorted(c) for s, c in responses.items() if len(c) >= 2}
    triples = choose_pairs(
        by_scenario, campaign.pairing, campaign.pairs_per_scenario, campaign.seed
    )
    before = campaign.comparisons.count()
    Comparison.objects.bulk_create(
        [
            Comparison(
                campaign=campaign,
                scenario_id=scenario_id,
                response_a_id=responses[scenario_id][low],
                response_b_id=responses[scenario_id][high],
            )
            for scenario_id, low, high in triples
        ],
        batch_size=2000,
        ignore_conflicts=True,
    )
    return campaign.comparisons.count() - before
