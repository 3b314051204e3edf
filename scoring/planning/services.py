"""The study-size planner of a campaign: the database side (defaults from the campaign and from
an earlier campaign, the stored plans, the running campaign's status); the statistics are
h2htalk.stats.planner's.

A plan is answered in the request (the planner takes seconds) and kept as a completed Job of
kind `campaign_plan` (params: the campaign and the inputs; result: the plan), so the campaign
page can show the latest one and the status line can use its δ and power, without a table of
its own. The status of a running campaign (separated adjacent pairs, votes still needed) is
computed from its current votes with the release's estimator and cached until a judgment or an
exclusion changes (the agreement report's fingerprint).
"""

from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from annotation import exclusions
from annotation.models import Campaign, Judgment
from h2htalk.models import Job
from h2htalk.params import parse_int
from scoring.agreement import services as agreement

KIND = "campaign_plan"
DEFAULTS = {"min_elo": 50.0, "alpha": 0.3, "tie_rate": 0.15, "power": 0.8}
DEFAULT_SECONDS = 60.0  # h2htalk.stats.planner.DEFAULT_SECONDS (not imported: no numpy here)
OBSERVED_DIGITS = (("alpha", 3), ("tie_rate", 3), ("seconds_per_item", 1), ("sigma", 3), ("tau", 3))
STATUS_VERSION = "s1"
INLINE_CELLS = 20_000_000  # cells a plan in the request may simulate (seconds); more: a job
STATUS_TTL = 7 * 24 * 3600
INPUTS = ("n_companions", "overlap", "pairs_per_scenario", "min_elo", "alpha", "tie_rate")
INPUTS += (
    "seconds_per_item",
    "power",
    "sigma",
    "tau",
    "effect",
    "flag_share",
    "min_gap",
    "weakened",
)
FLAG_GAP = "flag_gap"  # the effect planned by h2htalk.stats.gap_planner
GAP_DEFAULTS = {"flag_share": 0.5, "min_gap": 100.0, "weakened": 1}


def design_defaults(campaign: Campaign) -> dict:
    """The planner's inputs as the campaign stands: its companions, k and pairing; the latest
    plan's δ, α, ties, time and power (else the defaults)."""
    every = campaign.pairing in (Campaign.Pairing.ALL_PAIRS, Campaign.Pairing.FIXED)
    values = {**DEFAULTS, "seconds_per_item": DEFAULT_SECONDS, "sigma": None, "tau": None}
    values.update(effect="adjacent", **GAP_DEFAULTS)
    latest = latest_plan(campaign)
    if latest is not None:
        values.update({k: v for k, v in latest.params.get("inputs", {}).items() if k in INPUTS})
    values.update(
        n_companions=max(2, campaign.companions.count()),
        overlap=campaign.overlap,
        pairs_per_scenario=None if every else campaign.pairs_per_scenario,
    )
    return values


def observed(campaign: Campaign) -> dict:
    """What an earlier campaign measured, for the planner: Krippendorff's α (nominal, A/tie/B,
    mirrored: the agreement report's `winner3` overall, computed by the platform's agreement
    code), the share of ties and the median visible seconds per item, over its regular
    judgments (annotators excluded from it left out). Missing figures are None."""
    from h2htalk.stats.agreement.annotators import visible_time

    frame = agreement.judgments_frame(campaign)
    out = {"campaign": campaign.pk, "name": campaign.name, "judgments": 0}
    out.update(alpha=None, tie_rate=None, seconds_per_item=None)
    if frame.empty:
        return out
    left_out = {row["annotator"] for row in exclusions.summary(campaign)}
    regular = frame[~frame["is_gold"] & ~frame["annotator"].isin(left_out)]
    out["judgments"] = len(regular)
    if regular.empty:
        return out
    out["tie_rate"] = float((regular["preference"] == 0).mean())
    seconds = visible_time(regular)[0].dropna() / 1000
    out["seconds_per_item"] = float(seconds.median()) if len(seconds) else None
    out["alpha"] = _winner3_alpha(campaign, regular)
    out.update(_noise(campaign, out))
    return out


