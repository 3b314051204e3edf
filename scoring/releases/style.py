"""Style control in a release: the human leaderboard refitted with the presentation of the two
responses as covariates (h2htalk.stats.style_control), beside the plain fit on the same votes.

A per-release choice (Release.style_control, off by default), frozen in the inputs as the
`style` section: the presentation features (h2htalk.stats.style_features) of every response of
the frozen comparisons, counted from their texts when the release is frozen (a table of
integers; the texts' sha256 are frozen beside them in `responses`, so an edited text fails the
check, and a later change to how features are counted does not change an old release's
numbers). Releases frozen without the choice have no `style` section (or `style: null`) and no
`results.style_control`, and check bit for bit as before.

The section, `results.style_control`: the plain and the controlled Elo of every companion with
its interval and rank (1 + the companions significantly better), the rank change, and each
covariate's coefficient with its interval; both fits from one scenario bootstrap.
"""

from dataclasses import dataclass

import numpy as np
import pandas as pd

from h2htalk.stats import leaderboard as stats
from h2htalk.stats.style_control import LOG_RATIO, SHARE, style_strengths
from h2htalk.stats.style_features import FEATURES, features
from scenarios.models import Response
from scoring.frames import id_subquery
from scoring.releases.freezing import columns_of

KINDS = {name: LOG_RATIO if name == "length" else SHARE for name in FEATURES}
FIT_NAME = "style/overall"  # the seed of the bootstrap derives from it


def frozen_features(response_ids) -> dict:
    """The `style` section of a release's inputs: {id: [...], <feature>: [...]} by id."""
    rows = Response.objects.filter(pk__in=id_subquery(response_ids)).values_list("pk", "text")
    table = sorted((pk, *features(text)) for pk, text in rows.iterator(chunk_size=5000))
    return columns_of(table, ("id", *FEATURES))


def freeze_section(comparisons) -> dict:
    """The `style` section for the frozen comparisons' rows (id, scenario, response A, B)."""
    return frozen_features(sorted({r for _, _, a, b in comparisons for r in (a, b)}))


@dataclass
class StyleData:
    """What the computation needs beside ReleaseData.votes (scoring.releases.data)."""

    features: pd.DataFrame  # index: response id; columns: FEATURES
    responses: pd.DataFrame  # index: comparison id; columns: response_a, response_b
    scenario_keys: dict[int, str]  # scenario id → its key in the bootstrap's order


def style_data(inputs: dict) -> StyleData | None:
    """StyleData from a release's frozen inputs (None: frozen without style control)."""
    frozen = inputs.get("style")
    if frozen is None:
        return None
    scenarios = inputs["scenarios"]
    comparisons = inputs["comparisons"]
    return StyleData(
        features=pd.DataFrame({f: frozen[f] for f in FEATURES}, index=frozen["id"], dtype=float),
        responses=pd.DataFrame(
            {"response_a": comparisons["response_a"], "response_b": comparisons["response_b"]},
            index=comparisons["id"],
        ),
        # the content hash orders the scenarios (renumbered ids draw the same scenarios); the
        # id only breaks a tie between two scenarios with the same text
        scenario_keys={
            pk: f"{digest}/{pk:012d}"
            for pk, digest in zip(scenarios["id"], scenarios["content_sha256"], strict=True)
        },
    )


def _expanded(strengths, present: np.ndarray, n: int) -> dict:
    """Elo, interval, rank and votes of the present companions, None for the others."""
    out = {key: [None] * n for key in ("elo", "low", "high", "rank")}
    out["games"] = [0] * n
    for local, k in enumerate(present.tolist()):
        for key in ("elo", "low", "high", "rank"):
            out[key][k] = getattr(strengths, key)[local]
        out["games"][k] = round(float(strengths.games[local]))
    return out


