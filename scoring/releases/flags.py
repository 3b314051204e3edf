"""Slices of a release by scenario flag (implicit need, evolving need, risk level) and, per
companion, where it struggles: its Elo on explicit minus implicit needs (and stable minus
evolving) with a bootstrap interval.

The slices are the leaderboard's own per-group fits (scoring.releases.computing runs them
beside the dimensions and subtasks, with the same minimums and skip notes); this module only
says how scenarios group by flag and turns two groups' bootstrap draws into a difference.

Why a difference of two fits and its interval from their draws: the groups are disjoint sets
of scenarios, so their bootstraps (scenarios resampled within a group, with all their human
votes or judge pairs, as the overall leaderboard does) are independent, and pairing draw k
of one with draw k of the other is a draw of the stratified bootstrap of the difference.
Bradley–Terry strengths are relative (mean 0 within each fit), so the raw difference says how a
companion's standing against the mean of the others changes, and a drop of a few companions
moves every other one's the other way (two of eight losing 0.8 logits give the rest −35 Elo).
So each companion's gap is reported from the field's, a robust (biweight) mean of the companions'
gaps in which a minority that struggles far more weighs little or nothing, and the field's own shift, which no pairwise comparison can see, is
measured once per flag from absolute scores (scoring.releases.shared_shift).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

# The field (Tukey's biweight) lives with the statistics so the flag-gap planner shares it.
from h2htalk.stats.field import BIWEIGHT_C, BIWEIGHT_ROUNDS, biweight, field_gap  # noqa: F401
from scenarios.taxonomy import RiskLevel

if TYPE_CHECKING:  # numpy is imported where it computes: the page's formats load this module
    import numpy as np

ROUNDING = 1e-6  # Elo points: a difference this small is floating-point noise, not a sign

# flag → (results key, {frozen value: group label}, group labels in display order)
FLAGS = {
    "implicit_need": (
        "by_implicit_need",
        {False: "explicit", True: "implicit"},
        ["explicit", "implicit"],
    ),
    "evolving_need": (
        "by_evolving_need",
        {False: "stable", True: "evolving"},
        ["stable", "evolving"],
    ),
    "risk_level": ("by_risk_level", {v: v for v in RiskLevel.values}, list(RiskLevel.values)),
}
# flag → (the group a struggle is measured from, the group it is measured on)
CONTRASTS = {"implicit_need": ("explicit", "implicit"), "evolving_need": ("stable", "evolving")}
LABELS = {
    "implicit_need": "Implicit need",
    "evolving_need": "Evolving need",
    "risk_level": "Risk level",
    "explicit": "explicit need",
    "implicit": "implicit need",
    "stable": "stable need",
    "evolving": "evolving need",
    **{v: f"risk {label.lower()}" for v, label in RiskLevel.choices},
}


def slicings(flags: dict | None) -> list[tuple[str, list[str], dict, str]]:
    """(results key, the group labels present in order, {scenario: label}, fit-name tag) per
    flag; nothing for releases frozen without flags (inputs of schema /1)."""
    if flags is None:
        return []
    out = []
    for flag, (scope, label_of_value, order) in FLAGS.items():
        # A value outside the taxonomy (none expected) puts its scenario in no group.
        label_of = {s: label_of_value.get(v) for s, v in flags[flag].items()}
        present = set(label_of.values())
        out.append((scope, [g for g in order if g in present], label_of, f"{flag}/"))
    return out


def present_groups(flags: dict | None) -> dict[str, list[str]]:
    """{flag: the group labels present} (the results' "flags" entry)."""
    return {flag: labels for flag, (_, labels, _, _) in zip(FLAGS, slicings(flags), strict=True)}


def expanded_draws(draws: np.ndarray, present: np.ndarray, n: int) -> np.ndarray:
    """Bootstrap draws of a fit on the present companions as n_boot × n (NaN elsewhere)."""
    import numpy as np

    full = np.full((draws.shape[0], n), np.nan)
    full[:, present] = draws
    return full


def _skip_reason(group: str, block: dict | None) -> str:
    if block is None:
        return f"no scenario of the release is in the group {LABELS[group]}"
    if block.get("skipped"):
        return f"{LABELS[group]}: {block['skipped']}"
    return ""


def difference(section: dict, draws: dict, prefix: str, flag: str, level: float) -> dict:
    """Per companion its gap Elo(from-group) − Elo(on-group) measured from the field's (field_gap:
    minus the field's robust mean gap, draw by draw), so that its percentile interval and
    its +1/−1 (the interval above/below 0) say how much more (less) this companion loses than
    the field (None: not in both fits). `field` is the field's own gap (relative to the mean
    of all companions, as Bradley–Terry gives it), `field_weight` each companion's weight in
    it, `relative` the gaps before the field's is taken off."""
    import numpy as np

    scope = FLAGS[flag][0]
    first, second = CONTRASTS[flag]
    blocks = [section.get(scope, {}).get(g) for g in (first, second)]
    reasons = [_skip_reason(g, b) for g, b in zip((first, second), blocks, strict=True)]
    reasons = [r for r in reasons if r]
    if reasons:
        return {"skipped": "; ".join(reasons)}
    relative = np.array(blocks[0]["elo"], dtype=float) - np.array(blocks[1]["elo"], dtype=float)
    paired = draws[f"{prefix}/{flag}/{first}"] - draws[f"{prefix}/{flag}/{second}"]
    both = np.isfinite(relative)
    field, field_draws, weight = field_gap(relative, paired, both)
    tail = (1 - level) / 2
    low, high = np.quantile(field_draws, [tail, 1 - tail])
    out = {"difference": [], "low": [], "high": [], "significant": [], "relative": []}
    out["field_weight"] = []  # the companion's weight in the field's gap (0: left out)
    out["field"] = {"difference": field, "low": float(low), "high": float(high)}
    for k, value in enumerate(relative):
        if not both[k]:
            for key in ("difference", "low", "high", "significant", "relative", "field_weight"):
                out[key].append(None)
            continue
        out["field_weight"].append(float(weight[k]))
        low, high = np.quantile(paired[:, k] - field_draws, [tail, 1 - tail])
        out["difference"].append(float(value - field))
        out["low"].append(float(low))
        out["high"].append(float(high))
        out["significant"].append(1 if low > ROUNDING else -1 if high < -ROUNDING else 0)
        out["relative"].append(float(value))
    return out


def differences(
    human: dict, judge: dict | None, draws: dict, level: float, shared: dict | None = None
) -> dict:
    """{flag: {from, on, human, judge, shared}} for the implicit and the evolving need;
    `shared[flag]` the field's shift in absolute scores (scoring.releases.shared_shift)."""
    out = {}
    for flag, (first, second) in CONTRASTS.items():
        out[flag] = {
            "from": first,
            "on": second,
            "human": difference(human, draws, "human", flag, level),
            "judge": difference(judge, draws, "judge", flag, level) if judge else None,
            "shared": (shared or {}).get(flag),
        }
    out["note"] = difference_note(level)
    return out


def difference_note(level: float) -> str:
    return (
        "Where companions struggle: a companion's Elo on scenarios with an explicit (stable) "
        "need minus its Elo on those with an implicit (evolving) need, each fitted on that "
        "group alone, measured from the field: minus the field's gap (Tukey's biweight mean "
        "of the companions' gaps, a robust mean in which a few companions that struggle far "
        "more than the rest weigh little or nothing), so a positive number is a weakness of "
        "this companion beyond what the field shares and 0 is the field's own. "
        f"{level:.0%} percentile interval from pairing the two groups' independent bootstrap "
        "draws (scenarios resampled within each group, all their votes or judge pairs with "
        "them), the field's gap taken off draw by draw. Elo is relative, so the field's "
        "own drop cannot show in Elo: it is given once per flag as the shared shift, from "
        "absolute scores of every response (the calibrated judge's, else the composite)."
    )


def slice_note() -> str:
    return (
        "Per scenario flag (implicit or explicit need, evolving or stable need, risk level) "
        "the same fits and skip rules as per dimension and subtask, on the scenarios with "
        "that flag value."
    )
