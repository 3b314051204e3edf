"""A database that is away (restarting, failing over) answers 503 with Retry-After, not a 500.

The request did nothing that needs undoing: each view's writes are atomic, so the client can
simply retry (submit is idempotent by item key). API paths get JSON, pages a short text that
htmx shows in place.
"""

import logging

from django.db import InterfaceError, OperationalError
from django.http import HttpResponse, JsonResponse

logger = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 5
MESSAGE = "The database is not reachable right now; nothing was changed. Try again shortly."


class DatabaseUnavailableMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if not isinstance(exception, OperationalError | InterfaceError):
            return None
        logger.warning(
            "database unavailable for %s %s: %s", request.method, request.path, exception
        )
        if request.path.startswith("/api/"):
            response = JsonResponse({"detail": MESSAGE}, status=503)
        else:
            response = HttpResponse(MESSAGE, status=503, content_type="text/plain; charset=utf-8")
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
