"""Leaderboard versions: a computed release extended with more votes or more companions, so that
the numbers of the two stay comparable.

A version is a Release with a `parent`. It keeps the parent's anchor, judge, seed, bootstrap draws,
level and style choice, and its companions are the parent's plus any added ones. Its votes are
collected as:
- the parent's frozen judgment ids, minus those of annotators excluded from their campaign since
  the parent was frozen (`dropped`), plus
- the judgments counted now (freezing.counted_judgments: on the current text, excluded annotators
  left out) on comparisons between the version's companions in the parent's campaigns and the
  campaigns the version adds, that the parent did not count.
Responses and scenarios follow from those comparisons and from the representative responses
(the parent's, then the latest of each campaign for pairs the parent had none of).

The frozen inputs have the release's usual sections (so computing and `--check` are the
release's own) plus a `version` section: the parent (id, fingerprint), the campaigns read, the
added companions, the dropped judgment ids, the anchor's Elo on the lineage's scale and, per
companion, the votes that are new, dropped or of readmitted annotators (the reasons the page
gives). Results stay on the release's scale (mean log-strength 0); the version page shows
them on the lineage's scale: every Elo shifted so that the anchor keeps the Elo it had in the
first release of the lineage (`changes`).
"""

from collections import defaultdict

from django.db import transaction
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from annotation.models import AnnotatorExclusion, Campaign, Comparison
from scenarios.models import CompanionModel
from scoring.frames import id_subquery
from scoring.models import Release, ReleaseResult
from scoring.releases.errors import ReleaseError
from scoring.releases.freezing import (
    EXCLUSION_COLUMNS,
    INPUTS_SCHEMA,
    RESPONSE_COLUMNS,
    columns_of,
    counted_judgments,
    judge_entry,
    latest_responses,
    metrics_digest,
    scenario_columns,
    scenario_rows,
    text_hashes,
)

CHANGE_COLUMNS = ("companion", "new_votes", "dropped_votes", "readmitted_votes")
JUDGMENT_COLUMNS = ("id", "comparison", "annotator", "preference")
COMPARISON_COLUMNS = ("id", "scenario", "response_a", "response_b")


def lineage_campaigns(release: Release) -> list[int]:
    """The campaigns a frozen release read its votes from."""
    section = release.inputs.get("version")
    return list(section["campaigns"]) if section else [release.inputs["campaign"]]


def anchor_elo(release: Release) -> float:
    """The anchor's Elo on the lineage's scale: its Elo in the first release of the lineage."""
    section = release.inputs.get("version")
    if section:
        return section["anchor_elo"]
    data = release.result.data
    ids = [c["id"] for c in data["companions"]]
    return data["human"]["overall"]["elo"][ids.index(data["anchor"])]


def check_parent(parent: Release) -> None:
    if parent.state != Release.State.READY or not parent.inputs:
        raise ReleaseError(_("only a frozen, computed release can get a new version"))
    if not ReleaseResult.objects.filter(release=parent).exists():
        raise ReleaseError(_("only a frozen, computed release can get a new version"))
    data = parent.result.data
    ids = [c["id"] for c in data["companions"]]
    if not data["human"]["overall"].get("elo") or data["anchor"] not in ids:
        raise ReleaseError(_("the parent release has no human Elo for its anchor"))


def check_version_choices(parent: Release, campaigns, companions) -> tuple[list, list]:
    """(campaign ids, companions) of a version of `parent`: the parent's campaigns plus the
    added ones, the parent's companions plus the added ones, each added companion a companion
    of one of those campaigns. ReleaseError otherwise."""
    check_parent(parent)
    campaign_ids = sorted({*lineage_campaigns(parent), *(c.pk for c in campaigns)})
    kept = set(parent.inputs["companions"]["id"])
    added = [c for c in companions if c.pk not in kept]
    allowed = set(
        CompanionModel.objects.filter(campaigns__in=campaign_ids).values_list("pk", flat=True)
    )
    outside = sorted(c.name for c in added if c.pk not in allowed)
    if outside:
        raise ReleaseError(
            _("not a companion of the version's campaigns: %(names)s")
            % {"names": ", ".join(outside)}
        )
    chosen = list(CompanionModel.objects.filter(pk__in=kept)) + added
    return campaign_ids, sorted(chosen, key=lambda c: c.pk)


