"""One display name per concept and human units, for every page.

Internal codes (``preference5``, ``dialogue_base``, memory importance 2) and raw units (ms,
proportions) stay in the data, the API and the exports; pages show them through these
functions, registered as template filters without ``{% load %}`` (h2htalk/templatetags/display.py).
"""

import math
from datetime import UTC, datetime
from numbers import Real

from django.utils.translation import gettext as _
from django.utils.translation import ngettext, pgettext_lazy

from annotation.models import RATING_DIMENSIONS
from scenarios.taxonomy import MEMORY_IMPORTANCE, Dimension, Subtask

MISSING = "—"

DIMENSION_NAMES = dict(Dimension.choices)
SUBTASK_NAMES = dict(Subtask.choices)
RATING_NAMES = dict(RATING_DIMENSIONS)

# What the annotator's pages show, in the page's language (the constants above stay English:
# judge prompts, release documents and exports use them).
SUBTASK_LABELS = {
    "dialogue_base": pgettext_lazy("subtask", "Dialogue · base"),
    "dialogue_emotion": pgettext_lazy("subtask", "Dialogue · emotional support"),
    "dialogue_schedule": pgettext_lazy("subtask", "Dialogue · weaves in today's plans"),
    "recollection_synthesize": pgettext_lazy("subtask", "Recollection · extract memory"),
    "recollection_refine": pgettext_lazy("subtask", "Recollection · refine memory"),
    "recollection_initialize": pgettext_lazy("subtask", "Recollection · proactive message"),
    "itinerary_basic": pgettext_lazy("subtask", "Itinerary · day overview"),
    "itinerary_middle": pgettext_lazy("subtask", "Itinerary · up to 5 timed items"),
    "itinerary_advanced": pgettext_lazy("subtask", "Itinerary · detailed sub-schedule"),
    "itinerary_feedback": pgettext_lazy("subtask", "Itinerary · reply to feedback"),
    "itinerary_initialize": pgettext_lazy("subtask", "Itinerary · proactive greeting"),
}
IMPORTANCE_LABELS = {
    0: pgettext_lazy("memory importance", "~a week"),
    1: pgettext_lazy("memory importance", "~three months"),
    2: pgettext_lazy("memory importance", "long-term"),
}
assert set(SUBTASK_LABELS) == set(SUBTASK_NAMES) and set(IMPORTANCE_LABELS) == set(
    MEMORY_IMPORTANCE
)


DIMENSION_LABELS = {
    "dialogue": pgettext_lazy("dimension", "Companion Dialogue"),
    "recollection": pgettext_lazy("dimension", "Companion Recollection"),
    "itinerary": pgettext_lazy("dimension", "Companion Itinerary"),
}
RISK_LABELS = {
    "none": pgettext_lazy("risk level", "None"),
    "low": pgettext_lazy("risk level", "Low"),
    "medium": pgettext_lazy("risk level", "Medium"),
    "high": pgettext_lazy("risk level", "High (e.g. self-harm)"),
}
LANGUAGE_LABELS = {
    "zh": pgettext_lazy("language", "Chinese"),
    "en": pgettext_lazy("language", "English"),
}
# A scenario's flags (scenarios.taxonomy.FLAG_LABELS), and the groups of comparisons a release
# forms by flag value (scoring.releases.flags.LABELS), in the page's language.
FLAG_NAMES = {
    "implicit_need": pgettext_lazy("scenario flag", "implicit need"),
    "evolving_need": pgettext_lazy("scenario flag", "evolving need"),
    "risk_level": pgettext_lazy("scenario flag", "safety risk"),
}
FLAG_GROUP_LABELS = {
    "implicit_need": pgettext_lazy("flag group", "Implicit need"),
    "evolving_need": pgettext_lazy("flag group", "Evolving need"),
    "risk_level": pgettext_lazy("flag group", "Risk level"),
    "explicit": pgettext_lazy("flag group", "explicit need"),
    "implicit": pgettext_lazy("flag group", "implicit need"),
    "stable": pgettext_lazy("flag group", "stable need"),
    "evolving": pgettext_lazy("flag group", "evolving need"),
    "none": pgettext_lazy("flag group", "risk none"),
    "low": pgettext_lazy("flag group", "risk low"),
    "medium": pgettext_lazy("flag group", "risk medium"),
    "high": pgettext_lazy("flag group", "risk high (e.g. self-harm)"),
}
assert set(DIMENSION_LABELS) == set(DIMENSION_NAMES)


