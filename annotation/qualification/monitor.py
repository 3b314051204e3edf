"""Each annotator's phase and history in a campaign, for the campaign page and the API (three
queries, whatever the number of annotators)."""

from collections import defaultdict

from django.contrib.auth import get_user_model
from django.utils.translation import gettext as _

from .models import Phase, PracticeSet, QualificationEvent, QualificationStatus


def _share(value) -> str:
    return "–" if value is None else f"{value:.0%}"


def event_text(kind: str, data: dict) -> str:
    """One line of history, in the page's language."""
    practice_set = PracticeSet(data["set"]).label if data.get("set") in PracticeSet.values else ""
    if kind == QualificationEvent.Kind.STARTED:
        return _("%(set)s set, attempt %(n)s started") % {
            "set": practice_set,
            "n": data.get("attempt"),
        }
    if kind == QualificationEvent.Kind.PAUSED:
        measure = (
            _("gold accuracy") if data.get("measure") == "gold" else _("agreement with others")
        )
        return _("paused: %(measure)s %(value)s over the last %(n)s (threshold %(threshold)s)") % {
            "measure": measure,
            "value": _share(data.get("value")),
            "n": data.get("n"),
            "threshold": _share(data.get("threshold")),
        }
    figures = {
        "set": practice_set,
        "n": data.get("attempt"),
        "correct": data.get("correct"),
        "same": data.get("same_direction"),
        "total": data.get("total"),
    }
    if kind == QualificationEvent.Kind.PASSED:
        text = _("%(set)s set passed: %(correct)s of %(total)s exact, %(same)s same direction")
        return text % figures
    text = _("%(set)s set failed: %(correct)s of %(total)s exact, %(same)s same direction")
    return text % figures + (" · " + _("may retry") if data.get("retry") else "")


def annotator_phases(campaign) -> list[dict]:
    """One row per annotator of the pool or with a history: username, phase (value and
    label), since, and their history [{"at", "kind", "text", "data"}], oldest first."""
    statuses = {
        row.annotator_id: row for row in QualificationStatus.objects.filter(campaign_id=campaign.pk)
    }
    history = defaultdict(list)
    for event in QualificationEvent.objects.filter(campaign_id=campaign.pk).order_by(
        "created_at", "pk"
    ):
        history[event.annotator_id].append(
            {
                "at": event.created_at,
                "kind": event.kind,
                "text": event_text(event.kind, event.data),
                "data": event.data,
            }
        )
    pool = set(campaign.annotators.values_list("pk", flat=True))
    ids = pool | set(statuses) | set(history)
    names = dict(get_user_model().objects.filter(pk__in=ids).values_list("pk", "username"))
    default = Phase.QUALIFYING if campaign.requires_qualification else Phase.NOT_REQUIRED
    rows = []
    for pk in sorted(ids, key=lambda pk: names.get(pk, "")):
        status = statuses.get(pk)
        current = Phase(status.phase) if status else default
        if not campaign.requires_qualification:
            current = Phase.NOT_REQUIRED
        rows.append(
            {
                "annotator": names.get(pk, ""),
                "in_pool": pk in pool,
                "phase": current.value,
                "phase_label": str(current.label),
                "since": status.since if status else None,
                "history": history.get(pk, []),
            }
        )
    return rows
