"""Reading stored rows for the data frames of calibration features and releases."""

import math

from django.db import connection
from django.db.models.expressions import RawSQL


def id_subquery(ids) -> RawSQL:
    """`SELECT` of these ids bound as one parameter (an array on PostgreSQL, a JSON list on
    SQLite), for `pk__in=id_subquery(ids)`: any number of ids in one query, without an IN list
    of thousands of placeholders for Django and the driver to build and parse."""
    listed = ",".join(str(int(i)) for i in ids)  # one text parameter, not a value per id
    if connection.vendor == "postgresql":
        return RawSQL("SELECT unnest(%s::bigint[])", ("{" + listed + "}",))
    return RawSQL("SELECT value FROM json_each(%s)", ("[" + listed + "]",))


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