def _covariates(fit) -> list[dict]:
    rows = []
    for k, name in enumerate(FEATURES):
        used = bool(fit.used[k])
        low, high = fit.low[k], fit.high[k]
        rows.append(
            {
                "feature": name,
                "kind": KINDS[name],
                "used": used,
                "coefficient": fit.coefficient[k] if used else None,
                "low": low if used else None,
                "high": high if used else None,
                "scale": fit.scale[k],
                "per_unit": fit.coefficient[k] / fit.scale[k] if used else None,
                "significant": (1 if low > 0 else -1 if high < 0 else 0) if used else 0,
            }
        )
    return rows


def _skipped(votes: pd.DataFrame, present) -> str:
    if not len(votes):
        return "no human votes"
    if len(present) < 2:
        return "fewer than two companions with votes"
    if votes["scenario"].nunique() < 2:
        return "votes on fewer than two scenarios (the bootstrap resamples scenarios)"
    return ""


def section(data, index: pd.Index, outcome_a: np.ndarray) -> dict:
    """`results.style_control` of a release (data: its ReleaseData, data.style set; index: the
    companions' ids in results order; outcome_a: each vote's outcome for A)."""
    votes, n = data.votes, len(index)
    a = index.get_indexer(votes["companion_a"])
    b = index.get_indexer(votes["companion_b"])
    present = np.flatnonzero(np.bincount(a, minlength=n) + np.bincount(b, minlength=n))
    block = {
        "features": list(FEATURES),
        "votes": len(votes),
        "scenarios": int(votes["scenario"].nunique()),
        "level": data.level,
        "n_boot": data.n_boot,
        "note": NOTE,
    }
    why = _skipped(votes, present)
    if why:
        return stats.json_safe({**block, "skipped": why})
    local = np.full(n, -1)
    local[present] = np.arange(len(present))
    pairs = data.style.responses.loc[votes["comparison"].to_numpy()]
    table = data.style.features
    names = dict(data.companions)
    fit = style_strengths(
        local[a],
        local[b],
        outcome_a,
        [data.style.scenario_keys[s] for s in votes["scenario"].tolist()],
        table.loc[pairs["response_a"].to_numpy()].to_numpy(),
        table.loc[pairs["response_b"].to_numpy()].to_numpy(),
        [KINDS[f] for f in FEATURES],
        [names[int(index[k])] for k in present],
        n_boot=data.n_boot,
        level=data.level,
        seed=stats.derived_seed(data.seed, FIT_NAME),
    )
    plain = _expanded(fit.plain, present, n)
    controlled = _expanded(fit.controlled, present, n)
    change = [
        None if p is None else int(p) - int(c)
        for p, c in zip(plain["rank"], controlled["rank"], strict=True)
    ]
    return stats.json_safe(
        {
            **block,
            "rows": fit.rows,
            "method": fit.plain.method,
            "plain": plain,
            "controlled": controlled,
            "rank_change": change,
            "covariates": _covariates(fit),
        }
    )


NOTE = (
    "Style control (Chatbot Arena's method): the human votes refitted by Bradley–Terry with the "
    "presentation of the two responses as covariates, P(A beats B) = σ(θA − θB + γ·z), so that "
    "a companion's controlled Elo is its strength with presentation held fixed. Covariates: "
    "the log ratio of the responses' lengths in characters, log((1 + LA)/(1 + LB)), and for "
    "Markdown list items, Markdown headers, persona actions in half- or full-width "
    "parentheses, emoji and question marks the normalised difference (fA − fB)/(fA + fB + 1); "
    "each divided by its root mean square over the votes, so a coefficient is in log-odds per "
    "standard deviation of its covariate (per_unit: per unit of the covariate itself; a "
    "covariate that is 0 on every vote is left out). Rank change = plain rank − controlled "
    "rank (positive: the companion rises once presentation is held fixed). The plain fit here "
    "uses the same votes and the same scenario bootstrap draws, so the two columns compare "
    "like with like; it can differ slightly from the leaderboard's human Elo when that one "
    "resamples differently."
)
