"""Researcher pages for the LLM judge: configurations, runs (progress, cancel/resume, failures
with their raw outputs), the bias report per configuration, and the verdict import."""

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from h2htalk import csvexport, jobs, sweeper, uploads
from h2htalk.params import int_param, parse_int
from h2htalk.roles import RESEARCHER, role_required
from scoring.judges import imports as judge_import
from scoring.judges import judging, prompts, services
from scoring.judges.forms import (
    JudgeConfigForm,
    JudgeImportForm,
    JudgeRunForm,
    is_locked,
    key_status,
)
from scoring.models import JudgeConfig, JudgeRun
from scoring.tasks import queue_judge_run, run_judge_import

IMPORT_KIND = "judge_import"


@role_required(RESEARCHER)
def config_list(request):
    rows = [(c, key_status(c)) for c in services.configs_with_counts()]
    return render(request, "judges/configs.html", {"rows": rows})


@role_required(RESEARCHER)
def config_edit(request, pk=None):
    config = get_object_or_404(JudgeConfig, pk=pk) if pk else None
    initial = {}
    if config is None and int_param(request.GET, "copy") is not None:
        source = get_object_or_404(JudgeConfig, pk=int_param(request.GET, "copy"))
        initial = services.copy_initial(source)
    form = JudgeConfigForm(request.POST or None, instance=config, initial=initial)
    if request.method == "POST" and form.is_valid():
        form.save()
        messages.success(request, _("Judge saved."))
        return redirect("judges:list")
    context = {
        "form": form,
        "config": config,
        "default_single": prompts.DEFAULT_SINGLE_RUBRIC,
        "default_pairwise": prompts.DEFAULT_PAIRWISE_RUBRIC,
    }
    return render(request, "judges/config_form.html", context)


@role_required(RESEARCHER)
def run_list(request):
    runs = services.runs_with_counts(int_param(request.GET, "judge"))
    return render(request, "judges/runs.html", {"runs": runs})


@role_required(RESEARCHER)
def run_create(request):
    initial = {"name": f"judge run {timezone.now():%Y-%m-%d %H:%M}"}
    for name in ("judge", "campaign"):
        if int_param(request.GET, name) is not None:
            initial[name] = int_param(request.GET, name)
    form = JudgeRunForm(request.POST or None, initial=initial, user=request.user)
    if request.method == "POST" and form.is_valid():
        run = form.save(commit=False)
        run.created_by = request.user
        services.start_run(run, form.selected_responses)
        messages.success(request, _("Judge run queued."))
        return redirect("judges:run", pk=run.pk)
    return render(request, "judges/run_form.html", {"form": form})


@role_required(RESEARCHER)
def run_detail(request, pk):
    run = get_object_or_404(JudgeRun.objects.select_related("judge", "campaign"), pk=pk)
    context = services.run_detail_context(run)
    return render(request, "judges/run_detail.html", context)


@role_required(RESEARCHER)
def run_progress(request, pk):
    """htmx partial polled while the run is queued or running."""
    run = get_object_or_404(JudgeRun, pk=pk)
    response = render(request, "judges/_run_progress.html", services.run_context(run))
    if run.state not in judging.ACTIVE:
        response["HX-Refresh"] = "true"
    return response


@require_POST
@role_required(RESEARCHER)
def run_cancel(request, pk):
    run = get_object_or_404(JudgeRun, pk=pk, imported=False)
    judging.request_cancel(run)
    messages.info(request, _("Cancel requested: requests in flight finish, no new ones start."))
    return redirect("judges:run", pk=pk)


@require_POST
@role_required(RESEARCHER)
def run_resume(request, pk):
    run = get_object_or_404(JudgeRun, pk=pk, imported=False)
    if judging.is_going(run):
        messages.error(request, _("The run is already going."))
    else:
        budget = request.POST.get("token_budget", "").strip()
        if budget:
            if parse_int(budget) is None:
                messages.error(request, _("The token budget must be a whole number."))
                return redirect("judges:run", pk=pk)
            run.token_budget = parse_int(budget)
            run.save(update_fields=["token_budget"])
        queue_judge_run(run)
        messages.success(
            request, _("Resumed: only missing verdicts and failed requests are redone.")
        )
    return redirect("judges:run", pk=pk)


@role_required(RESEARCHER)
def run_export(request, pk):
    """The run's verdicts as JSONL in the import schema (round trip)."""
    run = get_object_or_404(JudgeRun, pk=pk)
    content_type = "application/x-ndjson; charset=utf-8"
    lines = judge_import.export_lines(run)
    return csvexport.download(lines, content_type, f"judge-run-{run.pk}.jsonl")


@role_required(RESEARCHER)
def bias(request, pk):
    config = get_object_or_404(JudgeConfig, pk=pk)
    report = judging.bias_report(config)
    return render(
        request,
        "judges/bias.html",
        {"config": config, "report": report, "locked": is_locked(config)},
    )


@role_required(RESEARCHER)
def verdict_import(request):
    """Store the upload and start its preview job; its page polls and shows the report."""
    initial = {"judge": request.GET.get("judge", "")}
    form = JudgeImportForm(request.POST or None, request.FILES or None, initial=initial)
    options = ("judge", "run_name")
    job = uploads.start_job(request, form, IMPORT_KIND, run_judge_import, options)
    if job is not None:
        return redirect("judges:import_job", job_id=job.pk)
    return render(request, "judges/import.html", {"form": form})


@role_required(RESEARCHER)
def import_job(request, job_id):
    """A verdict import's preview or result (the progress bar reloads the page when done)."""
    job = sweeper.settle(jobs.job_or_404(request.user, job_id, kind=IMPORT_KIND))
    context = {"job": job, "progress": jobs.live_progress(job), "report": job.result}
    return render(request, "judges/import_job.html", context)


@require_POST
@role_required(RESEARCHER)
def import_confirm(request, job_id):
    preview = jobs.job_or_404(request.user, job_id, kind=IMPORT_KIND)
    try:
        job = uploads.confirm(preview, run_judge_import, request.user)
    except uploads.NotConfirmable as error:
        messages.error(request, str(error))
        return redirect("judges:import_job", job_id=preview.pk)
    return redirect("judges:import_job", job_id=job.pk)
