"""Reading stored rows for the data frames of calibration features and releases."""

import math

ID_CHUNK = 5_000  # ids per IN (...) query


def chunks(values, size: int = ID_CHUNK):
    """The values in lists of at most `size`, so that an IN (...) query stays within the
    database's parameter limits."""
    values = list(values)
    for start in range(0, len(values), size):
        yield values[start : start + size]


def finite_number(value) -> float:
    """A stored JSON value as a float, NaN when it is missing, not a number, a boolean or not
    finite (stored metrics and verdict scores come from outside and may be any of these)."""
    if value is None or isinstance(value, bool):
        return math.nan
    try:
        number = float(value)
    except (TypeError, ValueError):
        return math.nan
    return number if math.isfinite(number) else math.nan
