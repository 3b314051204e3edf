"""Shared client for OpenAI-compatible chat-completions endpoints (OpenAI, vLLM, Ollama, llama.cpp).

One call = one chat completion with retries: 429, 5xx, timeouts, dropped connections and
malformed bodies are retried with exponential backoff (honouring Retry-After); other errors
(400, 401, 404 …) fail at once. A cross-process slot limiter bounds concurrent requests per
endpoint, so several workers together never exceed an endpoint's limit.

Every request goes through `h2htalk.egress`: the base URL is checked before each call and each
new connection resolves, checks and pins the host's address (LLM_ALLOWED_ENDPOINTS); redirects
are not followed. A refused endpoint fails at once (not retried) with a message naming the rule.

openai and tenacity are imported by the first call, not with this module: the models and every
page import it (for `Endpoint`), and a process that never calls an endpoint should not pay for
them at start-up (tests/test_startup.py).
"""

import functools
import json
import os
import random
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING

from django.core.cache import cache

from . import egress

if TYPE_CHECKING:
    import openai
    from tenacity import RetryCallState


@functools.cache
def retryable() -> tuple[type[BaseException], ...]:
    """The errors worth another attempt."""
    import openai

    return (
        openai.RateLimitError,
        openai.InternalServerError,
        openai.APITimeoutError,
        openai.APIConnectionError,
        openai.APIResponseValidationError,
        json.JSONDecodeError,  # a 200 whose body is not JSON
    )


@dataclass(frozen=True)
class Endpoint:
    base_url: str
    model: str
    api_key_env: str = ""
    timeout: float = 60.0
    max_concurrency: int = 4
    params: dict = field(default_factory=dict, hash=False, compare=False)

    def api_key(self) -> str:
        """Keys live only in the environment; local servers accept any placeholder."""
        if self.api_key_env:
            key = os.environ.get(self.api_key_env, "")
            if not key:
                raise LLMError(f"environment variable {self.api_key_env} is not set", False)
            return key
        return "not-needed"


@dataclass
class ChatResult:
    text: str
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: int
    attempts: int


class LLMError(Exception):
    def __init__(self, message: str, retryable: bool, status: int | None = None, attempts=1):
        super().__init__(message)
        self.retryable = retryable
        self.status = status
        self.attempts = attempts


_clients: dict[tuple, "openai.OpenAI"] = {}
_clients_lock = threading.Lock()


def client_for(endpoint: Endpoint) -> "openai.OpenAI":
    import openai

    key = (endpoint.base_url, endpoint.api_key(), endpoint.timeout)
    with _clients_lock:
        if key not in _clients:
            _clients[key] = openai.OpenAI(
                base_url=endpoint.base_url,
                api_key=key[1],
                timeout=endpoint.timeout,
                max_retries=0,  # retries are ours, so Retry-After and budgets are honoured
                http_client=openai.DefaultHttpxClient(
                    # Connections resolve, check and pin the host (egress); a redirect is an
                    # error, never followed to wherever it points.
                    transport=egress.GuardedTransport(limits=openai.DEFAULT_CONNECTION_LIMITS),
                    follow_redirects=False,
                ),
            )
        return _clients[key]


def retry_after_seconds(error: BaseException) -> float | None:
    response = getattr(error, "response", None)
    headers = getattr(response, "headers", None) or {}
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


class BackoffWait:
    """Retry-After when the server sends it, else exponential backoff with jitter; capped."""

    def __init__(self, base: float = 1.0, cap: float = 60.0):
        self.base, self.cap = base, cap

    def __call__(self, state: "RetryCallState") -> float:
        error = state.outcome.exception() if state.outcome else None
        hinted = retry_after_seconds(error) if error else None
        if hinted is not None:
            return min(hinted, self.cap)
        delay = self.base * 2 ** (state.attempt_number - 1)
        return min(self.cap, delay * (0.5 + random.random() / 2))


def chat(
    endpoint: Endpoint,
    messages: list[dict],
    params: dict | None = None,
    *,
    max_attempts: int = 5,
    backoff: BackoffWait | None = None,
    sleep=time.sleep,
) -> ChatResult:
    """One chat completion with retries; raises LLMError when it finally fails."""
    import openai
    from tenacity import Retrying, retry_if_exception, stop_after_attempt

    request = {**endpoint.params, **(params or {})}
    try:
        egress.check_url(endpoint.base_url)
    except egress.EgressError as error:
        raise LLMError(f"endpoint refused: {error}", False) from error
    client = client_for(endpoint)
    retrying = Retrying(
        retry=retry_if_exception(lambda e: isinstance(e, retryable())),
        stop=stop_after_attempt(max_attempts),
        wait=backoff or BackoffWait(),
        sleep=sleep,
        reraise=True,
    )
    started = time.monotonic()
    attempts = 0
    try:
        for attempt in retrying:
            with attempt:
                attempts = attempt.retry_state.attempt_number
                with endpoint_slot(endpoint):
                    completion = client.chat.completions.create(
                        model=endpoint.model, messages=messages, **request
                    )
    except egress.EgressError as error:  # raised by the transport when connecting
        raise LLMError(f"endpoint refused: {error}", False, None, attempts) from error
    except openai.APIStatusError as error:
        raise _status_error(error, attempts) from error
    except retryable() as error:
        raise LLMError(f"{type(error).__name__}: {_short(error)}", True, None, attempts) from error
    except openai.OpenAIError as error:
        raise LLMError(f"{type(error).__name__}: {_short(error)}", False, None, attempts) from error
    if not getattr(completion, "choices", None):
        raise LLMError("the response has no choices", False, None, attempts)
    choice = completion.choices[0]
    usage = completion.usage
    return ChatResult(
        text=choice.message.content or "",
        finish_reason=choice.finish_reason or "",
        prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
        completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
        latency_ms=round((time.monotonic() - started) * 1000),
        attempts=attempts,
    )


def _status_error(error: "openai.APIStatusError", attempts: int) -> LLMError:
    """The LLMError for an HTTP error answer; a redirect says where to (it is not followed)."""
    if 300 <= error.status_code < 400:
        where = error.response.headers.get("location", "")
        return LLMError(
            f"HTTP {error.status_code}: the endpoint redirects to {where[:200]!r}; "
            "redirects are not followed (give the final URL as the base URL)",
            False,
            error.status_code,
            attempts,
        )
    return LLMError(
        f"HTTP {error.status_code}: {_short(error)}",
        isinstance(error, retryable()),
        error.status_code,
        attempts,
    )


def _short(error: BaseException, limit: int = 300) -> str:
    text = str(error)
    return text if len(text) <= limit else text[:limit] + "…"


@contextmanager
def endpoint_slot(endpoint: Endpoint, lease_seconds: float | None = None, poll: float = 0.05):
    """Hold one of the endpoint's `max_concurrency` slots (shared through the cache)."""
    # A slot outlives a crashed holder only until its lease ends: one request's timeout.
    lease = int(lease_seconds or endpoint.timeout + 5)
    token = uuid.uuid4().hex
    slots = [f"llm-slot:{endpoint.base_url}:{i}" for i in range(max(1, endpoint.max_concurrency))]
    while True:
        for slot in slots:
            if cache.add(slot, token, lease):
                try:
                    yield
                finally:
                    if cache.get(slot) == token:
                        cache.delete(slot)
                return
        time.sleep(poll)
