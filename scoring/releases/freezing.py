"""Freezing a release's inputs: ids and content hashes of everything its numbers come from.

A release freezes, in `Release.inputs` (schema INPUTS_SCHEMA), ids and content hashes:
- companions (id, name) and the anchor; the seed, the bootstrap draws and the level (95%);
- scenarios (id, subtask, Scenario.content_hash, implicit_need, evolving_need, risk_level): the
  approved scenarios on which at least two of the release's companions have a successful
  response in the campaign's runs, with the flags the per-flag slices group them by (the
  content hash does not cover the flags; releases of schema /1 froze no flags);
- responses (id, scenario, companion, sha256 of the text, population flag): one per scenario
  and companion (the latest successful one, as the campaign's pairing chooses; flagged 1: the
  population the judge scores over all pairs and the composite averages), plus those of the
  judged comparisons (flag 0 unless they are that one);
- comparisons (id, scenario, response A, response B): the campaign's regular (non-gold)
  comparisons between two release companions on a release scenario with at least one judgment;
- judgments (id, comparison, annotator, preference) of those comparisons, except those of
  annotators excluded from the campaign (annotation.exclusions); a comparison judged only by
  excluded annotators is left out;
- exclusions (annotator id, reason, judgments left out): the exclusion list as it was when the
  release was frozen, so excluding or bringing back an annotator makes a different fingerprint
  (releases frozen before exclusions existed have no such section);
- judgments_on_other_text: how many judgments (of annotators not excluded) were left out
  because they were made on an earlier text of their scenario (`judgments_on_current_text`);
  the release counts only judgments made on the scenario text it freezes;
- the calibrated judge (id, name, version, sha256 of its canonical document) and, when its
  features include LLM verdicts, the sha256 of those verdicts;
- `metrics_sha256`: the sha256 of the stored reference metrics (MetricScore.values) of the
  release's responses, which the composite and the judge's features are computed from;
- style: the choice of style control (null: off) and, when on, the presentation features of
  the comparisons' responses counted from their texts (scoring.releases.style); releases frozen
  before the choice existed have no such section.
The fingerprint is the sha256 of the canonical JSON of all that (keys sorted, no spaces, UTF-8).
"""

from collections import defaultdict

from annotation.models import AnnotatorExclusion, Comparison, Judgment
from h2htalk import stats
from h2htalk.provenance import canonical, sha256_text
from scenarios.models import CompanionModel, Response, Scenario
from scenarios.services import last_content_change
from scoring.frames import id_subquery
from scoring.models import CalibratedJudge
from scoring.releases.errors import ReleaseError

INPUTS_SCHEMA = "h2htalk.release-inputs/2"
FLAG_COLUMNS = ("implicit_need", "evolving_need", "risk_level")
LEVEL = stats.LEVEL
NO_JUDGE = "no judge in this release"
RESPONSE_COLUMNS = ("id", "scenario", "companion", "text_sha256", "population")
EXCLUSION_COLUMNS = ("annotator", "reason", "judgments")


def fingerprint_of(inputs: dict) -> str:
    """The sha256 of the canonical JSON of a release's inputs."""
    return sha256_text(canonical(inputs))


def check_choices(campaign, companions, anchor, judge=None) -> list[CompanionModel]:
    """The companions a release ranks (default: the campaign's), or ReleaseError."""
    allowed = {c.pk: c for c in campaign.companions.all()}
    chosen = list(companions or allowed.values())
    outside = [c.name for c in chosen if c.pk not in allowed]
    if outside:
        raise ReleaseError(f"not a companion of campaign {campaign.name}: {', '.join(outside)}")
    if len(chosen) < 2:
        raise ReleaseError("a release needs at least two companions")
    if anchor is None or anchor.pk not in {c.pk for c in chosen}:
        raise ReleaseError("the anchor must be one of the release's companions")
    return sorted(chosen, key=lambda c: c.pk)


def candidate_responses(campaign, companion_ids):
    """Successful responses of the campaign's runs by the companions on approved scenarios."""
    return Response.objects.filter(
        run__in=campaign.runs.all(),
        companion_id__in=list(companion_ids),
        status=Response.Status.OK,
        scenario__state=Scenario.State.APPROVED,
    )


def judged_comparisons(campaign, companion_ids):
    ids = list(companion_ids)
    return Comparison.objects.filter(
        campaign=campaign,
        is_gold=False,
        scenario__state=Scenario.State.APPROVED,
        response_a__companion_id__in=ids,
        response_b__companion_id__in=ids,
        response_a__status=Response.Status.OK,
        response_b__status=Response.Status.OK,
        judgments__isnull=False,
    ).distinct()


def text_hashes(response_ids) -> dict[int, tuple[int, int, str]]:
    """{response id: (scenario, companion, sha256 of the text)}."""
    rows = Response.objects.filter(pk__in=id_subquery(response_ids)).values_list(
        "pk", "scenario_id", "companion_id", "text"
    )
    return {
        pk: (scenario, companion, sha256_text(text or ""))
        for pk, scenario, companion, text in rows.iterator(chunk_size=5000)
    }


