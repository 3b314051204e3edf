"""The one heartbeat of background work (Jobs and runs alike) and the one takeover rule.

Why the cache (Redis when a broker is configured) and a thread: an import holds its writes in
one transaction, which would hide a heartbeat written to the database (and a row lock could
block it), and a long phase without progress must still count as alive. So while a job or run
executes, a daemon thread of the executing process writes the time under the work's key every
`interval()` seconds. `stop` (at the end of the work) and Celery's task_postrun (after every
task, for work that ended with an uncaught error) stop it; a killed worker simply stops beating.

The takeover rule (`is_stale`): running work whose last beat, or its start when it has not
beaten yet, is older than JOB_STALE_SECONDS lost its worker. h2htalk.sweeper applies it to Jobs
(restart or fail) and to runs (hand them to a live worker), and h2htalk.runner's `claim` lets a
new executor into a run only under the same rule.
"""

import hashlib
import logging
import threading
import time
from datetime import datetime

from celery.signals import task_postrun
from django.conf import settings
from django.core.cache import cache
from django.db import connections
from django.db.models import Model

logger = logging.getLogger(__name__)

TTL = 24 * 3600


def stale_seconds() -> float:
    """Running work whose heartbeat is older than this lost its worker (JOB_STALE_SECONDS)."""
    return float(settings.JOB_STALE_SECONDS)


def interval() -> float:
    """How often running work beats: a quarter of the stale threshold, at most 5 s."""
    return max(0.2, min(5.0, stale_seconds() / 4))


def is_stale(last_beat: float | None, started_at: datetime | None, now: float) -> bool:
    """The takeover rule: no beat (or, before the first one, no start) for JOB_STALE_SECONDS."""
    since = last_beat
    if since is None:
        since = started_at.timestamp() if started_at else 0.0
    return since < now - stale_seconds()


def namespace() -> str:
    """Ids repeat across databases that share a Redis (test runs, bench): key by database."""
    name = str(connections["default"].settings_dict.get("NAME") or "")
    return hashlib.sha1(name.encode(), usedforsecurity=False).hexdigest()[:8]


def subject(model: type[Model], pk: int) -> str:
    """What beats: one row of a model of background work, e.g. "h2htalk.job:7"."""
    return f"{model._meta.label_lower}:{pk}"


def key(name: str) -> str:
    return f"heartbeat:{namespace()}:{name}"


def beat(name: str) -> None:
    cache.set(key(name), time.time(), TTL)


def last_beats(names) -> dict[str, float]:
    """subject -> time (epoch seconds) of its last beat, for those that have one."""
    keys = {key(name): name for name in names}
    found = cache.get_many(list(keys)) if keys else {}
    return {keys[k]: float(value) for k, value in found.items()}


def forget(name: str) -> None:
    cache.delete(key(name))


_beating: dict[str, tuple[threading.Event, int]] = {}  # subject -> (stop, owner thread)
_lock = threading.Lock()


def _loop(name: str, stop: threading.Event, every: float) -> None:
    try:
        while not stop.wait(every):
            try:
                beat(name)
            except Exception:  # a cache hiccup must not end the work; the next beat retries
                logger.warning("heartbeat of %s failed", name, exc_info=True)
    finally:
        # A beat written to the database cache (no Redis, or Redis away: h2htalk.outage)
        # opened a connection of this thread's own, which nothing else would ever close.
        connections.close_all()


def start(name: str) -> None:
    """Beat now and every `interval()` from a thread of this process, until `stop`."""
    beat(name)
    stop_event = threading.Event()
    with _lock:
        previous = _beating.pop(name, None)
        _beating[name] = (stop_event, threading.get_ident())
    if previous:
        previous[0].set()
    threading.Thread(
        target=_loop, args=(name, stop_event, interval()), name=f"{name}-heartbeat", daemon=True
    ).start()


def stop(name: str, only_this_thread: bool = False) -> None:
    """Stop this process's beating for `name`; with `only_this_thread`, only if this thread
    started it (an executor that was taken over leaves its successor's heartbeat alone)."""
    with _lock:
        entry = _beating.get(name)
        if entry and (not only_this_thread or entry[1] == threading.get_ident()):
            del _beating[name]
        else:
            entry = None
    if entry:
        entry[0].set()


def _stop_beats_of_this_thread(**kwargs) -> None:
    """After every task: work whose task ended without stopping its heartbeat (an uncaught
    error) stops beating, so that the sweeper can deal with it."""
    me = threading.get_ident()
    with _lock:
        mine = [name for name, (_, owner) in _beating.items() if owner == me]
    for name in mine:
        stop(name)


task_postrun.connect(_stop_beats_of_this_thread, weak=False)
