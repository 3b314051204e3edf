"""Care for raters who read crisis content (issue 22 point 4).

Risk categories are the scenario risk levels (`scenarios.taxonomy.RiskLevel`): low, medium
and high. Topic tags do not refine them: a scenario's tags are the researchers' vocabulary, and
a rater choosing what to read needs three plain categories that every scenario has one of.

- An item whose scenario has a risk level carries a content note (`content_note`): the page
  shows it before the item, and the rater continues or answers "I'd rather not" (`RATHER_NOT`,
  a skip reason of its own: not counted as a skip in any quality figure; the item goes to
  someone else, as every skipped item does).
- A rater opts out of risk levels at any time (`RaterCare`, in every campaign): the queue no
  longer hands them comparisons of those levels (`excluded_levels`, a filter added to the
  candidate query), and the items of those levels they hold are passed on (`set_opted_out`).
- A campaign may cap the high-risk items a rater is handed per local day
  (`Campaign.high_risk_daily_cap`, counted on their tally at hand-out: `count_hand_out`) and
  suggest a break after N minutes of continuous rating (the page's own clock, rate.js).

Hot path: the opt-outs and today's high-risk count come with the campaign read the rating page
and API make anyway (`CARE_SQL`, two index probes in that statement); a rater without opt-outs
below the cap gets the candidate query unchanged. Handing out a high-risk item adds one
statement (the count); other items none.
"""

from dataclasses import dataclass
from datetime import datetime, time

from django.db import transaction
from django.db.models import Count, Q, TextField
from django.db.models.expressions import RawSQL
from django.utils import timezone
from django.utils.translation import gettext_lazy, pgettext_lazy

from h2htalk.rows import bound_cursor, db_value
from scenarios.models import Scenario
from scenarios.taxonomy import RiskLevel

from .models import AnnotatorTally, Assignment, Campaign, Comparison, RaterCare

RISK_LEVELS = (RiskLevel.LOW.value, RiskLevel.MEDIUM.value, RiskLevel.HIGH.value)
RATHER_NOT = "rather_not"
RATHER_NOT_LABEL = gettext_lazy("I'd rather not")

LEVEL_LABELS = {
    "low": pgettext_lazy("risk level", "Low risk"),
    "medium": pgettext_lazy("risk level", "Medium risk"),
    "high": pgettext_lazy("risk level", "High risk"),
}
LEVEL_DESCRIPTIONS = {
    "low": gettext_lazy("Everyday distress: stress, loneliness, conflict."),
    "medium": gettext_lazy("Strong emotional pain: grief, hopelessness, abuse."),
    "high": gettext_lazy("Crisis: self-harm, suicide, immediate danger."),
}
CONTENT_NOTES = {
    "low": gettext_lazy(
        "This conversation is about a difficult everyday experience, such as stress or loneliness."
    ),
    "medium": gettext_lazy(
        "This conversation describes strong emotional pain, such as grief or hopelessness."
    ),
    "high": gettext_lazy(
        "This conversation mentions self-harm, suicide or immediate danger. It may be "
        "upsetting to read."
    ),
}
assert set(LEVEL_LABELS) == set(LEVEL_DESCRIPTIONS) == set(CONTENT_NOTES) == set(RISK_LEVELS)


def content_note(risk_level: str) -> dict | None:
    """What an item of this risk level says before it is shown: {"level", "label", "text"}
    (label and text in the request's language), or None."""
    if risk_level not in CONTENT_NOTES:
        return None
    return {
        "level": risk_level,
        "label": str(LEVEL_LABELS[risk_level]),
        "text": str(CONTENT_NOTES[risk_level]),
    }


def parse_levels(text: str) -> tuple[str, ...]:
    """Stored opt-outs ("medium,high") as levels in level order; unknown values are dropped."""
    given = set((text or "").split(","))
    return tuple(level for level in RISK_LEVELS if level in given)