def metrics_digest(response_ids) -> str:
    """sha256 over "id<TAB>canonical values" lines of the stored metrics ("-" when none), the
    rows streamed in id order beside the sorted ids (scoring.stored_columns)."""
    from scoring import stored_columns  # numpy: not when the pages import this module

    return stored_columns.metric_columns(response_ids, digest=True).digest


def _judge_config(document):
    from scoring.calibration.document import DocumentError
    from scoring.calibration.prediction import judge_config_of

    try:
        return judge_config_of(document)
    except DocumentError as error:
        raise ReleaseError(str(error)) from error


def verdicts_digest(document, response_ids) -> str | None:
    """sha256 of the LLM verdicts the judge's features come from (None: a metrics-only judge)."""
    config = _judge_config(document)
    if config is None:
        return None
    from scoring import stored_columns

    return stored_columns.verdict_rows(config, response_ids, digest=True).digest


def judge_entry(judge: CalibratedJudge | None, response_ids) -> dict | None:
    if judge is None:
        return None
    return {
        "id": judge.pk,
        "name": judge.name,
        "version": judge.version,
        "document_sha256": sha256_text(canonical(judge.document)),
        "verdicts_sha256": verdicts_digest(judge.document, response_ids),
    }


def freeze(
    campaign,
    companions,
    anchor,
    judge=None,
    seed: int = 0,
    n_boot: int = stats.N_BOOT,
    style_control: bool = False,
) -> dict:
    """The inputs of a release (see the module docstring), read from the database now."""
    from scoring.releases import style  # numpy: not when the pages import this module

    companions = check_choices(campaign, companions, anchor, judge)
    companion_ids = [c.pk for c in companions]
    representative = latest_responses(campaign, companion_ids)
    per_scenario = defaultdict(int)
    for scenario, _ in representative:
        per_scenario[scenario] += 1
    kept = {s for s, n in per_scenario.items() if n >= 2}
    population = {pk for (s, _), pk in representative.items() if s in kept}
    response_ids = set(population)
    judged = counted_judgments(campaign, companion_ids)
    for _, scenario, a, b in judged["comparisons"]:
        kept.add(scenario)
        response_ids.update((a, b))
    texts = text_hashes(response_ids)
    response_rows = sorted((pk, *texts[pk], int(pk in population)) for pk in response_ids)
    return {
        "schema": INPUTS_SCHEMA,
        "campaign": campaign.pk,
        "seed": int(seed),
        "n_boot": int(n_boot),
        "level": LEVEL,
        "anchor": anchor.pk,
        "companions": columns_of([(c.pk, c.name) for c in companions], ("id", "name")),
        "scenarios": columns_of(scenario_rows(kept), scenario_columns(INPUTS_SCHEMA)),
        "responses": columns_of(response_rows, RESPONSE_COLUMNS),
        "comparisons": columns_of(
            judged["comparisons"], ("id", "scenario", "response_a", "response_b")
        ),
        "judgments": columns_of(
            judged["judgments"], ("id", "comparison", "annotator", "preference")
        ),
        "exclusions": judged["exclusions"],
        "judgments_on_other_text": judged["on_other_text"],
        "judge": judge_entry(judge, response_ids),
        "metrics_sha256": metrics_digest(response_ids),
        "style": style.freeze_section(judged["comparisons"]) if style_control else None,
    }


def latest_responses(campaign, companion_ids) -> dict[tuple[int, int], int]:
    """{(scenario, companion): response id}: the latest successful response of each companion
    on each scenario, as the campaign's pairing (annotation.pairing) chooses it."""
    representative = {}
    for pk, scenario, companion in (
        candidate_responses(campaign, companion_ids)
        .order_by("run__created_at", "pk")  # the latest one wins, as in annotation.pairing
        .values_list("pk", "scenario_id", "companion_id")
        .iterator(chunk_size=5000)
    ):
        representative[(scenario, companion)] = pk
    return representative


def counted_judgments(campaign, companion_ids) -> dict:
    """The judgments a release counts and what it leaves out: {judgments (rows), comparisons
    (rows of the comparisons they judge), exclusions (frozen_exclusions), on_other_text}."""
    candidates = Judgment.objects.filter(
        comparison_id__in=judged_comparisons(campaign, companion_ids).values("pk")
    )
    excluded = frozen_exclusions(campaign, candidates)
    judgments, on_other_text = judgments_on_current_text(
        candidates.exclude(annotator_id__in=excluded["annotator"])
    )
    counted = {comparison for _, comparison, _, _ in judgments}
    comparisons = sorted(
        row
        for row in judged_comparisons(campaign, companion_ids).values_list(
            "pk", "scenario_id", "response_a_id", "response_b_id"
        )
        if row[0] in counted  # a comparison judged only by excluded annotators is left out
    )
    return {
        "judgments": judgments,
        "comparisons": comparisons,
        "exclusions": excluded,
        "on_other_text": on_other_text,
    }


