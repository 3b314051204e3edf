"""Researcher pages for rating campaigns: list, create/edit, monitoring, gold items, export.

Every page is for the researcher role and object-level: a campaign outside
managed_campaigns(user) answers 404, exactly like a missing one. Researchers see model names
here (the gold page shows both texts); annotators never reach these pages. What is stored and
what a campaign may do lives in annotation.campaigns; these views read the request and render.
"""

from django.contrib import messages
from django.http import QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from h2htalk import confirmation, csvexport, jobs
from h2htalk.params import int_list, int_param
from h2htalk.roles import RESEARCHER, role_required

from . import campaigns, scenario_set
from .access import managed_campaign_or_404
from .campaign_forms import PAIRING_RULE, CampaignForm, GoldForm, StateForm
from .markdown import render_markdown
from .qualification.monitor import annotator_phases
from .tasks import queue_build


@role_required(RESEARCHER)
def campaign_list(request):
    rows = campaigns.campaigns_with_progress(request.user)
    return render(request, "campaigns/list.html", {"campaigns": rows})


@role_required(RESEARCHER)
def campaign_create(request):
    initial = {"scenario_query": request.GET.get("query", "")} if "query" in request.GET else {}
    form = CampaignForm(request.POST or None, initial=initial, owner=request.user)
    if request.method == "POST" and form.is_valid():
        campaign, _job = campaigns.create_campaign(form, request.user)
        messages.info(
            request,
            _("Campaign %(name)s created; its comparisons are being built.")
            % {"name": campaign.name},
        )
        return redirect("campaigns:detail", pk=campaign.pk)
    return render(
        request, "campaigns/form.html", {"form": form, "campaign": None, "rule": PAIRING_RULE}
    )


@role_required(RESEARCHER)
def campaign_set_count(request):
    """The builder's live count (htmx): what the form's current settings would build."""
    picker = scenario_set.ScenarioSetForm(request.GET, prefix=scenario_set.PREFIX)
    count = None
    if picker.is_valid() and picker.cleaned_data["state"]:
        count = scenario_set.count_set(
            picker.query(),
            int_list(request.GET, "companions"),
            int_list(request.GET, "runs"),
            request.GET.get("pairing", "all_pairs"),
            max(1, int_param(request.GET, "pairs_per_scenario", 1) or 1),
            int_param(request.GET, "seed", 0) or 0,
        )
    context = {"count": count, "query": picker.query() if count else ""}
    return render(request, "campaigns/_set_count.html", context)


@role_required(RESEARCHER)
def campaign_build_status(request, pk):
    """The campaign page's build box (htmx-polled while the build runs); once it ends, the
    page reloads to show the numbers the build made."""
    campaign = managed_campaign_or_404(request.user, pk)
    job = campaigns.latest_build_job(campaign)
    response = render(request, "campaigns/_build.html", _build_context(campaign, job))
    if job is not None and job.is_finished and request.GET.get("polling"):
        response["HX-Refresh"] = "true"
    return response


def _build_context(campaign, job) -> dict:
    return {
        "campaign": campaign,
        "build_job": job,
        "build": jobs.live_progress(job) if job is not None else None,
    }


@role_required(RESEARCHER)
def campaign_edit(request, pk):
    campaign = managed_campaign_or_404(request.user, pk)
    form = CampaignForm(request.POST or None, instance=campaign)
    if request.method == "POST" and form.is_valid():
        question = campaigns.edit_question(campaign, form)
        if question and not confirmation.confirmed(request):
            return confirmation.ask(request, question, reverse("campaigns:edit", args=[pk]))
        campaign, job = campaigns.save_campaign(form, request.user)
        if job:
            messages.info(request, _("Campaign saved; its comparisons are being rebuilt."))
            return redirect("campaigns:detail", pk=campaign.pk)
        messages.success(request, _("Campaign saved."))
        return redirect("campaigns:detail", pk=campaign.pk)
    return render(
        request,
        "campaigns/form.html",
        {"form": form, "campaign": campaign, "rule": PAIRING_RULE},
    )


# The campaign page's numbers refresh this often while it is open and its tab is visible.
POLL_SECONDS = 10


def _live_context(campaign) -> dict:
    """What the page's live part shows (`campaigns/_live.html`), read again on every poll."""
    return {
        "campaign": campaign,
        "overview": campaigns.campaign_overview(campaign),
        **campaigns.annotator_monitoring(campaign),
        "poll_seconds": POLL_SECONDS,
        "polling": campaign.state == campaigns.State.OPEN,
    }