def _noise(campaign: Campaign, found: dict) -> dict:
    """The response-effect sd σ and tie threshold τ behind the campaign's α and ties, given how
    far apart its own companions were (their Bradley–Terry fit on its regular votes): what
    carries over to a design with other companions (h2htalk.stats.vote_model)."""
    import numpy as np

    from h2htalk.stats import bradley_terry as bt
    from h2htalk.stats import vote_model

    out = {"sigma": None, "tau": None, "noise_note": ""}
    rows = campaign_votes(campaign)
    if found["alpha"] is None or not rows:
        return out
    _scenario, a, b, preference = (np.asarray(column) for column in zip(*rows, strict=True))
    ids, codes = np.unique(np.concatenate([a, b]), return_inverse=True)
    outcome = np.where(preference < 0, 1.0, np.where(preference == 0, 0.5, 0.0))
    wins = bt.aggregate(codes[: len(a)], codes[len(a) :], outcome, len(ids)).wins()
    try:
        sigma, tau, _floor = vote_model.noise_from_strengths(
            bt.fit(wins), found["alpha"], found["tie_rate"]
        )
    except vote_model.PlanError as refused:
        out["noise_note"] = str(refused)
        return out
    return {**out, "sigma": sigma, "tau": tau}


def _winner3_alpha(campaign: Campaign, regular) -> float | None:
    """The report's overall winner3 α: from the stored report of these judgments, else
    computed the report's way (label_agreement) without its bootstrap."""
    report = agreement.cached_report(campaign)
    rows = report.data.get("overall", []) if report else []
    for row in rows:
        if row.get("label") == "winner3":
            return row.get("alpha")
    if regular["comparison"].nunique() < agreement.MIN_UNITS_FOR_ALPHA:
        return None
    from h2htalk.stats.agreement.reliability import label_agreement

    value = label_agreement(regular, labels=["winner3"], n_boot=1).loc["winner3", "alpha"]
    return float(value) if value == value else None  # NaN: nothing to agree on


class PlanRefused(ValueError):
    """The planner cannot model these inputs (its message says why and what to change)."""


def setting_of(values: dict):
    """The planner's Setting, or the flag-gap planner's GapSetting (empty gap inputs take
    GAP_DEFAULTS); stored inputs from before the flag-gap mode plan adjacent pairs."""
    from h2htalk.stats import gap_planner, planner

    common = {k: v for k, v in values.items() if k in INPUTS and k not in GAP_DEFAULTS}
    common.pop("effect", None)
    if values.get("effect") != FLAG_GAP:
        return planner.Setting(**common)
    gap = {k: GAP_DEFAULTS[k] if values.get(k) is None else values[k] for k in GAP_DEFAULTS}
    return gap_planner.GapSetting(**common, **gap)


def _answer(setting, seed: int, progress=None) -> dict:
    from h2htalk.stats import gap_planner, planner

    if isinstance(setting, gap_planner.GapSetting):
        return gap_planner.plan(setting, seed=seed).as_dict()
    return planner.plan(setting, seed=seed, progress=progress).as_dict()


def make_plan(campaign: Campaign, inputs: dict, user, earlier: Campaign | None = None, task=None):
    """Plan (h2htalk.stats.planner.plan, or gap_planner.plan for a flag gap; PlanRefused for
    inputs it cannot model) and keep the answer as a job of the campaign: now, completed,
    when the search simulates at most INLINE_CELLS cells (seconds); else queued for `task` (scoring.tasks.run_plan, passed in: it imports this module)
    with its progress, and the page polls it."""
    from h2htalk.stats import gap_planner, planner

    values = {k: inputs.get(k) for k in INPUTS}
    params = {"campaign": campaign.pk, "inputs": values}
    if earlier is not None:
        params["earlier"] = earlier.pk
    try:
        setting = setting_of(values)
        starter = gap_planner.start if values["effect"] == FLAG_GAP else planner.start
        if task is not None and starter(setting, seed=campaign.seed).cells > INLINE_CELLS:
            job = Job.objects.create(kind=KIND, created_by=user, params=params)
            transaction.on_commit(lambda: task.delay(job.pk))
            return job
        result = _answer(setting, campaign.seed)
    except planner.PlanError as error:
        raise PlanRefused(str(error)) from error
    now = timezone.now()
    return Job.objects.create(
        kind=KIND,
        state=Job.State.COMPLETED,
        created_by=user,
        started_at=now,
        finished_at=now,
        done=1,
        total=1,
        message=summary_text(result),
        params=params,
        result=result,
    )


def compute_plan(job: Job, progress=None) -> dict:
    """A queued plan's answer (the background task's work)."""
    from h2htalk.stats import planner

    campaign = Campaign.objects.get(pk=job.params["campaign"])
    try:
        return _answer(setting_of(job.params["inputs"]), campaign.seed, progress)
    except planner.PlanError as error:
        raise PlanRefused(str(error)) from error


def running_plan(campaign: Campaign) -> Job | None:
    """The campaign's newest plan job when it has not finished, or failed (with its reason)."""
    newest = Job.objects.filter(kind=KIND, params__campaign=campaign.pk).order_by("-pk").first()
    if newest is None or newest.state == Job.State.COMPLETED:
        return None
    return newest


