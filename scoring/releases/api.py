"""REST API of benchmark releases: list, create (freeze + compute), detail with every number,
and compute / verify. Researchers who own or are members of the release's campaign, admins."""

from django.db import transaction
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response as ApiResponse

from annotation.access import managed_campaigns
from annotation.models import Campaign
from h2htalk.api_summaries import summarised
from h2htalk.roles import IsResearcher
from scenarios.models import CompanionModel
from scoring import tasks
from scoring.models import CalibratedJudge, Release, ReleaseResult
from scoring.releases import access, errors, formats, freezing, versioning
from scoring.releases import service as releases
from scoring.releases.forms import MAX_BOOT, MIN_BOOT


def unused_release_name(value: str) -> str:
    """A release's name, stripped, refused when another release has it (new releases and
    versions alike)."""
    value = value.strip()
    if Release.objects.filter(name=value).exists():
        raise serializers.ValidationError("A release with this name exists.")
    return value


class ReleaseSerializer(serializers.ModelSerializer):
    campaign_name = serializers.CharField(source="campaign.name", read_only=True)
    anchor_name = serializers.CharField(source="anchor.name", read_only=True)
    judge_name = serializers.SerializerMethodField()
    state = serializers.CharField(
        read_only=True, help_text="pending, computing, ready (numbers available) or failed."
    )
    links = serializers.SerializerMethodField()

    class Meta:
        model = Release
        fields = [
            "id",
            "name",
            "description",
            "campaign",
            "campaign_name",
            "anchor",
            "anchor_name",
            "judge",
            "judge_name",
            "seed",
            "n_boot",
            "style_control",
            "parent",
            "is_demo",
            "state",
            "message",
            "fingerprint",
            "frozen_at",
            "checked_at",
            "check_ok",
            "check_message",
            "created_at",
            "links",
        ]
        read_only_fields = fields

    def get_judge_name(self, release) -> str | None:
        return f"{release.judge.name} v{release.judge.version}" if release.judge else None

    def get_links(self, release) -> dict[str, str]:
        from django.urls import reverse

        return {
            "page": reverse("releases:detail", kwargs={"pk": release.pk}),
            **{
                fmt: reverse("releases:export", kwargs={"pk": release.pk, "fmt": fmt})
                for fmt in formats.FILES
            },
        }


class ReleaseDetailSerializer(ReleaseSerializer):
    results = serializers.SerializerMethodField()
    provenance = serializers.SerializerMethodField()

    class Meta(ReleaseSerializer.Meta):
        fields = [*ReleaseSerializer.Meta.fields, "provenance", "results"]
        read_only_fields = fields

    def _result(self, release):
        try:
            return release.result
        except ReleaseResult.DoesNotExist:
            return None

    def get_provenance(self, release) -> dict | None:
        """Code version, time and sha256 of the stored numbers."""
        result = self._result(release)
        if result is None:
            return None
        return {
            "code_version": result.code_version,
            "computed_at": result.computed_at.isoformat(),
            "results_sha256": result.data_sha256,
            "seconds": result.seconds,
        }

    def get_results(self, release) -> dict | None:
        """Every number of the release (see the README's "Benchmark releases and leaderboards"),
        null until computed."""
        result = self._result(release)
        return result.data if result else None


class ReleaseCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=150)
    description = serializers.CharField(required=False, allow_blank=True, default="")
    campaign = serializers.PrimaryKeyRelatedField(queryset=Campaign.objects.none())
    companions = serializers.PrimaryKeyRelatedField(
        queryset=CompanionModel.objects.all(),
        many=True,
        required=False,
        help_text="Default: all of the campaign's companions.",
    )
    anchor = serializers.PrimaryKeyRelatedField(queryset=CompanionModel.objects.all())
    judge = serializers.PrimaryKeyRelatedField(
        queryset=CalibratedJudge.objects.none(),
        required=False,
        allow_null=True,
        default=None,
        help_text="A calibrated judge id (null: humans and reference metrics only).",
    )
    seed = serializers.IntegerField(min_value=0, max_value=2**31 - 1, default=0)
    n_boot = serializers.IntegerField(min_value=MIN_BOOT, max_value=MAX_BOOT, default=1000)
    style_control = serializers.BooleanField(
        default=False,
        help_text="Also rank the companions with the responses' presentation held fixed "
        '(results.style_control; README, "Style control").',
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        from scoring.calibration.access import visible_judges

        request = self.context.get("request")
        if request is not None:  # (the schema generator builds it without a request)
            self.fields["campaign"].queryset = managed_campaigns(request.user)
            self.fields["judge"].queryset = visible_judges(request.user)

    def validate_name(self, value):
        return unused_release_name(value)

    def validate(self, attrs):
        try:
            attrs["companions"] = freezing.check_choices(
                attrs["campaign"],
                attrs.get("companions") or [],
                attrs["anchor"],
                attrs.get("judge"),
            )
        except errors.ReleaseError as error:
            raise serializers.ValidationError(str(error)) from error
        return attrs


class VersionCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=150)
    description = serializers.CharField(required=False, allow_blank=True, default="")
    campaigns = serializers.PrimaryKeyRelatedField(
        queryset=Campaign.objects.none(),
        many=True,
        required=False,
        default=list,
        help_text="Campaigns besides the parent's whose new votes the version counts.",
    )
    companions = serializers.PrimaryKeyRelatedField(
        queryset=CompanionModel.objects.all(),
        many=True,
        required=False,
        default=list,
        help_text="Companions added to the parent's (each a companion of one of the campaigns).",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        request = self.context.get("request")
        if request is not None:
            self.fields["campaigns"].child_relation.queryset = managed_campaigns(request.user)

    def validate_name(self, value):
        return unused_release_name(value)

    def validate(self, attrs):
        try:
            versioning.check_version_choices(
                self.context["parent"], attrs["campaigns"], attrs["companions"]
            )
        except errors.ReleaseError as error:
            raise serializers.ValidationError(str(error)) from error
        return attrs


class LineageSerializer(serializers.Serializer):
    releases = ReleaseSerializer(many=True)
    changes = serializers.ListField(child=serializers.DictField(), allow_null=True)


@summarised(
    "release",
    "benchmark releases",
    create="Freeze and compute a new release",
    retrieve="Show a release with every number",
)
class ReleaseViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    viewsets.GenericViewSet,
):
    """Benchmark releases of the campaigns you own or are a member of (admins: all).

    `GET /api/releases/` lists them; `GET /api/releases/{id}/` adds every number (`results`,
    null until computed); `POST /api/releases/` freezes and computes a new one (inline when
    small, else a background job: poll the detail until `state` is `ready`);
    `POST /api/releases/{id}/compute/` computes one without numbers or recomputes and verifies
    one bit for bit. `POST /api/releases/{id}/versions/` makes a new version of a computed
    release; `GET /api/releases/{id}/lineage/` lists its ancestors, itself and its versions, and
    (for a version) the change table against its parent.
    """

    permission_classes = [IsResearcher]
    queryset = Release.objects.none()

    def get_queryset(self):
        rows = access.visible_releases(self.request.user).select_related(
            "campaign", "anchor", "judge"
        )
        rows = rows.defer("inputs", "judge__document")  # large; loaded on access
        if self.action == "retrieve":
            return rows.select_related("result")
        return rows.order_by("-created_at")

    def get_serializer_class(self):
        if self.action == "create":
            return ReleaseCreateSerializer
        if self.action == "retrieve":
            return ReleaseDetailSerializer
        return ReleaseSerializer

    @extend_schema(request=ReleaseCreateSerializer, responses={201: ReleaseDetailSerializer})
    def create(self, request, *args, **kwargs):
        serializer = ReleaseCreateSerializer(data=request.data, context={"request": request})
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        release = releases.create_release(
            name=data["name"],
            description=data.get("description", ""),
            campaign=data["campaign"],
            companions=data["companions"],
            anchor=data["anchor"],
            judge=data.get("judge"),
            seed=data["seed"],
            n_boot=data["n_boot"],
            style_control=data["style_control"],
            user=request.user,
        )
        release = self.get_queryset().select_related("result").get(pk=release.pk)
        body = ReleaseDetailSerializer(release, context={"request": request}).data
        return ApiResponse(body, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Compute a release, or recompute and verify it",
        request=None,
        responses={200: OpenApiTypes.OBJECT, 202: OpenApiTypes.OBJECT},
    )
    @action(detail=True, methods=["post"])
    def compute(self, request, pk=None):
        """Compute the release (if it has no numbers) or recompute it from its frozen inputs and
        compare with the stored numbers bit for bit. Large releases: a background job (202)."""
        release = self.get_object()
        if releases.running_job(release):
            return ApiResponse(
                {"state": release.state, "detail": "being computed already", "job": release.job_id},
                status=status.HTTP_202_ACCEPTED,
            )
        if releases.needs_job(release):
            with transaction.atomic():
                job = tasks.queue_release_job(release, request.user)
            return ApiResponse(
                {"state": "computing", "job": job.pk}, status=status.HTTP_202_ACCEPTED
            )
        sentence = releases.compute_or_check(release)
        release.refresh_from_db()
        return ApiResponse(
            {
                "state": release.state,
                "detail": sentence,
                "check_ok": release.check_ok,
                "check_message": release.check_message,
                "fingerprint": release.fingerprint,
            }
        )

    @extend_schema(
        summary="Make a new version of a computed release",
        request=VersionCreateSerializer,
        responses={201: ReleaseDetailSerializer},
    )
    @action(detail=True, methods=["post"])
    def versions(self, request, pk=None):
        """Freeze and compute a version of this release (same anchor, scale, seed and draws; the
        parent's votes plus the new ones; inline when small, else a job: poll the detail)."""
        parent = self.get_object()
        serializer = VersionCreateSerializer(
            data=request.data, context={"request": request, "parent": parent}
        )
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        version = versioning.create_version(
            parent,
            name=data["name"],
            description=data.get("description", ""),
            campaigns=data["campaigns"],
            companions=data["companions"],
            user=request.user,
        )
        version = self.get_queryset().select_related("result").get(pk=version.pk)
        body = ReleaseDetailSerializer(version, context={"request": request}).data
        return ApiResponse(body, status=status.HTTP_201_CREATED)

    @extend_schema(summary="A release's lineage and changes", responses={200: LineageSerializer})
    @action(detail=True, methods=["get"])
    def lineage(self, request, pk=None):
        """Ancestors (oldest first), the release, its versions; `changes`: per companion the
        parent's and this version's Elo on the lineage's scale, the change and the reasons
        (null for a release without a parent or numbers)."""
        release = self.get_object()
        chain = [
            r for r in versioning.lineage(release) if r.pk == release.pk or _visible(request, r)
        ]
        context = versioning.page_context(release, _result_of(release))
        rows = context.get("version", {}).get("rows")
        changes = None
        if rows is not None:
            changes = [
                {
                    "companion": row["id"],
                    "name": row["name"],
                    "anchor": row["anchor"],
                    "parent": row["parent"],
                    "version": row["version"],
                    "change": row["change"],
                    "reasons": [{"code": code, "votes": n} for code, n in row["reasons"]],
                }
                for row in rows
            ]
        releases_data = ReleaseSerializer(chain, many=True, context={"request": request}).data
        return ApiResponse({"releases": releases_data, "changes": changes})


def _visible(request, release) -> bool:
    return access.visible_releases(request.user).filter(pk=release.pk).exists()


def _result_of(release):
    return ReleaseResult.objects.filter(release=release).first()
