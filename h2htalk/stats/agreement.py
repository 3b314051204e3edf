"""Agreement between human raters of pairwise comparisons, annotator quality, aggregated labels.

Plain functions on a judgments DataFrame (one row per judgment) and on raters × units
matrices; nothing here touches the database.

Judgments columns (missing optional ones leave the statistics that need them empty):
- ``comparison`` (or ``comparison_id``): the unit; ``annotator``: the rater.
- ``preference``: −2..2 keyed by the model pair, negative = response A of the comparison
  better (A's companion has the lower id). Every agreement statistic uses this key, never the
  screen side: "left better" with A on the left and "right better" with A on the right are the
  same label. When ``screen_preference`` and ``left_is_a`` are present too, they are checked
  against it (`check_keying`); without ``preference`` it is derived from them.
- ``screen_preference`` (as shown, negative = left better) and ``left_is_a``: only for
  position bias.
- ``time_on_task_ms``, ``is_gold``, ``gold_preference`` (−1/0/1 keyed by the pair, or NaN).
- ratings as ``a_<dim>`` / ``b_<dim>`` columns (1–5), or a ``ratings`` column of dicts
  ``{"a": {dim: n}, "b": {dim: n}}`` (see `expand_ratings`).

Labels (`rating_matrix`) and the level of measurement α uses for each:
- ``preference5``: the 5-point pair-keyed preference, ordinal;
- ``winner3``: its sign, A (−1) / tie (0) / B (1), nominal;
- ``rating_<dim>``: a 1–5 rating of a response, interval; its units are the two responses of
  every comparison (A's and B's rating as a unit and its mirror);
- ``a_<dim>``, ``b_<dim>``: a 1–5 rating of response A or B alone, interval (generic matrices
  only: which response is A depends on the numbering, so reports use ``rating_<dim>``);
- ``screen5`` / ``screen3``: the preference *as shown* (left/right). Diagnostics only: agreement
  on these mixes position with preference and is not a reliability figure.

Orientation (the one definition of every chance-corrected figure on preference data). A
comparison has no natural "A": A is only the lower companion id, so any fixed orientation (the
lower id, a hash of the comparison id) makes chance-corrected figures depend on how companions
and comparisons happen to be numbered. With one dominant companion a fixed orientation piles the
labels up on one side, the pooled marginals go lopsided, the chance baseline approaches the
observed agreement and α or κ collapse while raw agreement stays high. So every unit is
*mirrored*: each comparison enters once as its votes v and once as −v (A and B swapped). The
pooled distribution is then symmetric and within-unit disagreement is unchanged, and because
swapping A and B of any comparison only swaps a unit with its mirror, every figure is the same
under any renumbering of companions or comparisons (and under any screen layout). Applied to:
- α at each level (`preference_reliability` / `label_agreement`): the reliability data is the
  raters × 2N matrix [v, −v] (for a 1–5 rating of a response: [rating of A, rating of B], the
  same pairing); the bootstrap resamples comparisons and keeps each with its mirror;
- percent agreement and Fleiss' κ on the same mirrored data (percent agreement is unchanged by
  mirroring; Fleiss' κ gets the symmetric marginals);
- Cohen's κ between two raters or between a judge and the human majority (`pair_kappa`): each
  item once as (x, y) and once as (−x, −y);
- Dawid–Skene labels (`aggregate_labels`): fitted on the mirrored votes.
`alpha`, `alpha_with_ci`, `cohen_kappa`, `percent_agreement` and `fleiss_kappa` stay the
generic textbook coefficients on reliability data as given (they reproduce the published
values); mirroring applies to pair-keyed preference data only.

Krippendorff's α: units (columns) with fewer than two values are not pairable and are dropped;
`n_units` and `n_pairable` count what is left. α is NaN when nothing is pairable or every
pairable value is the same (no variation to agree on). The point estimate comes from the
`krippendorff` package; the bootstrap CI resamples units with replacement, done as a
multinomial reweighting of the distinct unit patterns (value-count rows) with α computed from
the weighted coincidence matrix, which is exact and makes 1,000 draws cost milliseconds.
"""

import re
from dataclasses import dataclass

import krippendorff
import numpy as np
import pandas as pd
from scipy.stats import beta as beta_distribution
from scipy.stats import binomtest

from . import dawid_skene

LEVELS = ("nominal", "ordinal", "interval", "ratio")
LABEL_LEVELS = {
    "preference5": "ordinal",
    "winner3": "nominal",
    "screen5": "ordinal",
    "screen3": "nominal",
}
RATING_LABEL = re.compile(r"^[ab]_\w+$")
RATING_DIMENSION_LABEL = re.compile(r"^rating_(\w+)$")
PAIR_LABELS = ("preference5", "winner3")  # pair-keyed, symmetric about 0: mirrored as −v
WINNER_NAMES = {-1: "A", 0: "tie", 1: "B"}
WINNER_CLASSES = np.array([-1, 0, 1])
MAX_VALUES = 30  # α here is for discrete scales; the coincidence work grows with values²


# Keying and pivoting


def pair_preference(screen_preference, left_is_a) -> np.ndarray:
    """Screen preference (negative = left better) → pair-keyed (negative = A better)."""
    screen = np.asarray(screen_preference)
    return np.where(np.asarray(left_is_a, dtype=bool), screen, -screen)


