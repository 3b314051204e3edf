"""Signing deliveries and checking a signature (what a receiver does; README "Webhooks").

Header: `X-H2HTalk-Signature: t=<unix seconds>,v1=<hex>`, where hex is HMAC-SHA256 with the
endpoint's secret over `<t>.<raw body>` (the bytes as received). A receiver recomputes it,
compares in constant time and refuses a timestamp further than the replay window
(`TOLERANCE_SECONDS`, 5 minutes) from its clock, so a captured request cannot be replayed later.
Plain standard library, so a receiver can copy it.
"""

import hashlib
import hmac
import time

HEADER = "X-H2HTalk-Signature"
TOLERANCE_SECONDS = 300


class SignatureError(ValueError):
    pass


def signature(secret: str, timestamp: int, body: bytes) -> str:
    message = f"{timestamp}.".encode() + body
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def header_value(secret: str, body: bytes, timestamp: int | None = None) -> str:
    timestamp = int(time.time()) if timestamp is None else timestamp
    return f"t={timestamp},v1={signature(secret, timestamp, body)}"


def verify(
    secret: str, header: str, body: bytes, tolerance: int = TOLERANCE_SECONDS, now=None
) -> int:
    """Check a delivery's signature header against its raw body; its timestamp, or
    SignatureError."""
    parts = dict(part.split("=", 1) for part in (header or "").split(",") if "=" in part)
    try:
        timestamp = int(parts["t"])
        given = parts["v1"]
    except (KeyError, ValueError):
        raise SignatureError("malformed signature header") from None
    now = time.time() if now is None else now
    if abs(now - timestamp) > tolerance:
        raise SignatureError("timestamp outside the replay window")
    if not hmac.compare_digest(signature(secret, timestamp, body), given):
        raise SignatureError("signature does not match")
    return timestamp