def summary_text(result: dict) -> str:
    s = result["setting"]
    if "n_flagged" in result:
        return (
            f"{result['n_comparisons']:,} comparisons ({result['n_scenarios']:,} scenarios, "
            f"{result['n_flagged']:,} with the flag), {result['n_votes']:,} votes, about "
            f"{result['annotator_hours']:,.1f} annotator-hours for {s['power']:.0%} power to "
            f"mark a companion whose flag gap exceeds the field's by {s['min_gap']:g} Elo"
        )
    return (
        f"{result['n_comparisons']:,} comparisons ({result['n_scenarios']:,} scenarios), "
        f"{result['n_votes']:,} votes, about {result['annotator_hours']:,.1f} annotator-hours "
        f"for {s['power']:.0%} power to separate companions {s['min_elo']:g} Elo apart"
    )


def latest_plan(campaign: Campaign) -> Job | None:
    return (
        Job.objects.filter(kind=KIND, params__campaign=campaign.pk, state=Job.State.COMPLETED)
        .order_by("-pk")
        .first()
    )


def campaign_votes(campaign: Campaign):
    """(scenario, companion a, companion b, outcome for a) of the campaign's regular votes,
    excluded annotators left out, as the release counts them (tie ½)."""
    rows = (
        Judgment.objects.filter(comparison__campaign=campaign, comparison__is_gold=False)
        .exclude(annotator_id__in=exclusions.excluded_annotator_ids(campaign))
        .values_list(
            "comparison__scenario_id",
            "comparison__response_a__companion_id",
            "comparison__response_b__companion_id",
            "preference",
        )
    )
    return list(rows)


def status(campaign: Campaign) -> dict:
    """Adjacent pairs separated now and the votes still needed (cached per judgment state)."""
    latest = latest_plan(campaign)
    inputs = latest.params.get("inputs", {}) if latest else {}
    min_elo = float(inputs.get("min_elo", DEFAULTS["min_elo"]))
    power = float(inputs.get("power", DEFAULTS["power"]))
    key = f"plan-status:{STATUS_VERSION}:{campaign.pk}:{agreement.fingerprint(campaign)}"
    key += f":{min_elo}:{power}"
    cached = cache.get(key)
    if cached is None:
        cached = _compute_status(campaign, min_elo, power)
        cache.set(key, cached, STATUS_TTL)
    return {**cached, "plan": latest.pk if latest else None}


def _compute_status(campaign: Campaign, min_elo: float, power: float) -> dict:
    import numpy as np

    from h2htalk.stats import planner

    rows = campaign_votes(campaign)
    base = {"votes": len(rows), "min_elo": min_elo, "power": power, "overlap": campaign.overlap}
    if not rows:
        return {**base, "ready": False, "reason": "no votes yet"}
    scenario, a, b, preference = (np.asarray(column) for column in zip(*rows, strict=True))
    ids, codes = np.unique(np.concatenate([a, b]), return_inverse=True)
    if len(ids) < 2:
        return {**base, "ready": False, "reason": "fewer than two companions with votes"}
    outcome = np.where(preference < 0, 1.0, np.where(preference == 0, 0.5, 0.0))
    found = planner.separation_status(
        scenario, codes[: len(a)], codes[len(a) :], outcome, len(ids), min_elo, power
    )
    names = dict(campaign.companions.values_list("pk", "name"))
    for pair in found["adjacent"]:
        pair["better"] = names.get(int(ids[pair["better"]]), str(ids[pair["better"]]))
        pair["worse"] = names.get(int(ids[pair["worse"]]), str(ids[pair["worse"]]))
    more = found["more_votes"]
    return {**base, **found, "ready": True, "more_comparisons": -(-more // campaign.overlap)}


def form_initial(campaign: Campaign, query, user) -> tuple[dict, dict | None]:
    """The form's initial values: the campaign's design (design_defaults) and, when the query
    names an earlier campaign the user manages (`earlier`), what that one measured."""
    from annotation.access import managed_campaigns

    initial = design_defaults(campaign)
    chosen = parse_int(str(query.get("earlier", "")))  # a query string or JSON
    if chosen is None:
        return initial, None
    earlier = managed_campaigns(user).exclude(pk=campaign.pk).filter(pk=chosen).first()
    if earlier is None:
        return initial, None
    found = observed(earlier)
    initial["earlier"] = earlier.pk
    for key, digits in OBSERVED_DIGITS:
        if found[key] is not None:
            initial[key] = round(found[key], digits)
    return initial, found