def check_keying(judgments: pd.DataFrame) -> None:
    """Raise ValueError when ``preference`` disagrees with ``screen_preference``/``left_is_a``."""
    needed = {"preference", "screen_preference", "left_is_a"}
    if not needed <= set(judgments.columns):
        return
    expected = pair_preference(judgments["screen_preference"], judgments["left_is_a"])
    wrong = np.asarray(judgments["preference"]) != expected
    if wrong.any():
        raise ValueError(
            f"{int(wrong.sum())} of {len(judgments)} judgments have a pair-keyed preference "
            "that does not follow from screen_preference and left_is_a"
        )


def _unit_column(judgments: pd.DataFrame, unit: str | None) -> str:
    if unit is not None:
        return unit
    for name in ("comparison", "comparison_id"):
        if name in judgments.columns:
            return name
    raise ValueError("judgments need a 'comparison' (or 'comparison_id') column")


def _preference(judgments: pd.DataFrame) -> pd.Series:
    if "preference" in judgments.columns:
        return judgments["preference"]
    if {"screen_preference", "left_is_a"} <= set(judgments.columns):
        values = pair_preference(judgments["screen_preference"], judgments["left_is_a"])
        return pd.Series(values, index=judgments.index, name="preference")
    raise ValueError("judgments need 'preference' (or 'screen_preference' and 'left_is_a')")


def expand_ratings(judgments: pd.DataFrame, column: str = "ratings") -> pd.DataFrame:
    """Copy with the ``ratings`` dicts spread into ``a_<dim>`` / ``b_<dim>`` float columns."""
    frame = judgments.copy()
    if column not in frame.columns:
        return frame
    values: dict[str, list] = {}
    for row, ratings in enumerate(frame[column]):
        if not isinstance(ratings, dict):
            continue
        for side in ("a", "b"):
            for dimension, value in (ratings.get(side) or {}).items():
                name = f"{side}_{dimension}"
                if name not in values:  # (not setdefault: its default would be built every time)
                    values[name] = [np.nan] * len(frame)
                values[name][row] = value
    for name in sorted(values):
        frame[name] = pd.to_numeric(pd.Series(values[name], index=frame.index), errors="coerce")
    return frame


def rating_labels(judgments: pd.DataFrame) -> list[str]:
    """The rating columns (``a_<dim>``, ``b_<dim>``) present."""
    return [c for c in judgments.columns if RATING_LABEL.match(str(c))]


def rating_dimension_labels(judgments: pd.DataFrame) -> list[str]:
    """``rating_<dim>`` for every dimension with both ``a_<dim>`` and ``b_<dim>`` columns."""
    columns = set(judgments.columns)
    return [
        f"rating_{c[2:]}"
        for c in rating_labels(judgments)
        if c.startswith("a_") and f"b_{c[2:]}" in columns
    ]


def label_level(label: str) -> str:
    """Level of measurement α uses for a label (see the module docstring)."""
    if label in LABEL_LEVELS:
        return LABEL_LEVELS[label]
    if RATING_LABEL.match(label) or RATING_DIMENSION_LABEL.match(label):
        return "interval"
    raise ValueError(f"unknown label {label!r}")


def label_values(judgments: pd.DataFrame, label: str) -> pd.Series:
    """One value per judgment for `label` (NaN where a rating was not given)."""
    if label == "preference5":
        check_keying(judgments)
        return _preference(judgments).astype(float)
    if label == "winner3":
        check_keying(judgments)
        return np.sign(_preference(judgments).astype(float))
    if label == "screen5":
        return judgments["screen_preference"].astype(float)
    if label == "screen3":
        return np.sign(judgments["screen_preference"].astype(float))
    label_level(label)  # raises on unknown labels
    if label not in judgments.columns:
        raise ValueError(f"no rating column {label!r} (see expand_ratings)")
    return pd.to_numeric(judgments[label], errors="coerce").astype(float)


def rating_matrix(
    judgments: pd.DataFrame, label: str, unit: str | None = None, rater: str = "annotator"
) -> pd.DataFrame:
    """Raters × units matrix of `label` (NaN = not rated), rows and columns sorted by id.

    The preference labels are keyed by the model pair (see the module docstring). A rater
    judging a unit twice is an error.
    """
    unit = _unit_column(judgments, unit)
    values = label_values(judgments, label).to_numpy()
    rater_codes, raters = pd.factorize(judgments[rater], sort=True)
    unit_codes, units = pd.factorize(judgments[unit], sort=True)
    cell = rater_codes.astype(np.int64) * len(units) + unit_codes
    if len(np.unique(cell)) != len(cell):
        raise ValueError(f"some {rater} judged the same {unit} more than once")
    matrix = np.full((len(raters), len(units)), np.nan)
    matrix[rater_codes, unit_codes] = values
    return pd.DataFrame(
        matrix, index=pd.Index(raters, name=rater), columns=pd.Index(units, name=unit)
    )


# Krippendorff's alpha


def value_counts(matrix) -> tuple[np.ndarray, np.ndarray]:
    """Units × values count table and the sorted value domain, from raters × units.

    At most MAX_VALUES distinct values (a discrete scale); more raise ValueError.
    """
    data = np.asarray(matrix, dtype=float)
    present = ~np.isnan(data)
    domain = np.unique(data[present])
    if len(domain) > MAX_VALUES:
        raise ValueError(
            f"{len(domain)} distinct values: α here is for discrete scales (≤ {MAX_VALUES})"
        )
    _, unit = np.nonzero(present)
    index = np.searchsorted(domain, data[present])
    flat = np.bincount(unit * len(domain) + index, minlength=data.shape[1] * len(domain))
    return flat.reshape(data.shape[1], len(domain)), domain


