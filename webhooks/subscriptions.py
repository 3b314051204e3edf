"""Which endpoints receive an event, and the cached answer the rating path asks.

A filled comparison asks `wants_batched(campaign_id)`: one cache read (Redis in deployment),
no query, until the answer expires (`TTL`) or an endpoint is saved or deleted (which forgets
the answers of the campaigns it covers). A campaign-wide endpoint of a researcher who joins a
campaign later is noticed when the answer expires, within `TTL` seconds.
"""

from django.core.cache import cache
from django.db.models import Q

from annotation.access import managed_campaigns
from annotation.models import Campaign

from .events import BATCHED
from .models import Endpoint

TTL = 300


def _key(campaign_id: int) -> str:
    return f"webhooks:batched:{campaign_id}"


def endpoints_for(event: str, campaign_id: int | None, owner_id: int | None = None) -> list:
    """Active endpoints subscribed to `event` for this campaign (its own, and campaign-wide
    ones of those who manage it); with no campaign, the campaign-wide ones of `owner_id`."""
    rows = Endpoint.objects.filter(active=True).select_related("owner")
    if campaign_id is None:
        rows = rows.filter(campaign__isnull=True, owner_id=owner_id)
    else:
        rows = rows.filter(Q(campaign_id=campaign_id) | Q(campaign__isnull=True))
    found = []
    for endpoint in rows:
        if event not in endpoint.events:
            continue
        campaign_wide = endpoint.campaign_id is None and campaign_id is not None
        if campaign_wide and not managed_campaigns(endpoint.owner).filter(pk=campaign_id).exists():
            continue
        found.append(endpoint)
    return found


def wants_batched(campaign_id: int) -> bool:
    """Whether any endpoint wants an event the campaign's batch task notices (cached)."""
    answer = cache.get(_key(campaign_id))
    if answer is None:
        answer = any(endpoints_for(event, campaign_id) for event in BATCHED)
        cache.set(_key(campaign_id), answer, TTL)
    return answer


def forget(endpoint: Endpoint) -> None:
    """An endpoint changed: the campaigns it covers ask again."""
    if endpoint.campaign_id is not None:
        ids = [endpoint.campaign_id]
    else:
        ids = list(managed_campaigns(endpoint.owner).values_list("pk", flat=True))
    cache.delete_many([_key(pk) for pk in ids])


def campaign_choices(user):
    return managed_campaigns(user).order_by("name") if user else Campaign.objects.none()
