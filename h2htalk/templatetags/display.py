"""Display names, human units and statistic meanings for every template (registered as
builtins in settings.TEMPLATES, so no template needs ``{% load %}``)."""

from django import template
from django.utils.html import format_html
from django.utils.translation import gettext_lazy

from h2htalk import display
from h2htalk.meanings import MEANINGS, meaning_rows
from scoring.agreement.flag_text import flag_text

register = template.Library()

# Pages show names in their language; frozen documents and files keep the English of h2htalk.display's
# *_name functions.
register.filter("subtask_name", display.subtask_label)
register.filter("dimension_name", display.dimension_label)
register.filter("risk_name", display.risk_label)
register.filter("scenario_language", display.language_label)
register.filter("group_name", display.group_label)
register.filter("scenario_name", display.scenario_label)
register.filter("label_name", display.label_title)
register.filter("importance", display.importance_name)
register.filter("flag_name", display.flag_label)
register.filter("duration", display.duration)
register.filter("duration_ms", display.duration_ms)
register.filter("percent", display.percent)
register.filter("share_of", display.share_of)
register.filter("generation", display.generation_summary)
register.filter("timestamp", display.timestamp)
register.filter("flag_text", lambda items, english="": flag_text(items, english))


@register.simple_tag
def share(value, base, noun=""):
    """`share_of` with a noun: {% share 0.25 80 "comparison" %} → "20 of 80 comparisons (25%)"."""
    return display.share_of(value, base, noun)


MEANINGS_CAPTION = gettext_lazy("What each figure means")


@register.inclusion_tag("_stat_meanings.html")
def meanings(*keys, caption=MEANINGS_CAPTION):
    """A table of one-line meanings for the statistics `keys` (see h2htalk.meanings)."""
    return {"rows": meaning_rows(keys), "caption": caption}


@register.simple_tag
def meaning(key):
    """The one-line meaning of statistic `key`, inline (for a figure shown in a sentence)."""
    return format_html('<span class="muted" data-meaning="{}">{}</span>', key, MEANINGS[key][1])


@register.inclusion_tag("_pagination.html")
def pagination(page, query="", target=""):
    """Page links for a Django `Page`: first, previous, numbers around the current one (with
    gaps: Paginator.ELLIPSIS), next, last. `query`: the filters, urlencoded, kept on every
    link; `target`: an htmx target the links load into (the page itself without one)."""
    numbers = []
    if page.paginator.num_pages > 1:
        numbers = list(page.paginator.get_elided_page_range(page.number, on_each_side=2))
    prefix = f"?{query}&page=" if query else "?page="
    return {
        "page": page,
        "numbers": numbers,
        "prefix": prefix,
        "target": target,
        "gap": page.paginator.ELLIPSIS,
    }
