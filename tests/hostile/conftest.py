"""Fuzzed base URLs are not looked up in DNS: the save-time endpoint check (h2htalk.egress)
meets "no such name", as for a host that is not up yet. This machine's resolver answers at
once but holds about one lookup in 25 for its 5 s timeout, which made the API fuzzing spend
four of its five minutes waiting; what the check does with resolved addresses is
tests/test_egress.py's."""

import socket

import pytest
from django.core.cache import cache

from h2htalk import auth, egress

SLOW_ONLY = "test_schemathesis_coverage.py"


def pytest_ignore_collect(collection_path, config):
    """The coverage phase's module only when the slow tier is selected (`-m slow`): its cases
    are made while collecting, and every `make test` process would pay for them to deselect
    them."""
    if collection_path.name == SLOW_ONLY:
        return "not slow" in (config.getoption("markexpr") or "")
    return None


# The addresses the fuzzers' requests come from: Django's test client, and the WSGI calls of
# schemathesis (no REMOTE_ADDR: h2htalk.auth counts them as "unknown").
FUZZER_ADDRESSES = ("127.0.0.1", "unknown")


@pytest.fixture(autouse=True)
def no_dns(monkeypatch):
    """Address literals resolve as usual (without DNS); names do not resolve."""

    def resolve(host: str, port: int) -> list[str]:
        try:
            infos = socket.getaddrinfo(host, port, flags=socket.AI_NUMERICHOST)
        except (socket.gaierror, UnicodeError):
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known") from None
        return list(dict.fromkeys(info[4][0] for info in infos))

    monkeypatch.setattr(egress, "resolve", resolve)


@pytest.fixture(autouse=True)
def login_budgets_given_back():
    """The fuzzers fail logins on purpose (hostile names on the login page and /api/token/):
    each failure keeps a slot of its address's failure budget for LOGIN_LOCKOUT_SECONDS
    (h2htalk.auth), and in Redis the slots outlive the test. The page fuzzer takes 16 of the
    test client's 20, so later tests of the same xdist worker that fail a login or two on
    purpose (tests/accounts/) could meet a full budget and a 429, and a run within 15 minutes
    of an earlier one did (tests/accounts/test_deactivation.py, test_names.py). Freed before
    the test (what an earlier run left) and after it."""
    free_address_budgets()
    yield
    free_address_budgets()


def free_address_budgets() -> None:
    keys = []
    for address in FUZZER_ADDRESSES:
        prefix, limit = auth.budgets("", address)[1]  # (pair, address, account)
        keys += auth._slots(prefix, limit)
    cache.delete_many(keys)
