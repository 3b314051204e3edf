"""One attempt to deliver: sign, post, log; then the next attempt's delay, if any.

The URL goes through the LLM endpoints' allow-list (`h2htalk.egress`, setting
LLM_ALLOWED_ENDPOINTS) at registration and again here: the host is resolved and every address
checked before the attempt (a refused address fails the delivery at once, no retry, nothing
sent), and the connection itself goes through `GuardedTransport`, which resolves, checks and
pins the address again (DNS rebinding). No redirect is followed: a 3xx is a failed attempt.

Retries: an attempt that gets no 2xx answer is tried again after WEBHOOK_RETRY_BASE_SECONDS ×
2^(n-1) (n = attempts so far), up to WEBHOOK_MAX_ATTEMPTS attempts in all; a delivery re-sent
by hand makes one attempt. The secret is never logged; the log keeps the status, duration,
error and the first EXCERPT characters of the answer.
"""

import json
import time

import httpx2
from django.conf import settings
from django.db.models import F
from django.utils import timezone

from h2htalk import egress

from .models import Attempt, Delivery
from .signing import HEADER, header_value

EXCERPT = 500
USER_AGENT = "H2HTalk-Webhooks/1"


class Refused(Exception):
    """The endpoint's address is not allowed (egress); nothing was sent."""


def body_of(delivery: Delivery) -> bytes:
    return json.dumps(delivery.payload, ensure_ascii=False, separators=(",", ":")).encode()


def _post(delivery: Delivery, body: bytes) -> httpx2.Response:
    url = delivery.endpoint.url
    try:
        host, port = egress.check_url(url)
        egress.checked_addresses(host, port)
    except egress.EgressError as error:
        raise Refused(str(error)) from None
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        HEADER: header_value(delivery.endpoint.secret, body),
        "X-H2HTalk-Event": delivery.event,
        "X-H2HTalk-Delivery": str(delivery.event_id),
    }
    transport = egress.GuardedTransport()
    timeout = settings.WEBHOOK_TIMEOUT_SECONDS
    with httpx2.Client(transport=transport, follow_redirects=False, timeout=timeout) as client:
        return client.post(url, content=body, headers=headers)


def attempt(delivery: Delivery, by_hand: bool = False) -> tuple[Attempt, bool]:
    """Make one attempt and log it; (the attempt, whether to try again later)."""
    started, clock = timezone.now(), time.perf_counter()
    status, error, excerpt, refused = None, "", "", False
    try:
        response = _post(delivery, body_of(delivery))
        status, excerpt = response.status_code, response.text[:EXCERPT]
    except Refused as problem:
        error, refused = f"refused: {problem}", True
    except (httpx2.HTTPError, OSError) as problem:
        error = f"{type(problem).__name__}: {problem}"[:2000]
    Delivery.objects.filter(pk=delivery.pk).update(attempts=F("attempts") + 1)
    delivery.refresh_from_db(fields=["attempts"])
    logged = Attempt.objects.create(
        delivery=delivery,
        number=delivery.attempts,
        by_hand=by_hand,
        started_at=started,
        status_code=status,
        duration_ms=int((time.perf_counter() - clock) * 1000),
        error=error,
        response_excerpt=excerpt,
    )
    again = not logged.ok and not refused and not by_hand
    again = again and delivery.attempts < settings.WEBHOOK_MAX_ATTEMPTS
    state = (
        Delivery.State.SUCCEEDED
        if logged.ok
        else (Delivery.State.PENDING if again else Delivery.State.FAILED)
    )
    Delivery.objects.filter(pk=delivery.pk).update(state=state)
    delivery.state = state
    return logged, again


def backoff_seconds(attempts: int) -> float:
    """The wait before attempt `attempts + 1`."""
    return settings.WEBHOOK_RETRY_BASE_SECONDS * 2 ** (attempts - 1)
