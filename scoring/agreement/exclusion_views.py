"""The agreement page's exclusion actions (POST forms): exclude chosen annotators with a reason,
exclude every flagged annotator, bring annotators back. Researchers who manage the campaign
(owner, members) and admins; the work is done by annotation.exclusions, the messages are
made in scoring.agreement.services."""

from django.contrib import messages
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from annotation.access import managed_campaign_or_404
from h2htalk.roles import RESEARCHER, role_required
from scoring.agreement import services as agreement


@role_required(RESEARCHER)
@require_POST
def agreement_exclusions(request, campaign_id):
    campaign = managed_campaign_or_404(request.user, campaign_id)
    level, text = agreement.exclusion_action(
        campaign,
        request.POST.get("action", ""),
        request.POST.getlist("annotators"),
        request.POST.get("reason", ""),
        by=request.user,
    )
    messages.add_message(request, level, text)
    return redirect("scoring:agreement", campaign_id=campaign.pk)
