import json

from django.db import transaction
from django.http import HttpResponse, HttpResponseBadRequest
from django.shortcuts import render

from annotation import exclusions
from annotation.access import managed_campaign_or_404
from h2htalk import csvexport, jobs
from h2htalk.models import Job
from h2htalk.roles import RESEARCHER, role_required
from scoring.agreement import services as agreement
from scoring.agreement.plots import agreement_heatmap_svg
from scoring.tasks import compute_agreement

AGREEMENT_TABLES = ("alpha", "annotators")
ALPHA_COLUMNS = [
    "group",
    "label",
    "level",
    "alpha",
    "low",
    "high",
    "ci",
    "n_units",
    "n_pairable",
    "percent_agreement",
    "fleiss_kappa",
]


def _running_job(campaign) -> Job | None:
    return (
        Job.objects.filter(kind="agreement", params__campaign=campaign.pk)
        .exclude(state__in=Job.FINISHED)
        .first()
    )


def _start_job(user, campaign) -> Job:
    job = Job.objects.create(kind="agreement", created_by=user, params={"campaign": campaign.pk})
    transaction.on_commit(lambda: compute_agreement.delay(job.pk))
    return job


@role_required(RESEARCHER)
def agreement_page(request, campaign_id):
    campaign = managed_campaign_or_404(request.user, campaign_id)
    report = agreement.cached_report(campaign)
    job = None
    if report is None:
        count = int(agreement.fingerprint(campaign).split(":")[0])
        if count <= agreement.INLINE_LIMIT:
            report = agreement.report_for(campaign)
        else:
            job = _running_job(campaign) or _start_job(request.user, campaign)
    context = {"campaign": campaign, "report": report.data if report else None, "job": job}
    context["exclusions"] = exclusions.summary(campaign)
    if job:
        context["progress"] = jobs.live_progress(job)
    if report and report.data["heatmap"]["annotators"]:
        heat = report.data["heatmap"]
        context["heatmap"] = agreement_heatmap_svg(
            heat["annotators"], heat["share"], heat["shared"]
        )
    return render(request, "scoring/agreement.html", context)


@role_required(RESEARCHER)
def agreement_export(request, campaign_id, fmt):
    campaign = managed_campaign_or_404(request.user, campaign_id)
    data = agreement.report_for(campaign).data
    stem = f"agreement-campaign-{campaign.pk}"
    if fmt == "json":
        response = HttpResponse(
            json.dumps(data, ensure_ascii=False, indent=1), content_type="application/json"
        )
        response["Content-Disposition"] = f'attachment; filename="{stem}.json"'
        return response
    table = request.GET.get("table", "alpha")
    if table not in AGREEMENT_TABLES:  # (it goes into the file name below)
        return HttpResponseBadRequest(
            f"table must be one of {', '.join(AGREEMENT_TABLES)}", content_type="text/plain"
        )
    if table == "annotators":
        rows = data["annotators"]
        columns = list(rows[0]) if rows else ["annotator"]
    else:
        rows = [
            {**row, "scope": scope}
            for scope in ("overall", "by_dimension", "by_subtask")
            for row in data[scope]
        ]
        columns = ["scope", *ALPHA_COLUMNS]
    body = csvexport.text(columns, rows, extrasaction="ignore")
    response = HttpResponse(body, content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="{stem}-{table}.csv"'
    return response
