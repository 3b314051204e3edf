"""REST API of a campaign's agreement report (researchers who manage the campaign); the same
report as the page, computed by scoring.agreement.services."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.decorators import api_view, permission_classes
from rest_framework.response import Response

from annotation.access import managed_campaign_or_404
from h2htalk.roles import IsResearcher
from scoring.agreement import services as agreement


@extend_schema(responses=OpenApiTypes.OBJECT, summary="A campaign's agreement report")
@api_view(["GET"])
@permission_classes([IsResearcher])
def campaign_agreement(request, campaign_id: int):
    """Krippendorff's α with 95% bootstrap CIs overall, per dimension and subtask; annotators
    with flags; pairwise agreement; majority vs Dawid–Skene. Computed on demand, cached until
    new judgments arrive."""
    campaign = managed_campaign_or_404(request.user, campaign_id)
    report = agreement.report_for(campaign)
    return Response({"fingerprint": report.fingerprint, **report.data})
