"""REST API: annotators excluded from a campaign's numbers (under the campaign's agreement).

GET lists the exclusions; POST excludes chosen annotators with a reason, or every annotator the
agreement report flags (`{"flagged": true}`); DELETE brings back the annotators named in
`?annotator=` (all of them without it). Researchers who manage the campaign, and admins; the
work is done by annotation.exclusions, as for the page and `manage.py exclude_annotators`.
"""

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.response import Response

from annotation import exclusions
from annotation.access import managed_campaign_or_404
from h2htalk.roles import IsResearcher
from h2htalk.serializers import ErrorSerializer


def _name():
    return serializers.CharField(max_length=150)


class ExclusionSerializer(serializers.Serializer):
    annotator = serializers.CharField(help_text="Username of the excluded annotator.")
    reason = serializers.CharField()
    judgments = serializers.IntegerField(help_text="Their judgments in the campaign (left out).")
    created_by = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()


class ExclusionListSerializer(serializers.Serializer):
    campaign = serializers.IntegerField()
    excluded_judgments = serializers.IntegerField(
        help_text="Judgments left out of agreement, calibration fits and new releases."
    )
    exclusions = ExclusionSerializer(many=True)


class ExcludeSerializer(serializers.Serializer):
    annotators = serializers.ListField(
        child=_name(),
        required=False,
        default=list,
        max_length=1000,
        help_text="Usernames to exclude (annotators of the campaign or with judgments in it).",
    )
    reason = serializers.CharField(
        max_length=exclusions.REASON_MAX,
        required=False,
        allow_blank=True,
        default="",
        help_text="Why (required with `annotators`; shown with the numbers).",
    )
    flagged = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Exclude every annotator the agreement report flags, each with its flag as "
        "the reason (instead of `annotators`).",
    )

    def validate(self, data):
        if data["flagged"] and data["annotators"]:
            raise serializers.ValidationError("give either `annotators` or `flagged`, not both")
        if not data["flagged"] and not data["annotators"]:
            raise serializers.ValidationError(
                {"annotators": ["name at least one annotator (or send flagged: true)"]}
            )
        if data["annotators"] and not data["reason"].strip():
            raise serializers.ValidationError({"reason": ["give a reason for the exclusion"]})
        return data


class RemoveSerializer(serializers.Serializer):
    annotator = serializers.ListField(child=_name(), required=False, default=list, max_length=1000)


def _listing(campaign) -> dict:
    rows = exclusions.summary(campaign)
    return {
        "campaign": campaign.pk,
        "excluded_judgments": sum(row["judgments"] for row in rows),
        "exclusions": rows,
    }


@extend_schema(
    methods=["GET"],
    summary="Annotators excluded from a campaign's numbers",
    responses=ExclusionListSerializer,
)
@extend_schema(
    methods=["POST"],
    summary="Exclude annotators (chosen ones with a reason, or all flagged ones)",
    request=ExcludeSerializer,
    responses={
        200: ExclusionListSerializer,
        400: OpenApiResponse(ErrorSerializer, description="Unknown annotator, no reason, …"),
    },
)
@extend_schema(
    methods=["DELETE"],
    summary="Bring excluded annotators back",
    parameters=[
        OpenApiParameter(
            "annotator",
            str,
            many=True,
            description="Username to bring back (repeat for several); none: every one.",
        )
    ],
    request=None,
    responses={200: ExclusionListSerializer},
)
@api_view(["GET", "POST", "DELETE"])
@permission_classes([IsResearcher])
def campaign_exclusions(request, campaign_id: int):
    """Annotators whose judgments agreement, calibration fits and releases of the campaign
    leave out, with the reason and how many judgments that is."""
    campaign = managed_campaign_or_404(request.user, campaign_id)
    if request.method == "POST":
        form = ExcludeSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        try:
            if data["flagged"]:
                exclusions.exclude_flagged(campaign, by=request.user)
            else:
                exclusions.exclude(campaign, data["annotators"], data["reason"], by=request.user)
        except exclusions.ExclusionError as error:
            return Response({"detail": str(error)}, status=status.HTTP_400_BAD_REQUEST)
    elif request.method == "DELETE":
        form = RemoveSerializer(data={"annotator": request.query_params.getlist("annotator")})
        form.is_valid(raise_exception=True)
        exclusions.clear(campaign, form.validated_data["annotator"] or None)
    return Response(_listing(campaign))
