"""Researcher pages for rating campaigns: list, create/edit, monitoring, gold items, export.

Every page is for the researcher role and object-level: a campaign outside
managed_campaigns(user) answers 404, exactly like a missing one. Researchers see model names
here (the gold page shows both texts); annotators never reach these pages.
"""

from django.contrib import messages
from django.core.paginator import Paginator
from django.db import transaction
from django.db.models import Count, IntegerField, OuterRef, Subquery, Sum, Value
from django.db.models.functions import Coalesce
from django.http import QueryDict, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from h2htalk import csvexport
from h2htalk.models import Job
from h2htalk.roles import RESEARCHER, role_required
from scenarios.taxonomy import Subtask

from . import monitoring
from .access import managed_campaign_or_404, managed_campaigns
from .campaign_forms import PAIRING_RULE, CampaignForm, GoldForm, StateForm
from .markdown import render_markdown
from .models import RATING_DIMENSIONS, Campaign, Comparison, Judgment
from .tasks import BUILD_KIND, queue_build

State = Campaign.State
# action -> (new state, states it may come from)
TRANSITIONS = {
    "open": (State.OPEN, {State.DRAFT, State.PAUSED, State.CLOSED}),
    "pause": (State.PAUSED, {State.OPEN}),
    "close": (State.CLOSED, {State.DRAFT, State.OPEN, State.PAUSED}),
}
GOLD_PAGE_SIZE = 20


def _count_per_campaign(queryset, aggregate) -> Coalesce:
    """A correlated subquery: `aggregate` over `queryset` rows of the outer campaign."""
    rows = queryset.filter(campaign=OuterRef("pk")).order_by().values("campaign")
    value = Subquery(rows.annotate(n=aggregate).values("n"), output_field=IntegerField())
    return Coalesce(value, Value(0))


def with_progress(campaigns):
    """Campaigns annotated with comparison, judgment and annotator counts (no row fan-out)."""
    regular = Comparison.objects.filter(is_gold=False)
    return campaigns.annotate(
        n_regular=_count_per_campaign(regular, Count("pk")),
        n_judged=_count_per_campaign(regular, Sum("judgment_count")),
        n_gold=_count_per_campaign(Comparison.objects.filter(is_gold=True), Count("pk")),
        n_annotators=_count_per_campaign(Campaign.annotators.through.objects, Count("pk")),
    )


@role_required(RESEARCHER)
def campaign_list(request):
    campaigns = list(with_progress(managed_campaigns(request.user)).select_related("owner"))
    for campaign in campaigns:
        campaign.target = campaign.n_regular * campaign.overlap
        campaign.percent = monitoring.progress_percent(campaign.n_judged, campaign.target)
    return render(request, "campaigns/list.html", {"campaigns": campaigns})


@role_required(RESEARCHER)
def campaign_create(request):
    initial = {"scenario_query": request.GET.get("query", "")} if "query" in request.GET else {}
    form = CampaignForm(request.POST or None, initial=initial, owner=request.user)
    if request.method == "POST" and form.is_valid():
        with transaction.atomic():
            campaign = form.save(commit=False)
            campaign.owner = request.user
            campaign.save()
            form.save_m2m()
            job = queue_build(campaign, request.user)
        messages.success(request, f"Campaign {campaign.name} created; building its comparisons.")
        return redirect("job_detail", pk=job.pk)
    return render(
        request, "campaigns/form.html", {"form": form, "campaign": None, "rule": PAIRING_RULE}
    )


@role_required(RESEARCHER)
def campaign_edit(request, pk):
    campaign = managed_campaign_or_404(request.user, pk)
    form = CampaignForm(request.POST or None, instance=campaign)
    if request.method == "POST" and form.is_valid():
        rebuild = form.needs_build
        with transaction.atomic():
            campaign = form.save()
            job = queue_build(campaign, request.user, reset=True) if rebuild else None
        if job:
            messages.success(request, "Campaign saved; rebuilding its comparisons.")
            return redirect("job_detail", pk=job.pk)
        messages.success(request, "Campaign saved.")
        return redirect("campaigns:detail", pk=campaign.pk)
    return render(
        request,
        "campaigns/form.html",
        {"form": form, "campaign": campaign, "rule": PAIRING_RULE},
    )