# ---------------------------------------------------------------- the queue's read


@dataclass(frozen=True)
class CareState:
    opted_out: tuple[str, ...]
    high_today: int


# The user's opt-outs and the high-risk items handed to them today in the campaign, as one text
# value "medium,high;2", for a query in which annotation_campaign is the campaign
# (`rating_reads`): two index probes, the rater's care row and their tally.
CARE_SQL = (
    "COALESCE((SELECT rc.opted_out FROM annotation_ratercare rc WHERE rc.user_id = %s), '')"
    " || ';' || COALESCE((SELECT CASE WHEN t.high_day = %s THEN t.high_today ELSE 0 END"
    " FROM annotation_annotatortally t WHERE t.campaign_id = annotation_campaign.id"
    " AND t.annotator_id = %s), 0)"
)


def care_params(user) -> list:
    """The values of `CARE_SQL`'s placeholders, in order."""
    return [user.pk, db_value(AnnotatorTally, "high_day", timezone.localdate()), user.pk]


def read_care(user, campaign: Campaign) -> CareState:
    """The rater's care state in the campaign: as read with it (`CARE_SQL`, attribute `care`)
    or in one query now."""
    raw = getattr(campaign, "care", None)
    if raw is None:
        raw = (
            Campaign.objects.filter(pk=campaign.pk)
            .annotate(care=RawSQL(CARE_SQL, care_params(user), output_field=TextField()))  # noqa: S611 - values are params
            .values_list("care", flat=True)
            .get()
        )
        campaign.care = raw
    if isinstance(raw, CareState):
        return raw
    levels, high = str(raw).split(";")
    state = CareState(parse_levels(levels), int(high))
    campaign.care = state
    return state


def excluded_levels(user, campaign: Campaign) -> tuple[str, ...]:
    """The risk levels the queue must not hand the rater in this campaign now: those they
    opted out of, and high once the campaign's daily cap is reached."""
    state = read_care(user, campaign)
    levels = set(state.opted_out)
    cap = campaign.high_risk_daily_cap
    if cap is not None and state.high_today >= cap:
        levels.add(RiskLevel.HIGH.value)
    return tuple(level for level in RISK_LEVELS if level in levels)


_COUNT_HIGH = """INSERT INTO annotation_annotatortally AS t
        (campaign_id, annotator_id, judged, filled, today, high_day, high_today)
        VALUES (%s, %s, 0, 0, 0, %s, 1)
    ON CONFLICT (campaign_id, annotator_id) DO UPDATE SET
        high_today = CASE WHEN t.high_day = excluded.high_day THEN t.high_today + 1 ELSE 1 END,
        high_day = excluded.high_day"""


def count_hand_out(user, campaign: Campaign, comparison: Comparison) -> None:
    """The queue handed `comparison` to the rater: a high-risk one counts towards the cap."""
    if comparison.scenario.risk_level != RiskLevel.HIGH:
        return
    today = db_value(AnnotatorTally, "high_day", timezone.localdate())
    with bound_cursor() as cursor:
        cursor.execute(_COUNT_HIGH, [campaign.pk, user.pk, today])
    if isinstance(getattr(campaign, "care", None), CareState):
        state = campaign.care
        campaign.care = CareState(state.opted_out, state.high_today + 1)


# ---------------------------------------------------------------- the rater's settings


def opted_out(user) -> tuple[str, ...]:
    row = RaterCare.objects.filter(user=user).values_list("opted_out", flat=True).first()
    return parse_levels(row or "")