def create_version(
    parent: Release,
    *,
    name: str,
    campaigns=(),
    companions=(),
    description: str = "",
    user=None,
    compute_now: bool | None = None,
) -> Release:
    """A new version of a computed release, frozen and computed like a release (inline when
    small, else a background job; compute_now as in service.create_release)."""
    from scoring.releases import service

    campaign_ids, chosen = check_version_choices(parent, campaigns, companions)
    with transaction.atomic():
        version = Release.objects.create(
            name=name,
            description=description,
            campaign=parent.campaign,
            anchor=parent.anchor,
            judge=parent.judge,
            seed=parent.seed,
            n_boot=parent.n_boot,
            style_control=parent.style_control,
            is_demo=parent.is_demo,
            parent=parent,
            created_by=user,
        )
        version.companions.set(chosen)
        version.added_campaigns.set([c for c in campaign_ids if c != parent.campaign_id])
    return service.start(version, user, compute_now)


def _excluded_pairs(campaign_ids) -> set[tuple[int, int]]:
    return set(
        AnnotatorExclusion.objects.filter(campaign_id__in=campaign_ids).values_list(
            "campaign_id", "annotator_id"
        )
    )


def _parent_exclusions(parent_inputs: dict) -> set[int]:
    frozen = parent_inputs.get("exclusions") or {"annotator": []}
    return set(frozen["annotator"])


def freeze_version(release: Release) -> dict:
    """The frozen inputs of a version (see the module docstring), read from the database now."""
    from scoring.releases import style  # numpy: not when the pages import this module

    parent = release.parent
    check_parent(parent)
    base = parent.inputs
    campaign_ids = sorted(
        {*lineage_campaigns(parent), *release.added_campaigns.values_list("pk", flat=True)}
    )
    companion_ids = sorted(release.companions.values_list("pk", flat=True))
    campaigns = list(Campaign.objects.filter(pk__in=campaign_ids).order_by("pk"))
    judgments, dropped = _parent_votes(base, campaign_ids)
    comparisons = {
        row[0]: tuple(row)
        for row in zip(*(base["comparisons"][n] for n in COMPARISON_COLUMNS), strict=True)
    }
    counted = _counted_now(campaigns, companion_ids, set(base["judgments"]["id"]))
    judgments += counted["judgments"]
    for pk, row in counted["comparisons"].items():
        comparisons.setdefault(pk, row)
    judgments.sort()
    used = {comparison for _, comparison, _, _ in judgments}
    comparison_rows = sorted(row for pk, row in comparisons.items() if pk in used)
    kept, population = _population(base, counted["representative"])
    response_ids = set(population)
    for _pk, scenario, a, b in comparison_rows:
        kept.add(scenario)
        response_ids.update((a, b))
    texts = text_hashes(response_ids)
    response_rows = sorted((pk, *texts[pk], int(pk in population)) for pk in response_ids)
    companions = [(c.pk, c.name) for c in CompanionModel.objects.filter(pk__in=companion_ids)]
    return {
        "schema": INPUTS_SCHEMA,
        "campaign": base["campaign"],
        "seed": base["seed"],
        "n_boot": base["n_boot"],
        "level": base["level"],
        "anchor": base["anchor"],
        "companions": columns_of(sorted(companions), ("id", "name")),
        "scenarios": columns_of(scenario_rows(kept), scenario_columns(INPUTS_SCHEMA)),
        "responses": columns_of(response_rows, RESPONSE_COLUMNS),
        "comparisons": columns_of(comparison_rows, COMPARISON_COLUMNS),
        "judgments": columns_of(judgments, JUDGMENT_COLUMNS),
        "exclusions": columns_of(sorted(counted["exclusions"]), EXCLUSION_COLUMNS),
        "judgments_on_other_text": counted["on_other_text"],
        "judge": judge_entry(release.judge, response_ids),
        "metrics_sha256": metrics_digest(response_ids),
        "style": style.freeze_section(comparison_rows) if base.get("style") else None,
        "version": {
            "parent": parent.pk,
            "parent_fingerprint": parent.fingerprint,
            "campaigns": campaign_ids,
            "new_companions": sorted(set(companion_ids) - set(base["companions"]["id"])),
            "dropped_judgments": sorted(dropped),
            "anchor_elo": anchor_elo(parent),
            "changes": _vote_changes(base, judgments, dropped, comparison_rows, response_rows),
        },
    }


