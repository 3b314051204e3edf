"""When Redis is away: the pages that need only the database keep working.

Redis carries the cache (sessions' cached copies, the login throttle's budgets, live job
progress, heartbeats) and Celery's broker. When it stops answering:
- sessions are read from and written to the database alone (`SessionStore`, the settings'
  SESSION_ENGINE): the database always held every session (cached_db), the cache only a copy;
- the login throttle counts in the database cache table (`throttle_cache`): its budgets keep
  holding, counted afresh for the outage (at most one more budget's worth of attempts per
  switch);
- a job's page shows the progress last written to the database;
- anything else that needs Redis (sending a background task, a write that must reach the cache)
  answers 503 with Retry-After, as for a database outage (h2htalk.middleware), never a 500.

Noticing it costs one failed connection (a refused connection fails at once; a silent host after
REDIS_CONNECT_TIMEOUT): after that the process goes straight to the database for
`RETRY_SECONDS`, then tries Redis again, so it is used again within seconds of its return,
without a restart.

Stale copies. Keys this process could not write or delete in Redis (a session that changed or
ended during the outage) are deleted from Redis as soon as it answers again, before this
process reads any session from it: a logout during the outage stays a logout. (Another process
could read such a copy before this one deletes it, within the first seconds after Redis
returns — only when Redis kept its data through the outage, i.e. was unreachable, not
restarted.)
"""

import logging
import threading
import time

from django.conf import settings
from django.contrib.sessions.backends.cached_db import SessionStore as CachedDBStore
from django.core.cache import caches

logger = logging.getLogger(__name__)

RETRY_SECONDS = 5.0
FALLBACK = "fallback"  # the database cache's alias (settings.CACHES, when Redis is the default)

_lock = threading.Lock()
_down_until = 0.0
_pending_deletes: set[str] = set()


def errors() -> tuple[type[BaseException], ...]:
    """The exceptions that mean "Redis is not answering" (the cache's and the broker's)."""
    found: list[type[BaseException]] = []
    try:
        import redis.exceptions

        found += [redis.exceptions.ConnectionError, redis.exceptions.TimeoutError]
    except ImportError:  # no Redis client installed: no Redis to lose
        pass
    try:
        import kombu.exceptions

        found.append(kombu.exceptions.OperationalError)  # sending a task without a broker
    except ImportError:
        pass
    return tuple(found)


def redis_is_down() -> bool:
    return time.monotonic() < _down_until


def note_down(error: BaseException) -> None:
    global _down_until
    if not redis_is_down():
        logger.warning(
            "Redis is not answering (%s): using the database for %.0f s", error, RETRY_SECONDS
        )
    _down_until = time.monotonic() + RETRY_SECONDS


def _flush_pending() -> None:
    """Delete the session keys this process could not write or delete during the outage."""
    if not _pending_deletes:
        return
    with _lock:
        keys = list(_pending_deletes)
        _pending_deletes.clear()
    if keys:
        try:
            caches[settings.SESSION_CACHE_ALIAS].delete_many(keys)
        except errors():
            with _lock:
                _pending_deletes.update(keys)
            raise


def call(target, method: str, *args, fallback=None, stale_key: str | None = None):
    """`target.<method>(*args)` (a cache, or a module that uses it), or `fallback` when Redis
    is down (`stale_key`: a session key that must not survive in Redis if this write or delete
    could not reach it)."""
    if redis_is_down():
        if stale_key is not None:
            with _lock:
                _pending_deletes.add(stale_key)
        return fallback
    try:
        _flush_pending()
        return getattr(target, method)(*args)
    except errors() as error:
        note_down(error)
        if stale_key is not None:
            with _lock:
                _pending_deletes.add(stale_key)
        return fallback


def throttle_cache():
    """The cache the login throttle counts in: the default one (Redis), or the database cache
    while Redis is down."""
    if redis_is_down() and FALLBACK in settings.CACHES:
        return caches[FALLBACK]
    return caches["default"]


class _TolerantCache:
    """The session cache seen through `call`: a read that fails is a miss (the database
    answers), a write or delete that fails is remembered as a stale key."""

    def __init__(self, cache):
        self.cache = cache

    def get(self, key, default=None):
        return call(self.cache, "get", key, default, fallback=default)

    def set(self, key, value, timeout=None):
        call(self.cache, "set", key, value, timeout, stale_key=key)

    def delete(self, key):
        call(self.cache, "delete", key, stale_key=key)

    def __contains__(self, key):
        return bool(call(self.cache, "has_key", key, fallback=False))


class SessionStore(CachedDBStore):
    """Django's cached_db sessions that carry on from the database while the cache is away."""

    def __init__(self, session_key=None):
        super().__init__(session_key)
        self._cache = _TolerantCache(self._cache)


def _reset_for_tests() -> None:
    global _down_until
    _down_until = 0.0
    _pending_deletes.clear()
