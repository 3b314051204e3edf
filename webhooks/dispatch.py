"""Turning an event into deliveries: one Delivery row per subscribed endpoint, sent by a Celery
task once the transaction that made the event commits (never an HTTP call in a request)."""

import uuid

from django.db import transaction
from django.utils import timezone

from .models import Delivery
from .subscriptions import endpoints_for


def envelope(event: str, event_id: uuid.UUID, data: dict) -> dict:
    return {
        "id": str(event_id),
        "type": event,
        "created": timezone.now().isoformat(),
        "data": data,
    }


def emit(event: str, campaign_id: int | None, data: dict, owner_id: int | None = None) -> list:
    """Deliveries of `event` to every endpoint subscribed to it (see `endpoints_for`)."""
    endpoints = endpoints_for(event, campaign_id, owner_id)
    if not endpoints:
        return []
    event_id = uuid.uuid4()
    payload = envelope(event, event_id, data)
    deliveries = [
        Delivery.objects.create(endpoint=e, event=event, event_id=event_id, payload=payload)
        for e in endpoints
    ]
    send_on_commit([d.pk for d in deliveries])
    return deliveries


def send_on_commit(delivery_ids: list[int], by_hand: bool = False) -> None:
    from .tasks import deliver

    def send():
        for pk in delivery_ids:
            deliver.delay(pk, by_hand)

    transaction.on_commit(send)
