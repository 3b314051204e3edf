"""The field a companion's flag gap is read from (scoring.releases.flags): Tukey's biweight
location of the companions' gaps, a robust mean in which a minority that struggles far more
than the rest weighs little or nothing. Here (plain arrays) so that the release and the flag-gap
planner (h2htalk.stats.gap_planner) compute it with the same code; numpy is imported where it
computes (the release's page formats load scoring.releases.flags at start-up).
"""

# Tukey's biweight: a gap more than 4 median absolute deviations (about 2.7 SDs) from the
# centre weighs nothing. Measured on the simulated releases of tests/scoring/test_release_field
# (200 seeds × 200 draws): c = 4 marks the other companions in 5–6.5% of seeds, c = 6
# (astropy's default) in 6–11% (the two that struggle keep a third of their weight), the median
# alone in 8.5–11%.
BIWEIGHT_C = 4.0
BIWEIGHT_ROUNDS = 10


def biweight(values):
    """Tukey's biweight location of each row of `values` (rows × companions) and the weights
    of the last round: from the median, each round weighs a value by (1 − u²)², u its distance
    from the current centre in units of BIWEIGHT_C median absolute deviations (0 beyond), and
    takes the weighted mean (astropy's biweight_location, iterated). Equal values (no spread)
    keep their mean. Each row is summed in sorted order, so the companions' order (their ids)
    cannot change a bit of it."""
    import numpy as np

    order = np.argsort(values, axis=1, kind="stable")
    values = np.take_along_axis(values, order, axis=1)
    center = np.median(values, axis=1)
    weights = np.ones_like(values)
    for _ in range(BIWEIGHT_ROUNDS):
        deviation = values - center[:, None]
        spread = BIWEIGHT_C * np.median(np.abs(deviation), axis=1)
        u = np.divide(
            deviation, spread[:, None], out=np.zeros_like(values), where=spread[:, None] > 0
        )
        weights = np.where(np.abs(u) < 1, (1 - u**2) ** 2, 0.0)
        center = (weights * values).sum(axis=1) / weights.sum(axis=1)
    unsorted = np.empty_like(weights)
    np.put_along_axis(unsorted, order, weights, axis=1)
    return center, unsorted


def field_gap(relative, paired, both):
    """The field's gap, its n_boot draws and each companion's weight in it: the biweight
    location of the companions' gaps (a robust mean: a minority that struggles far more than
    the rest weighs little or nothing, while a mean would follow it and the median of a few
    companions leans toward it), for the point estimate and for each draw."""
    import numpy as np

    present = np.flatnonzero(both)
    field, weights = biweight(relative[present][None, :])
    draws, _ = biweight(paired[:, present])
    full = np.full(len(relative), np.nan)
    full[present] = weights[0]
    return float(field[0]), draws, full
