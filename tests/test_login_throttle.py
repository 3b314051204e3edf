"""Every login path (site, /api/token/, Django admin) goes through one throttle with three
budgets: account and address, address, account. (The real multi-worker server:
tests/test_login_throttle_server.py.)"""

import pytest
from django.core.cache import cache
from django.test import RequestFactory
from django.urls import reverse

from h2htalk import auth
from tests.conftest import PASSWORD
from tests.test_settings import run

ADMIN_LOGIN = "/django-admin/login/?next=/django-admin/"


@pytest.fixture(autouse=True)
def fresh_cache(db, settings):
    # The deployment's cache: Redis when configured, else the database table (conftest gives
    # other in-process tests per-process memory instead).
    if not settings.REDIS_URL:
        settings.CACHES = {"default": settings.DATABASE_CACHE}
    settings.LOGIN_FAILURE_LIMIT = 5
    settings.LOGIN_ADDRESS_FAILURE_LIMIT = 20
    settings.LOGIN_ACCOUNT_FAILURE_LIMIT = 50
    settings.TRUSTED_PROXIES = []
    cache.clear()
    yield
    cache.clear()


def site(client, username, password, address="10.0.0.1"):
    response = client.post(
        reverse("login"), {"username": username, "password": password}, REMOTE_ADDR=address
    )
    return outcome(response)


def admin_login(client, username, password, address="10.0.0.1"):
    response = client.post(
        ADMIN_LOGIN, {"username": username, "password": password}, REMOTE_ADDR=address
    )
    return outcome(response)


def token(client, username, password, address="10.0.0.1"):
    response = client.post(
        reverse("api_token"), {"username": username, "password": password}, REMOTE_ADDR=address
    )
    return {200: "in", 400: "wrong", 429: "locked"}[response.status_code]


def outcome(response) -> str:
    text = response.content.decode()
    if response.status_code == 302:
        return "in"
    assert response.status_code == 200, text[:300]
    if "Too many failed attempts" in text:
        return "locked"
    assert "did not match" in text or "Please enter the correct" in text, text[:300]
    return "wrong"


def test_the_throttle_runs_on_the_deployment_cache(settings):
    from django.core.cache import caches

    backend = type(caches["default"]).__name__
    assert backend == ("RedisCache" if settings.REDIS_URL else "DatabaseCache")


def test_login_page_locks_after_five_failures_even_with_the_right_password(client, researcher):
    assert [site(client, "researcher1", "wrong") for _ in range(5)] == ["wrong"] * 5
    assert site(client, "researcher1", PASSWORD) == "locked"
    assert "_auth_user_id" not in client.session


def test_a_success_before_the_limit_resets_the_count(client, researcher):
    for _ in range(4):
        site(client, "researcher1", "wrong")
    assert site(client, "researcher1", PASSWORD) == "in"
    client.logout()
    for _ in range(4):
        site(client, "researcher1", "wrong")
    assert site(client, "researcher1", PASSWORD) == "in"


def test_failures_from_one_address_do_not_lock_the_owner_out_elsewhere(client, researcher):
    for _ in range(5):
        site(client, "researcher1", "wrong", address="10.6.6.6")
    assert site(client, "researcher1", PASSWORD, "10.6.6.6") == "locked"
    assert site(client, "researcher1", PASSWORD, "10.1.1.1") == "in"


def test_one_address_guessing_many_names_is_locked_at_the_address_budget(client, researcher):
    results = [site(client, f"name{i}", "wrong", address="10.9.9.9") for i in range(25)]
    assert results == ["wrong"] * 20 + ["locked"] * 5
    assert site(client, "researcher1", PASSWORD, "10.9.9.9") == "locked"
    assert site(client, "researcher1", PASSWORD, "10.1.1.1") == "in"  # another address


def test_many_addresses_guessing_one_account_are_stopped_at_the_account_budget(
    client, researcher, settings
):
    settings.LOGIN_FAILURE_LIMIT, settings.LOGIN_ACCOUNT_FAILURE_LIMIT = 3, 8
    results = [
        site(client, "Researcher1 ", "wrong", address=f"10.2.0.{n}")  # same account, normalised
        for n in range(4)
        for _ in range(3)
    ]
    assert results.count("wrong") == 8 and results.count("locked") == 4
    assert site(client, "researcher1", PASSWORD, "10.3.3.3") == "locked"