def _pairable(counts: np.ndarray) -> np.ndarray:
    return counts[counts.sum(axis=1) >= 2]


def alpha(matrix, level: str) -> float:
    """Krippendorff's α (the `krippendorff` package) of a raters × units matrix at `level`.

    NaN when undefined (no pairable unit, or a single value overall).
    """
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}")
    counts, domain = value_counts(matrix)
    counts = _pairable(counts)
    if len(counts) == 0 or (counts.sum(axis=0) > 0).sum() < 2:
        return float("nan")
    return float(
        krippendorff.alpha(value_counts=counts, value_domain=domain, level_of_measurement=level)
    )


def _distances(domain: np.ndarray, level: str, n_v: np.ndarray) -> np.ndarray:
    """Distance matrices δ²(c, k): V × V, or draws × V × V for ordinal (depends on n_v)."""
    if level == "nominal":
        return (domain[:, None] != domain[None, :]).astype(float)
    if level == "interval":
        return (domain[:, None] - domain[None, :]) ** 2
    if level == "ratio":
        total = domain[:, None] + domain[None, :]
        difference = domain[:, None] - domain[None, :]
        safe = np.where(total == 0, 1.0, total)
        return np.where(total == 0, 0.0, difference / safe) ** 2
    if level == "ordinal":
        # δ²(c, k) = (Σ_{g=c..k} n_g − (n_c + n_k)/2)², with n_g the pairable values per value.
        cumulative = np.concatenate([np.zeros((n_v.shape[0], 1)), np.cumsum(n_v, axis=1)], axis=1)
        index = np.arange(n_v.shape[1])
        low = np.minimum(index[:, None], index[None, :])
        high = np.maximum(index[:, None], index[None, :])
        between = cumulative[:, high + 1] - cumulative[:, low]
        return (between - (n_v[:, :, None] + n_v[:, None, :]) / 2) ** 2
    raise ValueError(f"level must be one of {LEVELS}")


def coincidence_alpha(counts, domain, level: str, weights=None) -> np.ndarray:
    """α from a units × values count table, for one or many weightings of the units.

    `weights` is None (each unit once), a vector over units, or a draws × units array (one
    α per row). Units with fewer than two values get no weight. Equals the package's α.
    """
    counts = np.asarray(counts, dtype=float)
    domain = np.asarray(domain, dtype=float)
    m = counts.sum(axis=1)
    pairable = m >= 2
    counts, m = counts[pairable], m[pairable]
    size = counts.shape[1]
    # Per-unit coincidences (n nᵀ − diag n) / (m − 1), flattened to V² columns.
    per_unit = counts[:, :, None] * counts[:, None, :]
    per_unit[:, np.arange(size), np.arange(size)] -= counts
    per_unit = (per_unit / (m - 1)[:, None, None]).reshape(len(counts), size * size)
    if weights is None:
        w = np.ones((1, len(counts)))
    else:
        w = np.atleast_2d(np.asarray(weights, dtype=float))[:, pairable]
    observed = w @ per_unit  # draws × V²
    n_v = observed.reshape(-1, size, size).sum(axis=2)
    distance = _distances(domain, level, n_v)
    if distance.ndim == 2:
        disagreement = observed @ distance.reshape(-1)
        expected = np.einsum("bi,ij,bj->b", n_v, distance, n_v)
    else:
        disagreement = np.einsum("bk,bk->b", observed, distance.reshape(len(n_v), -1))
        expected = np.einsum("bi,bij,bj->b", n_v, distance, n_v)
    total = n_v.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        result = 1 - (total - 1) * disagreement / expected
    result[~(expected > 0)] = np.nan
    return result if weights is not None and np.ndim(weights) == 2 else result[0]


@dataclass
class AlphaResult:
    """Krippendorff's α with a percentile bootstrap interval at confidence `ci` (e.g. 0.95)."""

    alpha: float
    low: float
    high: float
    level: str  # level of measurement
    ci: float  # confidence level of [low, high]
    n_units: int  # pairable units (≥ 2 values)
    n_pairable: int  # values in pairable units
    n_boot: int  # bootstrap draws (resampled units)

    def __str__(self) -> str:
        return (
            f"α = {self.alpha:.3f} ({self.ci:.0%} CI {self.low:.3f} to {self.high:.3f}; "
            f"{self.level}; {self.n_units} units, {self.n_pairable} pairable values, "
            f"{self.n_boot} bootstrap draws)"
        )


