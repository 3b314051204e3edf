"""Login throttling: one check for every way to log in.

Every password check goes through Django's `authenticate()` — the login page, the Django
admin's login and DRF's `/api/token/` alike — and so through `ThrottledModelBackend`, the only
authentication backend. Before a password is checked, the attempt takes one slot in each of
three failure budgets kept in the default cache, which every worker shares (Redis, or the
database cache table when no Redis is configured; never per-process memory):

- per account and client address, `LOGIN_FAILURE_LIMIT` (5): one client guessing one account;
- per client address, `LOGIN_ADDRESS_FAILURE_LIMIT` (20): one client trying many names;
- per account, `LOGIN_ACCOUNT_FAILURE_LIMIT` (50): many clients guessing one account.

A slot is a numbered cache key taken with `cache.add` (SET NX in Redis, an INSERT on the
primary key in the database cache: atomic across processes), before the password hash is
computed, so concurrent requests on several workers cannot check more passwords than a budget
holds. A wrong password keeps its slots for `LOGIN_LOCKOUT_SECONDS`; a right one gives its
slots back and clears its account-and-address budget. When a budget is full the attempt is
refused without a password check.

Why three budgets. One address can spend at most `LOGIN_FAILURE_LIMIT` of an account's budget,
which is larger (settings refuse otherwise), so failures from one address never lock the
account's owner out elsewhere; spraying many names from one address stops at the address
budget; guessing one account from many addresses stops at the account budget (the owner is
then locked out too until slots expire: the price of stopping a distributed guess).

The client address is REMOTE_ADDR, or, when REMOTE_ADDR is one of `TRUSTED_PROXIES`, the
right-most address of X-Forwarded-For that is not a trusted proxy. IPv6 clients are counted
per /64 (one host usually holds the whole /64).
"""

import contextlib
import functools
import hashlib
import ipaddress
import math
import time

from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import views as auth_views
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils.translation import gettext_lazy, ngettext
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions
from rest_framework.authtoken.views import ObtainAuthToken

from h2htalk import outage
from h2htalk.accounts import names
from h2htalk.roles import remember_roles, with_roles

PREFIX = "login-throttle"


# ---------------------------------------------------------------- client address


@functools.lru_cache(maxsize=8)
def _networks(entries: tuple[str, ...]) -> tuple:
    return tuple(ipaddress.ip_network(entry, strict=False) for entry in entries)


def _ip(value: str):
    try:
        address = ipaddress.ip_address(value.strip())
    except ValueError:
        return None
    mapped = getattr(address, "ipv4_mapped", None)
    return mapped or address


def _trusted(address) -> bool:
    return any(address in network for network in _networks(tuple(settings.TRUSTED_PROXIES)))


def client_address(request) -> str:
    """The address the request came from, through trusted proxies only."""
    meta = request.META
    peer = _ip(meta.get("REMOTE_ADDR", ""))
    if peer is None:
        return "unknown"
    if _trusted(peer):
        hops = meta.get("HTTP_X_FORWARDED_FOR", "").split(",")
        for hop in reversed([hop for hop in hops if hop.strip()]):
            address = _ip(hop)
            if address is None:  # malformed: keep the last hop a trusted proxy vouched for
                break
            peer = address
            if not _trusted(address):
                break
    return str(peer)


def _address_key(address: str) -> str:
    ip = _ip(address)
    if ip is not None and ip.version == 6:
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return address


# ---------------------------------------------------------------- budgets


class Locked(Exception):
    def __init__(self, seconds: int):
        super().__init__(f"locked for {seconds} s")
        self.seconds = seconds


def normalise_username(username: str) -> str:
    """The name as every budget and the user lookup know it (NFKC, case-folded)."""
    return names.fold(username)


def _digest(*parts: str) -> str:
    # Hashed: a username is user input (any length, spaces, control characters).
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:32]