def _parent_votes(base: dict, campaign_ids) -> tuple[list[tuple], list[int]]:
    """(kept rows, dropped ids) of the parent's frozen judgments: dropped, those of annotators
    excluded from their campaign since the parent was frozen."""
    excluded = _excluded_pairs(campaign_ids)
    campaign_of = dict(
        Comparison.objects.filter(pk__in=id_subquery(base["comparisons"]["id"])).values_list(
            "pk", "campaign_id"
        )
    )
    judgments, dropped = [], []
    for row in zip(*(base["judgments"][n] for n in JUDGMENT_COLUMNS), strict=True):
        pk, comparison, annotator, _preference = row
        if (campaign_of.get(comparison), annotator) in excluded:
            dropped.append(pk)
        else:
            judgments.append(tuple(row))
    return judgments, dropped


def _counted_now(campaigns, companion_ids, known: set[int]) -> dict:
    """What the campaigns count now: their judgments the parent did not have (`known`), their
    comparisons (first seen kept), their exclusion lists, the votes on another text and the
    latest responses of each (scenario, companion)."""
    judgments, comparisons, exclusions, on_other_text = [], {}, [], 0
    representative = {}
    for campaign in campaigns:
        counted = counted_judgments(campaign, companion_ids)
        judgments += [tuple(row) for row in counted["judgments"] if row[0] not in known]
        for row in counted["comparisons"]:
            comparisons.setdefault(row[0], tuple(row))
        exclusions += list(zip(*(counted["exclusions"][n] for n in EXCLUSION_COLUMNS), strict=True))
        on_other_text += counted["on_other_text"]
        representative.update(latest_responses(campaign, companion_ids))
    return {
        "judgments": judgments,
        "comparisons": comparisons,
        "exclusions": exclusions,
        "on_other_text": on_other_text,
        "representative": representative,
    }


def _population(base: dict, representative: dict) -> tuple[set[int], set[int]]:
    """(scenario ids, representative response ids) of a version: the parent's representative
    responses, then the campaigns' latest for the rest; a scenario kept when it was the
    parent's or has two companions' representatives."""
    parent_population = {
        (s, c): pk
        for pk, s, c, flag in zip(
            *(base["responses"][n] for n in ("id", "scenario", "companion", "population")),
            strict=True,
        )
        if flag
    }
    representative = {**representative, **parent_population}
    per_scenario = defaultdict(int)
    for scenario, _companion in representative:
        per_scenario[scenario] += 1
    kept = {s for s, n in per_scenario.items() if n >= 2} | set(base["scenarios"]["id"])
    population = {pk for (s, _c), pk in representative.items() if s in kept}
    return kept, population


def _vote_changes(base, judgments, dropped, comparison_rows, response_rows) -> dict:
    """Per companion: votes new in the version, parent votes dropped (annotator excluded since),
    and new votes of annotators the parent had excluded (readmitted)."""
    companion_of = {pk: companion for pk, _s, companion, *_ in response_rows}
    for pk, companion in zip(base["responses"]["id"], base["responses"]["companion"], strict=True):
        companion_of.setdefault(pk, companion)
    sides = {pk: (companion_of[a], companion_of[b]) for pk, _s, a, b in comparison_rows}
    for pk, a, b in zip(
        base["comparisons"]["id"],
        base["comparisons"]["response_a"],
        base["comparisons"]["response_b"],
        strict=True,
    ):
        sides.setdefault(pk, (companion_of[a], companion_of[b]))
    known = set(base["judgments"]["id"])
    readmitted = _parent_exclusions(base)
    counts = defaultdict(lambda: [0, 0, 0])
    for pk, comparison, annotator, _preference in judgments:
        if pk in known:
            continue
        for companion in sides[comparison]:
            counts[companion][0] += 1
            counts[companion][2] += annotator in readmitted
    parent_comparison = dict(
        zip(base["judgments"]["id"], base["judgments"]["comparison"], strict=True)
    )
    for pk in dropped:
        for companion in sides[parent_comparison[pk]]:
            counts[companion][1] += 1
    rows = sorted((c, *values) for c, values in counts.items())
    return columns_of(rows, CHANGE_COLUMNS)


# ---------------------------------------------------------------- the page's change table


