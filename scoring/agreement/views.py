"""The campaign's agreement page (a small report computed in the request, a large one by a job
the page polls) and its JSON / CSV downloads; the work is in scoring.agreement.services."""

import json

from django.http import HttpResponse, HttpResponseBadRequest
from django.shortcuts import render

from annotation import exclusions
from annotation.access import managed_campaign_or_404
from h2htalk import csvexport, jobs
from h2htalk.roles import RESEARCHER, role_required
from scoring.agreement import services as agreement
from scoring.agreement.plots import agreement_heatmap_svg
from scoring.tasks import compute_agreement


@role_required(RESEARCHER)
def agreement_page(request, campaign_id):
    campaign = managed_campaign_or_404(request.user, campaign_id)
    report, job = agreement.report_or_job(campaign, request.user, compute_agreement)
    context = {"campaign": campaign, "report": report.data if report else None, "job": job}
    if report:
        context["alpha_tables"] = agreement.alpha_tables(report.data)
        context["note"] = agreement.note_text(report.data)
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
    if table not in agreement.EXPORT_TABLES:  # (it goes into the file name below)
        return HttpResponseBadRequest(
            f"table must be one of {', '.join(agreement.EXPORT_TABLES)}", content_type="text/plain"
        )
    columns, rows = agreement.export_rows(data, table)
    body = csvexport.text(columns, rows, extrasaction="ignore")
    response = HttpResponse(body, content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="{stem}-{table}.csv"'
    return response