def test_api_token_endpoint_is_throttled_the_same_way(client, researcher):
    assert [token(client, "researcher1", "nope") for _ in range(5)] == ["wrong"] * 5
    response = client.post(
        reverse("api_token"),
        {"username": "researcher1", "password": PASSWORD},
        REMOTE_ADDR="10.0.0.1",
    )
    assert response.status_code == 429 and "Too many failed attempts" in response.json()["detail"]


def test_django_admin_login_is_throttled(client, admin_user):
    assert [admin_login(client, "admin1", "wrong") for _ in range(5)] == ["wrong"] * 5
    assert admin_login(client, "admin1", PASSWORD) == "locked"
    assert "_auth_user_id" not in client.session


def test_all_three_paths_spend_one_budget(client, admin_user):
    for _ in range(2):
        site(client, "admin1", "wrong")
        token(client, "admin1", "wrong")
    assert admin_login(client, "admin1", "wrong") == "wrong"  # the fifth failure
    assert admin_login(client, "admin1", PASSWORD) == "locked"
    assert site(client, "admin1", PASSWORD) == "locked"
    assert token(client, "admin1", PASSWORD) == "locked"
    assert admin_login(client, "admin1", PASSWORD, address="10.4.4.4") == "in"


def test_a_locked_attempt_does_not_check_the_password(client, researcher, monkeypatch):
    for _ in range(5):
        site(client, "researcher1", "wrong")
    checked = []
    original = type(researcher).check_password
    monkeypatch.setattr(
        type(researcher),
        "check_password",
        lambda self, raw: checked.append(raw) or original(self, raw),
    )
    assert site(client, "researcher1", PASSWORD) == "locked"
    assert checked == []


def request_from(remote, forwarded=None):
    extra = {"REMOTE_ADDR": remote}
    if forwarded is not None:
        extra["HTTP_X_FORWARDED_FOR"] = forwarded
    return RequestFactory().get("/", **extra)


def test_forwarded_for_is_ignored_unless_the_peer_is_a_trusted_proxy(settings):
    assert auth.client_address(request_from("10.0.0.7", "1.2.3.4")) == "10.0.0.7"
    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
    assert auth.client_address(request_from("10.0.0.7", "1.2.3.4")) == "1.2.3.4"
    # The right-most untrusted hop: what a client writes itself on the left does not count.
    assert auth.client_address(request_from("10.0.0.7", "6.6.6.6, 1.2.3.4, 10.0.0.9")) == "1.2.3.4"
    assert auth.client_address(request_from("10.0.0.7")) == "10.0.0.7"
    assert auth.client_address(request_from("10.0.0.7", "junk, 10.0.0.9")) == "10.0.0.9"
    assert auth.client_address(request_from("192.0.2.1", "1.2.3.4")) == "192.0.2.1"


def test_addresses_behind_a_trusted_proxy_have_their_own_budgets(client, researcher, settings):
    settings.TRUSTED_PROXIES = ["127.0.0.1"]
    for i in range(20):
        client.post(
            reverse("login"),
            {"username": f"x{i}", "password": "wrong"},
            REMOTE_ADDR="127.0.0.1",
            HTTP_X_FORWARDED_FOR="203.0.113.9",
        )
    response = client.post(
        reverse("login"),
        {"username": "researcher1", "password": PASSWORD},
        REMOTE_ADDR="127.0.0.1",
        HTTP_X_FORWARDED_FOR="203.0.113.10",
    )
    assert outcome(response) == "in"


def test_ipv6_clients_are_counted_per_64(client, researcher):
    for n in range(5):
        site(client, "researcher1", "wrong", address=f"2001:db8:1:2::{n + 1}")
    assert site(client, "researcher1", PASSWORD, "2001:db8:1:2:ffff::1") == "locked"
    assert site(client, "researcher1", PASSWORD, "2001:db8:1:3::1") == "in"


SETTINGS_LOAD = "import os; os.environ['DJANGO_SETTINGS_MODULE']='h2htalk.settings'; import django; django.setup()"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"LOGIN_FAILURE_LIMIT": "5", "LOGIN_ACCOUNT_FAILURE_LIMIT": "5"}, "must be greater than"),
        ({"TRUSTED_PROXIES": "10.0.0.0/8,proxy.example"}, "'proxy.example' is not an IP"),
    ],
)
def test_settings_refuse_a_throttle_one_address_could_abuse(env, message):
    done = run(SETTINGS_LOAD, SECRET_KEY="x", **env)
    assert done.returncode != 0 and message in done.stderr
