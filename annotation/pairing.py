"""Which comparisons a campaign holds: all pairs, or balanced random pairs per scenario.

numpy and the active sampler are imported by the adaptive top-up, their only user, so the
rating pages that import this module start without them.
"""

import itertools
import math
import random
from collections import Counter
from typing import TYPE_CHECKING

from django.db import transaction
from django.db.models import QuerySet
from django.http import QueryDict

from scenarios.filters import ScenarioFilter
from scenarios.models import Response, Scenario

from .models import Assignment, Campaign, Comparison, Judgment
from .progress import recount_later

if TYPE_CHECKING:
    import numpy as np


def campaign_scenarios(campaign: Campaign) -> QuerySet:
    query = campaign.scenario_query or "state=approved"
    return ScenarioFilter(QueryDict(query), queryset=Scenario.objects.all()).qs


def available_responses(campaign: Campaign) -> dict[int, dict[int, int]]:
    """scenario id -> {companion id: response id}, the latest successful one from the runs."""
    return responses_of(
        campaign_scenarios(campaign), campaign.companions.all(), campaign.runs.all()
    )


def responses_of(scenarios, companions, runs) -> dict[int, dict[int, int]]:
    """available_responses for a scenario set, companions and runs not yet saved as a campaign
    (querysets or ids): what the campaign builder counts before saving."""
    rows = (
        Response.objects.filter(
            run__in=runs,
            companion__in=companions,
            scenario__in=scenarios,
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
    usage: Counter | None = None,
) -> list[tuple[int, int, int]]:
    """(scenario, companion low, companion high) triples.

    Random pairing is balanced: each scenario takes the model pairs used least so far
    (ties broken at random), so every pair of companions is compared about equally often.
    `usage` carries the pair counts of comparisons that already exist.
    """
    rng = random.Random(seed)
    chosen = []
    usage = Counter(usage or {})
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


def build_comparisons(campaign: Campaign, incremental: bool = True) -> int:
    """Create the campaign's comparisons; returns how many are new.

    Idempotent. With random pairing and `incremental`, scenarios that already have comparisons
    keep theirs and only new scenarios are paired, continuing the balance of the existing ones
    (so a rebuild after adding scenarios never adds pairs to old ones).
    """
    if campaign.pairing == Campaign.Pairing.FIXED:
        return 0  # chosen elsewhere (routing); a rebuild must not change them
    responses = available_responses(campaign)
    by_scenario = {s: sorted(c) for s, c in responses.items() if len(c) >= 2}
    if campaign.pairing == Campaign.Pairing.ADAPTIVE:
        by_scenario = _burn_in(campaign, by_scenario, incremental)
    usage: Counter = Counter()
    if incremental and campaign.pairing != Campaign.Pairing.ALL_PAIRS:
        existing = campaign.comparisons.values_list(
            "scenario_id", "response_a__companion_id", "response_b__companion_id"
        )
        paired = set()
        for scenario_id, low, high in existing:
            paired.add(scenario_id)
            usage[(low, high)] += 1
        by_scenario = {s: c for s, c in by_scenario.items() if s not in paired}
    triples = choose_pairs(
        by_scenario, campaign.pairing, campaign.pairs_per_scenario, campaign.seed, usage
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
    recount_later(campaign)
    return campaign.comparisons.count() - before


BURN_IN_PER_PAIR = 2  # comparisons per model pair before the votes steer the rest


def _burn_in(campaign: Campaign, by_scenario: dict, incremental: bool) -> dict:
    """An adaptive campaign starts with a few balanced comparisons; the rest come from
    `adaptive_top_up` as votes arrive. A rebuild adds nothing once it has started."""
    if incremental and campaign.comparisons.exists():
        return {}
    return burn_in_scenarios(by_scenario, campaign.pairs_per_scenario, campaign.seed)


def burn_in_scenarios(by_scenario: dict, pairs_per_scenario: int, seed: int) -> dict:
    """The scenarios of a new adaptive campaign's first, balanced comparisons."""
    n_models = len({c for companions in by_scenario.values() for c in companions})
    wanted = BURN_IN_PER_PAIR * math.comb(n_models, 2)
    chosen = sorted(by_scenario)
    random.Random(seed).shuffle(chosen)
    keep = chosen[: math.ceil(wanted / max(1, pairs_per_scenario))]
    return {s: by_scenario[s] for s in keep}


def _win_matrix(campaign: Campaign, index: dict[int, int]) -> "np.ndarray":
    """Pair-keyed votes of the campaign as a Bradley–Terry win matrix (a tie: half each)."""
    import numpy as np

    wins = np.zeros((len(index), len(index)))
    votes = Judgment.objects.filter(comparison__campaign=campaign, comparison__is_gold=False)
    for low, high, preference in votes.values_list(
        "comparison__response_a__companion_id", "comparison__response_b__companion_id", "preference"
    ).iterator(chunk_size=5000):
        i, j = index[low], index[high]
        a_share = 0.5 if preference == 0 else float(preference < 0)
        wins[i, j] += a_share
        wins[j, i] += 1 - a_share
    return wins


ADAPTIVE_MIN_GAMES = 10  # votes on a model pair before its order may count as settled


def _untaken_by_pair(campaign: Campaign, responses) -> dict[tuple[int, int], list[int]]:
    """Per model pair (low id, high id), the scenarios not yet compared for it."""
    taken = set(
        campaign.comparisons.values_list(
            "scenario_id", "response_a__companion_id", "response_b__companion_id"
        )
    )
    by_pair: dict[tuple[int, int], list[int]] = {}
    for scenario_id, companions in responses.items():
        for low, high in itertools.combinations(sorted(companions), 2):
            if (scenario_id, low, high) not in taken:
                by_pair.setdefault((low, high), []).append(scenario_id)
    return by_pair


def adaptive_top_up(campaign: Campaign, user, batch: int | None = None) -> int:
    """Add comparisons for the model pairs whose order is least certain; returns how many
    (0 when every pair that can still be compared is separated, or nothing is left to compare:
    the campaign is then done).

    One top-up at a time (the campaign row is locked), and none while this annotator still has
    something to rate, so many annotators running dry at once add one batch, not many.
    """
    import numpy as np

    from h2htalk.stats import active_sampling

    with transaction.atomic():
        campaign = Campaign.objects.select_for_update(no_key=True).get(pk=campaign.pk)
        seen = Assignment.objects.filter(campaign=campaign, annotator=user)
        still_open = campaign.comparisons.filter(
            is_gold=False, judgment_count__lt=campaign.overlap
        ).exclude(pk__in=seen.values("comparison_id"))
        if still_open.exists():
            return 1  # someone else's top-up just landed: take from it
        responses = available_responses(campaign)
        models = sorted({c for companions in responses.values() for c in companions})
        index = {companion: i for i, companion in enumerate(models)}
        batch = batch or max(10, math.comb(len(models), 2))
        rng = np.random.default_rng(campaign.seed + campaign.comparisons.count())
        by_pair = _untaken_by_pair(campaign, responses)
        available = np.zeros((len(models), len(models)), dtype=bool)
        for low, high in by_pair:
            available[index[low], index[high]] = True
        picks = active_sampling.allocate(
            _win_matrix(campaign, index),
            batch,
            rng,
            available=available,
            min_games=ADAPTIVE_MIN_GAMES,
        )
        new = []
        for i, j in picks:
            pair = (models[i], models[j])
            candidates = by_pair.get(pair)
            if not candidates:
                continue
            scenario_id = candidates.pop(int(rng.integers(len(candidates))))
            new.append(
                Comparison(
                    campaign=campaign,
                    scenario_id=scenario_id,
                    response_a_id=responses[scenario_id][pair[0]],
                    response_b_id=responses[scenario_id][pair[1]],
                )
            )
        Comparison.objects.bulk_create(new, ignore_conflicts=True)
        recount_later(campaign)
        return len(new)
