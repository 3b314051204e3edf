"""Routing comparisons to humans: a new (draft) rating campaign made of the comparisons of a
source campaign where the calibrated judge is least confident, or where the paper's composite
is low (the H2HTalk protocol sends low automatic scores to human evaluation).

- "uncertain": every candidate is scored with the calibrated judge (prediction.score_pairs,
  the same arithmetic as the exported document); the `count` with the smallest |p − ½| go,
  ties broken by comparison id. Candidates the judge cannot score (no verdict of its LLM
  judge) are skipped and counted.
- "composite": a comparison goes when the lower of its two responses' composites is below
  `threshold` (lowest first, at most `count`).

Candidates are the source campaign's regular (non-gold) comparisons, by default only those no
human has judged yet. Responses without reference metrics get them computed here when they are
few (INLINE_METRICS); otherwise RoutingError asks for the metrics job first.

The new campaign copies the source's guidelines, k, lease, runs and scenario filter, uses the
companions of the routed comparisons, starts as a draft with no annotators, and holds exactly
the routed comparisons (same scenario and responses, new Comparison rows). Its description says
why they were chosen. Its pairing is "fixed", so a rebuild never adds or removes comparisons.

numpy and the scoring of candidates are imported by `plan`'s steps, so the pages that import
this module for its choices start without them.
"""

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils.translation import gettext_lazy

from annotation.models import Campaign, Comparison, Judgment
from scenarios.models import Response
from scoring.calibration.access import visible_judges
from scoring.calibration.document import DocumentError
from scoring.metrics import jobs as metric_jobs
from scoring.models import CalibratedJudge

if TYPE_CHECKING:
    import numpy as np

UNCERTAIN, COMPOSITE = "uncertain", "composite"
MODES = [
    (UNCERTAIN, gettext_lazy("Least confident calibrated judge (smallest |p − ½|)")),
    (COMPOSITE, gettext_lazy("Low H2HTalk composite (below a threshold)")),
]
INLINE_METRICS = 2_000
DEFAULT_COUNT = 100  # comparisons routed when no number is given
MAX_COUNT = 50_000


class RoutingError(ValueError):
    """Routing cannot go ahead (said in a sentence for the page)."""


@dataclass
class Plan:
    comparisons: list[int]  # source comparison ids, in routing order
    values: list[float]  # p (uncertain) or the lower composite (composite), same order
    candidates: int
    skipped: int
    reason: str


def candidates(source: Campaign, exclude_judged: bool = True):
    rows = Comparison.objects.filter(campaign=source, is_gold=False)
    if exclude_judged:
        rows = rows.exclude(Exists(Judgment.objects.filter(comparison=OuterRef("pk"))))
    return rows.order_by("pk")


def _ensure_metrics(rows) -> None:
    rows = rows.order_by()
    responses = Response.objects.filter(
        Q(pk__in=rows.values("response_a")) | Q(pk__in=rows.values("response_b"))
    )
    missing = metric_jobs.missing(responses)
    count = missing.count()
    if count > INLINE_METRICS:
        raise RoutingError(
            f"{count} responses have no reference metrics yet: compute them first "
            "(Compute metrics on the calibration page, or manage.py compute_metrics)"
        )
    if count:
        metric_jobs.compute(missing)


def plan(
    source: Campaign,
    mode: str,
    *,
    judge: CalibratedJudge | None = None,
    count: int = DEFAULT_COUNT,
    threshold: float | None = None,
    exclude_judged: bool = True,
) -> Plan:
    """Which candidates of `source` go to humans under `mode`, in routing order, and why."""
    import numpy as np

    rows = candidates(source, exclude_judged)
    listed = list(rows.values_list("pk", "response_a_id", "response_b_id"))
    if not listed:
        raise RoutingError(
            f"campaign {source.name} has no "
            f"{'unjudged ' if exclude_judged else ''}regular comparisons to route"
        )
    _ensure_metrics(rows)
    ids = np.array([pk for pk, _, _ in listed])
    pairs = [(a, b) for _, a, b in listed]
    if mode == UNCERTAIN:
        chosen, values, skipped, reason = _least_confident(source, judge, ids, pairs, count)
    elif mode == COMPOSITE:
        chosen, values, skipped, reason = _low_composite(source, threshold, ids, pairs, count)
    else:
        raise RoutingError(f"unknown routing mode {mode!r}")
    if skipped:
        reason += f" {skipped} candidate(s) could not be scored and were skipped."
    return Plan(
        comparisons=[int(c) for c in chosen],
        values=[float(v) for v in values],
        candidates=len(listed),
        skipped=skipped,
        reason=reason,
    )


