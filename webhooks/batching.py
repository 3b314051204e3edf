"""The campaign's batch task: filled comparisons, completion and flags, noticed off the rating
path.

A submission that fills a comparison (brings it to k judgments) while an endpoint of the
campaign wants one of these events inserts one FilledComparison row and, unless a batch is
already due, sends the batch task for after `WEBHOOK_BATCH_SECONDS` (a cache key marks it
due). The task sends one `comparisons.filled` event for all rows since the last batch, then
`campaign.completed` once when no regular comparison is below k, and `annotator.flagged` once
per annotator when the agreement report first flags them (`annotation.exclusions.flagged`,
the function behind the agreement and monitoring pages).
"""

from django.conf import settings
from django.core.cache import cache
from django.db import IntegrityError, transaction

from annotation.exclusions import flagged
from annotation.models import Campaign, Comparison

from . import events, payloads
from .dispatch import emit
from .models import Announcement, FilledComparison
from .subscriptions import endpoints_for, wants_batched


def _due_key(campaign_id: int) -> str:
    return f"webhooks:batch-due:{campaign_id}"


def comparison_filled(campaign_id: int, comparison_id: int) -> None:
    """The rating path's hook: nothing unless someone listens; else one insert, and the batch
    task sent after commit when none is due."""
    if not wants_batched(campaign_id):
        return
    FilledComparison.objects.create(campaign_id=campaign_id, comparison_id=comparison_id)
    delay = settings.WEBHOOK_BATCH_SECONDS
    if cache.add(_due_key(campaign_id), 1, timeout=max(1, int(delay) + 60)):
        from .tasks import run_batch

        transaction.on_commit(lambda: run_batch.apply_async((campaign_id,), countdown=delay))


def run(campaign_id: int) -> None:
    cache.delete(_due_key(campaign_id))  # fills from now on send another batch
    campaign = Campaign.objects.filter(pk=campaign_id).first()
    if campaign is None:
        return
    with transaction.atomic():
        rows = list(FilledComparison.objects.filter(campaign_id=campaign_id).order_by("pk"))
        FilledComparison.objects.filter(pk__in=[r.pk for r in rows]).delete()
        regular = Comparison.objects.filter(campaign_id=campaign_id, is_gold=False)
        remaining = regular.filter(judgment_count__lt=campaign.overlap).count()
        if rows:
            ids = sorted({r.comparison_id for r in rows})
            data = payloads.comparisons_filled(campaign, ids, remaining)
            emit(events.COMPARISONS_FILLED, campaign_id, data)
        if remaining == 0 and regular.exists():
            _completed(campaign, regular.count())
    if endpoints_for(events.ANNOTATOR_FLAGGED, campaign_id):
        for annotator, reason in flagged(campaign):
            announce_flag(campaign, annotator, reason, "agreement report")


def _completed(campaign: Campaign, comparisons: int) -> None:
    if endpoints_for(events.CAMPAIGN_COMPLETED, campaign.pk) and _first(campaign, "completed"):
        emit(
            events.CAMPAIGN_COMPLETED,
            campaign.pk,
            payloads.campaign_completed(campaign, comparisons),
        )


def announce_flag(campaign: Campaign, annotator: str, reason: str, source: str) -> None:
    """`annotator.flagged`, once per annotator and source in the campaign."""
    if _first(campaign, f"{source}:{annotator}"):
        data = payloads.annotator_flagged(campaign, annotator, reason, source)
        emit(events.ANNOTATOR_FLAGGED, campaign.pk, data)


def _first(campaign: Campaign, key: str) -> bool:
    """Record the announcement; False when it was made before."""
    try:
        with transaction.atomic():
            Announcement.objects.create(campaign=campaign, key=key[:200])
    except IntegrityError:
        return False
    return True
