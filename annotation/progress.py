"""An annotator's progress in a campaign, in one query that reads no row per comparison or vote.

The counts come from counters and from index ranges that stay small whatever the campaign's or
the database's size: the annotator's tally (their judgments, kept by the queue), the sum of the
campaign's tallies (one row per annotator), the campaign's gold comparisons, the annotator's own
assignments, and the campaign's counts of comparisons (`Campaign.open_base`,
`Campaign.comparison_total`), taken again after comparisons were added or removed or k changed.

Which comparisons are gold and which scenarios are approved is read live, so marking gold or
sending a scenario back to review needs no recount:

- left for me = comparisons with fewer than k judgments (open_base - Σ filled)
  - open gold ones - open regular ones of a scenario not approved - open ones I was handed;
- campaign done = Σ judged - judgments on gold comparisons (their judgment counts).
"""

from dataclasses import dataclass

from django.db.models import Count, F, IntegerField, OuterRef, Subquery, Sum, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from scenarios.models import Scenario

from .models import AnnotatorTally, Assignment, Campaign, Comparison, Judgment

NOT_APPROVED = [state for state in Scenario.State.values if state != Scenario.State.APPROVED]


@dataclass
class AnnotatorProgress:
    done_today: int
    done_total: int
    left_for_me: int
    campaign_done: int
    campaign_target: int


def recount_later(campaign: Campaign) -> None:
    """Comparisons were added or removed: the next progress read counts them again."""
    Campaign.objects.filter(pk=campaign.pk).update(counted_overlap=None)
    campaign.counted_overlap = None


def _recount(campaign: Campaign) -> None:
    """One statement, so the comparisons and the tallies are read in the same snapshot: a
    judgment filling a comparison is in both or in neither."""
    here = OuterRef("pk")
    k = campaign.overlap
    comparisons = Comparison.objects.filter(campaign=here).values("campaign")
    tallies = AnnotatorTally.objects.filter(campaign=here).values("campaign")
    Campaign.objects.filter(pk=campaign.pk).update(
        comparison_total=_total(comparisons, Count("pk")),
        open_base=_total(comparisons.filter(judgment_count__lt=k), Count("pk"))
        + _total(tallies, Sum("filled")),
        counted_overlap=k,
    )
    campaign.counted_overlap = k


def _total(rows, aggregate) -> Coalesce:
    """`aggregate` over `rows` (grouped by one value: the campaign or the user) as a subquery,
    0 when there are none."""
    value = Subquery(rows.annotate(n=aggregate).values("n")[:1])
    return Coalesce(value, Value(0), output_field=IntegerField())


COUNTS = (
    *("today", "mine", "judged", "filled"),
    *("gold_n", "gold_votes", "gold_open", "withdrawn", "handed"),
)


def progress_counts(user, campaign: str = "") -> dict:
    """Annotations, `progress_<count>`, for a query of campaigns (`campaign` "") or of rows
    whose `campaign` path leads to one ("comparison__campaign__"): the counts `progress_for`
    reads, in the query that reads the campaign anyway."""
    here, k = OuterRef(f"{campaign}id"), OuterRef(f"{campaign}overlap")
    start_of_day = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)
    tallies = AnnotatorTally.objects.filter(campaign=here).values("campaign")
    gold = Comparison.objects.filter(campaign=here, is_gold=True).values("campaign")
    open_regular = Comparison.objects.filter(campaign=here, is_gold=False, judgment_count__lt=k)
    counts = {
        "today": _total(
            Judgment.objects.filter(
                annotator=user, comparison__campaign=here, created_at__gte=start_of_day
            ).values("annotator"),
            Count("pk"),
        ),
        "mine": _total(tallies.filter(annotator=user), Sum("judged")),
        "judged": _total(tallies, Sum("judged")),
        "filled": _total(tallies, Sum("filled")),
        "gold_n": _total(gold, Count("pk")),
        "gold_votes": _total(gold, Sum("judgment_count")),
        "gold_open": _total(gold.filter(judgment_count__lt=k), Count("pk")),
        "withdrawn": _total(
            open_regular.filter(scenario__state__in=NOT_APPROVED).values("campaign"), Count("pk")
        ),
        "handed": _total(
            Assignment.objects.filter(
                annotator=user,
                comparison__campaign=here,
                comparison__is_gold=False,
                comparison__judgment_count__lt=k,
                comparison__scenario__state=Scenario.State.APPROVED,
            ).values("annotator"),
            Count("pk"),
        ),
    }
    return {f"progress_{name}": value for name, value in counts.items()}


def progress_for(user, campaign: Campaign) -> AnnotatorProgress:
    """The counts as the campaign was read with `progress_counts` (plus what this request
    changed since: `count_hand_out`, `count_judgment`), or as read now."""
    if campaign.counted_overlap != campaign.overlap:
        _recount(campaign)
        campaign = Campaign.objects.annotate(**progress_counts(user)).get(pk=campaign.pk)
    elif not hasattr(campaign, "progress_handed"):
        campaign = Campaign.objects.annotate(**progress_counts(user)).get(pk=campaign.pk)
    n = {name: getattr(campaign, f"progress_{name}") for name in COUNTS}
    left = campaign.open_base - n["filled"] - n["gold_open"] - n["withdrawn"] - n["handed"]
    return AnnotatorProgress(
        done_today=n["today"],
        done_total=n["mine"],
        left_for_me=left,
        campaign_done=n["judged"] - n["gold_votes"],
        campaign_target=(campaign.comparison_total - n["gold_n"]) * campaign.overlap,
    )


def _add(campaign: Campaign, **changes) -> None:
    if hasattr(campaign, "progress_handed"):
        for name, change in changes.items():
            setattr(campaign, f"progress_{name}", getattr(campaign, f"progress_{name}") + change)


def count_hand_out(campaign: Campaign, comparison: Comparison) -> None:
    """The queue handed `comparison` to the user: one fewer left for them (a regular one)."""
    _add(campaign, handed=0 if comparison.is_gold else 1)


def count_judgment(campaign: Campaign, annotator, comparison: Comparison) -> None:
    """The queue stored a judgment of `annotator` on `comparison` (locked, its count read
    before this judgment). The first one makes the annotator's row (INSERT … ON CONFLICT DO
    NOTHING: a concurrent first judgment of theirs cannot fail on it)."""
    fills = comparison.judgment_count + 1 == campaign.overlap
    mine = AnnotatorTally.objects.filter(campaign=campaign, annotator=annotator)
    change = {"judged": F("judged") + 1, "filled": F("filled") + int(fills)}
    if not mine.update(**change):
        AnnotatorTally.objects.bulk_create(
            [AnnotatorTally(campaign=campaign, annotator=annotator)], ignore_conflicts=True
        )
        mine.update(**change)
    _add(
        campaign,
        today=1,
        mine=1,
        judged=1,
        filled=int(fills),
        gold_votes=int(comparison.is_gold),
        gold_open=-int(comparison.is_gold and fills),
        handed=-int(not comparison.is_gold and fills),  # no longer open: not "left" either
    )
