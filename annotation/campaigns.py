"""Campaign services behind the researcher pages: saving with a build job, the state machine,
the monitoring table, gold marks and the judgments CSV.

The pages (annotation.campaign_views) only read the request and render; what a campaign may do
and what is stored lives here, so a rule (a paused campaign cannot pause, a campaign without
comparisons cannot open) holds whoever calls it.
"""

from django.contrib import messages
from django.core.paginator import Page, Paginator
from django.db import transaction
from django.db.models import Count, IntegerField, OuterRef, Q, Subquery, Sum, Value
from django.db.models.functions import Coalesce
from django.http import QueryDict
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import pgettext_lazy

from h2htalk import csvexport
from h2htalk.confirmation import Question
from h2htalk.display import subtask_label
from h2htalk.models import Job
from scenarios.taxonomy import Subtask

from . import care, progress
from .access import managed_campaigns
from .campaign_forms import GoldForm, annotator_choices, member_choices
from .models import RATING_DIMENSIONS, Campaign, Comparison, Judgment
from .tasks import BUILD_KIND, queue_build

State = Campaign.State
# action -> (new state, states it may come from)
TRANSITIONS = {
    "open": (State.OPEN, {State.DRAFT, State.PAUSED, State.CLOSED}),
    "pause": (State.PAUSED, {State.OPEN}),
    "close": (State.CLOSED, {State.DRAFT, State.OPEN, State.PAUSED}),
}
GOLD_PAGE_SIZE = 20


# ---------------------------------------------------------------- saving and the list


def create_campaign(form, owner) -> tuple[Campaign, Job]:
    """Save a valid CampaignForm as `owner`'s campaign and queue the build of its comparisons
    (in one transaction: no campaign without its build job)."""
    with transaction.atomic():
        campaign = form.save(commit=False)
        campaign.owner = owner
        campaign.save()
        form.save_m2m()
        job = queue_build(campaign, owner)
    return campaign, job


def save_campaign(form, user) -> tuple[Campaign, Job | None]:
    """Save an edit; when the pairing settings changed, queue a rebuild (old pairs pruned)."""
    rebuild = form.needs_build
    with transaction.atomic():
        campaign = form.save()
        if "overlap" in form.changed_data:  # which items are on full comparisons changed
            progress.recount(campaign)
        job = queue_build(campaign, user, reset=True) if rebuild else None
    return campaign, job


def _count_per_campaign(queryset, aggregate) -> Coalesce:
    """A correlated subquery: `aggregate` over `queryset` rows of the outer campaign."""
    rows = queryset.filter(campaign=OuterRef("pk")).order_by().values("campaign")
    value = Subquery(rows.annotate(n=aggregate).values("n"), output_field=IntegerField())
    return Coalesce(value, Value(0))


def with_progress(campaigns):
    """Campaigns annotated with comparison, judgment and annotator counts (no row fan-out)."""
    regular = Comparison.objects.filter(is_gold=False)
    return campaigns.annotate(
        n_regular=_count_per_campaign(regular, Count("pk")),
        n_judged=_count_per_campaign(regular, Sum("judgment_count")),
        n_gold=_count_per_campaign(Comparison.objects.filter(is_gold=True), Count("pk")),
        n_annotators=_count_per_campaign(Campaign.annotators.through.objects, Count("pk")),
    )


def campaigns_with_progress(user) -> list[Campaign]:
    """The user's campaigns for the list page, each with `target` judgments and `percent` done."""
    campaigns = list(with_progress(managed_campaigns(user)).select_related("owner"))
    for campaign in campaigns:
        campaign.target = campaign.n_regular * campaign.overlap
        campaign.percent = progress_percent(campaign.n_judged, campaign.target)
    return campaigns


# ---------------------------------------------------------------- people

# The campaign's two lists of people, and who may join each (the edit form's choices).
POOLS = {
    "annotators": (lambda owner: annotator_choices(), "users with the annotator role"),
    "members": (member_choices, "researchers but the owner"),
}


class PoolRefused(Exception):
    """Some names cannot be added or removed: `errors` is {"add" | "remove": [message]}."""

    def __init__(self, errors: dict[str, list[str]]):
        super().__init__(errors)
        self.errors = errors


def pool_refusal(pool: str, usernames) -> str:
    """Why these users cannot join the pool (they are not among the form's choices)."""
    return f"Only {POOLS[pool][1]} can be {pool}: not {', '.join(sorted(usernames))}."


