"""The drift watch: after each judgment of an admitted annotator in a campaign that requires
qualification, their gold accuracy and consensus agreement over a moving window of their
latest judgments (made since they were admitted) are compared with the campaign's thresholds;
below one, they are paused and sent to the refresher set (`Phase.REFRESHER`).

The same measures as the monitoring page, on the window: gold accuracy is the share of gold
votes pointing the way of the known answer (a tie expects a tie); consensus agreement is the
share of votes whose direction equals the plurality of the others' (at least two others, a
unique top: `h2htalk.stats.agreement.annotators.loo_consensus`'s rule).

Cost in the rating cycle: nothing where the campaign needs no qualification (the queue checks
`Campaign.requires_qualification`, read with the campaign); else one read of the rule and the
annotator's phase, and one more for the measure the judgment can change (gold or consensus).
The watch only pauses when the campaign has a refresher set to send the annotator to.
"""

from collections import Counter, defaultdict

from django.db.models import Exists, OuterRef, Subquery
from django.utils import timezone

from ..models import Judgment
from .models import (
    Phase,
    PracticeItem,
    PracticeSet,
    QualificationEvent,
    QualificationRule,
    QualificationStatus,
)

MIN_OTHERS = 2


def sign(value) -> int:
    return (value > 0) - (value < 0)


def gold_accuracy(pairs) -> tuple[float | None, int]:
    """(share of votes pointing the known answer's way, n) from (preference, gold) pairs."""
    pairs = list(pairs)
    if not pairs:
        return None, 0
    return sum(sign(vote) == sign(gold) for vote, gold in pairs) / len(pairs), len(pairs)


def consensus_agreement(own: dict, others: dict) -> tuple[float | None, int]:
    """(share of own votes whose direction is the others' plurality, n with a consensus).

    `own`: {unit: preference}; `others`: {unit: [the other annotators' preferences]}. A unit
    counts when at least MIN_OTHERS others voted and their top direction is unique."""
    agree = counted = 0
    for unit, vote in own.items():
        directions = Counter(sign(v) for v in others.get(unit, ()))
        if sum(directions.values()) < MIN_OTHERS:
            continue
        (top, n), *rest = directions.most_common()
        if rest and rest[0][1] == n:
            continue
        counted += 1
        agree += sign(vote) == top
    return (agree / counted if counted else None), counted


def after_judgment(campaign, user, comparison) -> str | None:
    """Check the annotator's window after a judgment on `comparison`; pause them (and return
    the measure that fell: "gold" or "consensus") when one is below its threshold."""
    rule = (
        QualificationRule.objects.filter(campaign_id=campaign.pk)
        .annotate(
            admitted_since=Subquery(
                QualificationStatus.objects.filter(
                    campaign_id=campaign.pk, annotator_id=user.pk, phase=Phase.ADMITTED
                ).values("since")[:1]
            ),
            has_refresher=Exists(
                PracticeItem.objects.filter(
                    campaign_id=OuterRef("campaign_id"), practice_set=PracticeSet.REFRESHER
                )
            ),
        )
        .first()
    )
    if rule is None or rule.admitted_since is None or not rule.has_refresher:
        return None
    mine = Judgment.objects.filter(
        annotator_id=user.pk,
        comparison__campaign_id=campaign.pk,
        created_at__gte=rule.admitted_since,
    ).order_by("-created_at", "-pk")
    if comparison.is_gold and rule.min_gold_accuracy is not None:
        rows = mine.filter(comparison__is_gold=True, comparison__gold_preference__isnull=False)
        pairs = rows.values_list("preference", "comparison__gold_preference")[: rule.window]
        value, n = gold_accuracy(pairs)
        if _below(value, n, rule.min_gold_accuracy, rule):
            return _pause(campaign, user, "gold", value, n, rule.min_gold_accuracy, rule)
    if not comparison.is_gold and rule.min_consensus is not None:
        recent = mine.filter(comparison__is_gold=False).values("comparison_id")[: rule.window]
        own, others = {}, defaultdict(list)
        votes = Judgment.objects.filter(comparison_id__in=Subquery(recent)).values_list(
            "comparison_id", "annotator_id", "preference"
        )
        for unit, annotator, preference in votes:
            if annotator == user.pk:
                own[unit] = preference
            else:
                others[unit].append(preference)
        value, n = consensus_agreement(own, others)
        if _below(value, n, rule.min_consensus, rule):
            return _pause(campaign, user, "consensus", value, n, rule.min_consensus, rule)
    return None


def _below(value, n: int, threshold: float, rule) -> bool:
    return value is not None and n >= rule.min_in_window and value < threshold - 1e-9


def _pause(campaign, user, measure: str, value: float, n: int, threshold: float, rule) -> str:
    now = timezone.now()
    paused = QualificationStatus.objects.filter(
        campaign_id=campaign.pk, annotator_id=user.pk, phase=Phase.ADMITTED
    ).update(
        phase=Phase.REFRESHER,
        since=now,
        reason=f"{measure} {value:.0%} over their last {n} (threshold {threshold:.0%})",
    )
    if paused:
        QualificationEvent.objects.create(
            campaign_id=campaign.pk,
            annotator_id=user.pk,
            kind=QualificationEvent.Kind.PAUSED,
            data={
                "measure": measure,
                "value": value,
                "n": n,
                "threshold": threshold,
                "window": rule.window,
            },
        )
    return measure
