"""Django's PostgreSQL backend, whose health check of a kept connection is sent only after the
connection sat idle.

With CONN_HEALTH_CHECKS, Django sends `SELECT 1` before the first statement of every request
on a kept connection: two of the rating cycle's statements (issue 24). A connection that ended
a request cleanly less than IDLE_SECONDS ago is trusted instead, as long as psycopg does not
know it closed or broken; one idle for longer is checked as before. Should the database go away
within those seconds, the request's first statement fails, the answer is the 503 with
Retry-After of `h2htalk.middleware.DatabaseUnavailableMiddleware` (every write is atomic and a
submit idempotent, so the client retries), and Django closes the broken connection when that
request ends, as it does for a connection that breaks during a request.
"""

import time

from django.db.backends.postgresql import base

IDLE_SECONDS = 5.0


class DatabaseWrapper(base.DatabaseWrapper):
    answered_at: float | None = None  # when a request that used the connection last ended

    def close_if_unusable_or_obsolete(self):
        """Django calls this when a request starts and when it ends; at its end, whether the
        request used the connection is `health_check_done` (reset here for the next one)."""
        used = self.connection is not None and self.health_check_done
        super().close_if_unusable_or_obsolete()
        if used and self.connection is not None:
            self.answered_at = time.monotonic()

    def close_if_health_check_failed(self):
        if self._recently_answered():
            self.health_check_done = True
            return
        super().close_if_health_check_failed()

    def _recently_answered(self) -> bool:
        if self.connection is None or self.health_check_done or self.answered_at is None:
            return False
        if self.connection.closed or self.connection.broken:
            return False
        return time.monotonic() - self.answered_at < IDLE_SECONDS