def budgets(username: str, address: str | None) -> list[tuple[str, int]]:
    """(key prefix, limit) of each failure budget an attempt spends from, narrowest first."""
    name = normalise_username(username)
    found = []
    if address is not None:
        where = _address_key(address)
        found.append((f"{PREFIX}:pair:{_digest(name, where)}", settings.LOGIN_FAILURE_LIMIT))
        found.append((f"{PREFIX}:address:{_digest(where)}", settings.LOGIN_ADDRESS_FAILURE_LIMIT))
    found.append((f"{PREFIX}:account:{_digest(name)}", settings.LOGIN_ACCOUNT_FAILURE_LIMIT))
    return found


def _slots(prefix: str, limit: int) -> list[str]:
    return [f"{prefix}:{i}" for i in range(limit)]


def _seconds_left(cache, keys: list[str], now: float) -> int:
    """Until the oldest slot of a full budget frees (its value is its expiry time)."""
    expiries = [v for v in cache.get_many(keys).values() if isinstance(v, int | float)]
    return max(1, math.ceil(min(expiries) - now)) if expiries else 1


class Reservation:
    """The slots one attempt took; kept on failure, given back on success."""

    def __init__(self, cache, slots: list[str], pair_prefix: str | None, pair_limit: int):
        self.cache, self.slots = cache, slots
        self.pair_prefix, self.pair_limit = pair_prefix, pair_limit

    def succeeded(self) -> None:
        keys = list(self.slots)
        if self.pair_prefix:
            keys += _slots(self.pair_prefix, self.pair_limit)
        try:
            self.cache.delete_many(keys)
        except outage.errors() as error:  # Redis went away meanwhile: the slots expire
            outage.note_down(error)


def reserve(username: str, address: str | None) -> Reservation:
    """Take one slot in every budget of this attempt, or raise Locked (taking none). In the
    default cache (Redis), or in the database cache while Redis is down (h2htalk.outage)."""
    store = outage.throttle_cache()
    try:
        return _reserve(store, username, address)
    except outage.errors() as error:
        outage.note_down(error)
        fallback = outage.throttle_cache()
        if fallback is store:
            raise
        return _reserve(fallback, username, address)


def _reserve(cache, username: str, address: str | None) -> Reservation:
    lifetime = settings.LOGIN_LOCKOUT_SECONDS
    now = time.time()
    wanted = budgets(username, address)
    taken = cache.get_many([key for prefix, limit in wanted for key in _slots(prefix, limit)])
    claimed: list[str] = []
    try:
        for prefix, limit in wanted:
            keys = _slots(prefix, limit)
            slot = next(
                (k for k in keys if k not in taken and cache.add(k, now + lifetime, lifetime)),
                None,
            )
            if slot is None:
                raise Locked(_seconds_left(cache, keys, now))
            claimed.append(slot)
    except BaseException:
        if claimed:
            with contextlib.suppress(*outage.errors()):
                cache.delete_many(claimed)
        raise
    pair = wanted[0] if address is not None else (None, 0)
    return Reservation(cache, claimed, *pair)


def spend_address_slot(kind: str, address: str, limit: int, seconds: int) -> None:
    """Take one slot of the per-address budget `kind` (e.g. joins through study links) for
    `seconds`, or raise Locked: the login throttle's slots, for requests that are no login."""
    prefix = f"{PREFIX}:{kind}:{_digest(_address_key(address))}"
    store = outage.throttle_cache()
    try:
        _take_one(store, prefix, limit, seconds)
    except outage.errors() as error:
        outage.note_down(error)
        fallback = outage.throttle_cache()
        if fallback is store:
            raise
        _take_one(fallback, prefix, limit, seconds)


def _take_one(cache, prefix: str, limit: int, seconds: int) -> None:
    now, keys = time.time(), _slots(prefix, limit)
    taken = cache.get_many(keys)
    if not any(k not in taken and cache.add(k, now + seconds, seconds) for k in keys):
        raise Locked(_seconds_left(cache, keys, now))


