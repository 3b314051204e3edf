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
from django.views.decorators.http import require_POST

from h2htalk import jobs
from h2htalk.models import Job
from h2htalk.params import int_param
from h2htalk.roles import ADMIN, RESEARCHER, role_required, user_roles
from scoring.calibration import routing
from scoring.calibration import services as calibration
from scoring.calibration.forms import CalibrationForm, ImportForm, MetricsForm, RoutingForm
from scoring.metrics import features as feature_data
from scoring.metrics import jobs as metric_jobs
from scoring.tasks import queue_metrics_job

JOB_KINDS = (calibration.KIND, metric_jobs.KIND)
RECENT_JOBS = 10


def _recent_jobs(user):
    rows = Job.objects.filter(kind__in=JOB_KINDS).order_by("-created_at")
    if ADMIN not in user_roles(user):
        rows = rows.filter(created_by=user)
    recent = list(rows[:RECENT_JOBS])
    for job in recent:
        job.progress = jobs.live_progress(job)
        job.judge_id = job.result.get("calibrated_judge") if job.result else None
    return recent


@role_required(RESEARCHER)
def calibration_list(request):
    judges = list(
        calibration.visible_judges(request.user)
        .select_related("campaign", "created_by")
        .order_by("name", "-version")
    )
    for judge in judges:
        heldout = judge.document.get("heldout") or {}
        judge.summary = heldout.get("judges") or {}
        judge.worse = bool((heldout.get("comparison") or {}).get("composite", {}).get("worse"))
    return render(
        request,
        "calibration/list.html",
        {
            "judges": judges,
            "jobs": _recent_jobs(request.user),
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
        arguments = {
            "judge": data["judge"],
            "features": data["features"],
            "name": data["name"] or None,
            "folds": data["folds"],
            "seed": data["seed"],
        }
        campaign = data["campaign"]
        if calibration.needs_job(campaign):
            with transaction.atomic():
                job = calibration.queue_fit(request.user, campaign, **arguments)
            messages.info(request, "A large calibration: it runs in the background.")
            return redirect(f"{reverse('calibration:list')}#job-{job.pk}")
        try:
            judge = calibration.fit(campaign, user=request.user, **arguments)
        except feature_data.FeatureError as error:
            form.add_error(None, str(error))
        else:
            messages.success(request, f"{judge} fitted.")
            return redirect("calibration:detail", pk=judge.pk)
    return render(request, "calibration/form.html", {"form": form})


def _table_rows(document: dict) -> list[dict]:
    """The side-by-side rows of the report: one per metric, a cell per judge."""
    judges = (document.get("heldout") or {}).get("judges") or {}
    spec = [
        ("accuracy_without_ties", "Accuracy vs human majority, ties left out", 3),
        ("accuracy_with_ties", "Accuracy vs human majority, with ties (tie band)", 3),
        ("kappa", "Cohen's κ vs human majority (A / tie / B)", 3),
        ("log_loss", "Log-loss over votes (lower is better)", 3),
        ("brier", "Brier score over votes (lower is better)", 3),
        ("ece", "Expected calibration error (10 bins; lower is better)", 3),
        ("spearman", "System level: Spearman ρ with the human ranking", 3),
        ("kendall", "System level: Kendall τ with the human ranking", 3),
    ]
    rows = []
    for key, label, digits in spec:
        cells = []
        for name in calibration.JUDGE_LABELS:
            metrics = judges.get(name)
            value = metrics.get(key) if metrics else None
            text = "—" if value is None else f"{value:.{digits}f}"
            if key == "accuracy_with_ties" and metrics and value is not None:
                text += f" (δ {metrics.get('tie_band', 0):.2f})"
            cells.append(text)
        rows.append({"key": key, "label": label, "cells": cells})
    return rows


@role_required(RESEARCHER)
def calibration_detail(request, pk):
    judge = calibration.judge_or_404(request.user, pk)
    document = judge.document
    heldout = document.get("heldout") or {}
    judges = heldout.get("judges") or {}
    system = heldout.get("system") or {}
    companions = [
        {
            "name": companion["name"],
            "elo": {name: values[i] for name, values in (system.get("elo") or {}).items()},
        }
        for i, companion in enumerate(system.get("companions") or [])
    ]
    weights = [
        {
            "feature": feature,
            "label": document.get("feature_labels", {}).get(feature, feature),
            "weight": weight,
            "per_unit": per_unit,
            "scale": scale,
        }
        for feature, weight, per_unit, scale in zip(
            document["features"],
            document["weights"],
            document.get("weights_per_unit") or [None] * len(document["features"]),
            document["scaling"]["scale"],
            strict=True,
        )
    ]
    versions = list(
        calibration.visible_judges(request.user)
        .filter(name=judge.name)
        .order_by("-version")
        .values("pk", "version", "created_at")
    )
    comparison = heldout.get("comparison") or {}
    return render(
        request,
        "calibration/detail.html",
        {
            "judge": judge,
            "document": document,
            "heldout": heldout,
            "rows": _table_rows(document),
            "labels": list(calibration.JUDGE_LABELS.values()),
            "worse": bool(comparison.get("composite", {}).get("worse")),
            "versus": comparison,
            "humans": document.get("human_agreement") or {},
            "companions": companions,
            "weights": weights,
            "versions": versions,
            "diagram": calibration.reliability_svg(judges) if judges else None,
        },
    )


@role_required(RESEARCHER)
def calibration_download(request, pk):
    judge = calibration.judge_or_404(request.user, pk)
    response = HttpResponse(calibration.export_json(judge), content_type="application/json")
    stem = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in judge.name)[:80]
    response["Content-Disposition"] = (
        f'attachment; filename="calibrated-judge-{stem}-v{judge.version}.json"'
    )
    return response


@role_required(RESEARCHER)
def calibration_import(request):
    form = ImportForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        try:
            judge, created = calibration.import_document(
                form.cleaned_data["document"],
                name=form.cleaned_data["name"] or None,
                user=request.user,
            )
        except calibration.DocumentError as error:
            form.add_error("document", str(error))
        else:
            if created:
                messages.success(request, f"{judge} imported.")
            else:
                messages.info(request, f"{judge} is already here with the same document.")
            return redirect("calibration:detail", pk=judge.pk)
    return render(request, "calibration/import.html", {"form": form})


@role_required(RESEARCHER)
def calibration_route(request):
    initial = {"mode": routing.UNCERTAIN}
    if int_param(request.GET, "judge") is not None:
        initial["judge"] = int_param(request.GET, "judge")
        judge = calibration.visible_judges(request.user).filter(pk=initial["judge"]).first()
        if judge and judge.campaign_id:
            initial["source"] = judge.campaign_id
    form = RoutingForm(request.POST or None, initial=initial, user=request.user)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            campaign, routed = routing.route(
                data["source"],
                data["mode"],
                data["name"],
                request.user,
                judge=data["judge"],
                count=data["count"],
                threshold=data["threshold"],
                exclude_judged=data["exclude_judged"],
            )
        except routing.RoutingError as error:
            form.add_error(None, str(error))
        else:
            messages.success(
                request,
                f"Campaign {campaign.name} created as a draft with {len(routed.comparisons)} "
                "routed comparisons; add annotators on Edit, then open it.",
            )
            return redirect("campaigns:detail", pk=campaign.pk)
    return render(request, "calibration/route.html", {"form": form})


@require_POST
@role_required(RESEARCHER)
def calibration_metrics(request):
    form = MetricsForm(request.POST, user=request.user)
    if not form.is_valid():
        messages.error(request, "Choose a campaign you manage.")
        return redirect("calibration:list")
    with transaction.atomic():
        job = queue_metrics_job(
            request.user,
            campaign=form.cleaned_data["campaign"],
            recompute=form.cleaned_data["recompute"],
            embedding=form.cleaned_data["embedding"] or "none",
        )
    messages.info(request, "Computing reference metrics in the background.")
    return redirect(f"{reverse('calibration:list')}#job-{job.pk}")
