from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.shortcuts import redirect, render
from drf_spectacular.views import SpectacularSwaggerView

from . import jobs, sweeper
from .roles import ADMIN, ANNOTATOR, RESEARCHER, role_required, user_roles


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


_swagger = SpectacularSwaggerView.as_view(url_name="api_schema", template_name="api_docs.html")


def api_docs(request, *args, **kwargs):
    """The API's docs page: a browser without a session goes to the login page and comes
    back (DRF would answer a bare 401); a request with a token is DRF's to judge."""
    if not request.user.is_authenticated and "HTTP_AUTHORIZATION" not in request.META:
        return redirect_to_login(request.get_full_path())
    return _swagger(request, *args, **kwargs)