def set_opted_out(user, levels) -> int:
    """Store the rater's opt-outs (in every campaign) and pass on the open items they hold of
    those levels (closed as "I'd rather not"); returns how many were passed on."""
    unknown = set(levels) - set(RISK_LEVELS)
    if unknown:
        raise ValueError(f"unknown risk level(s): {', '.join(sorted(unknown))}")
    chosen = tuple(level for level in RISK_LEVELS if level in set(levels))
    with transaction.atomic():
        RaterCare.objects.update_or_create(user=user, defaults={"opted_out": ",".join(chosen)})
        if not chosen:
            return 0
        return Assignment.objects.filter(
            annotator=user,
            state=Assignment.State.OPEN,
            comparison__scenario__risk_level__in=chosen,
        ).update(
            state=Assignment.State.SKIPPED,
            finished_at=timezone.now(),
            skip_reason=f"{RATHER_NOT}: opted out",
        )


# ---------------------------------------------------------------- researchers' view


def _start_of_today():
    return timezone.make_aware(datetime.combine(timezone.localdate(), time.min))


def no_exposure() -> dict:
    """The exposure of a rater who was handed no risk item."""
    return {"levels": {lv: {"today": 0, "total": 0} for lv in RISK_LEVELS}, "rather_not": 0}


def exposure(campaign: Campaign) -> dict[str, dict]:
    """Per rater (username): risk items handed to them by level, today and in all
    ({"low": {"today", "total"}, …}), and their "I'd rather not" answers. Two queries."""
    shown = (
        Assignment.objects.filter(comparison__campaign=campaign)
        .exclude(comparison__scenario__risk_level=RiskLevel.NONE)
        .values_list("annotator__username", "comparison__scenario__risk_level")
        .annotate(total=Count("pk"), today=Count("pk", filter=Q(issued_at__gte=_start_of_today())))
    )
    rows: dict[str, dict] = {}

    def row(name):
        return rows.setdefault(name, no_exposure())

    for name, level, total, today in shown:
        if level in RISK_LEVELS:
            row(name)["levels"][level] = {"today": today, "total": total}
    rather_not = (
        Assignment.objects.filter(
            comparison__campaign=campaign,
            state=Assignment.State.SKIPPED,
            skip_reason__startswith=RATHER_NOT,
        )
        .values_list("annotator__username")
        .annotate(n=Count("pk"))
    )
    for name, n in rather_not:
        row(name)["rather_not"] = n
    return rows


def short_of_raters(campaign: Campaign) -> list[dict]:
    """Per risk level: the regular comparisons (approved scenarios, fewer than k judgments)
    that can no longer reach k, counting as possible only the raters of the pool who did not
    opt out of the level and were not handed the comparison already; with the number of raters
    who opted out. [{"level", "label", "comparisons", "eligible", "opted_out"}], short ones
    only. Three queries."""
    k = campaign.overlap
    choices = dict(campaign.annotators.values_list("pk", "care__opted_out"))
    pool = set(choices)
    out = {
        level: {u for u in pool if level in parse_levels(choices[u] or "")} for level in RISK_LEVELS
    }
    candidates = list(
        Comparison.objects.filter(
            campaign=campaign,
            is_gold=False,
            judgment_count__lt=k,
            scenario__state=Scenario.State.APPROVED,
            scenario__risk_level__in=RISK_LEVELS,
        ).values_list("pk", "scenario__risk_level", "judgment_count")
    )
    if not candidates:
        return []
    handed: dict[int, set] = {}
    for comparison_id, annotator_id in (
        Assignment.objects.filter(comparison__in=[pk for pk, _, _ in candidates])
        .exclude(state=Assignment.State.OPEN)
        .values_list("comparison_id", "annotator_id")
    ):
        handed.setdefault(comparison_id, set()).add(annotator_id)
    short = {}
    for pk, level, judged in candidates:
        eligible = pool - out[level] - handed.get(pk, set())
        if judged + len(eligible) < k:
            short[level] = short.get(level, 0) + 1
    return [
        {
            "level": level,
            "label": LEVEL_LABELS[level],
            "comparisons": short[level],
            "eligible": len(pool - out[level]),
            "opted_out": len(out[level]),
        }
        for level in RISK_LEVELS
        if level in short
    ]