def change_pool(campaign: Campaign, pool: str, add=(), remove=()) -> None:
    """Add and remove people (by username) in the campaign's `pool` ("annotators" or
    "members") as its edit page may: only the form's choices join, only those in the list
    leave. All or nothing: one wrong name changes nothing."""
    choices = POOLS[pool][0]
    people = getattr(campaign, pool)
    joining = list(choices(campaign.owner).filter(username__in=add))
    leaving = list(people.filter(username__in=remove))
    errors = {}
    refused = sorted(set(add) - {user.username for user in joining})
    if refused:
        errors["add"] = [pool_refusal(pool, refused)]
    absent = sorted(set(remove) - {user.username for user in leaving})
    if absent:
        errors["remove"] = [f"Not among the {pool}: {', '.join(absent)}."]
    both = sorted(set(add) & set(remove))
    if both:
        errors.setdefault("remove", []).append(f"Both added and removed: {', '.join(both)}.")
    if errors:
        raise PoolRefused(errors)
    with transaction.atomic():
        people.add(*joining)
        people.remove(*leaving)


def edit_question(campaign: Campaign, form) -> Question | None:
    """What to ask before a valid edit form is saved (None: it takes nothing away): taking
    annotators out of the pool, or changing the pairing of a campaign that has comparisons
    (the rebuild removes those no longer called for, with their gold marks). Call it before
    the form is saved."""
    asked = [q for q in (_pool_removal(campaign, form), _pairing_change(campaign, form)) if q]
    if len(asked) < 2:
        return asked[0] if asked else None
    return Question(
        f"Save these changes to {campaign.name}?",
        " ".join(f"{q.title} {q.consequence}" for q in asked),
        "Save the changes",
    )


def _pool_removal(campaign: Campaign, form) -> Question | None:
    staying = {user.username for user in form.cleaned_data["annotators"]}
    leaving = sorted(set(campaign.annotators.values_list("username", flat=True)) - staying)
    if not leaving:
        return None
    return Question(
        f"Remove {', '.join(leaving)} from the annotator pool of {campaign.name}?",
        "They stop receiving its items at once, and an answer to an item already on their "
        "screen is refused and not saved. Their judgments so far are kept and still count; "
        "adding them back lets them go on.",
        "Save and remove them",
    )


def _pairing_change(campaign: Campaign, form) -> Question | None:
    changed = form.changed_pairing_fields()
    if not changed or not campaign.comparisons.exists():
        return None
    return Question(
        f"Change how {campaign.name} pairs responses ({', '.join(changed)})?",
        "A background job rebuilds its comparisons: those the new settings no longer call for "
        "are deleted, with any gold mark on them; those that stay keep their gold marks, and "
        "new ones are added.",
        "Save and rebuild",
    )


# ---------------------------------------------------------------- progress


def campaign_overview(campaign: Campaign) -> dict:
    """Progress and coverage of the non-gold comparisons, and the gold items, in one query.

    Progress = judgments on non-gold comparisons / (non-gold comparisons × k); complete means
    k judgments, partial 1 … k−1, untouched none. Gold items ignore k and are counted apart.
    Only judgments that count are counted (`counting`): those of excluded annotators are
    `excluded_judgments`, apart.
    """
    k = campaign.overlap
    regular = Q(is_gold=False)
    counts = campaign.comparisons.aggregate(
        regular=Count("pk", filter=regular),
        complete=Count("pk", filter=regular & Q(judgment_count__gte=k)),
        untouched=Count("pk", filter=regular & Q(judgment_count=0)),
        judged=Sum("judgment_count", filter=regular),
        gold=Count("pk", filter=Q(is_gold=True)),
        gold_answered=Count("pk", filter=Q(is_gold=True, gold_preference__isnull=False)),
        gold_judgments=Sum("judgment_count", filter=Q(is_gold=True)),
    )
    counts["judged"] = counts["judged"] or 0
    counts["gold_judgments"] = counts["gold_judgments"] or 0
    excluded = Judgment.objects.filter(
        comparison__campaign=campaign,
        comparison__is_gold=False,
        annotator__exclusions__campaign=campaign,
    )
    counts["excluded_judgments"] = excluded.count()
    counts["partial"] = counts["regular"] - counts["complete"] - counts["untouched"]
    counts["target"] = counts["regular"] * k
    counts["percent"] = progress_percent(counts["judged"], counts["target"])
    return counts


def progress_percent(done: int, target: int) -> float:
    if not target:
        return 0.0
    return min(100.0, 100.0 * done / target)


# ---------------------------------------------------------------- state machine


class TransitionRefused(Exception):
    """The action is not allowed from the campaign's state; the message says why."""


