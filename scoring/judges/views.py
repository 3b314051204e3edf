"""Researcher pages for the LLM judge: configurations, runs (progress, cancel/resume, failures
with their raw outputs), the bias report per configuration, and the verdict import."""

from django.contrib import messages
from django.db import transaction
from django.db.models import Count, Q
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from h2htalk import csvexport, jobs, sweeper, uploads
from h2htalk.params import int_param, parse_int
from h2htalk.roles import RESEARCHER, role_required
from scoring.judges import imports as judge_import
from scoring.judges import judging
from scoring.judges import rubric as judge
from scoring.judges.forms import (
    JudgeConfigForm,
    JudgeImportForm,
    JudgeRunForm,
    is_locked,
    key_status,
)
from scoring.models import JudgeConfig, JudgeRun, JudgeVerdict
from scoring.tasks import queue_judge_run, run_judge_import

IMPORT_KIND = "judge_import"
FAILURES_SHOWN = 100
Parse = JudgeVerdict.Parse


@role_required(RESEARCHER)
def config_list(request):
    configs = JudgeConfig.objects.annotate(
        n_runs=Count("runs", distinct=True), n_verdicts=Count("runs__verdicts")
    )
    rows = [(c, key_status(c)) for c in configs]
    return render(request, "judges/configs.html", {"rows": rows})


@role_required(RESEARCHER)
def config_edit(request, pk=None):
    config = get_object_or_404(JudgeConfig, pk=pk) if pk else None
    initial = {}
    if config is None and int_param(request.GET, "copy") is not None:
        source = get_object_or_404(JudgeConfig, pk=int_param(request.GET, "copy"))
        initial = {
            name: getattr(source, name) for name in JudgeConfigForm._meta.fields if name != "name"
        }
        initial["name"] = f"{source.name} (copy)"[:100]
    form = JudgeConfigForm(request.POST or None, instance=config, initial=initial)
    if request.method == "POST" and form.is_valid():
        form.save()
        messages.success(request, "Judge saved.")
        return redirect("judges:list")
    context = {
        "form": form,
        "config": config,
        "default_single": judge.DEFAULT_SINGLE_RUBRIC,
        "default_pairwise": judge.DEFAULT_PAIRWISE_RUBRIC,
    }
    return render(request, "judges/config_form.html", context)


@role_required(RESEARCHER)
def run_list(request):
    runs = JudgeRun.objects.select_related("judge", "campaign", "created_by").annotate(
        n_verdicts=Count("verdicts"),
        n_unparseable=Count("verdicts", filter=Q(verdicts__parse=Parse.FAILED)),
        n_errors=Count("verdicts", filter=Q(verdicts__parse=Parse.ERROR)),
    )
    judge_id = int_param(request.GET, "judge")
    if judge_id is not None:
        runs = runs.filter(judge_id=judge_id)
    return render(request, "judges/runs.html", {"runs": runs})


@role_required(RESEARCHER)
def run_create(request):
    initial = {"name": f"judge run {timezone.now():%Y-%m-%d %H:%M}"}
    for name in ("judge", "campaign"):
        if int_param(request.GET, name) is not None:
            initial[name] = int_param(request.GET, name)
    form = JudgeRunForm(request.POST or None, initial=initial, user=request.user)
    if request.method == "POST" and form.is_valid():
        with transaction.atomic():
            run = form.save(commit=False)
            run.created_by = request.user
            run.save()
            if form.selected_responses is not None:
                run.responses.set(form.selected_responses)
            queue_judge_run(run)
        messages.success(request, "Judge run queued.")
        return redirect("judges:run", pk=run.pk)
    return render(request, "judges/run_form.html", {"form": form})


def _run_context(run: JudgeRun) -> dict:
    return {
        "run": run,
        "progress": judging.progress_of(run),
        "active": run.state in judging.ACTIVE,
    }


@role_required(RESEARCHER)
def run_detail(request, pk):
    run = get_object_or_404(JudgeRun.objects.select_related("judge", "campaign"), pk=pk)
    context = _run_context(run)
    verdicts = run.verdicts.select_related(
        "response__scenario",
        "response__companion",
        "first__scenario",
        "first__companion",
        "second__companion",
    ).order_by("pk")
    context["unparseable"] = verdicts.filter(parse=Parse.FAILED)[:FAILURES_SHOWN]
    context["errors"] = verdicts.filter(parse=Parse.ERROR)[:FAILURES_SHOWN]
    context["shown"] = FAILURES_SHOWN
    if (
        run.judge.mode == JudgeConfig.Mode.PAIRWISE
        or run.verdicts.filter(first__isnull=False).exists()
    ):
        context["pairwise_summary"] = judging.pairwise_summary(run)
    if (
        run.judge.mode == JudgeConfig.Mode.SINGLE
        or run.verdicts.filter(response__isnull=False).exists()
    ):
        context["single_summary"] = judging.single_summary(run)
    context["dimensions"] = judge.DIMENSIONS
    return render(request, "judges/run_detail.html", context)


@role_required(RESEARCHER)
def run_progress(request, pk):
    """htmx partial polled while the run is queued or running."""
    run = get_object_or_404(JudgeRun, pk=pk)
    response = render(request, "judges/_run_progress.html", _run_context(run))
    if run.state not in judging.ACTIVE:
        response["HX-Refresh"] = "true"
    return response


@require_POST
@role_required(RESEARCHER)
def run_cancel(request, pk):
    run = get_object_or_404(JudgeRun, pk=pk, imported=False)
    judging.request_cancel(run)
    messages.info(request, "Cancel requested: requests in flight finish, no new ones start.")
    return redirect("judges:run", pk=pk)


@require_POST
@role_required(RESEARCHER)
def run_resume(request, pk):
    run = get_object_or_404(JudgeRun, pk=pk, imported=False)
    if judging.is_going(run):
        messages.error(request, "The run is already going.")
    else:
        budget = request.POST.get("token_budget", "").strip()
        if budget:
            if parse_int(budget) is None:
                messages.error(request, "The token budget must be a whole number.")
                return redirect("judges:run", pk=pk)
            run.token_budget = parse_int(budget)
            run.save(update_fields=["token_budget"])
        queue_judge_run(run)
        messages.success(request, "Resumed: only missing verdicts and failed requests are redone.")
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
