"""Benchmark release pages: the list, freezing a new release, the leaderboard, its files, and
computing / verifying it. Researchers who own or are members of the release's campaign, and
admins."""

from django.contrib import messages
from django.db import transaction
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from h2htalk import jobs
from h2htalk.models import Job
from h2htalk.params import int_param
from h2htalk.roles import RESEARCHER, role_required
from scoring import tasks
from scoring.models import Release, ReleaseResult
from scoring.releases import access, formats, leaderboard, versioning
from scoring.releases import service as releases
from scoring.releases.errors import ReleaseError
from scoring.releases.forms import ReleaseForm, VersionForm
from scoring.releases.freezing import NO_JUDGE


def _result(release: Release):
    """The stored numbers (kept when a later recomputation or check fails: they are the numbers
    of the frozen inputs; the page says that the check failed)."""
    try:
        return release.result
    except ReleaseResult.DoesNotExist:
        return None


@role_required(RESEARCHER)
def release_list(request):
    rows = list(
        access.visible_releases(request.user)
        .select_related("campaign", "anchor", "judge", "created_by")
        .defer("inputs", "judge__document")
        .order_by("-created_at")
    )
    return render(request, "releases/list.html", {"releases": rows})


@role_required(RESEARCHER)
def release_create(request):
    initial = {"seed": 0, "n_boot": 1000}
    if int_param(request.GET, "campaign") is not None:
        initial["campaign"] = int_param(request.GET, "campaign")
    form = ReleaseForm(request.POST or None, initial=initial, user=request.user)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        release = releases.create_release(
            name=data["name"],
            description=data["description"],
            campaign=data["campaign"],
            companions=data["companions"],
            anchor=data["anchor"],
            judge=data["judge"],
            seed=data["seed"],
            n_boot=data["n_boot"],
            style_control=data["style_control"],
            user=request.user,
        )
        if release.state == Release.State.FAILED:
            messages.error(
                request,
                _("The release could not be computed: %(message)s") % {"message": release.message},
            )
        elif release.state == Release.State.READY:
            messages.success(
                request, _("Release %(name)s frozen and computed.") % {"name": release.name}
            )
        else:
            messages.info(
                request, _("A large release: it is frozen and computed in the background.")
            )
        return redirect("releases:detail", pk=release.pk)
    return render(request, "releases/form.html", {"form": form})


@role_required(RESEARCHER)
def release_detail(request, pk):
    release = access.release_or_404(request.user, pk)
    context = {"release": release, "no_judge": NO_JUDGE}
    job = releases.running_job(release)
    if job:
        context["job"] = job
        context["progress"] = jobs.live_progress(job)
    result = _result(release)
    if result is not None:
        context.update(leaderboard.leaderboard_context(result.data))
        context["result"] = result
    context.update(versioning.page_context(release, result))
    return render(request, "releases/detail.html", context)


@role_required(RESEARCHER)
def version_create(request, pk):
    """A new version of a computed release: the form, then freezing and computing it (inline
    when small, else a background job)."""
    parent = access.release_or_404(request.user, pk)
    form = VersionForm(request.POST or None, parent=parent, user=request.user)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            version = versioning.create_version(
                parent,
                name=data["name"],
                description=data["description"],
                campaigns=list(data["campaigns"]),
                companions=list(data["companions"]),
                user=request.user,
            )
        except ReleaseError as error:
            form.add_error(None, str(error))
        else:
            if version.state == Release.State.FAILED:
                messages.error(
                    request, _("The version could not be computed: %s") % version.message
                )
            elif version.state != Release.State.READY:
                messages.info(
                    request, _("A large version: it is frozen and computed in the background.")
                )
            return redirect("releases:detail", pk=version.pk)
    return render(request, "releases/version_form.html", {"form": form, "parent": parent})


@role_required(RESEARCHER)
def release_export(request, pk, fmt):
    release = access.release_or_404(request.user, pk)
    if _result(release) is None:
        messages.error(request, _("The release has no numbers yet."))
        return redirect("releases:detail", pk=release.pk)
    response = HttpResponse(formats.FILES[fmt](release), content_type=formats.CONTENT_TYPES[fmt])
    response["Content-Disposition"] = f'attachment; filename="{formats.file_stem(release)}.{fmt}"'
    return response


@require_POST
@role_required(RESEARCHER)
def release_compute(request, pk):
    """Compute a release without numbers, or recompute and verify one with numbers, as a
    background job whose progress the release's page shows (a first check of a large release
    takes half a minute and more: never inside the request)."""
    release = access.release_or_404(request.user, pk)
    if releases.running_job(release):
        messages.info(request, _("This release is being computed already."))
    else:
        with transaction.atomic():
            job = tasks.queue_release_job(release, request.user)
        job.refresh_from_db()
        if job.is_finished:  # Celery in eager mode (the demo, tests): it ran already
            ok = job.state == Job.State.COMPLETED
            (messages.success if ok else messages.error)(request, job.message)
            return redirect(reverse("releases:detail", kwargs={"pk": release.pk}))
        messages.info(
            request,
            _("Computing and verifying in the background: this page shows the progress.")
            if _result(release)
            else _("Computing in the background: this page shows the progress."),
        )
    return redirect(reverse("releases:detail", kwargs={"pk": release.pk}))
