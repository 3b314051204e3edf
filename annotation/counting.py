"""Which judgments count towards k, kept on `Comparison.judgment_count` as annotators are
excluded from a campaign and brought back.

`judgment_count` counts the judgments that count: those of annotators not excluded from the
campaign. The queue hands a regular comparison out while judgment_count + live leases < k and
refuses a submission once judgment_count >= k (`queue`, `candidates.claim`), so "never more than
k" is a guarantee about counted judgments, and a comparison whose judgments were excluded is
handed out again until it has k that count. The progress counts (`progress`) follow from the
same column.

Excluding (`uncount`): the researcher's transaction locks the campaign row, then the excluded
annotators' user rows (FOR UPDATE), then takes their judgments off the counts of the
comparisons they judged, closes their open items (freeing those slots) and recounts the
campaign's progress base in the same transaction. A submission holds a KEY SHARE lock on its
annotator's user row from its first statement (`rating_reads.rated_assignment`) to its commit,
so it either commits before the exclusion reads the annotator's judgments (which then include
it) or waits for the exclusion to commit, after which its store statement sees the exclusion
and stores the judgment without counting it (`recording.store`). An excluded annotator is handed
no new items (`queue.next_assignment`; their "left" is 0).

Bringing back (`recount_back`): the same locks; their judgments are counted again. A comparison
that was handed out again meanwhile may then have more than k counted judgments: all of them
count (nothing is thrown away), it is not handed out any more, and the campaign's progress may
pass its target (shown capped at 100%).
"""

from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.models import Count, F
from django.utils import timezone

from .models import Assignment, Campaign, Comparison, Judgment


def uncount(campaign: Campaign, user_ids) -> None:
    """The judgments of these (newly excluded) annotators stop counting towards k; their open
    items in the campaign are closed. Call inside the transaction that stores the exclusions."""
    _shift(campaign, user_ids, -1)


def recount_back(campaign: Campaign, user_ids) -> None:
    """The judgments of these annotators (whose exclusions were just removed) count again."""
    _shift(campaign, user_ids, +1)


def lock_campaign(campaign: Campaign) -> None:
    """Lock the campaign row until the transaction ends: exclusions of a campaign and its
    progress recounts happen one at a time. FOR NO KEY UPDATE, not FOR UPDATE: hand-outs
    and answers committing meanwhile check their rows' foreign keys against the campaign row
    (KEY SHARE), and must not wait for an exclusion."""
    list(Campaign.objects.select_for_update(no_key=True).filter(pk=campaign.pk).values_list("pk"))


def _shift(campaign: Campaign, user_ids, sign: int) -> None:
    from .progress import recount_locked  # progress imports models only; no cycle at import

    ids = sorted(set(user_ids))
    if not ids:
        return
    with transaction.atomic():
        # Lock order: campaign, then users (by id), then comparisons (by id).
        lock_campaign(campaign)
        users = get_user_model().objects.select_for_update().filter(pk__in=ids).order_by("pk")
        list(users.values_list("pk"))
        per_comparison = dict(
            Judgment.objects.filter(comparison__campaign=campaign, annotator_id__in=ids)
            .values("comparison_id")
            .annotate(n=Count("pk"))
            .values_list("comparison_id", "n")
        )
        locked = Comparison.objects.select_for_update().filter(pk__in=list(per_comparison))
        list(locked.order_by("pk").values_list("pk"))
        by_amount: dict[int, list[int]] = {}
        for comparison_id, n in per_comparison.items():
            by_amount.setdefault(n, []).append(comparison_id)
        for n, comparison_ids in by_amount.items():
            Comparison.objects.filter(pk__in=comparison_ids).update(
                judgment_count=F("judgment_count") + sign * n
            )
        if sign < 0:
            _close_open_items(campaign, ids)
        recount_locked(campaign)


def _close_open_items(campaign: Campaign, user_ids: list[int]) -> None:
    """Close the annotators' open items as rejected, freeing their slots. An item locked right
    now is being answered (its submission waits for this transaction): it is skipped here, and
    its judgment is stored uncounted."""
    items = Assignment.objects.filter(
        comparison__campaign=campaign, annotator_id__in=user_ids, state=Assignment.State.OPEN
    )
    if connection.features.has_select_for_update_skip_locked:
        items = items.select_for_update(skip_locked=True, of=("self",))
    ids = list(items.values_list("pk", flat=True))
    Assignment.objects.filter(pk__in=ids, state=Assignment.State.OPEN).update(
        state=Assignment.State.REJECTED, finished_at=timezone.now()
    )
