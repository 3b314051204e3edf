import pytest


@pytest.fixture(autouse=True)
def no_cached_subscriptions():
    """Whether a campaign has listeners is cached by campaign id (webhooks.subscriptions); with
    Redis the cache outlives a test, and on SQLite ids repeat after each test's rollback, so a
    campaign could inherit an earlier test's answer. Each test starts with the worker's own
    cache empty (tests/conftest.py gives every xdist worker its own Redis database)."""
    from django.core.cache import cache

    cache.clear()