# The state buttons, in the page's language.
ACTION_LABELS = {
    "open": pgettext_lazy("campaign action", "Open"),
    "pause": pgettext_lazy("campaign action", "Pause"),
    "close": pgettext_lazy("campaign action", "Close"),
}
OPEN_LABELS = {
    State.PAUSED: pgettext_lazy("campaign action", "Resume"),
    State.CLOSED: pgettext_lazy("campaign action", "Reopen"),
}


def available_actions(campaign: Campaign) -> list[tuple[str, str]]:
    """(action, button label) for every transition allowed from the campaign's state."""
    labels = {**ACTION_LABELS, "open": OPEN_LABELS.get(campaign.state, ACTION_LABELS["open"])}
    return [
        (action, str(labels.get(action, action.capitalize())))
        for action, (_target, sources) in TRANSITIONS.items()
        if campaign.state in sources
    ]


# Actions asked about first (h2htalk.confirmation): they take work away from annotators or
# change what the numbers count.
DESTRUCTIVE_ACTIONS = ("close",)


def question(campaign: Campaign, action: str) -> Question | None:
    """What to ask before `action` (a state action, "rebuild"), or None when it is not
    destructive."""
    if action == "close":
        return Question(
            _("Close the campaign %(name)s?") % {"name": campaign.name},
            _(
                "Annotators stop receiving its items at once, and an answer to an item already "
                "on someone's screen is refused and not saved. The judgments so far are kept, "
                "and the campaign can be reopened."
            ),
            _("Close the campaign"),
        )
    if action == "rebuild":
        return Question(
            _("Rebuild the comparisons of %(name)s?") % {"name": campaign.name},
            _(
                "A background job adds the comparisons that its scenarios, companions and "
                "response runs now call for and that are missing, so the target can grow while "
                "annotators rate. Existing comparisons, gold marks and judgments are kept."
            ),
            _("Rebuild comparisons"),
        )
    return None


def state_buttons(campaign: Campaign) -> list[dict]:
    """The state actions allowed now, each with its label and, if destructive, its question."""
    return [
        {
            "action": action,
            "label": label,
            "question": question(campaign, action) if action in DESTRUCTIVE_ACTIONS else None,
        }
        for action, label in available_actions(campaign)
    ]


def change_state(campaign: Campaign, action: str) -> State:
    """Apply `action` (a key of TRANSITIONS) and return the new state, or raise
    TransitionRefused. The update is conditional on the state it comes from, so two researchers
    pressing buttons at once cannot skip a rule."""
    target, sources = TRANSITIONS[action]
    if target == State.OPEN and not campaign.comparisons.exists():
        raise TransitionRefused(_("Nothing to rate yet: the campaign has no comparisons."))
    if not Campaign.objects.filter(pk=campaign.pk, state__in=sources).update(state=target):
        state = campaign.get_state_display().lower()
        raise TransitionRefused(
            _("A %(state)s campaign cannot %(action)s.") % {"state": state, "action": action}
        )
    return State(target)


# ---------------------------------------------------------------- monitoring


def annotator_monitoring(campaign: Campaign) -> dict:
    """The monitoring table: `rows`, one per annotator (in or once in the pool; `excluded` with
    its reason), and `overall` (over the judgments that count; None before the first), with percentages and seconds for display; `pool`, the
    number of annotators in the pool. Flags are the agreement report's (annotation.monitoring;
    pandas and scipy load here, not with the pages)."""
    from . import monitoring

    judgments = monitoring.load_judgments(campaign)
    skips = monitoring.load_skips(campaign)
    pool = set(campaign.annotators.values_list("username", flat=True))
    excluded = dict(campaign.exclusions.values_list("annotator__username", "reason"))
    rows = monitoring.records(monitoring.annotator_table(judgments, skips, pool))
    exposure = care.exposure(campaign)
    for row in rows:
        row["in_pool"] = row["annotator"] in pool
        row["exposure"] = exposure.get(row["annotator"], care.no_exposure())
        row["excluded"] = row["annotator"] in excluded
        row["excluded_reason"] = excluded.get(row["annotator"], "")
        _for_display(row)
    # The overall row: the judgments that count (excluded annotators' rows stand apart).
    counted = judgments[~judgments["annotator"].isin(list(excluded))]
    counted_skips = skips[~skips["annotator"].isin(list(excluded))]
    overall = monitoring.overall_row(counted, counted_skips) if len(counted) else None
    if overall:
        _for_display(overall)
    return {
        "rows": rows,
        "overall": overall,
        "pool": len(pool),
        "n_excluded": len(excluded),
        "short_of_raters": care.short_of_raters(campaign),
    }


