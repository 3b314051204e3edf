from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import Group
from django.db.models import Prefetch
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from . import jobs, sweeper
from .roles import ADMIN, ANNOTATOR, RESEARCHER, ROLES, role_required, user_roles


@login_required
def home(request):
    """Send each role to its own landing page."""
    roles = user_roles(request.user)
    if ADMIN in roles:
        return redirect("admin_home")
    if RESEARCHER in roles:
        return redirect("scenarios:list")
    if ANNOTATOR in roles:
        return redirect("annotation:home")
    return render(request, "no_role.html", status=403)


@role_required(ADMIN)
def admin_home(request):
    users = (
        get_user_model()
        .objects.order_by("username")
        .prefetch_related(Prefetch("groups", queryset=Group.objects.filter(name__in=ROLES)))
    )
    return render(request, "admin_home.html", {"users": users, "roles": ROLES})


@require_POST
@role_required(ADMIN)
def set_roles(request, user_id):
    user = get_object_or_404(get_user_model(), pk=user_id)
    wanted = [role for role in request.POST.getlist("roles") if role in ROLES]
    user.groups.remove(*Group.objects.filter(name__in=ROLES))
    user.groups.add(*Group.objects.filter(name__in=wanted))
    if not user.is_superuser:  # admins use the Django admin too, which needs is_staff
        user.is_staff = ADMIN in wanted
        user.save(update_fields=["is_staff"])
    return redirect("admin_home")


@role_required(RESEARCHER)
def job_detail(request, pk):
    """A job's page: its creator's, the admins', and for a campaign's job its managers' (404
    for anyone else)."""
    job = sweeper.settle(jobs.job_or_404(request.user, pk))
    return render(request, "jobs/detail.html", {"job": job, "progress": jobs.live_progress(job)})


@role_required(RESEARCHER)
def job_progress(request, pk):
    """htmx partial, polled every second while the job runs."""
    job = sweeper.settle(jobs.job_or_404(request.user, pk))
    response = render(
        request, "jobs/_progress.html", {"job": job, "progress": jobs.live_progress(job)}
    )
    if job.is_finished:
        response["HX-Refresh"] = "true"  # reload once to show the result section
    return response