def subtask_label(code: str) -> str:
    """A subtask's name in the page's language (the code when unknown)."""
    return str(SUBTASK_LABELS.get(code, code))


def dimension_label(code: str) -> str:
    return str(DIMENSION_LABELS.get(code, code))


def risk_label(code: str) -> str:
    return str(RISK_LABELS.get(code, code))


def language_label(code: str) -> str:
    return str(LANGUAGE_LABELS.get(code, code))


def flag_label(code: str) -> str:
    """A scenario flag's name ("implicit need") in the page's language."""
    return str(FLAG_NAMES.get(code, code))


# The agreement labels of h2htalk.stats.agreement (see its package docstring).
LABEL_NAMES = {
    "preference5": "5-point preference",
    "winner3": "3-way winner (A / tie / B)",
    "outcome4": "4-way outcome (A / tie / B / both unacceptable)",
    "screen5": "5-point preference as shown (left / right)",
    "screen3": "3-way winner as shown (left / tie / right)",
}


LABEL_TITLES = {
    "preference5": pgettext_lazy("agreement label", "5-point preference"),
    "winner3": pgettext_lazy("agreement label", "3-way winner (A / tie / B)"),
    "outcome4": pgettext_lazy("agreement label", "4-way outcome (A / tie / B / both unacceptable)"),
    "screen5": pgettext_lazy("agreement label", "5-point preference as shown (left / right)"),
    "screen3": pgettext_lazy("agreement label", "3-way winner as shown (left / tie / right)"),
}
assert set(LABEL_TITLES) == set(LABEL_NAMES)


def label_title(code: str) -> str:
    """`label_name` in the page's language (pages; the exports keep `label_name`)."""
    if code in LABEL_TITLES:
        return str(LABEL_TITLES[code])
    prefix, _sep, dimension = code.partition("_")
    if dimension in RATING_NAMES and prefix in ("rating", "a", "b"):
        from annotation.forms import ASPECT_LABELS  # the rating page's names of the aspects

        name = ASPECT_LABELS[dimension]
        if prefix == "rating":
            return _("%(name)s rating") % {"name": name}
        return _("%(name)s rating of %(side)s") % {"name": name, "side": prefix.upper()}
    return code


def label_name(code: str) -> str:
    """The name of an agreement label: ``rating_empathy`` → "Empathy rating", ``a_empathy`` →
    "Empathy rating of A"; an unknown code is shown as it is."""
    if code in LABEL_NAMES:
        return LABEL_NAMES[code]
    prefix, _, dimension = code.partition("_")
    if dimension in RATING_NAMES:
        name = f"{RATING_NAMES[dimension]} rating"
        return {"rating": name, "a": f"{name} of A", "b": f"{name} of B"}.get(prefix, code)
    return code


def group_name(code: str) -> str:
    """The name of a group of comparisons: "overall", a dimension or a subtask code."""
    if code == "overall":
        return "All comparisons"
    return SUBTASK_NAMES.get(code) or DIMENSION_NAMES.get(code) or code


def group_label(code: str) -> str:
    """`group_name` in the page's language (pages; frozen documents and files keep
    `group_name`)."""
    if code == "overall":
        return _("All comparisons")
    for labels in (SUBTASK_LABELS, DIMENSION_LABELS, FLAG_GROUP_LABELS):
        if code in labels:
            return str(labels[code])
    return code


def scenario_name(scenario) -> str:
    """A scenario as pages name it: "demo-001 · Dialogue · base" (its str() keeps the codes)."""
    subtask = SUBTASK_NAMES.get(scenario.subtask, scenario.subtask)
    return f"{scenario.external_id or scenario.pk} · {subtask}"


def scenario_label(scenario) -> str:
    """`scenario_name` in the page's language: "demo-001 · 对话 · 基础"."""
    return f"{scenario.external_id or scenario.pk} · {subtask_label(scenario.subtask)}"