# Short names of the skip reasons (annotation.queue.SKIP_REASONS) for the monitoring table.
SKIP_LABELS = {
    "cannot_judge": pgettext_lazy("skip reason", "cannot judge"),
    "language": pgettext_lazy("skip reason", "language"),
    "offensive": pgettext_lazy("skip reason", "offensive"),
    "broken": pgettext_lazy("skip reason", "broken"),
    "other": pgettext_lazy("skip reason", "other"),
    "unknown": pgettext_lazy("skip reason", "no reason given"),
}


def _for_display(row: dict) -> None:
    """Seconds for the monitoring table (None stays None: shown as a dash)."""

    def scaled(value, factor):
        return None if value is None else value * factor

    row["median_time_s"] = scaled(row["median_time_ms"], 1 / 1000)
    row["median_server_s"] = scaled(row["median_server_ms"], 1 / 1000)
    row["skip_list"] = [(SKIP_LABELS.get(code, code), n) for code, n in row["skip_reasons"].items()]


def latest_build_job(campaign: Campaign) -> Job | None:
    return (
        Job.objects.filter(kind=BUILD_KIND, params__campaign_id=campaign.pk)
        .order_by("-created_at")
        .first()
    )


# ---------------------------------------------------------------- gold items


def gold_query(params) -> QueryDict:
    """The gold page's own filters and page, and nothing else (also used after a POST)."""
    query = QueryDict(mutable=True)
    if params.get("subtask") in Subtask.values:
        query["subtask"] = params["subtask"]
    if params.get("gold") in ("1", "0"):
        query["gold"] = params["gold"]
    if str(params.get("page", "")).isdigit():
        query["page"] = params["page"]
    return query


def gold_page(campaign: Campaign, query: QueryDict) -> Page:
    """One page of the campaign's comparisons, both texts and companions, filtered by `query`."""
    page = Paginator(gold_comparisons(campaign, query), GOLD_PAGE_SIZE).get_page(query.get("page"))
    for comparison in page:
        if comparison.is_gold:
            comparison.unmark_prompt = gold_unmark_question(comparison).prompt
    return page


def gold_comparisons(campaign: Campaign, query: QueryDict):
    """The campaign's comparisons with both texts and companions, filtered by `query` (the gold
    page's filters, from gold_query), in the gold page's order."""
    comparisons = (
        campaign.comparisons.select_related(
            "scenario", "response_a__companion", "response_b__companion"
        )
        .defer(
            "scenario__search_text", "response_a__prompt_messages", "response_b__prompt_messages"
        )
        .order_by("scenario__subtask", "scenario__external_id", "pk")
    )
    if "subtask" in query:
        comparisons = comparisons.filter(scenario__subtask=query["subtask"])
    if "gold" in query:
        comparisons = comparisons.filter(is_gold=query["gold"] == "1")
    return comparisons


def campaign_subtasks(campaign: Campaign) -> list[tuple[str, str]]:
    """(subtask, label) of the subtasks the campaign's comparisons are in, for the filter."""
    subtasks = (
        campaign.comparisons.order_by("scenario__subtask")
        .values_list("scenario__subtask", flat=True)
        .distinct()
    )
    return [(s, subtask_label(s)) for s in subtasks]


def save_gold(campaign: Campaign, data: dict) -> list[tuple[int, str]]:
    """Mark or unmark one comparison as gold from GoldForm's cleaned data.

    Returns what to tell the researcher as (messages level, text) pairs.
    """
    comparison = campaign.comparisons.filter(pk=data["comparison"]).first()
    if comparison is None:
        return [(messages.ERROR, "No such comparison in this campaign.")]
    return mark_gold(comparison, data)


def unmark_question(campaign: Campaign, comparison_id) -> Question | None:
    """What to ask before a gold comparison of the campaign is unmarked (None: nothing to ask,
    it is not gold or not the campaign's)."""
    if not str(comparison_id).isdigit():
        return None
    comparison = campaign.comparisons.filter(pk=comparison_id, is_gold=True).first()
    return None if comparison is None else gold_unmark_question(comparison)


def gold_unmark_question(comparison: Comparison) -> Question:
    return Question(
        f"Unmark comparison {comparison.pk} as gold?",
        f"Its known answer and note are deleted, and its {comparison.judgment_count} "
        "judgment(s) stop counting as gold answers: gold accuracy no longer uses them and "
        "agreement counts them as ordinary votes.",
        "Unmark gold",
    )


