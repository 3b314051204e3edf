"""The researchers' study-link page of a campaign: its settings, the address to publish,
rotating and closing it, and the participants with what to pay them (also as CSV)."""

from django.contrib import messages
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from h2htalk import csvexport
from h2htalk.roles import RESEARCHER, role_required

from ..access import managed_campaign_or_404
from . import export, links
from .forms import StudyLinkForm
from .models import StudyLink


@role_required(RESEARCHER)
def study_page(request, pk):
    campaign = managed_campaign_or_404(request.user, pk)
    link = StudyLink.objects.filter(campaign=campaign).first()
    form = StudyLinkForm(request.POST or None, instance=link)
    if request.method == "POST" and form.is_valid():
        form.instance.campaign = campaign
        form.save()
        messages.success(request, _("Study link saved."))
        return redirect("campaigns:study", pk=pk)
    context = {
        "campaign": campaign,
        "link": link,
        "form": form,
        "url": links.published_url(link, request.build_absolute_uri("/")[:-1]) if link else "",
        "rows": export.labelled(export.participant_rows(link)) if link else [],
    }
    return render(request, "study/manage.html", context)


@require_POST
@role_required(RESEARCHER)
def study_action(request, pk):
    """Rotate the token, close or open the link."""
    campaign = managed_campaign_or_404(request.user, pk)
    link = StudyLink.objects.filter(campaign=campaign).first()
    action = request.POST.get("action")
    if link is None or action not in ("rotate", "close", "open"):
        messages.error(request, _("Unknown action."))
    elif action == "rotate":
        links.rotate(link)
        messages.success(request, _("New link made: the old one no longer works."))
    else:
        links.set_open(link, action == "open")
        messages.success(request, _("Link opened.") if action == "open" else _("Link closed."))
    return redirect("campaigns:study", pk=pk)


@role_required(RESEARCHER)
def study_export(request, pk):
    campaign = managed_campaign_or_404(request.user, pk)
    link = StudyLink.objects.filter(campaign=campaign).first()
    rows = export.csv_rows(link) if link else iter(())
    filename = csvexport.stamped_filename(f"campaign-{campaign.pk}-participants", "csv")
    return csvexport.download(csvexport.stream(export.COLUMNS, rows), "text/csv", filename)
