"""Zip downloads of the Hugging Face dataset folder of a campaign or a release (researchers who
manage the campaign, admins); `?companions=1` names the companions, off by default."""

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect
from django.utils.translation import gettext as _

from annotation.access import managed_campaign_or_404
from h2htalk.roles import RESEARCHER, role_required
from scoring.hfexport import export
from scoring.releases.access import release_or_404

TRUE = {"1", "true", "on", "yes"}


def wants_companions(params) -> bool:
    return str(params.get("companions", "")).lower() in TRUE


def zip_response(body: bytes, name: str) -> HttpResponse:
    response = HttpResponse(body, content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="{name}.zip"'
    return response


def campaign_zip(campaign, include_companions: bool) -> HttpResponse:
    name = f"campaign-{campaign.pk}-hf-dataset"
    body = export.zipped(
        lambda folder: export.export_campaign(campaign, folder, include_companions), name
    )
    return zip_response(body, name)


def release_zip(release, include_companions: bool) -> HttpResponse:
    name = f"release-{release.pk}-hf-dataset"
    body = export.zipped(
        lambda folder: export.export_release(release, folder, include_companions), name
    )
    return zip_response(body, name)


@role_required(RESEARCHER)
def campaign_dataset(request, pk):
    campaign = managed_campaign_or_404(request.user, pk)
    return campaign_zip(campaign, wants_companions(request.GET))


@role_required(RESEARCHER)
def release_dataset(request, pk):
    release = release_or_404(request.user, pk)
    if not release.inputs:
        messages.error(request, _("The release is not frozen yet: there is nothing to export."))
        return redirect("releases:detail", pk=release.pk)
    return release_zip(release, wants_companions(request.GET))