@role_required(RESEARCHER)
def campaign_live(request, pk):
    """The campaign page's progress and annotator table alone, which the page polls (htmx)."""
    campaign = managed_campaign_or_404(request.user, pk)
    return render(request, "campaigns/_live.html", _live_context(campaign))


@role_required(RESEARCHER)
def campaign_detail(request, pk):
    campaign = managed_campaign_or_404(request.user, pk)
    context = {
        **_live_context(campaign),
        "companions": list(campaign.companions.order_by("name")),
        "runs": list(campaign.runs.order_by("-created_at")),
        "members": list(campaign.members.order_by("username")),
        "annotators": list(campaign.annotators.order_by("username")),
        "owner": campaign.owner,
        "guidelines": render_markdown(campaign.guidelines),
        **_build_context(campaign, campaigns.latest_build_job(campaign)),
        "actions": campaigns.state_buttons(campaign),
        "rebuild_question": campaigns.question(campaign, "rebuild"),
        # Phases only where qualification is asked for: no query otherwise (MAX_DETAIL_QUERIES).
        "phases": annotator_phases(campaign) if campaign.requires_qualification else [],
    }
    return render(request, "campaigns/detail.html", context)


@require_POST
@role_required(RESEARCHER)
def campaign_state(request, pk):
    campaign = managed_campaign_or_404(request.user, pk)
    form = StateForm(request.POST)
    if not form.is_valid():
        messages.error(request, _("Unknown action."))
        return redirect("campaigns:detail", pk=pk)
    action = form.cleaned_data["action"]
    if action in campaigns.DESTRUCTIVE_ACTIONS and not confirmation.confirmed(request):
        return _ask(request, campaign, action)
    try:
        state = campaigns.change_state(campaign, action)
    except campaigns.TransitionRefused as refused:
        messages.error(request, str(refused))
        return redirect("campaigns:detail", pk=pk)
    messages.success(request, _("Campaign is now %(lower)s.") % {"lower": state.label.lower()})
    if state == campaigns.State.OPEN and not campaign.annotators.exists():
        messages.warning(request, _("No annotator is in the pool yet: add some on Edit."))
    return redirect("campaigns:detail", pk=pk)


@require_POST
@role_required(RESEARCHER)
def campaign_rebuild(request, pk):
    campaign = managed_campaign_or_404(request.user, pk)
    if not confirmation.confirmed(request):
        return _ask(request, campaign, "rebuild")
    queue_build(campaign, request.user)
    messages.info(request, _("Rebuilding: missing comparisons are added, existing ones kept."))
    return redirect("campaigns:detail", pk=pk)


def _ask(request, campaign, action: str):
    """The confirmation page for a destructive action on the campaign (nothing changed)."""
    cancel = reverse("campaigns:detail", args=[campaign.pk])
    return confirmation.ask(request, campaigns.question(campaign, action), cancel)


@role_required(RESEARCHER)
def campaign_gold(request, pk):
    campaign = managed_campaign_or_404(request.user, pk)
    if request.method == "POST":
        query = campaigns.gold_query(QueryDict(request.POST.get("query", "")))
        url = reverse("campaigns:gold", args=[pk])
        back = f"{url}?{query.urlencode()}" if query else url
        if request.POST.get("action") == "unmark" and not confirmation.confirmed(request):
            question = campaigns.unmark_question(campaign, request.POST.get("comparison"))
            if question:
                return confirmation.ask(request, question, back)
        _save_gold(request, campaign)
        return redirect(back)
    query = campaigns.gold_query(request.GET)
    filters = query.copy()
    filters.pop("page", None)
    context = {
        "campaign": campaign,
        "page": campaigns.gold_page(campaign, query),
        "subtasks": campaigns.campaign_subtasks(campaign),
        "selected_subtask": query.get("subtask", ""),
        "selected_gold": query.get("gold", ""),
        "filters": filters.urlencode(),
        "query": query.urlencode(),
        "answers": GoldForm.ANSWERS,
        "n_gold": campaign.comparisons.filter(is_gold=True).count(),
    }
    return render(request, "campaigns/gold.html", context)


def _save_gold(request, campaign) -> None:
    form = GoldForm(request.POST)
    if not form.is_valid():
        errors = "; ".join(e for field in form.errors.values() for e in field)
        messages.error(request, _("Not saved: %(errors)s") % {"errors": errors})
        return
    for level, text in campaigns.save_gold(campaign, form.cleaned_data):
        messages.add_message(request, level, text)


@role_required(RESEARCHER)
def campaign_export(request, pk):
    campaign = managed_campaign_or_404(request.user, pk)
    return csvexport.download(
        campaigns.iter_judgments_csv(campaign),
        "text/csv",
        campaigns.judgments_csv_filename(campaign),
    )
