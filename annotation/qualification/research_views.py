"""The researchers' qualification page: the rule, the practice and refresher items (add one,
import a file, remove), and each annotator's phase and history. Researchers who manage the
campaign and admins only (`managed_campaign_or_404`: any other campaign is a 404)."""

from django.contrib import messages
from django.db import transaction
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from h2htalk.roles import RESEARCHER, role_required

from ..access import managed_campaign_or_404
from . import items
from .models import PracticeItem, PracticeSet
from .monitor import annotator_phases
from .phases import rule_of
from .research_forms import ImportForm, PracticeItemForm, RuleForm


def practice_items(campaign) -> dict:
    """The campaign's practice items per set, with both responses and their companions."""
    rows = PracticeItem.objects.filter(campaign=campaign).select_related(
        "scenario", "response_a__companion", "response_b__companion"
    )
    grouped = {value: [] for value in PracticeSet.values}
    for item in rows.order_by("pk"):
        grouped[item.practice_set].append(item)
    return grouped


def _render(request, campaign, rule_form=None, item_form=None, import_form=None, status=200):
    grouped = practice_items(campaign)
    context = {
        "campaign": campaign,
        "rule_form": rule_form
        or RuleForm(
            instance=rule_of(campaign),
            initial={"requires_qualification": campaign.requires_qualification},
        ),
        "item_form": item_form or PracticeItemForm(campaign=campaign),
        "import_form": import_form or ImportForm(),
        "sets": [(PracticeSet(value).label, value, grouped[value]) for value in grouped],
        "phases": annotator_phases(campaign),
    }
    return render(request, "campaigns/qualification.html", context, status=status)


@role_required(RESEARCHER)
def qualification(request, pk):
    """GET: the page; POST: save the rule."""
    campaign = managed_campaign_or_404(request.user, pk)
    if request.method != "POST":
        return _render(request, campaign)
    form = RuleForm(request.POST, instance=rule_of(campaign))
    if not form.is_valid():
        return _render(request, campaign, rule_form=form, status=400)
    form.save_for(campaign)
    messages.success(request, _("Qualification settings saved."))
    return redirect("campaigns:qualification", pk=campaign.pk)


@require_POST
@role_required(RESEARCHER)
def add_item(request, pk):
    campaign = managed_campaign_or_404(request.user, pk)
    form = PracticeItemForm(request.POST, campaign=campaign)
    if not form.is_valid():
        return _render(request, campaign, item_form=form, status=400)
    try:
        items.add_item(campaign, {k: v for k, v in form.cleaned_data.items() if v is not None})
    except items.ItemInvalid as invalid:
        form.add_error(None, str(invalid))
        return _render(request, campaign, item_form=form, status=400)
    messages.success(request, _("Practice item added."))
    return redirect("campaigns:qualification", pk=campaign.pk)


@require_POST
@role_required(RESEARCHER)
def import_items(request, pk):
    campaign = managed_campaign_or_404(request.user, pk)
    form = ImportForm(request.POST, request.FILES)
    if not form.is_valid():
        return _render(request, campaign, import_form=form, status=400)
    try:
        n = items.import_items(campaign, form.cleaned_data["file"])
    except items.ImportRefused as refused:
        for problem in refused.problems[:20]:
            form.add_error("file", problem)
        return _render(request, campaign, import_form=form, status=400)
    messages.success(request, _("%(n)s practice items imported.") % {"n": n})
    return redirect("campaigns:qualification", pk=campaign.pk)


@require_POST
@transaction.atomic
@role_required(RESEARCHER)
def delete_item(request, pk, item):
    campaign = managed_campaign_or_404(request.user, pk)
    if items.delete_item(campaign, item):
        messages.success(request, _("Practice item removed."))
    else:
        messages.error(request, _("No such practice item."))
    return redirect("campaigns:qualification", pk=campaign.pk)
