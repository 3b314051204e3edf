"""Annotators left out of a campaign's numbers, and why.

A researcher excludes annotators from a campaign (chosen ones with a reason, or every annotator
the agreement report flags, each with its flag as the reason). Agreement (scoring.agreement.services),
calibration fits (scoring.metrics.features) and releases (scoring.releases.freezing) then leave their judgments
out; the judgments stay stored, and `clear` brings them back. The queue and the progress counts
follow at once: the comparisons excluded judgments filled are handed out again until k judgments
count (`counting`). The agreement page, the REST API
(scoring.agreement.api) and `manage.py exclude_annotators` all call these functions.
"""

import hashlib
from collections.abc import Iterable

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Count, Q

from . import counting
from .models import AnnotatorExclusion, Campaign, Judgment
from .signals import annotators_excluded

REASON_MAX = AnnotatorExclusion._meta.get_field("reason").max_length


class ExclusionError(ValueError):
    """An exclusion cannot be made as asked (said in one sentence)."""


def exclusions(campaign: Campaign):
    """The campaign's exclusions, by annotator name."""
    return (
        AnnotatorExclusion.objects.filter(campaign=campaign)
        .select_related("annotator", "created_by")
        .order_by("annotator__username")
    )


def excluded_annotator_ids(campaign: Campaign) -> list[int]:
    return sorted(
        AnnotatorExclusion.objects.filter(campaign=campaign).values_list("annotator_id", flat=True)
    )


def candidates(campaign: Campaign):
    """Users who may be excluded: the campaign's annotators and anyone with a judgment in it."""
    return (
        get_user_model()
        .objects.filter(Q(rating_campaigns=campaign) | Q(judgments__comparison__campaign=campaign))
        .distinct()
        .order_by("username")
    )


def resolve(campaign: Campaign, usernames: Iterable[str]) -> list:
    """The users of these names among the campaign's candidates; unknown names are an error."""
    names = sorted({str(name).strip() for name in usernames if str(name).strip()})
    if not names:
        raise ExclusionError("name at least one annotator")
    if any("\x00" in name for name in names):
        raise ExclusionError("an annotator name cannot contain a NUL character")
    users = list(candidates(campaign).filter(username__in=names))
    unknown = sorted(set(names) - {u.username for u in users})
    if unknown:
        raise ExclusionError(
            f"{', '.join(unknown)}: not an annotator of campaign {campaign.name} "
            "(no judgments in it and not in its annotator list)"
        )
    return users


def clean_reason(reason) -> str:
    text = " ".join(str(reason or "").split())
    if "\x00" in text:
        raise ExclusionError("the reason cannot contain a NUL character")
    if not text:
        raise ExclusionError("give a reason for the exclusion (it is shown with the numbers)")
    if len(text) > REASON_MAX:
        raise ExclusionError(f"the reason is longer than {REASON_MAX} characters")
    return text


def exclude(campaign: Campaign, users, reason: str, by=None) -> list[AnnotatorExclusion]:
    """Exclude these users (User objects or usernames) with a reason; an annotator already
    excluded keeps one exclusion, with the new reason."""
    reason = clean_reason(reason)
    users = list(users)
    if any(isinstance(u, str) for u in users):
        users = resolve(campaign, [u if isinstance(u, str) else u.username for u in users])
    else:
        allowed = set(candidates(campaign).values_list("pk", flat=True))
        outside = sorted(u.username for u in users if u.pk not in allowed)
        if outside:
            raise ExclusionError(
                f"{', '.join(outside)}: not an annotator of campaign {campaign.name}"
            )
    if not users:
        raise ExclusionError("name at least one annotator")
    made = []
    with transaction.atomic():
        counting.lock_campaign(campaign)  # exclusions of one campaign change one at a time
        already = set(excluded_annotator_ids(campaign))
        for user in users:
            exclusion, _ = AnnotatorExclusion.objects.update_or_create(
                campaign=campaign,
                annotator=user,
                defaults={"reason": reason, "created_by": by},
            )
            made.append(exclusion)
        counting.uncount(campaign, [u.pk for u in users if u.pk not in already])
        new = [u.username for u in users if u.pk not in already]
        if new:
            annotators_excluded.send(Campaign, campaign=campaign, usernames=new, reason=reason)
    return made


def flagged(campaign: Campaign) -> list[tuple[str, str]]:
    """(username, flag text) of every annotator the campaign's agreement report flags."""
    # scoring builds on annotation: imported where needed
    from scoring.agreement import services as agreement

    return [
        (row["annotator"], row["flag"])
        for row in agreement.annotator_flags(campaign)
        if row.get("flagged")
    ]


def exclude_flagged(campaign: Campaign, by=None) -> list[AnnotatorExclusion]:
    """Exclude every annotator the agreement report flags, each with its flag as the reason
    (an empty list when nobody is flagged)."""
    rows = flagged(campaign)
    users = {u.username: u for u in resolve(campaign, [name for name, _ in rows])} if rows else {}
    made = []
    with transaction.atomic():
        for name, flag in rows:
            reason = f"flagged by the agreement report: {flag}"
            if len(reason) > REASON_MAX:
                reason = reason[: REASON_MAX - 1] + "…"
            made += exclude(campaign, [users[name]], reason, by)
    return made


def clear(campaign: Campaign, users=None) -> int:
    """Remove the exclusions of these users (User objects or usernames; None: all of them).
    Returns how many were removed."""
    rows = AnnotatorExclusion.objects.filter(campaign=campaign)
    if users is not None:
        users = list(users)
        names = [u for u in users if isinstance(u, str) and "\x00" not in u]
        ids = [u.pk for u in users if not isinstance(u, str)]
        rows = rows.filter(Q(annotator__username__in=names) | Q(annotator_id__in=ids))
    with transaction.atomic():
        counting.lock_campaign(campaign)
        ids = list(rows.values_list("annotator_id", flat=True))
        deleted, _ = rows.delete()
        counting.recount_back(campaign, ids)
    return deleted


def summary(campaign: Campaign) -> list[dict]:
    """One dict per exclusion: annotator (name and id), reason, judgments left out, who and
    when."""
    rows = list(exclusions(campaign))
    counts = dict(
        Judgment.objects.filter(
            comparison__campaign=campaign, annotator_id__in=[r.annotator_id for r in rows]
        )
        .values("annotator_id")
        .annotate(n=Count("pk"))
        .values_list("annotator_id", "n")
    )
    return [
        {
            "annotator": row.annotator.username,
            "annotator_id": row.annotator_id,
            "reason": row.reason,
            "judgments": counts.get(row.annotator_id, 0),
            "created_by": row.created_by.username if row.created_by else None,
            "created_at": row.created_at.isoformat(),
        }
        for row in rows
    ]


def state(campaign: Campaign) -> str:
    """A short text that changes whenever the exclusions do ('' without any), for cache keys."""
    rows = AnnotatorExclusion.objects.filter(campaign=campaign).order_by("annotator_id")
    lines = [f"{a}\t{r}" for a, r in rows.values_list("annotator_id", "reason")]
    if not lines:
        return ""
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:12]