def mark_gold(comparison: Comparison, data: dict) -> list[tuple[int, str]]:
    """Mark (`action` "mark", with `gold_preference` and `gold_note`) or unmark the comparison;
    the (messages level, text) pairs of save_gold."""
    if data["action"] == "unmark":
        comparison.is_gold, comparison.gold_preference, comparison.gold_note = False, None, ""
        notes = [(messages.SUCCESS, f"Comparison {comparison.pk} is no longer gold.")]
    else:
        comparison.is_gold = True
        comparison.gold_preference = data["gold_preference"]
        comparison.gold_note = data["gold_note"].strip()
        answer = dict(GoldForm.ANSWERS)[data["gold_preference"]]
        notes = [(messages.SUCCESS, f"Comparison {comparison.pk} is gold: {answer}.")]
        if comparison.judgment_count:
            notes.append(
                (
                    messages.INFO,
                    f"It already had {comparison.judgment_count} judgment(s); they now count "
                    "as gold answers.",
                )
            )
    comparison.save(update_fields=["is_gold", "gold_preference", "gold_note"])
    return notes


# ---------------------------------------------------------------- judgments CSV

DIMENSIONS = [name for name, _ in RATING_DIMENSIONS]
EXPORT_COLUMNS = [
    "campaign",
    "comparison_id",
    "subtask",
    "external_id",
    "companion_a",
    "companion_b",
    "shown_left",
    "left_companion",
    "screen_preference",
    "preference",
    "both_unacceptable",
    "reasons",  # keys of the campaign's reasons, ";"-separated, said of the preferred response
    "confidence",
    *[f"a_{d}" for d in DIMENSIONS],
    *[f"b_{d}" for d in DIMENSIONS],
    "rationale",
    "annotator",
    "time_on_task_ms",
    "client_time_ms",
    "created_at",
    "is_gold",
    "gold_preference",
]
_EXPORT_FIELDS = {
    "comparison_id": "comparison_id",
    "subtask": "comparison__scenario__subtask",
    "external_id": "comparison__scenario__external_id",
    "companion_a": "comparison__response_a__companion__name",
    "companion_b": "comparison__response_b__companion__name",
    "left_is_a": "assignment__left_is_a",
    "screen_preference": "screen_preference",
    "preference": "preference",
    "both_unacceptable": "both_unacceptable",
    "reasons": "reasons",
    "confidence": "confidence",
    "ratings": "ratings",
    "rationale": "rationale",
    "annotator": "annotator__username",
    "time_on_task_ms": "time_on_task_ms",
    "client_time_ms": "client_time_ms",
    "created_at": "created_at",
    "is_gold": "comparison__is_gold",
    "gold_preference": "comparison__gold_preference",
}


def _export_row(campaign_name: str, values: dict) -> dict:
    ratings = values["ratings"] or {}
    row = {
        "campaign": campaign_name,
        "shown_left": "a" if values["left_is_a"] else "b",
        "left_companion": values["companion_a"] if values["left_is_a"] else values["companion_b"],
        "created_at": values["created_at"].isoformat(),
    }
    for key in ("comparison_id", "subtask", "external_id", "companion_a", "companion_b"):
        row[key] = values[key]
    for key in ("screen_preference", "preference", "rationale", "annotator"):
        row[key] = values[key]
    for key in ("time_on_task_ms", "client_time_ms", "gold_preference", "confidence"):
        row[key] = "" if values[key] is None else values[key]
    row["reasons"] = ";".join(values["reasons"] or [])
    for key in ("both_unacceptable", "is_gold"):
        row[key] = int(values[key])
    for side in ("a", "b"):
        given = ratings.get(side) or {}
        for dimension in DIMENSIONS:
            row[f"{side}_{dimension}"] = given.get(dimension, "")
    return row


def iter_judgments_csv(campaign: Campaign, batch: int = 500):
    """The campaign's judgments as CSV text in chunks, pair-keyed with the companions named
    (for researchers), through the shared spreadsheet-safe writer."""
    rows = (
        Judgment.objects.filter(comparison__campaign=campaign)
        .order_by("pk")
        .values(*_EXPORT_FIELDS.values())
        .iterator(chunk_size=2000)
    )
    names = {lookup: name for name, lookup in _EXPORT_FIELDS.items()}
    records = (_export_row(campaign.name, {names[k]: v for k, v in raw.items()}) for raw in rows)
    yield from csvexport.stream(EXPORT_COLUMNS, records, batch=batch)


def judgments_csv_filename(campaign: Campaign) -> str:
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    return f"campaign-{campaign.pk}-judgments-{stamp}.csv"
