from django.contrib import messages
from django.core.paginator import Paginator
from django.http import QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from h2htalk import csvexport, jobs, uploads
from h2htalk.params import int_list, int_param
from h2htalk.roles import RESEARCHER, role_required
from scenarios import bulk_review, services
from scenarios.exporters import EXPORTERS
from scenarios.filters import ScenarioFilter
from scenarios.forms import ImportForm, PersonaForm, ReviewForm, ScenarioForm
from scenarios.models import Persona, Scenario
from scenarios.tasks import run_scenario_import

PAGE_SIZES = (25, 50, 100)


def _filtered(request):
    queryset = Scenario.objects.select_related("persona").prefetch_related("tags")
    return ScenarioFilter(request.GET, queryset=queryset.order_by("pk"))


@role_required(RESEARCHER)
def scenario_list(request):
    filterset = _filtered(request)
    size = int_param(request.GET, "size", 50)
    paginator = Paginator(filterset.qs, size if size in PAGE_SIZES else 50)
    page = paginator.get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "filter": filterset,
        "page": page,
        "query": query.urlencode(),
        "bulk_actions": services.actions_for(request.user),
        "bulk_help": bulk_review.help_rows(request.user),
    }
    partial = request.htmx and request.htmx.target == "results"
    template = "scenarios/_table.html" if partial else "scenarios/list.html"
    return render(request, template, context)


@role_required(RESEARCHER)
def scenario_detail(request, pk):
    scenario = get_object_or_404(Scenario.objects.select_related("persona", "reviewer"), pk=pk)
    actions = {
        name: services.ACTION_LABELS[name]
        for name in services.allowed_actions(scenario, request.user)
    }
    return render(
        request,
        "scenarios/detail.html",
        {
            "scenario": scenario,
            "actions": actions,
            "comments": scenario.comments.select_related("author"),
            "review_form": ReviewForm(),
        },
    )


@role_required(RESEARCHER)
def scenario_create(request):
    form = ScenarioForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        scenario = services.create_scenario(
            form.save(commit=False), request.user, form.cleaned_data["tags_text"]
        )
        messages.success(request, _("Scenario created."))
        return redirect("scenarios:detail", pk=scenario.pk)
    return render(request, "scenarios/form.html", {"form": form, "scenario": None})


@role_required(RESEARCHER)
def scenario_edit(request, pk):
    scenario = get_object_or_404(Scenario, pk=pk)
    before = services.snapshot(scenario)
    form = ScenarioForm(request.POST or None, instance=scenario)
    if request.method == "POST" and form.is_valid():
        revision = services.update_scenario(
            form.save(commit=False), request.user, before, form.cleaned_data["tags_text"]
        )
        if revision and revision.note == services.BACK_TO_REVIEW_NOTE:
            messages.warning(
                request,
                _(
                    "Saved. The content of an approved scenario changed, so it is back in review: "
                    "the rating queue does not hand it out until it is approved again, and releases "
                    "leave out judgments made on the earlier text."
                ),
            )
        else:
            messages.success(request, "Saved." if revision else "Nothing changed.")
        return redirect("scenarios:detail", pk=scenario.pk)
    return render(request, "scenarios/form.html", {"form": form, "scenario": scenario})


@require_POST
@role_required(RESEARCHER)
def scenario_review(request, pk):
    scenario = get_object_or_404(Scenario, pk=pk)
    form = ReviewForm(request.POST)
    if form.is_valid():
        action, comment = form.cleaned_data["action"], form.cleaned_data["comment"]
        try:
            if action == "comment":
                services.add_comment(scenario, request.user, comment)
            else:
                services.transition(scenario, request.user, action, comment)
                messages.success(
                    request,
                    _("%(ACTION_LABELS)s: done.")
                    % {"ACTION_LABELS": services.ACTION_LABELS[action]},
                )
        except services.TransitionError as error:
            messages.error(request, str(error))
    return redirect("scenarios:detail", pk=pk)


@require_POST
@role_required(RESEARCHER)
def scenario_bulk(request):
    action = request.POST.get("action", "")
    query = request.POST.get("query", "")
    back = f"{reverse('scenarios:list')}?{query}"
    if action not in services.actions_for(request.user):
        messages.error(request, _("Choose an action."))
        return redirect(back)
    comment = request.POST.get("comment", "")
    if action == "request_changes" and not comment.strip():
        messages.error(request, _("Request changes needs a comment: say what should change."))
        return redirect(back)
    if request.POST.get("scope") == "all":
        filterset = ScenarioFilter(QueryDict(query), queryset=Scenario.objects.all())
        if not filterset.is_valid():  # an invalid filter would be dropped: everything matches
            messages.error(request, _("The filter is not valid; nothing was changed."))
            return redirect(back)
        ids = filterset.qs.values_list("pk", flat=True)
    else:
        ids = int_list(request.POST, "ids")
    counts = services.bulk_transition(ids, request.user, action, comment)
    for level, text in bulk_review.outcome(action, counts, request.user):
        messages.add_message(request, level, text)
    return redirect(back)


@role_required(RESEARCHER)
def scenario_history(request, pk):
    scenario = get_object_or_404(Scenario, pk=pk)
    revisions = scenario.revisions.select_related("author")
    return render(request, "scenarios/history.html", {"scenario": scenario, "revisions": revisions})


@role_required(RESEARCHER)
def revision_diff(request, pk, number):
    scenario = get_object_or_404(Scenario, pk=pk)
    revision = get_object_or_404(scenario.revisions.select_related("author"), number=number)
    previous = scenario.revisions.filter(number__lt=number).order_by("-number").first()
    diffs = services.revision_diffs(revision, previous)
    return render(
        request,
        "scenarios/diff.html",
        {"scenario": scenario, "revision": revision, "previous": previous, "diffs": diffs},
    )


@role_required(RESEARCHER)
def scenario_export(request):
    fmt = request.GET.get("format", "jsonl")
    if fmt not in EXPORTERS:
        fmt = "jsonl"
    writer, content_type = EXPORTERS[fmt]
    filename = csvexport.stamped_filename("scenarios", fmt)
    return csvexport.download(writer(_filtered(request).qs), content_type, filename)


@role_required(RESEARCHER)
def scenario_import(request):
    """Store the upload and start its preview job; the job page polls and shows the report."""
    form = ImportForm(request.POST or None, request.FILES or None)
    options = ("format", "default_subtask", "initial_state")
    job = uploads.start_job(request, form, "scenario_import", run_scenario_import, options)
    if job is not None:
        return redirect("job_detail", pk=job.pk)
    return render(request, "scenarios/import.html", {"form": form})


@require_POST
@role_required(RESEARCHER)
def scenario_import_confirm(request, job_id):
    """Write a previewed file: a new job with the same file and options, dry_run off."""
    preview = jobs.job_or_404(request.user, job_id, kind="scenario_import")
    job = uploads.confirm_from_page(request, preview, run_scenario_import)
    return redirect("job_detail", pk=job.pk)


@role_required(RESEARCHER)
def persona_list(request):
    return render(request, "scenarios/personas.html", {"personas": Persona.objects.all()})


@role_required(RESEARCHER)
def persona_edit(request, pk=None):
    persona = get_object_or_404(Persona, pk=pk) if pk else None
    form = PersonaForm(request.POST or None, instance=persona)
    if request.method == "POST" and form.is_valid():
        form.save()
        messages.success(request, _("Persona saved."))
        return redirect("scenarios:personas")
    return render(request, "scenarios/persona_form.html", {"form": form, "persona": persona})
