"""Celery tasks: a delivery attempt (re-sent with back-off: webhooks.delivery) and the
campaign's batch (webhooks.batching)."""

import logging

from celery import shared_task

from . import batching, delivery
from .models import Delivery

logger = logging.getLogger(__name__)


@shared_task(name="webhooks.deliver", ignore_result=True)
def deliver(delivery_id: int, by_hand: bool = False) -> None:
    row = Delivery.objects.select_related("endpoint").filter(pk=delivery_id).first()
    if row is None or (row.state != Delivery.State.PENDING and not by_hand):
        return  # deleted, or a duplicate message of a finished delivery
    logged, again = delivery.attempt(row, by_hand)
    logger.info(
        "webhook delivery %s attempt %s: %s %s",
        row.pk,
        logged.number,
        logged.status_code,
        logged.error[:200],
    )
    if again:
        deliver.apply_async((row.pk,), countdown=delivery.backoff_seconds(row.attempts))


@shared_task(name="webhooks.batch", ignore_result=True)
def run_batch(campaign_id: int) -> None:
    batching.run(campaign_id)
