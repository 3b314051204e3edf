"""Repeated failed logins lock the account name and the address for a while."""

import pytest
from django.core.cache import cache
from django.urls import reverse

from tests.conftest import PASSWORD


@pytest.fixture(autouse=True)
def fresh_cache():
    cache.clear()
    yield
    cache.clear()


def attempt(client, username, password, address="10.0.0.1"):
    return client.post(
        reverse("login"), {"username": username, "password": password}, REMOTE_ADDR=address
    )


def test_login_page_locks_after_five_failures_even_with_the_right_password(client, researcher):
    for _ in range(5):
        assert "did not match" in attempt(client, "researcher1", "wrong").content.decode()
    locked = attempt(client, "researcher1", PASSWORD)
    assert locked.status_code == 200 and "Too many failed attempts" in locked.content.decode()
    assert "_auth_user_id" not in client.session


def test_a_success_before_the_limit_resets_the_count(client, researcher):
    for _ in range(4):
        attempt(client, "researcher1", "wrong")
    assert attempt(client, "researcher1", PASSWORD).status_code == 302
    client.logout()
    for _ in range(4):
        attempt(client, "researcher1", "wrong")
    assert attempt(client, "researcher1", PASSWORD).status_code == 302


def test_one_address_guessing_many_names_is_locked_too(client, researcher):
    for name in ("a", "b", "c", "d", "e"):
        attempt(client, name, "wrong", address="10.9.9.9")
    assert "Too many" in attempt(client, "researcher1", PASSWORD, "10.9.9.9").content.decode()
    assert attempt(client, "researcher1", PASSWORD, "10.1.1.1").status_code == 302


def test_api_token_endpoint_is_throttled_the_same_way(client, researcher):
    url = reverse("api_token")
    for _ in range(5):
        response = client.post(url, {"username": "researcher1", "password": "nope"})
        assert response.status_code == 400
    response = client.post(url, {"username": "researcher1", "password": PASSWORD})
    assert response.status_code == 429 and "Too many failed attempts" in response.json()["detail"]