def lockout_message(seconds: int) -> str:
    minutes = max(1, round(seconds / 60))
    return ngettext(
        "Too many failed attempts. Try again in %(minutes)d minute.",
        "Too many failed attempts. Try again in %(minutes)d minutes.",
        minutes,
    ) % {"minutes": minutes}


def _note_lockout(request, seconds: int) -> None:
    if request is not None:  # DRF wraps the HttpRequest: note it on the one both views see
        getattr(request, "_request", request).login_locked_for = seconds


def lockout_seconds(request) -> int:
    """Seconds of the lock-out that refused this request's login (0: it was not refused)."""
    return getattr(getattr(request, "_request", request), "login_locked_for", 0)


class ThrottledModelBackend(ModelBackend):
    """Django's username/password backend behind the three failure budgets."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if username is None:
            username = kwargs.get(self._username_field())
        if username is None or password is None:
            return None
        address = client_address(request) if request is not None else None
        try:
            reservation = reserve(str(username), address)
        except Locked as locked:
            _note_lockout(request, locked.seconds)
            # PermissionDenied stops authenticate() from trying any other backend.
            raise PermissionDenied(lockout_message(locked.seconds)) from None
        user = self._check_password(str(username), password)
        if user is not None:
            reservation.succeeded()
        return user

    def _check_password(self, username: str, password: str):
        """ModelBackend's check, the user found by their folded name (`names.fold`): `Anna`,
        `anna` and full-width `ａｎｎａ` are one account on every login path."""
        from django.contrib.auth import get_user_model

        User = get_user_model()
        user = User._default_manager.filter(username_key__folded=names.fold(username)).first()
        if user is None:  # a user saved without the signal (a raw insert): the exact name
            user = User._default_manager.filter(**{User.USERNAME_FIELD: username}).first()
        if user is None:
            User().set_password(password)  # as ModelBackend: the same time as a wrong password
            return None
        if user.check_password(password) and self.user_can_authenticate(user):
            return user
        return None

    def get_user(self, user_id):
        """The session's user, with their roles read in the same query (`roles.with_roles`)."""
        from django.contrib.auth import get_user_model

        user = with_roles(get_user_model()._default_manager.filter(pk=user_id)).first()
        if user is None or not self.user_can_authenticate(user):
            return None
        remember_roles(user, user)
        return user

    @staticmethod
    def _username_field() -> str:
        from django.contrib.auth import get_user_model

        return get_user_model().USERNAME_FIELD


# ---------------------------------------------------------------- the three login paths


class LockoutMessageMixin:
    """A login form that says "locked out" instead of "wrong password" when it was."""

    def clean(self):
        try:
            return super().clean()
        except ValidationError:
            seconds = lockout_seconds(self.request)
            if seconds:
                raise ValidationError(lockout_message(seconds), code="locked") from None
            raise


class ThrottledAuthenticationForm(LockoutMessageMixin, AuthenticationForm):
    error_messages = {
        **AuthenticationForm.error_messages,
        "invalid_login": gettext_lazy(
            "Your username and password did not match. Please try again."
        ),
    }


class AdminLoginForm(LockoutMessageMixin, AdminAuthenticationForm):
    """The Django admin's login form (admin.site.login_form), same throttle and message."""


class LoginView(auth_views.LoginView):
    form_class = ThrottledAuthenticationForm


class ObtainToken(ObtainAuthToken):
    """POST username + password → token; throttled like the login page (429 when locked)."""

    @extend_schema(summary="Get your API token with your username and password")
    def post(self, request, *args, **kwargs):
        try:
            return super().post(request, *args, **kwargs)
        except exceptions.ValidationError:
            seconds = lockout_seconds(request)
            if seconds:
                raise exceptions.Throttled(wait=seconds, detail=lockout_message(seconds)) from None
            raise
