"""Answers for two exceptions a view may raise, instead of Django's own handling.

A database that is away (restarting, failing over) answers 503 with Retry-After, not a 500;
so does Redis (the cache or Celery's broker) where a page cannot do without it (h2htalk.outage:
sessions and the login throttle carry on from the database).
The request did nothing that needs undoing: each view's writes are atomic, so the client can
simply retry (submit is idempotent by item key). API paths get JSON, htmx requests a short
text that htmx shows in place, pages the 503 page in the site's layout (rendered without
touching the database).

A PermissionDenied (a role check, the Django admin) answers with the 403 page and is logged as
the single line Django writes for every 4xx answer ("Forbidden: /path"): a denial is an answer,
not a fault, and Django's own handling of the exception would log it with a traceback.
"""

import logging

from django.core.exceptions import PermissionDenied
from django.db import InterfaceError, OperationalError
from django.http import HttpResponse, JsonResponse
from django.utils.translation import gettext, gettext_lazy, gettext_noop

from . import errors, outage

logger = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 5
# English here (marked for the catalogue), in the request's language in the answer.
MESSAGE = gettext_noop(
    "The database is not reachable right now; nothing was changed. Try again shortly."
)
REDIS_MESSAGE = gettext_lazy(
    "A service this page needs (Redis: background work, live progress) is not reachable right "
    "now. Try again shortly."
)


class DatabaseUnavailableMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if isinstance(exception, OperationalError | InterfaceError):
            what, message = "database", gettext(MESSAGE)
        elif isinstance(exception, outage.errors()):
            outage.note_down(exception)
            what, message = "Redis", str(REDIS_MESSAGE)
        else:
            return None
        logger.warning(
            "%s unavailable for %s %s: %s", what, request.method, request.path, exception
        )
        if request.path.startswith("/api/"):
            response = JsonResponse({"detail": message}, status=503)
        elif request.headers.get("HX-Request") == "true":
            response = HttpResponse(message, status=503, content_type="text/plain; charset=utf-8")
        else:
            retry = request.get_full_path() if request.method == "GET" else None
            response = errors.page(
                request, 503, reason=message, with_request=False, retry_url=retry
            )
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response


class PermissionDeniedMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if isinstance(exception, PermissionDenied):
            return errors.permission_denied(request, exception)
        return None