@role_required(RESEARCHER)
def campaign_detail(request, pk):
    campaign = managed_campaign_or_404(request.user, pk)
    judgments = monitoring.load_judgments(campaign)
    skips = monitoring.load_skips(campaign)
    pool = set(campaign.annotators.values_list("username", flat=True))
    rows = monitoring.records(monitoring.annotator_table(judgments, skips, pool))
    for row in rows:
        row["in_pool"] = row["annotator"] in pool
        _for_display(row)
    overall = monitoring.overall_row(judgments, skips) if len(judgments) else None
    if overall:
        _for_display(overall)
    build_job = (
        Job.objects.filter(kind=BUILD_KIND, params__campaign_id=campaign.pk)
        .order_by("-created_at")
        .first()
    )
    labels = {"open": {State.PAUSED: "Resume", State.CLOSED: "Reopen"}.get(campaign.state, "Open")}
    actions = [
        (action, labels.get(action, action.capitalize()))
        for action, (_target, sources) in TRANSITIONS.items()
        if campaign.state in sources
    ]
    return render(
        request,
        "campaigns/detail.html",
        {
            "campaign": campaign,
            "overview": monitoring.campaign_overview(campaign),
            "rows": rows,
            "overall": overall,
            "companions": list(campaign.companions.order_by("name")),
            "runs": list(campaign.runs.order_by("-created_at")),
            "members": list(campaign.members.order_by("username")),
            "owner": campaign.owner,
            "guidelines": render_markdown(campaign.guidelines),
            "build_job": build_job,
            "actions": actions,
            "session_gap": monitoring.SESSION_GAP_MINUTES,
            "alpha": monitoring.LEFT_BIAS_ALPHA,
        },
    )


def _for_display(row: dict) -> None:
    """Percentages and seconds for the monitoring table (None stays None: shown as a dash)."""

    def scaled(value, factor):
        return None if value is None else value * factor

    row["gold_pct"] = scaled(row["gold_accuracy"], 100)
    row["left_pct"] = scaled(row["left_rate"], 100)
    row["median_time_s"] = scaled(row["median_time_ms"], 1 / 1000)
    row["median_client_s"] = scaled(row["median_client_ms"], 1 / 1000)
    row["skip_text"] = ", ".join(f"{code} {n}" for code, n in row["skip_reasons"].items())


@require_POST
@role_required(RESEARCHER)
def campaign_state(request, pk):
    campaign = managed_campaign_or_404(request.user, pk)
    form = StateForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Unknown action.")
        return redirect("campaigns:detail", pk=pk)
    action = form.cleaned_data["action"]
    target, sources = TRANSITIONS[action]
    if target == State.OPEN and not campaign.comparisons.exists():
        messages.error(request, "Nothing to rate yet: the campaign has no comparisons.")
        return redirect("campaigns:detail", pk=pk)
    # Conditional update: two researchers pressing buttons at once cannot skip a rule.
    changed = Campaign.objects.filter(pk=pk, state__in=sources).update(state=target)
    if not changed:
        messages.error(
            request, f"A {campaign.get_state_display().lower()} campaign cannot {action}."
        )
    else:
        messages.success(request, f"Campaign is now {State(target).label.lower()}.")
        if target == State.OPEN and not campaign.annotators.exists():
            messages.warning(request, "No annotator is in the pool yet: add some on Edit.")
    return redirect("campaigns:detail", pk=pk)


@require_POST
@role_required(RESEARCHER)
def campaign_rebuild(request, pk):
    campaign = managed_campaign_or_404(request.user, pk)
    job = queue_build(campaign, request.user)
    messages.info(request, "Rebuilding: missing comparisons are added, existing ones kept.")
    return redirect("job_detail", pk=job.pk)


def _gold_query(params) -> QueryDict:
    """The gold page's own filters and page, and nothing else (also used after a POST)."""
    query = QueryDict(mutable=True)
    if params.get("subtask") in Subtask.values:
        query["subtask"] = params["subtask"]
    if params.get("gold") in ("1", "0"):
        query["gold"] = params["gold"]
    if str(params.get("page", "")).isdigit():
        query["page"] = params["page"]
    return query


@role_required(RESEARCHER)
def campaign_gold(request, pk):
    campaign = managed_campaign_or_404(request.user, pk)
    if request.method == "POST":
        _save_gold(request, campaign)
        query = _gold_query(QueryDict(request.POST.get("query", "")))
        url = reverse("campaigns:gold", args=[pk])
        return redirect(f"{url}?{query.urlencode()}" if query else url)

    query = _gold_query(request.GET)
    comparisons = (
        campaign.comparisons.select_related(
            "scenario", "response_a__companion", "response_b__companion"
        )
        .defer(
            "scenario__search_text",
            "response_a__prompt_messages",
            "response_b__prompt_messages",
        )
        .order_by("scenario__subtask", "scenario__external_id", "pk")
    )
    if "subtask" in query:
        comparisons = comparisons.filter(scenario__subtask=query["subtask"])
    if "gold" in query:
        comparisons = comparisons.filter(is_gold=query["gold"] == "1")
    page = Paginator(comparisons, GOLD_PAGE_SIZE).get_page(query.get("page"))
    subtasks = (
        campaign.comparisons.order_by("scenario__subtask")
        .values_list("scenario__subtask", flat=True)
        .distinct()
    )
    labels = dict(Subtask.choices)
    filters = query.copy()
    filters.pop("page", None)
    return render(
        request,
        "campaigns/gold.html",
        {
            "campaign": campaign,
            "page": page,
            "subtasks": [(s, labels.get(s, s)) for s in subtasks],
            "selected_subtask": query.get("subtask", ""),
            "selected_gold": query.get("gold", ""),
            "filters": filters.urlencode(),
            "query": query.urlencode(),
            "answers": GoldForm.ANSWERS,
            "n_gold": campaign.comparisons.filter(is_gold=True).count(),
        },
    )


