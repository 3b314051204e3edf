"""The agreement page's exclusion actions (POST forms): exclude chosen annotators with a reason,
exclude every flagged annotator, bring annotators back. Researchers who manage the campaign
(owner, members) and admins; the work is done by annotation.exclusions."""

from django.contrib import messages
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from annotation import exclusions
from annotation.access import managed_campaign_or_404
from h2htalk.roles import RESEARCHER, role_required

ACTIONS = ("exclude", "exclude_flagged", "clear")


def _names(rows) -> str:
    return ", ".join(sorted(row.annotator.username for row in rows))


@role_required(RESEARCHER)
@require_POST
def agreement_exclusions(request, campaign_id):
    campaign = managed_campaign_or_404(request.user, campaign_id)
    action = request.POST.get("action", "")
    chosen = request.POST.getlist("annotators")
    try:
        if action == "exclude":
            made = exclusions.exclude(
                campaign, chosen, request.POST.get("reason", ""), by=request.user
            )
            messages.success(
                request,
                f"Excluded {_names(made)}: their judgments are left out of agreement, "
                "calibration fits and new releases of this campaign.",
            )
        elif action == "exclude_flagged":
            made = exclusions.exclude_flagged(campaign, by=request.user)
            if made:
                messages.success(
                    request,
                    f"Excluded {len(made)} flagged annotator(s): {_names(made)} (each with its "
                    "flag as the reason).",
                )
            else:
                messages.info(request, "No annotator is flagged: nobody was excluded.")
        elif action == "clear":
            removed = exclusions.clear(campaign, chosen or None)
            who = ", ".join(sorted(chosen)) if chosen else "every excluded annotator"
            messages.success(request, f"Brought back {who} ({removed} exclusion(s) removed).")
        else:
            messages.error(request, f"Unknown action {action[:40]!r}: use {', '.join(ACTIONS)}.")
    except exclusions.ExclusionError as error:
        messages.error(request, f"Nothing changed: {error}.")
    return redirect("scoring:agreement", campaign_id=campaign.pk)
