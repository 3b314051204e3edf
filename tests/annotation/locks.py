"""Rows held by another connection while a test runs (PostgreSQL, transactional tests)."""

import threading
from contextlib import contextmanager

from django.db import connections, transaction

from annotation.counting import lock_campaign


@contextmanager
def campaign_row_held(campaign):
    """Another connection holds the campaign row, as an exclusion does, while the block runs."""
    holding, go = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def hold():
        try:
            with transaction.atomic():
                lock_campaign(campaign)
                holding.set()
                go.wait(30)
        except BaseException as error:
            errors.append(error)
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(10), errors
        yield
    finally:
        go.set()
        holder.join(10)
    assert not errors, errors
