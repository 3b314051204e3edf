"""The planner on the campaign page: its panel (the form, prefilled from the campaign or an
earlier campaign, and the latest plan) and the running campaign's status line. Both answer
htmx with the fragment and a plain browser with a page; the work is in
scoring.planning.services."""

from django.shortcuts import render

from annotation.access import managed_campaign_or_404
from h2htalk import jobs
from h2htalk.roles import RESEARCHER, role_required
from scoring.planning import services
from scoring.planning.forms import PlanForm
from scoring.tasks import run_plan


@role_required(RESEARCHER)
def campaign_plan(request, campaign_id):
    campaign = managed_campaign_or_404(request.user, campaign_id)
    context = {"campaign": campaign, "error": None, "observed": None}
    if request.method == "POST":
        form = PlanForm(request.POST, campaign=campaign, user=request.user)
        if form.is_valid():
            data, earlier = form.cleaned_data, form.cleaned_data.get("earlier")
            try:
                services.make_plan(campaign, data, request.user, earlier, task=run_plan)
            except services.PlanRefused as refused:
                context["error"] = str(refused)
    else:
        initial, context["observed"] = services.form_initial(campaign, request.GET, request.user)
        form = PlanForm(initial=initial, campaign=campaign, user=request.user)
    running = services.running_plan(campaign)
    context.update(form=form, latest=services.latest_plan(campaign), running=running)
    context["progress"] = jobs.live_progress(running) if running else None
    template = "planning/_panel.html" if request.htmx else "planning/page.html"
    return render(request, template, context)


@role_required(RESEARCHER)
def campaign_plan_status(request, campaign_id):
    campaign = managed_campaign_or_404(request.user, campaign_id)
    context = {"campaign": campaign, "status": services.status(campaign)}
    template = "planning/_status.html" if request.htmx else "planning/status_page.html"
    return render(request, template, context)