def _least_confident(source: Campaign, judge, ids: "np.ndarray", pairs, count: int):
    """(chosen ids, their p, unscored candidates, reason) of the "uncertain" mode: the `count`
    with the smallest |p − ½|, ties broken by comparison id."""
    import numpy as np

    from scoring.calibration.prediction import score_pairs

    if judge is None:
        raise RoutingError("choose the calibrated judge whose confidence decides")
    try:
        p, _ = score_pairs(judge.document, pairs)
    except DocumentError as error:
        raise RoutingError(str(error)) from error
    scored = ~np.isnan(p)
    order = np.lexsort((ids[scored], np.abs(p[scored] - 0.5)))[:count]
    chosen, values = ids[scored][order], p[scored][order]
    reason = (
        f"Routed from campaign “{source.name}”: the {len(chosen)} comparisons (of "
        f"{int(scored.sum())} scored) where the calibrated judge {judge.name} "
        f"v{judge.version} is least confident"
    )
    if len(chosen):
        reason += (
            f" (|p − ½| ≤ {np.abs(values - 0.5).max():.3f}; p from {values.min():.3f} "
            f"to {values.max():.3f}, p = its probability that humans prefer response A)"
        )
    return chosen, values, int((~scored).sum()), reason


def _low_composite(source: Campaign, threshold, ids: "np.ndarray", pairs, count: int):
    """(chosen ids, their lower composite, unscored candidates, reason) of the "composite"
    mode: the lower composite of the two responses below `threshold`, lowest first."""
    import numpy as np

    from scoring.metrics import features as feature_data

    if threshold is None:
        raise RoutingError("give the composite threshold")
    sides = feature_data.side_features(pairs, None)
    low = np.fmin(sides.composite_a, sides.composite_b)
    scored = ~np.isnan(low)
    below = scored & (low < threshold)
    order = np.lexsort((ids[below], low[below]))[:count]
    chosen, values = ids[below][order], low[below][order]
    reason = (
        f"Routed from campaign “{source.name}”: the {len(chosen)} comparisons (of "
        f"{int(scored.sum())} scored) where the lower H2HTalk composite of the two "
        f"responses is below {threshold:g} — the paper's protocol sends low automatic "
        f"scores to human evaluation. {sides.composite_note}"
    )
    return chosen, values, int((~scored).sum()), reason


def initial_choices(user, judge_id: int | None) -> dict:
    """The routing form's starting values: "uncertain" mode, and with a judge given (the
    report's "route" link) that judge and the campaign it was fitted on."""
    initial = {"mode": UNCERTAIN}
    if judge_id is not None:
        initial["judge"] = judge_id
        judge = visible_judges(user).filter(pk=judge_id).first()
        if judge and judge.campaign_id:
            initial["source"] = judge.campaign_id
    return initial


def create_campaign(source: Campaign, routed: Plan, name: str, owner) -> Campaign:
    """The draft campaign holding exactly the routed comparisons."""
    if not routed.comparisons:
        raise RoutingError("no comparison meets the routing rule: nothing to send to humans")
    if Campaign.objects.filter(name=name).exists():
        raise RoutingError(f"a campaign named {name} exists already")
    rows = list(
        Comparison.objects.filter(pk__in=routed.comparisons).values_list(
            "pk",
            "scenario_id",
            "response_a_id",
            "response_b_id",
            "response_a__companion_id",
            "response_b__companion_id",
        )
    )
    by_id = {row[0]: row for row in rows}
    companions = {c for row in rows for c in row[4:]}
    description = f"{routed.reason}\n\nThe comparisons were chosen by routing and are fixed."
    with transaction.atomic():
        campaign = Campaign.objects.create(
            name=name,
            description=description,
            guidelines=source.guidelines,
            guidelines_zh_hans=source.guidelines_zh_hans,
            owner=owner,
            state=Campaign.State.DRAFT,
            scenario_query=source.scenario_query,
            pairing=Campaign.Pairing.FIXED,
            pairs_per_scenario=1,
            overlap=source.overlap,
            gold_share=0.0,
            lease_minutes=source.lease_minutes,
            seed=source.seed,
        )
        campaign.companions.set(companions)
        campaign.runs.set(source.runs.all())
        Comparison.objects.bulk_create(
            [
                Comparison(
                    campaign=campaign,
                    scenario_id=by_id[pk][1],
                    response_a_id=by_id[pk][2],
                    response_b_id=by_id[pk][3],
                )
                for pk in routed.comparisons
            ],
            batch_size=2000,
        )
    return campaign


def route(
    source: Campaign,
    mode: str,
    name: str,
    owner,
    *,
    judge: CalibratedJudge | None = None,
    count: int = DEFAULT_COUNT,
    threshold: float | None = None,
    exclude_judged: bool = True,
) -> tuple[Campaign, Plan]:
    routed = plan(
        source,
        mode,
        judge=judge,
        count=count,
        threshold=threshold,
        exclude_judged=exclude_judged,
    )
    return create_campaign(source, routed, name, owner), routed