def importance_name(value) -> str:
    """Memory importance 0 / 1 / 2 as how long the memory matters."""
    if value in IMPORTANCE_LABELS:
        return str(IMPORTANCE_LABELS[value])
    return MISSING if value is None else str(value)


def _number(value) -> float | None:
    if value is None or isinstance(value, bool) or not isinstance(value, Real | str):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def duration(seconds) -> str:
    """Seconds for a reader, in the page's language: "45.5 s", "2 min 5 s", "1 h 4 min"
    ("45.5 秒", "2 分 5 秒", "1 小时 4 分")."""
    number = _number(seconds)
    if number is None:
        return MISSING
    if number < 59.95:
        return _("%(seconds).1f s") % {"seconds": number}
    whole = round(number)
    if whole < 3600:
        minutes, rest = divmod(whole, 60)
        if rest:
            return _("%(minutes)d min %(seconds)d s") % {"minutes": minutes, "seconds": rest}
        return _("%(minutes)d min") % {"minutes": minutes}
    hours, rest = divmod(whole, 3600)
    minutes = round(rest / 60)
    if minutes:
        return _("%(hours)d h %(minutes)d min") % {"hours": hours, "minutes": minutes}
    return _("%(hours)d h") % {"hours": hours}


def duration_ms(milliseconds) -> str:
    """A duration stored in milliseconds, shown as `duration` shows seconds."""
    number = _number(milliseconds)
    return MISSING if number is None else duration(number / 1000)


def percent(share) -> str:
    """A share (0–1) as a whole percent; one decimal where rounding would show 0% or 100% for
    a share that is neither."""
    number = _number(share)
    if number is None:
        return MISSING
    value = number * 100
    text = f"{value:.0f}%"
    if text in ("0%", "100%") and 0 < number < 1:
        text = f"{value:.1f}%"
    return text


def share_of(share, base, noun: str = "") -> str:
    """A share with its base, as a count where the share is one: "21 of 81 comparisons (26%)";
    "26% of 81 comparisons" where it is not (a tie counted half, a mean). In the page's
    language; `noun` is one of BASE_NOUNS (another noun is shown as given)."""
    fraction, total = _number(share), _number(base)
    if fraction is None or total is None:
        return MISSING
    base_count = round(total)
    if noun in BASE_NOUNS:
        base_text = BASE_NOUNS[noun](base_count) % {"n": base_count}
    elif noun:
        base_text = f"{base_count} {noun if base_count == 1 else plural(noun)}"
    else:
        base_text = str(base_count)
    count = fraction * base_count
    if abs(count - round(count)) < 1e-6:
        numbers = {"count": round(count), "base": base_text, "percent": percent(fraction)}
        return _("%(count)s of %(base)s (%(percent)s)") % numbers
    return _("%(percent)s of %(base)s") % {"percent": percent(fraction), "base": base_text}


# The nouns a share's base is counted in on the pages.
BASE_NOUNS = {
    "comparison": lambda n: ngettext("%(n)s comparison", "%(n)s comparisons", n),
    "vote": lambda n: ngettext("%(n)s vote", "%(n)s votes", n),
}


def plural(noun: str) -> str:
    return noun[:-1] + "ies" if noun.endswith("y") and noun[-2:-1] not in "aeiou" else noun + "s"


def generation_summary(response) -> str:
    """What a response's generation cost: "212 tokens · 3.4 s · stop"; "imported" for a
    response brought in from a file without those figures (rather than "0 tokens · ? ms")."""
    parts = []
    if response.completion_tokens:
        count = response.completion_tokens
        parts.append(ngettext("%(count)d token", "%(count)d tokens", count) % {"count": count})
    if response.latency_ms is not None:
        parts.append(duration_ms(response.latency_ms))
    if response.finish_reason:
        parts.append(response.finish_reason)
    if not parts:
        return _("imported") if response.run.kind == "import" else _("no generation data")
    return " · ".join(parts)


def timestamp(value) -> str:
    """An ISO 8601 time stored in a document as "2026-12-05 07:46 UTC" (as given when it
    cannot be read)."""
    try:
        moment = datetime.fromisoformat(str(value))
    except ValueError:
        return str(value)
    if moment.tzinfo is not None:
        return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return moment.strftime("%Y-%m-%d %H:%M")