def alpha_with_ci(
    matrix, level: str, n_boot: int = 1000, seed: int = 0, ci: float = 0.95
) -> AlphaResult:
    """α (package) plus a `ci` (default 95%) percentile bootstrap CI over resampled units.

    Each draw resamples the pairable units with replacement (seeded), done as a multinomial
    draw over the distinct unit patterns; draws where α is undefined are left out.
    """
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}")
    counts, domain = value_counts(matrix)
    counts = _pairable(counts)
    n_units, n_pairable = len(counts), int(counts.sum())
    point = alpha(matrix, level)
    if np.isnan(point) or n_boot <= 0:
        return AlphaResult(point, np.nan, np.nan, level, ci, n_units, n_pairable, max(n_boot, 0))
    patterns, frequency = np.unique(counts, axis=0, return_counts=True)
    rng = np.random.default_rng(seed)
    draws = []
    batch = max(1, min(n_boot, 4_000_000 // len(patterns)))
    done = 0
    while done < n_boot:
        size = min(batch, n_boot - done)
        weights = rng.multinomial(n_units, frequency / n_units, size=size)
        draws.append(coincidence_alpha(patterns, domain, level, weights))
        done += size
    low, high = percentile_interval(np.concatenate(draws), ci)
    return AlphaResult(point, low, high, level, ci, n_units, n_pairable, n_boot)


def percentile_interval(values: np.ndarray, ci: float) -> tuple[float, float]:
    """The central `ci` share of bootstrap draws (NaN draws ignored; NaN when all are)."""
    if np.isnan(values).all():
        return float("nan"), float("nan")
    tail = (1 - ci) / 2
    low, high = np.nanquantile(values, [tail, 1 - tail])
    return float(low), float(high)


# Other agreement coefficients


def percent_agreement(matrix) -> float:
    """Pairwise percent agreement: per pairable unit, the share of rater pairs giving the
    same value, averaged over units (Fleiss' P̄, for any number of raters per unit)."""
    counts, _ = value_counts(matrix)
    counts = _pairable(counts).astype(float)
    if len(counts) == 0:
        return float("nan")
    m = counts.sum(axis=1)
    return float(((counts * (counts - 1)).sum(axis=1) / (m * (m - 1))).mean())


def cohen_kappa(x, y, weights: str | None = None) -> float:
    """Cohen's κ of two raters on the units both rated (NaN = not rated).

    `weights` None, "linear" or "quadratic" (distances between category ranks, as sklearn).
    NaN when undefined (fewer than two shared units, or no variation).
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    both = ~np.isnan(x) & ~np.isnan(y)
    x, y = x[both], y[both]
    if len(x) < 2:
        return float("nan")
    categories, codes = np.unique(np.concatenate([x, y]), return_inverse=True)
    size = len(categories)
    observed = np.zeros((size, size))
    np.add.at(observed, (codes[: len(x)], codes[len(x) :]), 1)
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0)) / observed.sum()
    rank = np.abs(np.arange(size)[:, None] - np.arange(size)[None, :])
    if weights is None:
        penalty = (rank > 0).astype(float)
    elif weights == "linear":
        penalty = rank.astype(float)
    elif weights == "quadratic":
        penalty = rank.astype(float) ** 2
    else:
        raise ValueError("weights must be None, 'linear' or 'quadratic'")
    denominator = (penalty * expected).sum()
    if denominator == 0:
        return float("nan")
    return float(1 - (penalty * observed).sum() / denominator)


def cohen_kappa_pairs(
    matrix, min_overlap: int = 20, weights: str | None = None, mirror: bool = False
) -> pd.DataFrame:
    """Cohen's κ for every pair of raters sharing at least `min_overlap` units (`mirror`: on
    pair-keyed preferences, `pair_kappa`)."""
    coefficient = pair_kappa if mirror else cohen_kappa
    frame = matrix if isinstance(matrix, pd.DataFrame) else pd.DataFrame(np.asarray(matrix))
    data = frame.to_numpy(dtype=float)
    present = ~np.isnan(data)
    overlap = present.astype(np.int64) @ present.T.astype(np.int64)
    rows = []
    for i in range(len(data)):
        for j in range(i + 1, len(data)):
            if overlap[i, j] >= min_overlap:
                kappa = coefficient(data[i], data[j], weights)
                rows.append((frame.index[i], frame.index[j], int(overlap[i, j]), kappa))
    return pd.DataFrame(rows, columns=["rater_1", "rater_2", "n", "kappa"])


def fleiss_kappa_counts(counts) -> float:
    """Fleiss' κ from a units × categories count table with the same raters per unit."""
    counts = np.asarray(counts, dtype=float)
    n = counts.sum(axis=1)
    if len(counts) == 0 or not np.all(n == n[0]) or n[0] < 2:
        raise ValueError("Fleiss' κ needs the same number (≥ 2) of ratings on every unit")
    n = n[0]
    p_unit = ((counts * counts).sum(axis=1) - n) / (n * (n - 1))
    p_category = counts.sum(axis=0) / counts.sum()
    chance = (p_category**2).sum()
    if chance == 1:
        return float("nan")
    return float((p_unit.mean() - chance) / (1 - chance))


@dataclass
class FleissResult:
    kappa: float
    n_units: int  # units used (exactly n_raters ratings)
    n_raters: int  # ratings per unit
    n_skipped: int  # pairable units with another number of ratings


def fleiss_kappa(matrix, n_raters: int | None = None) -> FleissResult:
    """Fleiss' κ on the units with exactly `n_raters` ratings (default: the most common count
    among pairable units, the larger on a tie); the others are skipped and counted."""
    counts, _ = value_counts(matrix)
    counts = _pairable(counts)
    m = counts.sum(axis=1)
    if len(m) == 0:
        return FleissResult(float("nan"), 0, 0, 0)
    if n_raters is None:
        sizes, frequency = np.unique(m, return_counts=True)
        n_raters = int(sizes[frequency == frequency.max()].max())
    used = m == n_raters
    if not used.any():
        return FleissResult(float("nan"), 0, n_raters, len(m))
    kappa = fleiss_kappa_counts(counts[used])
    return FleissResult(kappa, int(used.sum()), n_raters, int((~used).sum()))


# Preference data: the mirrored definition (see "Orientation" in the module docstring)


def preference_reliability(
    judgments: pd.DataFrame, label: str, unit: str | None = None
) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """The reliability data of `label` as (units, their mirrors), raters × comparisons each.

    preference5 / winner3: (v, −v); ``rating_<dim>``: (rating of A, rating of B). Labels with a
    natural orientation (the screen labels) or a single side (``a_<dim>``) have no mirror:
    (matrix, None).
    """
    if label in PAIR_LABELS:
        matrix = rating_matrix(judgments, label, unit)
        return matrix, -matrix
    match = RATING_DIMENSION_LABEL.match(label)
    if match:
        dimension = match.group(1)
        return (
            rating_matrix(judgments, f"a_{dimension}", unit),
            rating_matrix(judgments, f"b_{dimension}", unit),
        )
    return rating_matrix(judgments, label, unit), None


def paired_alpha_with_ci(
    first, second=None, *, level: str, n_boot: int = 1000, seed: int = 0, ci: float = 0.95
) -> AlphaResult:
    """α on reliability data whose units come in pairs: column j of `first` and column j of
    `second` (raters × units each; `second` None = the mirror −first). The point estimate is the
    package's α on the raters × 2N matrix [first, second]; the bootstrap resamples the N pairs
    (a comparison with its mirror). ``n_units`` counts pairs with a pairable unit,
    ``n_pairable`` the pairable values actually given (a mirror's values are not counted)."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}")
    first = np.asarray(first, dtype=float)
    mirror = second is None
    second = -first if mirror else np.asarray(second, dtype=float)
    if first.shape != second.shape:
        raise ValueError(f"paired matrices differ in shape: {first.shape} vs {second.shape}")
    data = np.hstack([first, second])
    n = first.shape[1]
    if not np.isfinite(data).any():
        return AlphaResult(np.nan, np.nan, np.nan, level, ci, 0, 0, max(n_boot, 0))
    counts, domain = value_counts(data)
    size = counts.shape[1]
    joint = np.hstack([counts[:n], counts[n:]])
    m_first, m_second = joint[:, :size].sum(axis=1), joint[:, size:].sum(axis=1)
    usable = (m_first >= 2) | (m_second >= 2)
    joint = joint[usable]
    n_units = int(usable.sum())
    given = m_first[usable] * (m_first[usable] >= 2)
    if not mirror:
        given = given + m_second[usable] * (m_second[usable] >= 2)
    n_pairable = int(given.sum())
    point = alpha(data, level)
    if np.isnan(point) or n_boot <= 0:
        return AlphaResult(point, np.nan, np.nan, level, ci, n_units, n_pairable, max(n_boot, 0))
    # A pair is unordered (a comparison with its mirror, or A's with B's ratings): put the
    # lexicographically smaller half first, so swapping A and B leaves the patterns alone.
    first_half, second_half = joint[:, :size], joint[:, size:]
    difference = second_half - first_half
    lead = np.argmax(difference != 0, axis=1)
    swap = difference[np.arange(len(joint)), lead] < 0
    joint = np.where(swap[:, None], np.hstack([second_half, first_half]), joint)
    patterns, frequency = np.unique(joint, axis=0, return_counts=True)
    units = np.vstack([patterns[:, :size], patterns[:, size:]])
    rng = np.random.default_rng(seed)
    draws = []
    batch = max(1, min(n_boot, 4_000_000 // len(patterns)))
    done = 0
    while done < n_boot:
        step = min(batch, n_boot - done)
        weights = rng.multinomial(n_units, frequency / n_units, size=step)
        draws.append(coincidence_alpha(units, domain, level, np.hstack([weights, weights])))
        done += step
    low, high = percentile_interval(np.concatenate(draws), ci)
    return AlphaResult(point, low, high, level, ci, n_units, n_pairable, n_boot)


def pair_kappa(x, y, weights: str | None = None) -> float:
    """Cohen's κ on pair-keyed labels (values symmetric about 0, e.g. −1 A / 0 tie / 1 B), each
    item counted once as (x, y) and once as (−x, −y): the same whichever side is A."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    return cohen_kappa(np.concatenate([x, -x]), np.concatenate([y, -y]), weights)


def label_agreement(
    judgments: pd.DataFrame,
    labels: list[str] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    ci: float = 0.95,
) -> pd.DataFrame:
    """The agreement figures of every report (agreement page, API, command, calibration
    document): one row per label with level, α and its `ci` bootstrap interval, units,
    pairable values, percent agreement and Fleiss' κ, all on the mirrored reliability data
    (`preference_reliability`, `paired_alpha_with_ci`). Default labels: preference5, winner3
    and ``rating_<dim>`` for every rated dimension."""
    if labels is None:
        labels = ["preference5", "winner3", *rating_dimension_labels(judgments)]
    rows = []
    for label in labels:
        first, second = preference_reliability(judgments, label)
        level = label_level(label)
        if second is None:
            matrix = first.to_numpy(dtype=float)
            result = alpha_with_ci(matrix, level, n_boot=n_boot, seed=seed, ci=ci)
        else:
            pair = (first.to_numpy(dtype=float), second.to_numpy(dtype=float))
            mirror = label in PAIR_LABELS
            matrix = np.hstack(pair)
            result = paired_alpha_with_ci(
                pair[0], None if mirror else pair[1], level=level, n_boot=n_boot, seed=seed, ci=ci
            )
        fleiss = fleiss_kappa(matrix) if np.isfinite(matrix).any() else None
        fleiss_units = fleiss.n_units if fleiss else 0
        if second is not None and label in PAIR_LABELS:
            fleiss_units //= 2  # a comparison and its mirror
        rows.append(
            {
                "label": label,
                "level": level,
                "alpha": result.alpha,
                "low": result.low,
                "high": result.high,
                "ci": ci,
                "n_units": result.n_units,
                "n_pairable": result.n_pairable,
                "n_boot": result.n_boot,
                "percent_agreement": percent_agreement(matrix)
                if np.isfinite(matrix).any()
                else float("nan"),
                "fleiss_kappa": fleiss.kappa if fleiss else float("nan"),
                "fleiss_units": fleiss_units,
            }
        )
    return pd.DataFrame(rows).set_index("label")


# Annotators


def loo_consensus(
    judgments: pd.DataFrame, unit: str | None = None, min_others: int = 2
) -> pd.DataFrame:
    """Per judgment, the leave-one-out consensus of the *other* annotators on the same unit.

    ``consensus``: their plurality winner3 label (−1/0/1), NaN when fewer than `min_others`
    others voted or their top labels tie; ``agrees``: this vote's winner3 equals it (NaN when no
    consensus); ``distance``: |own 5-point preference − mean of the others'| (NaN with no
    others). Same index as `judgments`.
    """
    unit = _unit_column(judgments, unit)
    preference = label_values(judgments, "preference5").to_numpy()
    winner = (np.sign(preference) + 1).astype(np.int64)
    codes, units = pd.factorize(judgments[unit])
    votes = np.zeros((len(units), 3))
    np.add.at(votes, (codes, winner), 1.0)
    others = votes[codes]
    others[np.arange(len(codes)), winner] -= 1
    n_others = others.sum(axis=1)
    top = others.max(axis=1)
    unique_top = (others == top[:, None]).sum(axis=1) == 1
    has = unique_top & (n_others >= min_others)
    consensus = np.where(has, others.argmax(axis=1) - 1.0, np.nan)
    agrees = np.where(has, (winner - 1 == consensus).astype(float), np.nan)
    sums = np.bincount(codes, weights=preference, minlength=len(units))
    counts = np.bincount(codes, minlength=len(units))
    rest = counts[codes] - 1
    with np.errstate(divide="ignore", invalid="ignore"):
        mean_others = (sums[codes] - preference) / rest
    distance = np.where(rest > 0, np.abs(preference - mean_others), np.nan)
    return pd.DataFrame(
        {"consensus": consensus, "agrees": agrees, "distance": distance, "n_others": n_others},
        index=judgments.index,
    )


def _gold_upper_bound(correct: float, total: float, confidence: float) -> float:
    """One-sided Clopper–Pearson upper bound of an accuracy (NaN with no items)."""
    if total == 0:
        return float("nan")
    if correct >= total:
        return 1.0
    return float(beta_distribution.ppf(confidence, correct + 1, total - correct))


def annotator_report(
    judgments: pd.DataFrame,
    unit: str | None = None,
    *,
    min_others: int = 2,
    min_units: int = 20,
    mad_k: float = 2.5,
    min_gap: float = 0.10,
    agreement_floor: float = 0.40,
    min_gold: int = 10,
    gold_floor: float = 0.60,
    gold_confidence: float = 0.99,
    position_alpha: float = 0.01,
    position_band: tuple[float, float] = (0.35, 0.65),
    fast_ms: float = 5000,
    fast_ratio: float = 0.25,
) -> pd.DataFrame:
    """One row per annotator: agreement with the others, gold accuracy, position bias, speed,
    and a ``flag`` text saying why an annotator stands out ("" when nothing does).

    Columns: ``n``; ``n_consensus`` and ``consensus_agreement`` (share of their winner3 votes
    equal to the leave-one-out consensus of the others, see `loo_consensus`);
    ``consensus_distance`` (mean |5-point preference − others' mean|); ``n_gold``,
    ``gold_accuracy`` (sign of the preference equals the sign of gold_preference, a tie gold
    expects a tie); ``n_non_tie``, ``left_rate`` (share of non-tie votes for the left side),
    ``left_p`` (two-sided exact binomial test against 50%); ``median_time_ms`` and
    ``time_source``; ``flagged``; ``flag``; ``note``.

    Flag rules (keyword thresholds):
    - consensus: with at least `min_units` consensus items, agreement below the pool median
      minus max(`mad_k` robust SDs (1.4826 × MAD), `min_gap`) (pool = annotators with
      `min_units`; 2.5 is Leys et al. 2013's moderately conservative outlier cut), or below
      `agreement_floor` (about chance for A/tie/B with few ties);
    - gold: at least `min_gold` gold votes and accuracy confidently below `gold_floor` (its
      one-sided `gold_confidence` Clopper–Pearson upper bound is under the floor);
    - position: `left_p` < `position_alpha` and `left_rate` outside `position_band`;
    - fast: median visible time below `fast_ms` (the browser's client_time_ms where reported,
      the server's lease time only as a fallback, see `_visible_time`).

    ``flagged`` is true only for these reasons, the ones a researcher would act on (look at the
    annotator's work, exclude their judgments). Observations that are not reasons on their own
    go to ``note``: a median time above `fast_ms` but below `fast_ratio` × the pool's median of
    medians ("quicker than most"). ``time_source`` says which clock the median comes from
    (client, server, mixed, none).
    """
    unit = _unit_column(judgments, unit)
    annotator = judgments["annotator"]
    grouped = judgments.groupby(annotator, sort=True)
    table = pd.DataFrame({"n": grouped.size()})
    table.index.name = "annotator"

    consensus = loo_consensus(judgments, unit, min_others)
    has = consensus["agrees"].notna()
    table["n_consensus"] = has.groupby(annotator).sum()
    table["consensus_agreement"] = consensus["agrees"].groupby(annotator).mean()
    table["consensus_distance"] = consensus["distance"].groupby(annotator).mean()

    if {"is_gold", "gold_preference"} <= set(judgments.columns):
        gold = judgments["is_gold"].astype(bool) & judgments["gold_preference"].notna()
        preference = label_values(judgments, "preference5")
        right = (np.sign(preference) == np.sign(judgments["gold_preference"].astype(float)))[gold]
        table["n_gold"] = gold.groupby(annotator).sum()
        table["gold_accuracy"] = right.groupby(annotator[gold]).mean()
    else:
        table["n_gold"] = 0
        table["gold_accuracy"] = np.nan

    if "screen_preference" in judgments.columns:
        screen = judgments["screen_preference"]
        non_tie = screen != 0
        table["n_non_tie"] = non_tie.groupby(annotator).sum()
        table["left_rate"] = (screen[non_tie] < 0).groupby(annotator[non_tie]).mean()
        left = (screen[non_tie] < 0).groupby(annotator[non_tie]).sum()
        table["left_p"] = [
            binomtest(int(left.get(name, 0)), int(n), 0.5).pvalue if n else np.nan
            for name, n in table["n_non_tie"].items()
        ]
    else:
        table["n_non_tie"] = 0
        table["left_rate"] = np.nan
        table["left_p"] = np.nan

    seconds, source = _visible_time(judgments)
    table["median_time_ms"] = seconds.groupby(annotator).median().astype(float)
    table["time_source"] = source.groupby(annotator).agg(_time_source)
    for column in ("n_consensus", "n_gold", "n_non_tie"):
        table[column] = table[column].fillna(0).astype(np.int64)

    reasons = {name: [] for name in table.index}
    pool = table.loc[table["n_consensus"] >= min_units, "consensus_agreement"].dropna()
    if len(pool):
        median = float(pool.median())
        spread = 1.4826 * float((pool - median).abs().median())
        threshold = max(median - max(mad_k * spread, min_gap), agreement_floor)
        for name in pool.index:
            value = pool[name]
            if value < threshold:
                reasons[name].append(
                    f"consensus: agrees with the others on {value:.0%} of "
                    f"{table.at[name, 'n_consensus']} items (pool median {median:.0%}, "
                    f"flag below {threshold:.0%})"
                )
    for name, row in table.iterrows():
        n_gold, n_non_tie = int(row["n_gold"]), int(row["n_non_tie"])
        if n_gold >= min_gold and not np.isnan(row["gold_accuracy"]):
            correct = round(row["gold_accuracy"] * n_gold)
            upper = _gold_upper_bound(correct, n_gold, gold_confidence)
            if upper < gold_floor:
                reasons[name].append(
                    f"gold: {correct} of {n_gold} gold items right ({row['gold_accuracy']:.0%}; "
                    f"{gold_confidence:.0%} upper bound {upper:.0%} < {gold_floor:.0%})"
                )
        low, high = position_band
        rate = row["left_rate"]
        if row["left_p"] < position_alpha and not low <= rate <= high:
            reasons[name].append(
                f"position: picks the left side in {rate:.0%} of {n_non_tie} non-tie "
                f"votes (binomial p = {row['left_p']:.1g}; expected {low:.0%}–{high:.0%})"
            )
    notes = {name: [] for name in table.index}
    medians = table["median_time_ms"].dropna()
    if len(medians):
        pool_median = float(medians.median())
        relative = fast_ratio * pool_median
        for name, value in medians.items():
            measured = TIME_SOURCES[table.at[name, "time_source"]]
            if value < fast_ms:
                reasons[name].append(
                    f"fast: median time {value / 1000:.1f} s ({measured}; flag below "
                    f"{fast_ms / 1000:.1f} s)"
                )
            elif value < relative:
                notes[name].append(
                    f"quicker than most: median time {value / 1000:.1f} s ({measured}; pool "
                    f"median {pool_median / 1000:.1f} s)"
                )
    table["flagged"] = [bool(reasons[name]) for name in table.index]
    table["flag"] = ["; ".join(reasons[name]) for name in table.index]
    table["note"] = ["; ".join(notes[name]) for name in table.index]
    return table


TIME_SOURCES = {
    "client": "visible time in the browser",
    "server": "server lease time, no browser time reported",
    "mixed": "browser time, server lease time where none was reported",
    "none": "no time recorded",
}


def _visible_time(judgments: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Per judgment: the time the item was on screen (client_time_ms, measured in the browser)
    where reported, else the server's lease time (time_on_task_ms, issued → submitted, which
    also counts network and any wait before the page was shown); and which one it is."""
    nan = pd.Series(np.nan, index=judgments.index, dtype=float)
    client = pd.to_numeric(judgments.get("client_time_ms", nan), errors="coerce").astype(float)
    server = pd.to_numeric(judgments.get("time_on_task_ms", nan), errors="coerce").astype(float)
    source = pd.Series(
        np.where(client.notna(), "client", np.where(server.notna(), "server", "none")),
        index=judgments.index,
    )
    return client.fillna(server), source


def _time_source(sources: pd.Series) -> str:
    present = set(sources) - {"none"}
    if not present:
        return "none"
    return present.pop() if len(present) == 1 else "mixed"


# Aggregated labels


def majority_labels(judgments: pd.DataFrame, unit: str | None = None) -> pd.DataFrame:
    """Per unit: votes for A / tie / B, the plurality winner3 label, and whether it was tied.

    A tied top is broken deterministically by the sign of the summed 5-point preferences of all
    the unit's votes (so one "A much better" outweighs one "B better", and an even split is a
    tie); ``majority_tied`` marks these units.
    """
    unit = _unit_column(judgments, unit)
    preference = label_values(judgments, "preference5").to_numpy()
    winner = (np.sign(preference) + 1).astype(np.int64)
    codes, units = pd.factorize(judgments[unit], sort=True)
    votes = np.zeros((len(units), 3), dtype=np.int64)
    np.add.at(votes, (codes, winner), 1)
    top = votes.max(axis=1)
    tied = (votes == top[:, None]).sum(axis=1) > 1
    strength = np.sign(np.bincount(codes, weights=preference, minlength=len(units)))
    label = np.where(tied, strength, votes.argmax(axis=1) - 1).astype(np.int64)
    return pd.DataFrame(
        {
            "n_votes": votes.sum(axis=1),
            "votes_a": votes[:, 0],
            "votes_tie": votes[:, 1],
            "votes_b": votes[:, 2],
            "majority": label,
            "majority_tied": tied,
        },
        index=pd.Index(units, name=unit),
    )


@dataclass
class Aggregation:
    """Labels per comparison by majority and by Dawid–Skene (winner3: −1 A, 0 tie, 1 B)."""

    labels: pd.DataFrame  # majority_labels columns + ds_label, p_a, p_tie, p_b, disagree
    disagreement: float  # share of units where the majority and Dawid–Skene labels differ
    n_majority_ties: int  # units whose majority was tied and broken (see majority_labels)
    model: dawid_skene.DawidSkeneFit


def aggregate_labels(
    judgments: pd.DataFrame,
    unit: str | None = None,
    exclude_annotators=(),
    max_iter: int = 100,
    tol: float = 1e-7,
) -> Aggregation:
    """Majority and Dawid–Skene labels per comparison on pair-keyed winner3 votes, and the share
    of comparisons where they disagree. `exclude_annotators` drops (e.g. flagged) raters.

    Dawid–Skene is fitted on the mirrored votes (module docstring, "Orientation"): unit 2i is
    the i-th comparison (sorted by id), unit 2i + 1 its mirror with every vote negated, so the
    prior and the confusion matrices do not depend on which companion is A."""
    unit = _unit_column(judgments, unit)
    kept = judgments[~judgments["annotator"].isin(list(exclude_annotators))]
    if kept.empty:
        raise ValueError("no judgments left to aggregate")
    table = majority_labels(kept, unit)
    winner = label_values(kept, "winner3").astype(np.int64).to_numpy()
    codes, _ = pd.factorize(kept[unit], sort=True)
    annotators = kept["annotator"].to_numpy()
    model = dawid_skene.fit(
        np.concatenate([2 * codes, 2 * codes + 1]),
        np.concatenate([annotators, annotators]),
        np.concatenate([winner, -winner]),
        WINNER_CLASSES,
        max_iter,
        tol,
    )
    position = 2 * np.arange(len(table))
    table["ds_label"] = model.labels[position].astype(np.int64)
    for column, index in (("p_a", 0), ("p_tie", 1), ("p_b", 2)):
        table[column] = model.posterior[position, index]
    table["disagree"] = table["majority"] != table["ds_label"]
    return Aggregation(
        labels=table,
        disagreement=float(table["disagree"].mean()),
        n_majority_ties=int(table["majority_tied"].sum()),
        model=model,
    )


def pairwise_agreement(matrix: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Share of shared units on which two raters gave the same value, and the shared counts
    (raters × raters, NaN where two raters share no unit): the data of an agreement heat map."""
    data = matrix.to_numpy(dtype=float)
    present = ~np.isnan(data)
    values = np.unique(data[present])
    same = np.zeros((len(data), len(data)))
    for value in values:
        hot = (data == value).astype(np.int64)
        same += hot @ hot.T
    shared = present.astype(np.int64) @ present.T.astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(shared > 0, same / shared, np.nan)
    index = matrix.index
    return pd.DataFrame(share, index=index, columns=index), pd.DataFrame(
        shared, index=index, columns=index
    )
