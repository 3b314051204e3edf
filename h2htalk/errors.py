"""The error pages (403, 404, 500, 503, and a form refused for its CSRF token) in the site's
layout, each saying why and linking back.

403 and 404 are rendered with the request, so the navigation shows the user's roles. 500 and
503 are rendered without it: they may be answering because the database is away, so nothing on
them may query it (no user, no roles: the bare layout, a link home and, when the browser came
from one of our pages, a link back to it).

The API keeps DRF's JSON errors: DRF answers its own denials before any of this runs.
"""

from urllib.parse import urlsplit

from django.core.exceptions import DisallowedHost
from django.http import HttpResponse
from django.template import loader
from django.utils.functional import Promise
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext_lazy


def back_url(request) -> str | None:
    """The page the browser came from, when it is one of ours and not this one."""
    referer = request.META.get("HTTP_REFERER", "")
    try:
        host = request.get_host()
    except DisallowedHost:
        return None
    ours = url_has_allowed_host_and_scheme(
        referer, allowed_hosts={host}, require_https=request.is_secure()
    )
    if not ours or urlsplit(referer).path == request.path:
        return None
    return referer


def _message(exception) -> str:
    """The exception's own sentence (``PermissionDenied("This page needs …")``), if it has one
    (a URL that matches nothing raises Resolver404 with a dict: the template's text instead)."""
    message = exception.args[0] if exception is not None and exception.args else ""
    return str(message) if isinstance(message, str | Promise) else ""


def page(request, status: int, *, reason: str = "", with_request: bool = True, **context):
    """The error page `<status>.html` with its reason and the links back."""
    context = {"reason": str(reason), "back_url": back_url(request), **context}
    html = loader.render_to_string(f"{status}.html", context, request if with_request else None)
    return HttpResponse(html, status=status)


def permission_denied(request, exception=None):
    return page(request, 403, reason=_message(exception))


CSRF_REASON = gettext_lazy(
    "This form could not be sent: its security token is missing or out of date. That happens "
    "when a page stays open across a log-in or log-out, or cookies are blocked. Go back, reload "
    "the page and send it again."
)


def csrf_failure(request, reason=""):
    """CSRF_FAILURE_VIEW: the 403 page with what to do, not Django's bare page (Django's own
    `reason` names the check that failed; it goes to the log, not to the page)."""
    return page(request, 403, reason=CSRF_REASON)


def page_not_found(request, exception=None):
    return page(request, 404, reason=_message(exception))


def server_error(request):
    return page(request, 500, with_request=False)
