"""Who sees which calibrated judge (the pages and the API answer 404 for the others)."""

from django.db.models import Q
from django.http import Http404

from annotation.access import managed_campaigns
from h2htalk.roles import ADMIN, user_roles
from scoring.models import CalibratedJudge


def visible_judges(user):
    """Calibrated judges the user may see: those of campaigns they manage (owner or member),
    those they fitted or imported, and those with neither a campaign nor a creator (imported
    by `manage.py import_judge_weights`). Admins see all."""
    if ADMIN in user_roles(user):
        return CalibratedJudge.objects.all()
    return CalibratedJudge.objects.filter(
        Q(campaign__in=managed_campaigns(user))
        | Q(created_by=user)
        | Q(campaign__isnull=True, created_by__isnull=True)
    )


def judge_or_404(user, pk) -> CalibratedJudge:
    judge = visible_judges(user).select_related("campaign", "created_by").filter(pk=pk).first()
    if judge is None:
        raise Http404("No such calibrated judge.")
    return judge
