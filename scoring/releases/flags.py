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
Bradley–Terry strengths are relative (mean 0 within each fit), so the difference says how a
companion's standing against the others changes; a drop every companion shares does not show:
two responses to one scenario cannot measure it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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
    """Per companion Elo(from-group) − Elo(on-group) with its percentile interval from the
    paired draws, +1/−1 where the interval lies above/below 0 (None: not in both fits)."""
    import numpy as np

    scope = FLAGS[flag][0]
    first, second = CONTRASTS[flag]
    blocks = [section.get(scope, {}).get(g) for g in (first, second)]
    reasons = [_skip_reason(g, b) for g, b in zip((first, second), blocks, strict=True)]
    reasons = [r for r in reasons if r]
    if reasons:
        return {"skipped": "; ".join(reasons)}
    point = np.array(blocks[0]["elo"], dtype=float) - np.array(blocks[1]["elo"], dtype=float)
    paired = draws[f"{prefix}/{flag}/{first}"] - draws[f"{prefix}/{flag}/{second}"]
    tail = (1 - level) / 2
    out = {"difference": [], "low": [], "high": [], "significant": []}
    for k, value in enumerate(point):
        if not np.isfinite(value):
            for key in out:
                out[key].append(None)
            continue
        low, high = np.quantile(paired[:, k], [tail, 1 - tail])
        out["difference"].append(float(value))
        out["low"].append(float(low))
        out["high"].append(float(high))
        out["significant"].append(1 if low > ROUNDING else -1 if high < -ROUNDING else 0)
    return out


def differences(human: dict, judge: dict | None, draws: dict, level: float) -> dict:
    """{flag: {from, on, human, judge}} for the implicit and the evolving need."""
    out = {}
    for flag, (first, second) in CONTRASTS.items():
        out[flag] = {
            "from": first,
            "on": second,
            "human": difference(human, draws, "human", flag, level),
            "judge": difference(judge, draws, "judge", flag, level) if judge else None,
        }
    out["note"] = difference_note(level)
    return out


def difference_note(level: float) -> str:
    return (
        "Where companions struggle: a companion's Elo on scenarios with an explicit (stable) "
        "need minus its Elo on those with an implicit (evolving) need, each fitted on that "
        f"group alone; {level:.0%} percentile interval from pairing the two groups' "
        "independent bootstrap draws (scenarios resampled within each group, all their votes "
        "or judge pairs with them). Positive: the companion loses ground against the "
        "others when the need is implicit (evolving). Elo is relative to the field, so a drop "
        "shared by every companion does not show."
    )


def slice_note() -> str:
    return (
        "Per scenario flag (implicit or explicit need, evolving or stable need, risk level) "
        "the same fits and skip rules as per dimension and subtask, on the scenarios with "
        "that flag value."
    )
