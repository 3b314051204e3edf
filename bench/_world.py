"""Bulk-inserted companions and responses shared by the database benchmarks (Django imported
inside the functions: the bench runner imports the modules before Django is set up)."""

import numpy as np


def imported_companions(n: int) -> list:
    """n companions `bench-companion-00`…, by primary key (response A = the lower id)."""
    from scenarios.models import CompanionModel

    companions = CompanionModel.objects.bulk_create(
        [CompanionModel(name=f"bench-companion-{k:02d}", provider="imported") for k in range(n)]
    )
    return sorted(companions, key=lambda c: c.pk)


def imported_responses(run, scenarios: list, companions: list) -> np.ndarray:
    """One response of every companion to every scenario, of a length that varies by
    companion; their ids as a scenarios × companions array."""
    from scenarios.models import Response

    created = Response.objects.bulk_create(
        [
            Response(
                run=run,
                scenario=scenario,
                companion=companion,
                text=f"Reply of {c} to {s}: " + "warm words " * (3 + c % 7),
            )
            for s, scenario in enumerate(scenarios)
            for c, companion in enumerate(companions)
        ],
        batch_size=5_000,
    )
    ids = np.array([response.pk for response in created], dtype=np.int64)
    return ids.reshape(len(scenarios), len(companions))
