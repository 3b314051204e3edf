"""What the pages and the API share: who sees which endpoint, saving one (URL checked against
the allow-list), the secret (its owner only), deliveries and re-sending one by hand."""

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q, QuerySet
from django.http import Http404
from django.utils.translation import gettext as _

from annotation.access import managed_campaigns
from h2htalk import egress
from h2htalk.roles import ADMIN, user_roles

from .dispatch import send_on_commit
from .events import NAMES
from .models import Delivery, Endpoint
from .subscriptions import forget


def visible_endpoints(user) -> QuerySet:
    """Admins: all; researchers: their own, and those of the campaigns they manage."""
    rows = Endpoint.objects.select_related("campaign", "owner")
    if ADMIN in user_roles(user):
        return rows
    return rows.filter(Q(owner=user) | Q(campaign__in=managed_campaigns(user))).distinct()


def endpoint_or_404(user, pk) -> Endpoint:
    endpoint = visible_endpoints(user).filter(pk=pk).first()
    if endpoint is None:
        raise Http404(_("No such webhook endpoint."))
    return endpoint


def delivery_or_404(user, pk) -> Delivery:
    row = Delivery.objects.select_related("endpoint").filter(pk=pk).first()
    if row is None or not visible_endpoints(user).filter(pk=row.endpoint_id).exists():
        raise Http404(_("No such delivery."))
    return row


def clean_url(url: str) -> str:
    """The allow-list of LLM endpoints (h2htalk.egress), checked when an endpoint is saved."""
    try:
        egress.check_endpoint(url)
    except egress.EgressError as error:
        raise ValidationError(
            _("This address is not allowed: %(reason)s"), params={"reason": str(error)}
        ) from None
    return url


def clean_events(events) -> list[str]:
    if not isinstance(events, list | tuple) or not events:
        raise ValidationError(_("Choose at least one event."))
    unknown = [e for e in events if e not in NAMES]
    if unknown:
        raise ValidationError(
            _("Unknown events: %(names)s."), params={"names": ", ".join(map(str, unknown))}
        )
    return [name for name in NAMES if name in events]


def clean_campaign(user, campaign):
    if campaign is not None and not managed_campaigns(user).filter(pk=campaign.pk).exists():
        raise ValidationError(_("You do not manage this campaign."))
    return campaign


def save(endpoint: Endpoint) -> Endpoint:
    """Save and make the rating path ask again whether anyone listens (also the campaign it
    covered before, if it moved)."""
    before = Endpoint.objects.filter(pk=endpoint.pk).first() if endpoint.pk else None
    with transaction.atomic():
        endpoint.save()
    for row in (before, endpoint):
        if row is not None:
            forget(row)
    return endpoint


def delete(endpoint: Endpoint) -> None:
    endpoint.delete()
    forget(endpoint)


def may_read_secret(user, endpoint: Endpoint) -> bool:
    return endpoint.owner_id == user.pk


def deliveries_of(endpoint: Endpoint) -> QuerySet:
    return endpoint.deliveries.prefetch_related("attempt_log")


def resend(delivery: Delivery) -> None:
    """One more attempt now (by hand), in a task like every attempt; pending meanwhile."""
    Delivery.objects.filter(pk=delivery.pk).update(state=Delivery.State.PENDING)
    delivery.state = Delivery.State.PENDING
    send_on_commit([delivery.pk], by_hand=True)
