"""Krippendorff's α: the point estimate (the `krippendorff` package), the exact weighted
coincidence-matrix α that makes bootstrap draws cheap, and the percentile intervals, for
reliability data as given and for units that come in pairs (a comparison with its mirror)."""

from dataclasses import dataclass

import krippendorff
import numpy as np

LEVELS = ("nominal", "ordinal", "interval", "ratio")
MAX_VALUES = 30  # α here is for discrete scales; the coincidence work grows with values²


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


def pairable_units(counts: np.ndarray) -> np.ndarray:
    return counts[counts.sum(axis=1) >= 2]


def alpha(matrix, level: str) -> float:
    """Krippendorff's α (the `krippendorff` package) of a raters × units matrix at `level`.

    NaN when undefined (no pairable unit, or a single value overall).
    """
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}")
    counts, domain = value_counts(matrix)
    counts = pairable_units(counts)
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
    counts = pairable_units(counts)
    n_units, n_pairable = len(counts), int(counts.sum())
    point = alpha(matrix, level)
    if np.isnan(point) or n_boot <= 0:
        return AlphaResult(point, np.nan, np.nan, level, ci, n_units, n_pairable, max(n_boot, 0))
    patterns, frequency = np.unique(counts, axis=0, return_counts=True)
    draws = _bootstrap_alphas(patterns, frequency, domain, level, n_boot, seed)
    low, high = percentile_interval(draws, ci)
    return AlphaResult(point, low, high, level, ci, n_units, n_pairable, n_boot)


def _bootstrap_alphas(
    units, frequency, domain, level: str, n_boot: int, seed: int, copies: int = 1
) -> np.ndarray:
    """α of `n_boot` seeded resamples with replacement of the distinct unit patterns
    (`frequency` of each: a multinomial draw per resample), in batches that bound the memory.

    `units` holds `copies` stacked blocks of rows, one per pattern each, that share the
    pattern's weight: a paired unit (a comparison and its mirror) is resampled as one."""
    n_units = int(np.sum(frequency))
    rng = np.random.default_rng(seed)
    draws = []
    batch = max(1, min(n_boot, 4_000_000 // len(frequency)))
    done = 0
    while done < n_boot:
        size = min(batch, n_boot - done)
        weights = rng.multinomial(n_units, frequency / n_units, size=size)
        draws.append(coincidence_alpha(units, domain, level, np.hstack([weights] * copies)))
        done += size
    return np.concatenate(draws)


def percentile_interval(values: np.ndarray, ci: float) -> tuple[float, float]:
    """The central `ci` share of bootstrap draws (NaN draws ignored; NaN when all are)."""
    if np.isnan(values).all():
        return float("nan"), float("nan")
    tail = (1 - ci) / 2
    low, high = np.nanquantile(values, [tail, 1 - tail])
    return float(low), float(high)


def paired_alpha_with_ci(
    first,
    second=None,
    *,
    level: str,
    n_boot: int = 1000,
    seed: int = 0,
    ci: float = 0.95,
    mirrored: bool = False,
) -> AlphaResult:
    """α on reliability data whose units come in pairs: column j of `first` and column j of
    `second` (raters × units each; `second` None = the mirror −first). The point estimate is the
    package's α on the raters × 2N matrix [first, second]; the bootstrap resamples the N pairs
    (a comparison with its mirror). ``n_units`` counts pairs with a pairable unit,
    ``n_pairable`` the pairable values actually given (a mirror's values are not counted;
    `mirrored`: `second` is a mirror of `first` made otherwise than by negation)."""
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
    n_units = int(usable.sum())
    given = m_first[usable] * (m_first[usable] >= 2)
    if not (mirror or mirrored):
        given = given + m_second[usable] * (m_second[usable] >= 2)
    n_pairable = int(given.sum())
    point = alpha(data, level)
    if np.isnan(point) or n_boot <= 0:
        return AlphaResult(point, np.nan, np.nan, level, ci, n_units, n_pairable, max(n_boot, 0))
    patterns, frequency = _unordered_pair_patterns(joint[usable], size)
    units = np.vstack([patterns[:, :size], patterns[:, size:]])
    draws = _bootstrap_alphas(units, frequency, domain, level, n_boot, seed, copies=2)
    low, high = percentile_interval(draws, ci)
    return AlphaResult(point, low, high, level, ci, n_units, n_pairable, n_boot)


def _unordered_pair_patterns(joint: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct pairs of value-count rows (``joint``: the two halves side by side) and how
    often each occurs. A pair is unordered (a comparison with its mirror, or A's with B's
    ratings): the lexicographically smaller half goes first, so swapping A and B leaves the
    patterns alone."""
    first_half, second_half = joint[:, :size], joint[:, size:]
    difference = second_half - first_half
    lead = np.argmax(difference != 0, axis=1)
    swap = difference[np.arange(len(joint)), lead] < 0
    joint = np.where(swap[:, None], np.hstack([second_half, first_half]), joint)
    return np.unique(joint, axis=0, return_counts=True)