def rows_by_id(model, ids, fields) -> list[tuple]:
    """(pk, *fields) of the model's rows with those ids as the database holds them now, sorted
    by id (rows deleted since are absent)."""
    rows = model.objects.filter(pk__in=id_subquery(ids)).values_list("pk", *fields)
    return sorted(rows.iterator(chunk_size=5000))


def scenario_columns(schema: str) -> tuple[str, ...]:
    """The columns of the scenarios section: inputs of schema /1 froze no flags."""
    base = ("id", "subtask", "content_sha256")
    return base if schema == "h2htalk.release-inputs/1" else (*base, *FLAG_COLUMNS)


def scenario_rows(scenario_ids, schema: str = INPUTS_SCHEMA) -> list[tuple]:
    """(id, subtask, content hash[, flags]) of the scenarios, sorted by id."""
    flags = FLAG_COLUMNS if len(scenario_columns(schema)) > 3 else ()
    return rows_by_id(Scenario, scenario_ids, ("subtask", "content_hash", *flags))


def judgments_on_current_text(judgments) -> tuple[list[tuple], int]:
    """The (id, comparison, annotator, preference) rows, sorted, of the judgments made on the
    scenario text the release freezes, and how many others it leaves out.

    A judgment counts when the content hash of the text it was shown (Judgment.scenario_hash)
    is the scenario's content hash now (the one frozen). Judgments stored before hashes were
    recorded (empty hash) count when no revision changed the scenario's content at or after
    their item was handed out (scenarios.services.last_content_change): the text shown then is
    the text now. Everything else was made on an earlier text and is left out."""
    rows = judgments.values_list(
        "pk",
        "comparison_id",
        "annotator_id",
        "preference",
        "scenario_hash",
        "comparison__scenario_id",
        "comparison__scenario__content_hash",
        "assignment__issued_at",
    )
    rows = list(rows.iterator(chunk_size=5000))
    legacy = {scenario for *_, shown, scenario, _, _ in rows if not shown}
    changed = last_content_change(legacy) if legacy else {}
    kept, left_out = [], 0
    for pk, comparison, annotator, preference, shown, scenario, current, issued in rows:
        unchanged_since_issue = scenario not in changed or issued > changed[scenario]
        on_current_text = (shown == current) if shown else unchanged_since_issue
        if on_current_text:
            kept.append((pk, comparison, annotator, preference))
        else:
            left_out += 1
    return sorted(kept), left_out


def other_text_note(left_out: int | None) -> str | None:
    if not left_out:
        return None
    return (
        f"{left_out} human judgment{'s' if left_out != 1 else ''} made on an earlier text of "
        f"{'their' if left_out != 1 else 'its'} scenario (edited since) "
        f"{'are' if left_out != 1 else 'is'} left out: the release counts only judgments made "
        "on the scenario text it freezes."
    )


def frozen_exclusions(campaign, candidates) -> dict:
    """The campaign's excluded annotators when the release is frozen (annotation.exclusions):
    annotator id, reason, and how many of the release's judgments that leaves out. A record of
    the choice (it is part of the fingerprint), not re-read from the database afterwards."""
    rows = list(
        AnnotatorExclusion.objects.filter(campaign=campaign)
        .order_by("annotator_id")
        .values_list("annotator_id", "reason")
    )
    counts = defaultdict(int)
    if rows:
        for annotator in candidates.filter(annotator_id__in=[a for a, _ in rows]).values_list(
            "annotator_id", flat=True
        ):
            counts[annotator] += 1
    return columns_of([(a, reason, counts[a]) for a, reason in rows], EXCLUSION_COLUMNS)


def exclusion_summary(inputs: dict) -> dict | None:
    """How many judgments the release left out and why: {judgments, annotators, reasons: [
    {reason, annotators, judgments}]} (None for releases frozen before exclusions existed)."""
    frozen = inputs.get("exclusions")
    if frozen is None:
        return None
    reasons: dict[str, list[int]] = {}
    for reason, n in zip(frozen["reason"], frozen["judgments"], strict=True):
        reasons.setdefault(reason, []).append(n)
    return {
        "judgments": int(sum(frozen["judgments"])),
        "annotators": len(frozen["annotator"]),
        "reasons": [
            {"reason": reason, "annotators": len(counts), "judgments": int(sum(counts))}
            for reason, counts in sorted(reasons.items(), key=lambda kv: (-sum(kv[1]), kv[0]))
        ],
    }


def exclusion_note(summary: dict | None) -> str | None:
    if not summary or not summary["annotators"]:
        return None
    reasons = "; ".join(
        f"{row['reason']} ({row['judgments']} judgment(s) of {row['annotators']} annotator(s))"
        for row in summary["reasons"]
    )
    return (
        f"{summary['judgments']} human judgment(s) of {summary['annotators']} annotator(s) "
        f"excluded by the researchers are left out. Why: {reasons}."
    )


def columns_of(rows, names) -> dict:
    """Rows as a columnar section {name: [values…]} (smaller JSON than a list of objects)."""
    columns = {name: [] for name in names}
    for row in rows:
        for name, value in zip(names, row, strict=True):
            columns[name].append(value)
    return columns
