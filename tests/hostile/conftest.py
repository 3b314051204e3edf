"""Fuzzed base URLs are not looked up in DNS: the save-time endpoint check (h2htalk.egress)
meets "no such name", as for a host that is not up yet. This machine's resolver answers at
once but holds about one lookup in 25 for its 5 s timeout, which made the API fuzzing spend
four of its five minutes waiting; what the check does with resolved addresses is
tests/test_egress.py's."""

import socket

import pytest

from h2htalk import egress


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
