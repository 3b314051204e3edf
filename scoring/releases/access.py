"""Who may see which release: the only place of the releases package that answers a request
with 404 (the computing core raises ReleaseError, never Http404)."""

from django.http import Http404

from annotation.access import managed_campaigns
from h2htalk.roles import ADMIN, user_roles
from scoring.models import Release


def visible_releases(user):
    """Releases of campaigns the user owns or is a member of (admins: all)."""
    if ADMIN in user_roles(user):
        return Release.objects.all()
    return Release.objects.filter(campaign__in=managed_campaigns(user))


def release_or_404(user, pk) -> Release:
    """A release the user may see, with what its pages show, or Http404 (also when it exists
    but is not visible: its existence is not disclosed)."""
    release = (
        visible_releases(user)
        .select_related("campaign", "anchor", "judge", "created_by", "job", "result")
        .defer("inputs", "judge__document")  # large; loaded on access (compute, check)
        .filter(pk=pk)
        .first()
    )
    if release is None:
        raise Http404("No such release.")
    return release
