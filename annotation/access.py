"""Object-level access: researchers see the campaigns they own or are members of (admins all);
annotators see the open campaigns they were added to."""

from django.db.models import Q, QuerySet
from django.http import Http404

from h2htalk.roles import ADMIN, user_roles

from .models import Campaign


def managed_campaigns(user) -> QuerySet:
    if ADMIN in user_roles(user):
        return Campaign.objects.all()
    return Campaign.objects.filter(Q(owner=user) | Q(members=user)).distinct()


def managed_campaign_or_404(user, pk) -> Campaign:
    campaign = managed_campaigns(user).filter(pk=pk).first()
    if campaign is None:
        raise Http404("No such campaign.")
    return campaign


def rating_campaigns(user) -> QuerySet:
    return Campaign.objects.filter(annotators=user, state=Campaign.State.OPEN)


def rating_campaign_or_404(user, pk) -> Campaign:
    """The campaign with its blind names (`blinding.name_lists`), whether the user holds an
    item there (`queue.open_item_flag`) and their progress (`progress.progress_counts`), in
    one query."""
    from .blinding import name_lists
    from .progress import progress_counts
    from .queue import open_item_flag

    campaign = (
        Campaign.objects.filter(annotators=user, pk=pk)
        .annotate(**name_lists(), **open_item_flag(user), **progress_counts(user))
        .first()
    )
    if campaign is None:
        raise Http404("No such campaign.")
    return campaign
