"""Whole numbers (ids, sizes, counts) from query strings and form bodies, parsed safely.

`str.isdigit()` is not a test for "int() will take it": `"²".isdigit()` is True and `int("²")`
raises, and a 30-digit id overflows the database's integer. Every view that reads an id or a
size from `request.GET` / `request.POST` by hand goes through here: only ASCII digits, at most 18
of them (below 2**63, the largest database integer); anything else counts as absent.
"""

import re

_WHOLE = re.compile(r"[0-9]{1,18}")


def parse_int(value, default=None):
    """`value` as an int if it is 1-18 ASCII digits, else `default`."""
    if isinstance(value, str) and _WHOLE.fullmatch(value):
        return int(value)
    return default


def int_param(params, name: str, default=None):
    """The query or form parameter `name` as an int (the last one if repeated), else `default`."""
    return parse_int(params.get(name), default)


def int_list(params, name: str) -> list[int]:
    """Every value of the repeated parameter `name` that is a whole number (others dropped)."""
    return [number for number in map(parse_int, params.getlist(name)) if number is not None]


def by_id_or_name(queryset, key: str):
    """The object whose id (ASCII digits) or else whose name is `key`, or None."""
    number = parse_int(key)
    found = queryset.filter(pk=number).first() if number is not None else None
    return found or queryset.filter(name=key).first()
