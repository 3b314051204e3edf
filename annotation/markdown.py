"""Markdown → sanitised HTML for researcher-written text shown to others (campaign guidelines).

Raw HTML in the Markdown passes through the Markdown converter, so the result is always
cleaned with nh3 against a small allow-list: no scripts, no event handlers, no images (an
external image would report every annotator's address to its host), links only to http(s)
and mailto, and every link opens without the referrer.
"""

import markdown as markdown_lib
import nh3
from django.utils.safestring import SafeString, mark_safe

ALLOWED_TAGS = {
    "p",
    "br",
    "hr",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "strong",
    "em",
    "b",
    "i",
    "u",
    "s",
    "del",
    "code",
    "pre",
    "kbd",
    "blockquote",
    "ul",
    "ol",
    "li",
    "dl",
    "dt",
    "dd",
    "a",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "sup",
    "sub",
}
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "th": {"align"}, "td": {"align"}, "ol": {"start"}}
URL_SCHEMES = {"http", "https", "mailto"}


def render_markdown(text: str) -> SafeString:
    """Markdown (tables, fenced code) as HTML that is safe to put into any page."""
    html = markdown_lib.markdown(
        text or "", extensions=["tables", "fenced_code", "sane_lists"], output_format="html"
    )
    cleaned = nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
    )
    return mark_safe(cleaned)  # noqa: S308 - cleaned by nh3 just above
