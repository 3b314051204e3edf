"""Calibration pages: versions, fitting, the report, download, import, routing to humans.

Researchers (and admins) only. A calibrated judge is visible when its campaign is one the user
manages (owner or member), when the user fitted or imported it, or when it has neither a
campaign nor a creator (imported by the command); otherwise its pages answer 404.
"""

from django.contrib import messages
from django.db import transaction
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from h2htalk.params import int_param
from h2htalk.roles import RESEARCHER, role_required
from scoring import charts, tasks
from scoring.calibration import access, fitting, report, routing, versions
from scoring.calibration.document import DocumentError, download_filename, export_json
from scoring.calibration.forms import CalibrationForm, ImportForm, MetricsForm, RoutingForm
from scoring.metrics import catalogue
from scoring.tasks import queue_metrics_job


@role_required(RESEARCHER)
def calibration_list(request):
    return render(
        request,
        "calibration/list.html",
        {
            "judges": report.list_rows(access.visible_judges(request.user)),
            "jobs": fitting.recent_jobs(request.user),
            "metrics_form": MetricsForm(user=request.user),
        },
    )


@role_required(RESEARCHER)
def calibration_create(request):
    initial = {}
    if int_param(request.GET, "campaign") is not None:
        initial["campaign"] = int_param(request.GET, "campaign")
    form = CalibrationForm(request.POST or None, initial=initial, user=request.user)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        arguments = {key: data[key] for key in ("judge", "features", "folds", "seed")}
        arguments["name"] = data["name"] or None
        campaign = data["campaign"]
        if fitting.needs_job(campaign):
            with transaction.atomic():
                job = tasks.queue_fit_job(request.user, campaign, **arguments)
            messages.info(request, _("A large calibration: it runs in the background."))
            return redirect(f"{reverse('calibration:list')}#job-{job.pk}")
        try:
            judge = fitting.fit(campaign, user=request.user, **arguments)
        except catalogue.FeatureError as error:
            form.add_error(None, str(error))
        else:
            messages.success(request, _("%(judge)s fitted.") % {"judge": judge})
            return redirect("calibration:detail", pk=judge.pk)
    return render(request, "calibration/form.html", {"form": form})


@role_required(RESEARCHER)
def calibration_detail(request, pk):
    judge = access.judge_or_404(request.user, pk)
    judges = report.heldout_judges(judge.document)
    context = report.detail_context(judge, access.visible_judges(request.user))
    return render(
        request,
        "calibration/detail.html",
        {
            **context,
            "diagram": charts.reliability_svg(judges) if judges else None,
        },
    )


@role_required(RESEARCHER)
def calibration_download(request, pk):
    judge = access.judge_or_404(request.user, pk)
    response = HttpResponse(export_json(judge), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{download_filename(judge)}"'
    return response


@role_required(RESEARCHER)
def calibration_import(request):
    form = ImportForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        try:
            judge, created = versions.import_document(
                form.cleaned_data["document"],
                name=form.cleaned_data["name"] or None,
                user=request.user,
            )
        except DocumentError as error:
            form.add_error("document", str(error))
        else:
            if created:
                messages.success(request, _("%(judge)s imported.") % {"judge": judge})
            else:
                messages.info(
                    request,
                    _("%(judge)s is already here with the same document.") % {"judge": judge},
                )
            return redirect("calibration:detail", pk=judge.pk)
    return render(request, "calibration/import.html", {"form": form})


@role_required(RESEARCHER)
def calibration_route(request):
    initial = routing.initial_choices(request.user, int_param(request.GET, "judge"))
    form = RoutingForm(request.POST or None, initial=initial, user=request.user)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        options = {key: data[key] for key in ("judge", "count", "threshold", "exclude_judged")}
        try:
            campaign, routed = routing.route(
                data["source"], data["mode"], data["name"], request.user, **options
            )
        except routing.RoutingError as error:
            form.add_error(None, str(error))
        else:
            messages.success(
                request,
                _(
                    "Campaign %(name)s created as a draft with %(len)s routed comparisons; add annotators on Edit, then open it."
                )
                % {"name": campaign.name, "len": len(routed.comparisons)},
            )
            return redirect("campaigns:detail", pk=campaign.pk)
    return render(request, "calibration/route.html", {"form": form})


@require_POST
@role_required(RESEARCHER)
def calibration_metrics(request):
    form = MetricsForm(request.POST, user=request.user)
    if not form.is_valid():
        messages.error(request, _("Choose a campaign you manage."))
        return redirect("calibration:list")
    with transaction.atomic():
        job = queue_metrics_job(
            request.user,
            campaign=form.cleaned_data["campaign"],
            recompute=form.cleaned_data["recompute"],
            embedding=form.cleaned_data["embedding"] or None,
            profile=form.cleaned_data["profile"] or None,
        )
    messages.info(request, _("Computing reference metrics in the background."))
    return redirect(f"{reverse('calibration:list')}#job-{job.pk}")
