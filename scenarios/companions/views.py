"""Researcher pages for companions, generation runs and their responses (model names shown)."""

from django.contrib import messages
from django.db.models import Count, Q
from django.http import HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from h2htalk import csvexport, jobs, uploads
from h2htalk.params import int_param
from h2htalk.roles import RESEARCHER, role_required
from scenarios.companions import generation, services
from scenarios.companions.exports import RESPONSE_EXPORTERS, FilterError, filter_responses
from scenarios.companions.forms import (
    CompanionForm,
    GenerationRunForm,
    ResponseImportForm,
    key_status,
)
from scenarios.models import CompanionModel, GenerationRun, Response, Scenario
from scenarios.tasks import queue_run, run_response_import


@role_required(RESEARCHER)
def companion_list(request):
    companions = CompanionModel.objects.annotate(n_responses=Count("responses"))
    rows = [(c, key_status(c)) for c in companions]
    return render(request, "companions/list.html", {"rows": rows})


@role_required(RESEARCHER)
def companion_edit(request, pk=None):
    companion = get_object_or_404(CompanionModel, pk=pk) if pk else None
    form = CompanionForm(request.POST or None, instance=companion)
    if request.method == "POST" and form.is_valid():
        form.save()
        messages.success(request, _("Companion saved."))
        return redirect("companions:list")
    return render(request, "companions/form.html", {"form": form, "companion": companion})


@role_required(RESEARCHER)
def run_list(request):
    runs = GenerationRun.objects.annotate(
        n_ok=Count("responses", filter=Q(responses__status=Response.Status.OK)),
        n_failed=Count("responses", filter=Q(responses__status=Response.Status.FAILED)),
    ).select_related("created_by")
    return render(request, "companions/runs.html", {"runs": runs})


@role_required(RESEARCHER)
def run_create(request):
    initial = {"scenario_query": request.GET.get("query", "")}
    initial["name"] = f"run {timezone.now():%Y-%m-%d %H:%M}"
    form = GenerationRunForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        run = form.save(commit=False)
        run.created_by = request.user
        services.start_run(run, form.cleaned_data["companions"], form.selected_scenarios)
        messages.success(request, _("Run queued."))
        return redirect("companions:run", pk=run.pk)
    return render(request, "companions/run_form.html", {"form": form})


def _run_context(run: GenerationRun) -> dict:
    return {
        "run": run,
        "progress": generation.progress_of(run),
        "active": run.state in generation.ACTIVE,
    }


@role_required(RESEARCHER)
def run_detail(request, pk):
    run = get_object_or_404(GenerationRun, pk=pk)
    context = _run_context(run)
    context["companions"] = run.companions.annotate(
        n_ok=Count("responses", filter=Q(responses__run=run, responses__status="ok")),
        n_failed=Count("responses", filter=Q(responses__run=run, responses__status="failed")),
    )
    context["failures"] = run.responses.filter(status=Response.Status.FAILED).select_related(
        "scenario", "companion"
    )[:50]
    return render(request, "companions/run_detail.html", context)


@role_required(RESEARCHER)
def run_progress(request, pk):
    """htmx partial polled while the run is queued or running."""
    run = get_object_or_404(GenerationRun, pk=pk)
    response = render(request, "companions/_run_progress.html", _run_context(run))
    if run.state not in generation.ACTIVE:
        response["HX-Refresh"] = "true"
    return response


@require_POST
@role_required(RESEARCHER)
def run_cancel(request, pk):
    run = get_object_or_404(GenerationRun, pk=pk, kind=GenerationRun.Kind.GENERATE)
    generation.request_cancel(run)
    messages.info(request, _("Cancel requested: requests in flight finish, no new ones start."))
    return redirect("companions:run", pk=pk)


@require_POST
@role_required(RESEARCHER)
def run_resume(request, pk):
    run = get_object_or_404(GenerationRun, pk=pk, kind=GenerationRun.Kind.GENERATE)
    if services.is_going(run):
        messages.error(request, _("The run is already going."))
    elif not services.set_token_budget(run, request.POST.get("token_budget", "")):
        messages.error(request, _("The token budget must be a whole number."))
    else:
        queue_run(run)
        messages.success(request, _("Resumed: only missing or failed responses are generated."))
    return redirect("companions:run", pk=pk)


@role_required(RESEARCHER)
def response_browser(request):
    """One scenario with all its responses side by side, filterable by run and companion."""
    try:
        responses = filter_responses(request.GET)
    except FilterError as error:
        return HttpResponseBadRequest(str(error), content_type="text/plain; charset=utf-8")
    scenario = None
    if int_param(request.GET, "scenario") is not None:
        scenario = get_object_or_404(
            Scenario.objects.select_related("persona"), pk=int_param(request.GET, "scenario")
        )
    context = services.browser_context(request.GET, responses, scenario)
    return render(request, "companions/responses.html", context)


@role_required(RESEARCHER)
def response_export(request):
    fmt = request.GET.get("format", "jsonl")
    if fmt not in RESPONSE_EXPORTERS:
        fmt = "jsonl"
    writer, content_type = RESPONSE_EXPORTERS[fmt]
    try:
        responses = filter_responses(request.GET)
    except FilterError as error:
        return HttpResponseBadRequest(str(error), content_type="text/plain; charset=utf-8")
    filename = csvexport.stamped_filename("responses", fmt)
    return csvexport.download(writer(responses), content_type, filename)


@role_required(RESEARCHER)
def response_import(request):
    """Store the upload and start its preview job; the job page polls and shows the report."""
    form = ResponseImportForm(request.POST or None, request.FILES or None)
    options = ("run_name",)
    job = uploads.start_job(request, form, "response_import", run_response_import, options)
    if job is not None:
        return redirect("job_detail", pk=job.pk)
    return render(request, "companions/response_import.html", {"form": form})


@require_POST
@role_required(RESEARCHER)
def response_import_confirm(request, job_id):
    preview = jobs.job_or_404(request.user, job_id, kind="response_import")
    job = uploads.confirm_from_page(request, preview, run_response_import)
    return redirect("job_detail", pk=job.pk)
