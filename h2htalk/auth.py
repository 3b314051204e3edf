"""Login with throttling: after repeated failures for a username or from an address, further
attempts are refused for a while (pages and the API token endpoint alike)."""

import hashlib

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.core.cache import cache
from django.core.exceptions import ValidationError
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.exceptions import Throttled


def _keys(username: str, address: str) -> list[str]:
    # Hashed: a username is user input (any length, spaces, control characters).
    name = hashlib.sha256(username.strip().lower().encode()).hexdigest()[:32]
    return [f"login-fail:user:{name}", f"login-fail:ip:{address}"]


def client_address(request) -> str:
    return request.META.get("REMOTE_ADDR", "unknown")


def locked_for(username: str, address: str) -> int:
    """Seconds left of a lock-out (0 when attempts are allowed)."""
    limit = settings.LOGIN_FAILURE_LIMIT
    for key in _keys(username, address):
        if (cache.get(key) or 0) >= limit:
            return settings.LOGIN_LOCKOUT_SECONDS
    return 0


def record_failure(username: str, address: str) -> None:
    for key in _keys(username, address):
        if not cache.add(key, 1, settings.LOGIN_LOCKOUT_SECONDS):
            try:
                cache.incr(key)
            except ValueError:  # expired between add and incr
                cache.add(key, 1, settings.LOGIN_LOCKOUT_SECONDS)


def clear_failures(username: str, address: str) -> None:
    cache.delete_many(_keys(username, address))


def lockout_message(seconds: int) -> str:
    minutes = max(1, round(seconds / 60))
    return f"Too many failed attempts. Try again in {minutes} minute{'s' if minutes > 1 else ''}."


class ThrottledAuthenticationForm(AuthenticationForm):
    error_messages = {
        **AuthenticationForm.error_messages,
        "invalid_login": "Your username and password did not match. Please try again.",
    }

    def clean(self):
        username = self.data.get("username", "")
        address = client_address(self.request)
        seconds = locked_for(username, address)
        if seconds:
            raise ValidationError(lockout_message(seconds), code="locked")
        try:
            cleaned = super().clean()
        except ValidationError:
            record_failure(username, address)
            raise
        clear_failures(username, address)
        return cleaned


class LoginView(auth_views.LoginView):
    form_class = ThrottledAuthenticationForm


class ObtainToken(ObtainAuthToken):
    """POST username + password → token; throttled like the login page."""

    def post(self, request, *args, **kwargs):
        data = request.data if isinstance(request.data, dict) else {}  # a JSON array: no name
        username = str(data.get("username", ""))
        address = client_address(request)
        seconds = locked_for(username, address)
        if seconds:
            raise Throttled(wait=seconds, detail=lockout_message(seconds))
        serializer = self.get_serializer(data=request.data)
        if not serializer.is_valid():
            record_failure(username, address)
        return super().post(request, *args, **kwargs)
