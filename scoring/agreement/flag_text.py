"""The annotator flags and notes of the agreement report and the campaign monitor in the page's
language. h2htalk.stats.agreement.annotators gives each as an item (its kind and numbers) beside
the English text; reports stored before items existed show their English text."""

from django.utils.formats import number_format
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

TIME_SOURCES = {
    "client": gettext_lazy("visible time in the browser"),
    "server": gettext_lazy("server lease time, no browser time reported"),
    "mixed": gettext_lazy("browser time, server lease time where none was reported"),
    "none": gettext_lazy("no time recorded"),
}


def _pct(share: float) -> str:
    return f"{share:.0%}"


def _seconds(value: float) -> str:
    return number_format(value, 1)


def describe(item: dict) -> str:
    """One flag or note item as a sentence in the active language."""
    kind = item.get("kind")
    if kind == "consensus":
        text = _(
            "consensus: agrees with the others on %(share)s of %(n)s items (pool median "
            "%(median)s, flag below %(threshold)s)"
        )
        return text % {
            "share": _pct(item["share"]),
            "n": item["n"],
            "median": _pct(item["median"]),
            "threshold": _pct(item["threshold"]),
        }
    if kind == "gold":
        text = _(
            "gold: %(correct)s of %(n)s gold items right (%(share)s; %(confidence)s upper "
            "bound %(upper)s < %(floor)s)"
        )
        return text % {
            "correct": item["correct"],
            "n": item["n"],
            "share": _pct(item["share"]),
            "confidence": _pct(item["confidence"]),
            "upper": _pct(item["upper"]),
            "floor": _pct(item["floor"]),
        }
    if kind == "position":
        text = _(
            "position: picks the left side in %(share)s of %(n)s non-tie votes (binomial p = "
            "%(p)s; expected %(low)s–%(high)s)"
        )
        return text % {
            "share": _pct(item["share"]),
            "n": item["n"],
            "p": f"{item['p']:.1g}",
            "low": _pct(item["low"]),
            "high": _pct(item["high"]),
        }
    measured = TIME_SOURCES.get(item.get("source"), item.get("source", ""))
    if kind == "fast":
        text = _("fast: median time %(seconds)s s (%(measured)s; flag below %(limit)s s)")
        return text % {
            "seconds": _seconds(item["seconds"]),
            "measured": measured,
            "limit": _seconds(item["limit"]),
        }
    if kind == "quicker":
        text = _(
            "quicker than most: median time %(seconds)s s (%(measured)s; pool median %(pool)s s)"
        )
        return text % {
            "seconds": _seconds(item["seconds"]),
            "measured": measured,
            "pool": _seconds(item["pool"]),
        }
    return str(item)


def flag_text(items, english: str = "") -> str:
    """The items joined, or the stored English text when there are none (older reports)."""
    if not items or not isinstance(items, list):
        return english
    return "; ".join(describe(item) for item in items)