def _on_lineage_scale(data: dict, anchor_value: float) -> dict[int, dict]:
    """{companion id: {elo, low, high}} on the lineage's scale (the anchor at anchor_value); the
    interval is that of the difference to the anchor (the anchor's own: none)."""
    ids = [c["id"] for c in data["companions"]]
    overall = data["human"]["overall"]
    if not overall.get("elo"):
        return {}
    a = ids.index(data["anchor"])
    shift = anchor_value - overall["elo"][a]
    out = {}
    for k, pk in enumerate(ids):
        if overall["elo"][k] is None:
            continue
        low, high = overall["diff_low"][k][a], overall["diff_high"][k][a]
        out[pk] = {
            "elo": overall["elo"][k] + shift,
            "low": None if k == a or low is None else anchor_value + low,
            "high": None if k == a or high is None else anchor_value + high,
        }
    return out


def changes(parent_data: dict, version_data: dict, section: dict) -> list[dict]:
    """Per companion of the version (by name): its Elo on the lineage's scale in the parent and
    in the version, the change, and why (`reasons`: (code, count) pairs)."""
    anchor_value = section["anchor_elo"]
    before = _on_lineage_scale(parent_data, anchor_value)
    after = _on_lineage_scale(version_data, anchor_value)
    votes = {
        row[0]: row[1:]
        for row in zip(*(section["changes"][n] for n in CHANGE_COLUMNS), strict=True)
    }
    new_companions = set(section["new_companions"])
    rows = []
    for companion in version_data["companions"]:
        pk = companion["id"]
        new, dropped, readmitted = votes.get(pk, (0, 0, 0))
        reasons = []
        if pk in new_companions:
            reasons.append(("new_companion", 0))
        if new - readmitted:
            reasons.append(("new_votes", new - readmitted))
        if dropped:
            reasons.append(("dropped_votes", dropped))
        if readmitted:
            reasons.append(("readmitted_votes", readmitted))
        if not reasons:
            reasons.append(("through_others", 0))
        old, now = before.get(pk), after.get(pk)
        rows.append(
            {
                "id": pk,
                "name": companion["name"],
                "anchor": pk == version_data["anchor"],
                "parent": old,
                "version": now,
                "change": (now["elo"] - old["elo"]) if old and now else None,
                "reasons": reasons,
            }
        )
    return rows


def reason_text(code: str, count: int) -> str:
    texts = {
        "new_companion": lambda n: _("new companion"),
        "new_votes": lambda n: ngettext("%(n)d new vote", "%(n)d new votes", n) % {"n": n},
        "dropped_votes": lambda n: (
            ngettext(
                "%(n)d vote left out (annotator excluded since the parent)",
                "%(n)d votes left out (annotators excluded since the parent)",
                n,
            )
            % {"n": n}
        ),
        "readmitted_votes": lambda n: (
            ngettext(
                "%(n)d vote of an annotator the parent excluded",
                "%(n)d votes of annotators the parent excluded",
                n,
            )
            % {"n": n}
        ),
        "through_others": lambda n: _("no vote of its own changed: moved through the others'"),
    }
    return texts[code](count)


def lineage(release: Release) -> list[Release]:
    """The release's ancestors, oldest first, then the release, then its versions (newest
    last, one level down)."""
    chain = [release]
    while chain[0].parent_id is not None:
        chain.insert(0, Release.objects.defer("inputs").get(pk=chain[0].parent_id))
    return chain + list(release.versions.defer("inputs").order_by("created_at", "pk"))


def page_context(release: Release, result) -> dict:
    """What a release page shows about versions: its lineage, whether a version can be made
    from it, and (for a version with numbers) the change table against its parent."""
    context = {
        "lineage": lineage(release) if release.parent_id or release.versions.exists() else [],
        "can_version": result is not None and release.state == Release.State.READY,
    }
    if release.parent_id is None or result is None:
        return context
    parent = Release.objects.select_related("result").get(pk=release.parent_id)
    section = release.inputs.get("version") if release.inputs else None
    parent_result = ReleaseResult.objects.filter(release=parent).first()
    if not section or parent_result is None:
        return context
    rows = changes(parent_result.data, result.data, section)
    for row in rows:
        row["why"] = [reason_text(code, n) for code, n in row["reasons"]]
    context["version"] = {
        "parent": parent,
        "rows": rows,
        "anchor_elo": section["anchor_elo"],
        "campaigns": list(Campaign.objects.filter(pk__in=section["campaigns"]).order_by("pk")),
        "dropped": len(section["dropped_judgments"]),
    }
    return context
