"""Object-level access: researchers see the campaigns they own or are members of (admins all);
annotators see the open campaigns they were added to."""

from django.db.models import Q, QuerySet
from django.http import Http404
from django.utils.translation import gettext as _

from h2htalk.roles import ADMIN, user_roles

from .models import Campaign


def managed_campaigns(user) -> QuerySet:
    if ADMIN in user_roles(user):
        return Campaign.objects.all()
    return Campaign.objects.filter(Q(owner=user) | Q(members=user)).distinct()


def managed_campaign_or_404(user, pk) -> Campaign:
    campaign = managed_campaigns(user).filter(pk=pk).first()
    if campaign is None:
        raise Http404(_("No such campaign."))
    return campaign


def rating_campaigns(user) -> QuerySet:
    return Campaign.objects.filter(annotators=user, state=Campaign.State.OPEN)


def rating_campaign_or_404(user, pk) -> Campaign:
    """The campaign with its blind names, whether the user holds an item there and their
    progress counts, in one statement (`rating_reads.rating_campaign`)."""
    from .rating_reads import rating_campaign

    campaign = rating_campaign(user, pk)
    if campaign is None:
        raise Http404(_("No such campaign."))
    return campaign
