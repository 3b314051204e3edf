"""The participants of a study link, one row each, for paying them and their bonuses: the
platform's ids as given, what they did (judgments, skips, gold answers), their time on task
and their qualification phase. The researcher page, its CSV and the API show these rows."""

from django.db.models import Count, F, Max, Q, Sum
from django.db.models.functions import Coalesce

from annotation.models import Assignment, Judgment
from annotation.qualification.models import Phase, QualificationStatus

from .models import Participant, StudyLink

COLUMNS = [
    "participant_id",
    "study_id",
    "session_id",
    "account",
    "joined_at",
    "consented_at",
    "finished_at",
    "finish_reason",
    "items",
    "skipped",
    "gold_items",
    "gold_correct",
    "time_on_task_seconds",
    "elapsed_seconds",
    "qualification",
]


def _judgment_counts(campaign_id: int) -> dict[int, dict]:
    """Per annotator: judgments, gold ones, gold ones agreeing in direction with the known
    answer, and the time on them (the browser's visible time, the server's where none came)."""
    agrees = Q(comparison__is_gold=True) & (
        Q(comparison__gold_preference__lt=0, preference__lt=0)
        | Q(comparison__gold_preference__gt=0, preference__gt=0)
        | Q(comparison__gold_preference=0, preference=0)
    )
    rows = (
        Judgment.objects.filter(comparison__campaign=campaign_id)
        .values("annotator")
        .annotate(
            items=Count("pk"),
            gold_items=Count("pk", filter=Q(comparison__is_gold=True)),
            gold_correct=Count("pk", filter=agrees),
            time_ms=Sum(Coalesce(F("client_time_ms"), F("time_on_task_ms"))),
        )
    )
    return {row.pop("annotator"): row for row in rows}


def _skips(campaign_id: int) -> dict[int, int]:
    rows = (
        Assignment.objects.filter(comparison__campaign=campaign_id, state="skipped")
        .values("annotator")
        .annotate(n=Count("pk"))
    )
    return {row["annotator"]: row["n"] for row in rows}


def participant_rows(link: StudyLink) -> list[dict]:
    """One row per participant in the order they joined (COLUMNS)."""
    counts, skips = _judgment_counts(link.campaign_id), _skips(link.campaign_id)
    last = dict(
        Judgment.objects.filter(comparison__campaign=link.campaign_id)
        .values("annotator")
        .annotate(last=Max("created_at"))
        .values_list("annotator", "last")
    )
    # Each participant's phase, as `annotation.qualification.phase` tells it, in one query.
    stood = dict(
        QualificationStatus.objects.filter(campaign=link.campaign_id).values_list(
            "annotator", "phase"
        )
    )
    unstarted = Phase.QUALIFYING if link.campaign.requires_qualification else Phase.NOT_REQUIRED
    rows = []
    for participant in Participant.objects.filter(link=link).select_related("user"):
        did = counts.get(participant.user_id, {})
        end = participant.finished_at or last.get(participant.user_id)
        rows.append(
            {
                "participant_id": participant.participant_id,
                "study_id": participant.study_id,
                "session_id": participant.session_id,
                "account": participant.user.username,
                "joined_at": participant.joined_at,
                "consented_at": participant.consented_at,
                "finished_at": participant.finished_at,
                "finish_reason": participant.finish_reason,
                "items": did.get("items", 0),
                "skipped": skips.get(participant.user_id, 0),
                "gold_items": did.get("gold_items", 0),
                "gold_correct": did.get("gold_correct", 0),
                "time_on_task_seconds": round((did.get("time_ms") or 0) / 1000, 1),
                "elapsed_seconds": round((end - participant.joined_at).total_seconds(), 1)
                if end
                else None,
                "qualification": stood.get(participant.user_id, unstarted),
            }
        )
    return rows


def labelled(rows: list[dict]) -> list[dict]:
    """The rows with the finish reason and qualification phase named for a page."""
    reasons, phases = dict(Participant.Finish.choices), dict(Phase.choices)
    for row in rows:
        row["finish_label"] = reasons.get(row["finish_reason"], "")
        row["qualification_label"] = phases.get(row["qualification"], row["qualification"])
    return rows


def csv_rows(link: StudyLink):
    """The rows as CSV cells (times in ISO 8601, empty for none)."""
    for row in participant_rows(link):
        yield {
            key: value.isoformat()
            if hasattr(value, "isoformat")
            else ("" if value is None else value)
            for key, value in row.items()
        }
