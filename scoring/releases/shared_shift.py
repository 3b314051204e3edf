"""The field's shared shift on a flag: how much every companion's responses lose, in absolute
terms, on scenarios with an implicit (evolving) need against those with an explicit (stable)
one. Bradley–Terry cannot see it (two answers to one scenario compare companions, not
scenarios), so it is measured on absolute scores of each response:

- with a calibrated judge that scores responses one by one (scoring.calibration.prediction:
  its decision for a pair is the difference of the two responses' own scores), each response's
  own score on the judge's logit scale (`ResponseFeatures.absolute`), shown on the Elo scale
  (× 400·log10(e): the judge is calibrated to human preference, so a logit is a logit of the
  humans' Bradley–Terry);
- otherwise (no judge, or a pairwise one) the paper's composite, in composite points.

Per companion: mean score of its responses on the from-group minus on the on-group; the shift
is the field's gap (scoring.releases.flags.field_gap, the robust mean the per-companion gaps are
measured from: Tukey's biweight, in which a few companions that struggle far more than the rest
weigh little or nothing), with a percentile interval from resampling scenarios within each group (the same unit as every other interval of a release). Rows are
taken in the canonical order of scoring.releases.computing (scenario ranks by text hash,
companion codes by name), so renumbered ids give the same numbers.
"""

import numpy as np

from h2htalk.stats import leaderboard as stats
from h2htalk.stats.bradley_terry import ELO_SCALE
from scoring.releases import flags

SOURCES = {
    "judge": (
        "Elo",
        ELO_SCALE,
        "the calibrated judge's own score of each response (logit scale, shown in Elo)",
    ),
    "composite": ("composite points", 1.0, "the paper's composite of each response"),
}


def _matrix(scenario, companion, score, rows, n_models):
    """Scenarios (in rank order) × companions: the scores and where there is one."""
    ranks, row = np.unique(scenario[rows], return_inverse=True)
    values = np.zeros((len(ranks), n_models))
    present = np.zeros((len(ranks), n_models))
    finite = np.isfinite(score[rows])
    values[row[finite], companion[rows][finite]] = score[rows][finite]
    present[row[finite], companion[rows][finite]] = 1.0
    return values, present


def _means(values, present, weights):
    with np.errstate(invalid="ignore", divide="ignore"):
        return (weights @ values) / (weights @ present)


def shift(scenario, companion, score, group, n_models, source, n_boot, level, seed) -> dict:
    """The shared shift of one flag. `group` per row: 0 the from-group, 1 the on-group, −1
    neither; scenario and companion canonical ranks and codes; score absolute per response."""
    unit, scale, what = SOURCES[source]
    scenario, companion = np.asarray(scenario), np.asarray(companion)
    score, group = np.asarray(score, dtype=float), np.asarray(group)
    parts = [_matrix(scenario, companion, score, group == g, n_models) for g in (0, 1)]
    sizes = [len(values) for values, _ in parts]
    out = {"source": source, "unit": unit, "scenarios": sizes, "scores": what}
    if min(sizes) < 2:
        return {**out, "skipped": f"absolute scores on {min(sizes)} scenario(s) of a group"}
    point = [_means(values, present, np.ones((1, len(values))))[0] for values, present in parts]
    both = np.isfinite(point[0]) & np.isfinite(point[1])
    if not both.any():
        return {**out, "skipped": "no companion with scores in both groups"}
    rng = np.random.default_rng(seed)
    draws = np.empty((n_boot, n_models))
    for start in range(0, n_boot, stats.BATCH):
        size = min(stats.BATCH, n_boot - start)
        means = []
        for (values, present), n in zip(parts, sizes, strict=True):
            weights = rng.multinomial(n, np.full(n, 1 / n), size=size).astype(float)
            means.append(_means(values, present, weights))
        draws[start : start + size] = means[0] - means[1]
    gap = point[0] - point[1]
    both &= np.isfinite(draws).all(axis=0)  # a companion missing from a draw is left out
    if not both.any():
        return {**out, "skipped": "too few scenarios with scores for every companion"}
    field, field_draws, _ = flags.field_gap(gap, draws, both)
    tail = (1 - level) / 2
    low, high = np.quantile(field_draws, [tail, 1 - tail])
    return {
        **out,
        "difference": field * scale,
        "low": float(low) * scale,
        "high": float(high) * scale,
        "companions": int(both.sum()),
    }


def note() -> str:
    return (
        "Shared shift: what the field (the typical companion) loses on implicit (evolving) "
        "needs against explicit (stable) ones in absolute terms, which Elo cannot show: the "
        "mean absolute score of each companion's responses on the first group minus on the "
        "second, the biweight (robust) mean over companions, with a percentile interval from resampling scenarios within each group. Absolute scores: the calibrated judge's own score of "
        "each response (its pairwise decision is the difference of two such scores), in Elo; "
        "without such a judge, the paper's composite, in composite points."
    )
