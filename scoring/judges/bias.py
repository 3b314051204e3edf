"""Judge bias statistics on plain DataFrames (no database): position and length bias.

Inputs (one row per parsed verdict):

- pairwise: `run, first, second, sample, winner` (winner as seen: "first" / "second" / "tie"),
  plus `first_len, second_len` (characters) for the length preference;
- single: `response, overall` (mean of the six scores) and `length` (characters); `run` and
  `sample` may be there and are not needed.

Numbers (every interval is a 95% interval):

- position-flip rate: among pairs judged in both orders (same run, same two responses, same
  sample index), the share whose winner (as a response, or tie) changes when the order flips.
  A judge without position bias that is sure of itself flips 0%; a coin flips about 67% with
  three outcomes. Wilson interval.
- first-position preference: among non-tie verdicts, the share choosing the response shown
  first; 50% is no preference. Wilson interval and the exact two-sided binomial test against 50%.
- longer preference: among non-tie verdicts on responses of different lengths, the share
  choosing the longer one. Wilson interval and binomial test.
- score–length correlation: Spearman's ρ between a response's overall single-mode score
  (averaged over its samples) and its length, over responses; the interval is Fisher's z with
  the Fieller–Hartley–Pearson standard error √(1.06 / (n − 3)) for Spearman's ρ.
"""

import math

import numpy as np
import pandas as pd
from scipy import stats

Z95 = 1.959963984540054
LEVEL = 0.95


def wilson(k: int, n: int, z: float = Z95) -> tuple[float | None, float | None]:
    """Wilson score interval for k successes in n trials."""
    if n <= 0:
        return None, None
    p = k / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def spearman_ci(rho: float, n: int, z: float = Z95) -> tuple[float | None, float | None]:
    """Fisher z interval for Spearman's ρ (SE √(1.06/(n−3)), Fieller, Hartley & Pearson 1957)."""
    if rho is None or n <= 3 or not math.isfinite(rho):
        return None, None
    if abs(rho) >= 1:
        return rho, rho
    centre = math.atanh(rho)
    half = z * math.sqrt(1.06 / (n - 3))
    return math.tanh(centre - half), math.tanh(centre + half)


def _binomial_p(k: int, n: int) -> float | None:
    return float(stats.binomtest(k, n, 0.5).pvalue) if n else None


def _rate(k: int, n: int) -> dict:
    low, high = wilson(k, n)
    return {"n": n, "k": k, "rate": k / n if n else None, "low": low, "high": high}


def position_flips(pairwise: pd.DataFrame) -> dict:
    """Share of pairs judged in both orders whose winner changes with the order."""
    if pairwise.empty:
        return {**_rate(0, 0), "flips": 0}
    df = pairwise[["run", "first", "second", "sample", "winner"]].copy()
    df["a"] = df[["first", "second"]].min(axis=1)
    df["b"] = df[["first", "second"]].max(axis=1)
    df["order"] = np.where(df["first"] == df["a"], "ab", "ba")
    # The winner as a response id (-1: tie), so both orders can be compared.
    df["outcome"] = np.select(
        [df["winner"] == "first", df["winner"] == "second"], [df["first"], df["second"]], -1
    )
    keys = ["run", "a", "b", "sample"]
    df = df.drop_duplicates([*keys, "order"], keep="last")
    wide = df.pivot(index=keys, columns="order", values="outcome")
    if not {"ab", "ba"} <= set(wide.columns):
        return {**_rate(0, 0), "flips": 0}
    both = wide.dropna(subset=["ab", "ba"])
    flips = int((both["ab"] != both["ba"]).sum())
    return {**_rate(flips, len(both)), "flips": flips}


def first_position(pairwise: pd.DataFrame) -> dict:
    """Share of non-tie verdicts that chose the response shown first."""
    winners = pairwise["winner"] if not pairwise.empty else pd.Series([], dtype=object)
    decided = winners[winners.isin(["first", "second"])]
    k, n = int((decided == "first").sum()), len(decided)
    return {
        **_rate(k, n),
        "first": k,
        "ties": int((winners == "tie").sum()),
        "verdicts": len(winners),
        "p_value": _binomial_p(k, n),
    }


def longer_preferred(pairwise: pd.DataFrame) -> dict:
    """Share of non-tie verdicts on responses of different lengths that chose the longer."""
    if pairwise.empty or "first_len" not in pairwise:
        return {**_rate(0, 0), "longer": 0, "p_value": None}
    df = pairwise[pairwise["winner"].isin(["first", "second"])]
    df = df[df["first_len"] != df["second_len"]]
    first_longer = df["first_len"] > df["second_len"]
    chose_first = df["winner"] == "first"
    k, n = int((first_longer == chose_first).sum()), len(df)
    return {**_rate(k, n), "longer": k, "p_value": _binomial_p(k, n)}


def length_correlation(single: pd.DataFrame) -> dict:
    """Spearman's ρ of a response's mean overall score with its length, over responses."""
    empty = {"n": 0, "rho": None, "low": None, "high": None, "p_value": None}
    if single.empty:
        return empty
    df = single.dropna(subset=["overall", "length"])
    per_response = df.groupby("response").agg(
        overall=("overall", "mean"), length=("length", "first")
    )
    n = len(per_response)
    if n < 3 or per_response["overall"].nunique() < 2 or per_response["length"].nunique() < 2:
        return {**empty, "n": n}
    result = stats.spearmanr(per_response["length"], per_response["overall"])
    rho, p_value = float(result.statistic), float(result.pvalue)
    low, high = spearman_ci(rho, n)
    return {"n": n, "rho": rho, "low": low, "high": high, "p_value": p_value}


def report(pairwise: pd.DataFrame, single: pd.DataFrame) -> dict:
    """All bias numbers of one judge (its verdicts' DataFrames); intervals are 95%."""
    return {
        "level": LEVEL,
        "position_flip": position_flips(pairwise),
        "first_position": first_position(pairwise),
        "longer_preferred": longer_preferred(pairwise),
        "length_correlation": length_correlation(single),
    }