def _save_gold(request, campaign):
    form = GoldForm(request.POST)
    if not form.is_valid():
        errors = "; ".join(e for field in form.errors.values() for e in field)
        messages.error(request, f"Not saved: {errors}")
        return
    data = form.cleaned_data
    comparison = campaign.comparisons.filter(pk=data["comparison"]).first()
    if comparison is None:
        messages.error(request, "No such comparison in this campaign.")
        return
    if data["action"] == "unmark":
        comparison.is_gold, comparison.gold_preference, comparison.gold_note = False, None, ""
        messages.success(request, f"Comparison {comparison.pk} is no longer gold.")
    else:
        comparison.is_gold = True
        comparison.gold_preference = data["gold_preference"]
        comparison.gold_note = data["gold_note"].strip()
        answer = dict(GoldForm.ANSWERS)[data["gold_preference"]]
        messages.success(request, f"Comparison {comparison.pk} is gold: {answer}.")
        if comparison.judgment_count:
            messages.info(
                request,
                f"It already had {comparison.judgment_count} judgment(s); they now count as "
                "gold answers.",
            )
    comparison.save(update_fields=["is_gold", "gold_preference", "gold_note"])


DIMENSIONS = [name for name, _ in RATING_DIMENSIONS]
EXPORT_COLUMNS = [
    "campaign",
    "comparison_id",
    "subtask",
    "external_id",
    "companion_a",
    "companion_b",
    "shown_left",
    "left_companion",
    "screen_preference",
    "preference",
    "both_unacceptable",
    *[f"a_{d}" for d in DIMENSIONS],
    *[f"b_{d}" for d in DIMENSIONS],
    "rationale",
    "annotator",
    "time_on_task_ms",
    "client_time_ms",
    "created_at",
    "is_gold",
    "gold_preference",
]
_EXPORT_FIELDS = {
    "comparison_id": "comparison_id",
    "subtask": "comparison__scenario__subtask",
    "external_id": "comparison__scenario__external_id",
    "companion_a": "comparison__response_a__companion__name",
    "companion_b": "comparison__response_b__companion__name",
    "left_is_a": "assignment__left_is_a",
    "screen_preference": "screen_preference",
    "preference": "preference",
    "both_unacceptable": "both_unacceptable",
    "ratings": "ratings",
    "rationale": "rationale",
    "annotator": "annotator__username",
    "time_on_task_ms": "time_on_task_ms",
    "client_time_ms": "client_time_ms",
    "created_at": "created_at",
    "is_gold": "comparison__is_gold",
    "gold_preference": "comparison__gold_preference",
}


def _export_row(campaign_name: str, values: dict) -> dict:
    ratings = values["ratings"] or {}
    row = {
        "campaign": campaign_name,
        "shown_left": "a" if values["left_is_a"] else "b",
        "left_companion": values["companion_a"] if values["left_is_a"] else values["companion_b"],
        "created_at": values["created_at"].isoformat(),
    }
    for key in ("comparison_id", "subtask", "external_id", "companion_a", "companion_b"):
        row[key] = values[key]
    for key in ("screen_preference", "preference", "rationale", "annotator"):
        row[key] = values[key]
    for key in ("time_on_task_ms", "client_time_ms", "gold_preference"):
        row[key] = "" if values[key] is None else values[key]
    for key in ("both_unacceptable", "is_gold"):
        row[key] = int(values[key])
    for side in ("a", "b"):
        given = ratings.get(side) or {}
        for dimension in DIMENSIONS:
            row[f"{side}_{dimension}"] = given.get(dimension, "")
    return row


def iter_judgments_csv(campaign: Campaign, batch: int = 500):
    rows = (
        Judgment.objects.filter(comparison__campaign=campaign)
        .order_by("pk")
        .values(*_EXPORT_FIELDS.values())
        .iterator(chunk_size=2000)
    )
    names = {lookup: name for name, lookup in _EXPORT_FIELDS.items()}
    records = (_export_row(campaign.name, {names[k]: v for k, v in raw.items()}) for raw in rows)
    yield from csvexport.stream(EXPORT_COLUMNS, records, batch=batch)


@role_required(RESEARCHER)
def campaign_export(request, pk):
    campaign = managed_campaign_or_404(request.user, pk)
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    response = StreamingHttpResponse(iter_judgments_csv(campaign), content_type="text/csv")
    response["Content-Disposition"] = (
        f'attachment; filename="campaign-{campaign.pk}-judgments-{stamp}.csv"'
    )
    return response
