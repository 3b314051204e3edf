"""Benchmark releases: freezing the inputs, the fingerprint, computing and checking the numbers,
the files (CSV, JSON, Markdown), object-level access and the background job.

Freezing. A release freezes, in `Release.inputs` (schema INPUTS_SCHEMA), ids and content hashes:
- companions (id, name) and the anchor; the seed, the bootstrap draws and the level (95%);
- scenarios (id, subtask, Scenario.content_hash): the approved scenarios on which at least two
  of the release's companions have a successful response in the campaign's runs;
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
  release's responses, which the composite and the judge's features are computed from.
The fingerprint is the sha256 of the canonical JSON of all that (keys sorted, no spaces, UTF-8).

Computing. `compute` first checks that every frozen input is still in the database unchanged
(`verify`, refusing with what changed or was deleted), then computes from the frozen ids only
(`load_data` → `compute_results`, pure) and stores the numbers as JSON with the code version.
`check` recomputes and compares the canonical JSON with the stored one, bit for bit.
"""

import contextlib
import hashlib
import importlib.metadata
import json
import math
import os
import time
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
from celery import shared_task
from django.db import transaction
from django.db.models import Q
from django.http import Http404
from django.utils import timezone

from annotation.access import managed_campaigns
from annotation.models import AnnotatorExclusion, Comparison, Judgment
from h2htalk import csvexport, jobs
from h2htalk.models import Job
from h2htalk.params import parse_int
from h2htalk.roles import ADMIN, user_roles
from h2htalk.stats import leaderboard as stats
from scenarios.models import CompanionModel, Response, Scenario
from scenarios.services import last_content_change
from scenarios.taxonomy import Dimension, Subtask, dimension_of
from scoring.metrics import composite as paper
from scoring.metrics import jobs as metric_jobs
from scoring.models import CalibratedJudge, JudgeVerdict, MetricScore, Release, ReleaseResult

INPUTS_SCHEMA = "h2htalk.release-inputs/1"
RESULTS_SCHEMA = "h2htalk.release-results/1"
KIND = "release_compute"
LEVEL = stats.LEVEL
INLINE_RESPONSES = 3_000  # more responses (or judgments) than this: a background job
INLINE_JUDGMENTS = 20_000
MIN_GROUP_VOTES = 30  # a dimension or subtask with fewer human votes is skipped, with a note
MIN_VOTES_PER_COMPANION = 10  # … or with fewer than this many votes per companion in it
MIN_GROUP_SCENARIOS = 5  # the judge's scenario bootstrap needs a few scenarios per group
CHUNK = 5_000  # ids per IN (...) query
PAIR_CHUNK = 50_000  # judge pairs scored at once
NO_JUDGE = "no judge in this release"
STAT_SOURCES = (
    "h2htalk/stats/leaderboard.py",
    "h2htalk/stats/bradley_terry.py",
    "h2htalk/stats/ppi.py",
    "scoring/releases/service.py",
    "scoring/metrics/composite.py",
    "scoring/calibration/prediction.py",
    "scoring/metrics/features.py",
)


class ReleaseError(ValueError):
    """A release cannot be frozen or computed (said in one sentence)."""


class InputsChanged(ReleaseError):
    """Inputs of a release were changed or deleted since it was frozen."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__(
            "the release's inputs changed since it was frozen, so its numbers cannot be "
            "reproduced: " + "; ".join(problems)
        )


# ---------------------------------------------------------------- canonical JSON, provenance


def canonical(value) -> str:
    return json.dumps(
        value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False
    )


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def fingerprint_of(inputs: dict) -> str:
    return sha256_text(canonical(inputs))


def code_version() -> str:
    """H2HTALK_CODE_VERSION if set, else the package version and a hash of the statistics code
    the numbers come from (no git call)."""
    return os.environ.get("H2HTALK_CODE_VERSION") or _code_version()


@cache
def _code_version() -> str:
    try:
        version = importlib.metadata.version("h2htalk-platform")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for name in STAT_SOURCES:
        path = root / name
        digest.update(name.encode())
        digest.update(path.read_bytes() if path.exists() else b"-")
    return f"h2htalk-platform {version}, statistics code sha256 {digest.hexdigest()[:16]}"


def _chunks(values, size: int = CHUNK):
    values = list(values)
    for start in range(0, len(values), size):
        yield values[start : start + size]


# ---------------------------------------------------------------- access


def visible_releases(user):
    """Releases of campaigns the user owns or is a member of (admins: all)."""
    if ADMIN in user_roles(user):
        return Release.objects.all()
    return Release.objects.filter(campaign__in=managed_campaigns(user))


def release_or_404(user, pk) -> Release:
    release = (
        visible_releases(user)
        .select_related("campaign", "anchor", "judge", "created_by", "job", "result")
        .defer("inputs", "judge__document")  # large; loaded on access (compute, check)
        .filter(pk=pk)
        .first()
    )
    if release is None:
        raise Http404("No such release.")
    return release


# ---------------------------------------------------------------- choosing and freezing


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


def estimate_size(release: Release) -> tuple[int, int]:
    """(responses, judgments) a release will freeze, roughly (for inline vs job)."""
    ids = list(release.companions.values_list("pk", flat=True))
    responses = candidate_responses(release.campaign, ids).count()
    judgments = Judgment.objects.filter(comparison__campaign=release.campaign).count()
    return responses, judgments


def needs_job(release: Release) -> bool:
    responses, judgments = estimate_size(release)
    return responses > INLINE_RESPONSES or judgments > INLINE_JUDGMENTS


def _text_hashes(response_ids) -> dict[int, tuple[int, int, str]]:
    out = {}
    for chunk in _chunks(sorted(response_ids)):
        rows = Response.objects.filter(pk__in=chunk).values_list(
            "pk", "scenario_id", "companion_id", "text"
        )
        for pk, scenario, companion, text in rows.iterator(chunk_size=2000):
            out[pk] = (scenario, companion, sha256_text(text or ""))
    return out


def metrics_digest(response_ids) -> str:
    """sha256 over "id<TAB>canonical values" lines of the stored metrics ("-" when none)."""
    values = {}
    for chunk in _chunks(sorted(response_ids)):
        values.update(
            MetricScore.objects.filter(response_id__in=chunk).values_list("response_id", "values")
        )
    digest = hashlib.sha256()
    for pk in sorted(response_ids):
        stored = values.get(pk)
        digest.update(f"{pk}\t{'-' if stored is None else canonical(stored)}\n".encode())
    return digest.hexdigest()


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
    ids = set(response_ids)
    digest = hashlib.sha256()
    rows = (
        JudgeVerdict.objects.filter(run__judge=config)
        .values_list(
            "pk", "response_id", "first_id", "second_id", "sample", "parse", "winner", "scores"
        )
        .order_by("pk")
    )
    for pk, response, first, second, sample, parse, winner, scores in rows.iterator(
        chunk_size=5000
    ):
        if response in ids or (first in ids and second in ids):
            digest.update(
                f"{pk}\t{response}\t{first}\t{second}\t{sample}\t{parse}\t{winner}\t"
                f"{canonical(scores or {})}\n".encode()
            )
    return digest.hexdigest()


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
    campaign, companions, anchor, judge=None, seed: int = 0, n_boot: int = stats.N_BOOT
) -> dict:
    """The inputs of a release (see the module docstring), read from the database now."""
    companions = check_choices(campaign, companions, anchor, judge)
    companion_ids = [c.pk for c in companions]
    representative: dict[tuple[int, int], int] = {}
    for pk, scenario, companion in (
        candidate_responses(campaign, companion_ids)
        .order_by("run__created_at", "pk")  # the latest one wins, as in annotation.pairing
        .values_list("pk", "scenario_id", "companion_id")
        .iterator(chunk_size=5000)
    ):
        representative[(scenario, companion)] = pk
    per_scenario = defaultdict(int)
    for scenario, _ in representative:
        per_scenario[scenario] += 1
    kept = {s for s, n in per_scenario.items() if n >= 2}
    population = {pk for (s, _), pk in representative.items() if s in kept}
    response_ids = set(population)
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
    for _, scenario, a, b in comparisons:
        kept.add(scenario)
        response_ids.update((a, b))
    scenario_rows = []
    for chunk in _chunks(sorted(kept)):
        scenario_rows.extend(
            Scenario.objects.filter(pk__in=chunk).values_list("pk", "subtask", "content_hash")
        )
    scenario_rows.sort()
    texts = _text_hashes(response_ids)
    response_rows = sorted((pk, *texts[pk], int(pk in population)) for pk in response_ids)
    return {
        "schema": INPUTS_SCHEMA,
        "campaign": campaign.pk,
        "seed": int(seed),
        "n_boot": int(n_boot),
        "level": LEVEL,
        "anchor": anchor.pk,
        "companions": _columns([(c.pk, c.name) for c in companions], ("id", "name")),
        "scenarios": _columns(scenario_rows, ("id", "subtask", "content_sha256")),
        "responses": _columns(response_rows, RESPONSE_COLUMNS),
        "comparisons": _columns(comparisons, ("id", "scenario", "response_a", "response_b")),
        "judgments": _columns(judgments, ("id", "comparison", "annotator", "preference")),
        "exclusions": excluded,
        "judgments_on_other_text": on_other_text,
        "judge": judge_entry(judge, response_ids),
        "metrics_sha256": metrics_digest(response_ids),
    }


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


EXCLUSION_COLUMNS = ("annotator", "reason", "judgments")


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
    return _columns([(a, reason, counts[a]) for a, reason in rows], EXCLUSION_COLUMNS)


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


RESPONSE_COLUMNS = ("id", "scenario", "companion", "text_sha256", "population")


def _columns(rows, names) -> dict:
    columns = {name: [] for name in names}
    for row in rows:
        for name, value in zip(names, row, strict=True):
            columns[name].append(value)
    return columns


def _rows(section: dict, names) -> dict:
    """{id: (the named columns…)} of a columnar section (columns by name: jsonb does not keep
    the order of an object's keys)."""
    return {pk: tuple(section[n][k] for n in names) for k, pk in enumerate(section["id"])}


# ---------------------------------------------------------------- verifying


def current_inputs(release: Release) -> dict:
    """The release's inputs as the database holds them now, for the frozen ids only."""
    stored = release.inputs
    out = {key: stored[key] for key in ("schema", "campaign", "seed", "n_boot", "level", "anchor")}
    companion_ids = stored["companions"]["id"]
    names = dict(CompanionModel.objects.filter(pk__in=companion_ids).values_list("pk", "name"))
    out["companions"] = _columns(
        [(pk, names[pk]) for pk in companion_ids if pk in names], ("id", "name")
    )
    rows = []
    for chunk in _chunks(stored["scenarios"]["id"]):
        rows.extend(
            Scenario.objects.filter(pk__in=chunk).values_list("pk", "subtask", "content_hash")
        )
    out["scenarios"] = _columns(sorted(rows), ("id", "subtask", "content_sha256"))
    response_ids = stored["responses"]["id"]
    texts = _text_hashes(response_ids)
    flags = dict(zip(response_ids, stored["responses"]["population"], strict=True))
    out["responses"] = _columns(
        sorted((pk, *texts[pk], flags[pk]) for pk in response_ids if pk in texts),
        RESPONSE_COLUMNS,
    )
    rows = []
    for chunk in _chunks(stored["comparisons"]["id"]):
        rows.extend(
            Comparison.objects.filter(pk__in=chunk).values_list(
                "pk", "scenario_id", "response_a_id", "response_b_id"
            )
        )
    out["comparisons"] = _columns(sorted(rows), ("id", "scenario", "response_a", "response_b"))
    rows = []
    for chunk in _chunks(stored["judgments"]["id"]):
        rows.extend(
            Judgment.objects.filter(pk__in=chunk).values_list(
                "pk", "comparison_id", "annotator_id", "preference"
            )
        )
    out["judgments"] = _columns(sorted(rows), ("id", "comparison", "annotator", "preference"))
    if "exclusions" in stored:  # the choice made at freezing (releases before it have none)
        out["exclusions"] = stored["exclusions"]
    if "judgments_on_other_text" in stored:  # counted at freezing (earlier releases: absent)
        out["judgments_on_other_text"] = stored["judgments_on_other_text"]
    if stored["judge"] is None:
        out["judge"] = None
    else:
        judge = CalibratedJudge.objects.filter(pk=stored["judge"]["id"]).first()
        out["judge"] = judge_entry(judge, response_ids) if judge else {"deleted": True}
    out["metrics_sha256"] = metrics_digest(response_ids)
    return out


SECTIONS = {
    "companions": ("companion", ("name",)),
    "scenarios": ("scenario", ("subtask", "content_sha256")),
    "responses": ("response", RESPONSE_COLUMNS[1:]),
    "comparisons": ("comparison", ("scenario", "response_a", "response_b")),
    "judgments": ("judgment", ("comparison", "annotator", "preference")),
}
WHAT = {
    "name": "name",
    "subtask": "subtask",
    "content_sha256": "content",
    "scenario": "scenario",
    "companion": "companion",
    "text_sha256": "text",
    "population": "population flag",
    "response_a": "response A",
    "response_b": "response B",
    "comparison": "comparison",
    "annotator": "annotator",
    "preference": "preference",
}


def _ids(values, limit: int = 8) -> str:
    shown = ", ".join(str(v) for v in values[:limit])
    return shown + (f" and {len(values) - limit} more" if len(values) > limit else "")


def compare_inputs(stored: dict, current: dict) -> list[str]:
    """What differs between the frozen inputs and the database now, in sentences."""
    problems = []
    for section, (label, names) in SECTIONS.items():
        before, now = _rows(stored[section], names), _rows(current[section], names)
        deleted = sorted(set(before) - set(now))
        if deleted:
            problems.append(f"{len(deleted)} {label}(s) deleted (id {_ids(deleted)})")
        changed = sorted(pk for pk in before if pk in now and before[pk] != now[pk])
        if changed:
            columns = sorted(
                {
                    WHAT[name]
                    for pk in changed
                    for name, x, y in zip(names, before[pk], now[pk], strict=True)
                    if x != y
                }
            )
            problems.append(
                f"{len(changed)} {label}(s) changed ({', '.join(columns)}; id {_ids(changed)})"
            )
    judge_before, judge_now = stored["judge"], current["judge"]
    if judge_before is not None:
        if judge_now.get("deleted"):
            problems.append(f"the calibrated judge {judge_before['id']} was deleted")
        else:
            if judge_now["document_sha256"] != judge_before["document_sha256"]:
                problems.append(
                    f"the calibrated judge {judge_before['name']} v{judge_before['version']}'s "
                    "document changed"
                )
            if judge_now["verdicts_sha256"] != judge_before["verdicts_sha256"]:
                problems.append("the LLM verdicts the judge's features come from changed")
    if stored["metrics_sha256"] != current["metrics_sha256"]:
        problems.append(
            "the stored reference metrics of the release's responses changed (recomputed, "
            "deleted or added since the release was frozen)"
        )
    return problems


def verify(release: Release) -> list[str]:
    """Problems that keep the release from being reproduced (empty: all inputs unchanged)."""
    if not release.inputs:
        return ["the release has not been frozen yet"]
    problems = []
    if fingerprint_of(release.inputs) != release.fingerprint:
        problems.append("the stored inputs do not match the release's fingerprint")
    try:
        current = current_inputs(release)
    except ReleaseError as error:
        return [*problems, str(error)]
    problems += compare_inputs(release.inputs, current)
    if not problems and fingerprint_of(current) != release.fingerprint:
        problems.append("the inputs' fingerprint no longer matches the database")
    return problems


# ---------------------------------------------------------------- data of a release


@dataclass
class ReleaseData:
    """Everything `compute_results` needs, from the frozen inputs (no database access there)."""

    companions: list[tuple[int, str]]  # (id, name) by id
    anchor: int
    subtask: dict[int, str]  # scenario id → subtask
    votes: pd.DataFrame  # comparison, scenario, companion_a, companion_b, annotator, preference
    composite: pd.DataFrame  # response, scenario, companion, composite (one per scen. × comp.)
    composite_note: str
    seed: int
    n_boot: int
    level: float = LEVEL
    judge: dict | None = None  # name, version, document_sha256
    population: pd.DataFrame | None = None  # scenario, companion_a, companion_b, p_a
    labelled: pd.DataFrame | None = None  # comparison, p_a
    reliability: dict | None = None
    notes: list[str] = field(default_factory=list)
    exclusions: dict | None = None  # exclusion_summary of the inputs (None: frozen before)
    on_other_text: int | None = None  # judgments left out, made on an earlier scenario text


def representatives(inputs: dict) -> pd.DataFrame:
    """The frozen population: one response per (scenario, companion), the latest successful one
    in the campaign's runs when the release was frozen (as the campaign's pairing chooses).
    Columns: response, scenario, companion."""
    responses = inputs["responses"]
    frame = pd.DataFrame(
        {
            "response": responses["id"],
            "scenario": responses["scenario"],
            "companion": responses["companion"],
        }
    )
    if frame.empty:
        return frame
    frame = frame[np.asarray(responses["population"], dtype=bool)]
    return frame.sort_values(["scenario", "companion"]).reset_index(drop=True)


def population_pairs(inputs: dict) -> pd.DataFrame:
    """Every pair of companions on every release scenario (A = the lower companion id) with
    their representative responses."""
    reps = representatives(inputs)
    columns = ["scenario", "companion_a", "companion_b", "response_a", "response_b"]
    if reps.empty:
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in columns})
    scenario = reps["scenario"].to_numpy()
    companion = reps["companion"].to_numpy()
    response = reps["response"].to_numpy()
    starts = np.flatnonzero(np.r_[True, scenario[1:] != scenario[:-1]])
    ends = np.r_[starts[1:], len(scenario)]
    first, second = [], []
    triu = {}
    for start, end in zip(starts, ends, strict=True):
        size = end - start
        if size not in triu:
            triu[size] = np.triu_indices(size, 1)
        i, j = triu[size]
        first.append(start + i)
        second.append(start + j)
    first = np.concatenate(first) if first else np.zeros(0, int)
    second = np.concatenate(second) if second else np.zeros(0, int)
    return pd.DataFrame(
        {
            "scenario": scenario[first],
            "companion_a": companion[first],
            "companion_b": companion[second],
            "response_a": response[first],
            "response_b": response[second],
        }
    )


def _score_pairs(document, response_a, response_b, progress=None) -> np.ndarray:
    """The calibrated judge's P(A over B) per pair (NaN where a feature source is missing), by
    scoring.calibration.prediction.score_pairs in chunks."""
    from scoring.calibration.document import DocumentError
    from scoring.calibration.prediction import score_pairs

    response_a, response_b = np.asarray(response_a), np.asarray(response_b)
    out = np.full(len(response_a), np.nan)
    for start in range(0, len(response_a), PAIR_CHUNK):
        stop = min(start + PAIR_CHUNK, len(response_a))
        pairs = list(
            zip(response_a[start:stop].tolist(), response_b[start:stop].tolist(), strict=True)
        )
        try:
            p, _ = score_pairs(document, pairs)
        except DocumentError as error:
            raise ReleaseError(str(error)) from error
        out[start:stop] = p
        if progress:
            progress(stop, len(response_a))
    return out


def judge_probabilities(release: Release, progress=None) -> pd.DataFrame:
    """The calibrated judge's P(A over B) for every pair of the release's companions on every
    release scenario: columns scenario, companion_a, companion_b (A = the lower companion id),
    response_a, response_b, p_a (NaN where the judge has no features for a response)."""
    frame = population_pairs(release.inputs)
    if release.judge is None:
        raise ReleaseError(NO_JUDGE)
    frame["p_a"] = _score_pairs(
        release.judge.document, frame["response_a"], frame["response_b"], progress
    )
    return frame


def labelled_probabilities(release: Release) -> pd.DataFrame:
    """The judge's P(A over B) on the responses of each frozen comparison: comparison, p_a."""
    comparisons = release.inputs["comparisons"]
    p = _score_pairs(release.judge.document, comparisons["response_a"], comparisons["response_b"])
    return pd.DataFrame({"comparison": comparisons["id"], "p_a": p})


def votes_frame(inputs: dict) -> pd.DataFrame:
    judgments = pd.DataFrame(inputs["judgments"])
    columns = ["comparison", "scenario", "companion_a", "companion_b", "annotator", "preference"]
    if judgments.empty:
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in columns})
    comparisons = pd.DataFrame(inputs["comparisons"]).rename(columns={"id": "comparison"})
    owner = dict(zip(inputs["responses"]["id"], inputs["responses"]["companion"], strict=True))
    comparisons["companion_a"] = comparisons["response_a"].map(owner)
    comparisons["companion_b"] = comparisons["response_b"].map(owner)
    frame = judgments.merge(comparisons, on="comparison", how="inner")
    return frame.sort_values("id")[columns].reset_index(drop=True)


def composite_frame(inputs: dict) -> tuple[pd.DataFrame, str]:
    """The paper's composite of each representative response, over the metric terms stored
    for every one of them (one renormalisation for the whole release)."""
    reps = representatives(inputs)
    values = {}
    for chunk in _chunks(reps["response"].tolist()):
        values.update(
            MetricScore.objects.filter(response_id__in=chunk).values_list("response_id", "values")
        )
    reps = reps[reps["response"].isin(values)].reset_index(drop=True)
    if reps.empty:
        reps["composite"] = pd.Series(dtype=float)
        return reps, "No reference metrics are stored for the release's responses."
    columns = {}
    partial = []
    for term in paper.PAPER_WEIGHTS:
        column = np.array(
            [_number(values[r].get(term, values[r].get(_alias(term)))) for r in reps["response"]]
        )
        if np.isnan(column).all():
            continue
        if np.isnan(column).any():
            partial.append(paper.LABELS[term])
            continue
        columns[term] = column
    backends = {values[r].get("embedding_backend") for r in reps["response"]} - {None}
    note_extra = ""
    if partial:
        note_extra = (
            f" {', '.join(partial)} {'is' if len(partial) == 1 else 'are'} stored for some "
            "responses only and left out, so every response is scored the same way."
        )
    if not columns:
        reps["composite"] = np.nan
        return reps, "None of the composite's terms is stored for every response." + note_extra
    backend = backends.pop() if "embedding_cosine" in columns and len(backends) == 1 else None
    result = paper.composite_columns(columns, embedding_backend=backend)
    reps["composite"] = np.asarray(result.score, dtype=float)
    return reps, result.note + note_extra


def _alias(term: str) -> str:
    return {v: k for k, v in paper.ALIASES.items()}.get(term, term)


def _number(value) -> float:
    if value is None or isinstance(value, bool):
        return math.nan
    try:
        number = float(value)
    except (TypeError, ValueError):
        return math.nan
    return number if math.isfinite(number) else math.nan


def reliability_of(document: dict) -> dict | None:
    """The held-out reliability tables in a calibrated judge's document (None if absent)."""
    judges = ((document or {}).get("heldout") or {}).get("judges") or {}
    out = {}
    for name, metrics in judges.items():
        if isinstance(metrics, dict) and isinstance(metrics.get("reliability"), list):
            out[name] = {
                "reliability": metrics["reliability"],
                "ece": metrics.get("ece"),
                "log_loss": metrics.get("log_loss"),
            }
    return out or None


def load_data(release: Release, progress=None) -> ReleaseData:
    """The release's data from its frozen inputs (the database only for the stored metrics and
    the judge's features of the frozen responses, both covered by the fingerprint)."""
    inputs = release.inputs
    composite, note = composite_frame(inputs)
    data = ReleaseData(
        companions=list(zip(inputs["companions"]["id"], inputs["companions"]["name"], strict=True)),
        anchor=inputs["anchor"],
        subtask=dict(zip(inputs["scenarios"]["id"], inputs["scenarios"]["subtask"], strict=True)),
        votes=votes_frame(inputs),
        composite=composite,
        composite_note=note,
        seed=inputs["seed"],
        n_boot=inputs["n_boot"],
        level=inputs["level"],
        exclusions=exclusion_summary(inputs),
        on_other_text=inputs.get("judgments_on_other_text"),
    )
    note = exclusion_note(data.exclusions)
    if note:
        data.notes.append(note)
    note = other_text_note(data.on_other_text)
    if note:
        data.notes.append(note)
    if release.judge_id is not None:
        data.judge = {
            key: inputs["judge"][key] for key in ("id", "name", "version", "document_sha256")
        }
        data.population = judge_probabilities(release, progress)
        data.labelled = labelled_probabilities(release)
        data.reliability = reliability_of(release.judge.document)
    return data


# ---------------------------------------------------------------- the numbers


def _outcome_a(preference) -> np.ndarray:
    preference = np.asarray(preference, dtype=float)
    return np.where(preference < 0, 1.0, np.where(preference == 0, 0.5, 0.0))


def _masked(strengths: stats.Strengths, present: np.ndarray, n: int) -> dict:
    """A Strengths fitted on the present companions, expanded to all n (None elsewhere)."""
    fitted = strengths.as_dict()
    out = {key: fitted[key] for key in ("level", "n_boot", "method")}
    index = {int(k): pos for pos, k in enumerate(present)}
    for key in ("elo", "low", "high", "rank"):
        out[key] = [fitted[key][index[k]] if k in index else None for k in range(n)]
    out["games"] = [round(fitted["games"][index[k]]) if k in index else 0 for k in range(n)]
    for key in ("p_better", "significant", "diff_low", "diff_high"):
        out[key] = [
            [
                fitted[key][index[i]][index[j]] if i in index and j in index else None
                for j in range(n)
            ]
            for i in range(n)
        ]
    return out


def _vote_block(frame, index, n, data, name, minimum) -> dict:
    votes = len(frame)
    block = {"votes": votes, "comparisons": int(frame["comparison"].nunique()) if votes else 0}
    if votes == 0:
        return {**block, "skipped": "no human votes"}
    a = frame["companion_a"].map(index).to_numpy()
    b = frame["companion_b"].map(index).to_numpy()
    present = np.unique(np.concatenate([a, b]))
    if len(present) < 2:
        return {**block, "skipped": "fewer than two companions with votes"}
    if minimum and votes < max(minimum, MIN_VOTES_PER_COMPANION * len(present)):
        needed = max(minimum, MIN_VOTES_PER_COMPANION * len(present))
        return {
            **block,
            "skipped": f"only {votes} human votes (a fit needs {needed}: at least {minimum} "
            f"and {MIN_VOTES_PER_COMPANION} per companion)",
        }
    local = {int(k): pos for pos, k in enumerate(present)}
    strengths = stats.vote_strengths(
        [local[int(k)] for k in a],
        [local[int(k)] for k in b],
        _outcome_a(frame["preference"]),
        len(present),
        n_boot=data.n_boot,
        level=data.level,
        seed=stats.derived_seed(data.seed, name),
    )
    return {**block, **_masked(strengths, present, n)}


def _judge_block(frame, index, n, data, name, minimum_scenarios) -> dict:
    usable = frame[np.isfinite(frame["p_a"].to_numpy(dtype=float))]
    block = {
        "pairs": len(usable),
        "without_prediction": len(frame) - len(usable),
        "scenarios": int(usable["scenario"].nunique()) if len(usable) else 0,
    }
    if block["scenarios"] < minimum_scenarios:
        return {
            **block,
            "skipped": f"the judge scored pairs on {block['scenarios']} scenario(s) "
            f"(fewer than {minimum_scenarios})",
        }
    a = usable["companion_a"].map(index).to_numpy()
    b = usable["companion_b"].map(index).to_numpy()
    present = np.unique(np.concatenate([a, b]))
    if len(present) < 2:
        return {**block, "skipped": "fewer than two companions with judge predictions"}
    local = np.full(n, -1)
    local[present] = np.arange(len(present))
    strengths = stats.scenario_strengths(
        usable["scenario"].to_numpy(),
        local[a],
        local[b],
        usable["p_a"].to_numpy(dtype=float),
        len(present),
        n_boot=data.n_boot,
        level=data.level,
        seed=stats.derived_seed(data.seed, name),
    )
    return {**block, **_masked(strengths, present, n)}


def _anchor_rows(data: ReleaseData, ids: list[int]) -> list[dict]:
    votes = data.votes
    rows = []
    labelled_p = (
        dict(zip(data.labelled["comparison"], data.labelled["p_a"], strict=True))
        if data.labelled is not None
        else {}
    )
    for x in ids:
        if x == data.anchor:
            continue
        pair = votes[
            ((votes["companion_a"] == x) & (votes["companion_b"] == data.anchor))
            | ((votes["companion_a"] == data.anchor) & (votes["companion_b"] == x))
        ]
        outcome_a = _outcome_a(pair["preference"])
        outcome_x = np.where(pair["companion_a"].to_numpy() == x, outcome_a, 1 - outcome_a)
        per_comparison = (
            pd.DataFrame({"comparison": pair["comparison"].to_numpy(), "y": outcome_x})
            .groupby("comparison", sort=True)["y"]
            .mean()
        )
        row = {"companion": x}
        if data.population is None:
            y = per_comparison.to_numpy()
            row.update(stats.anchor_win_rate(y, y, [], data.level))
            row["judge"] = row["ppi"] = None
            row["judge_reason"] = row["ppi_reason"] = NO_JUDGE
            rows.append(row)
            continue
        x_is_a = {c: a == x for c, a in zip(pair["comparison"], pair["companion_a"], strict=True)}
        f = np.array(
            [
                labelled_p.get(c, np.nan) if x_is_a[c] else 1 - labelled_p.get(c, np.nan)
                for c in per_comparison.index
            ],
            dtype=float,
        )
        keep = np.isfinite(f)
        population = data.population
        mine = population[
            ((population["companion_a"] == x) & (population["companion_b"] == data.anchor))
            | ((population["companion_a"] == data.anchor) & (population["companion_b"] == x))
        ]
        p = mine["p_a"].to_numpy(dtype=float)
        f_all = np.where(mine["companion_a"].to_numpy() == x, p, 1 - p)
        f_all = f_all[np.isfinite(f_all)]
        row.update(
            stats.anchor_win_rate(per_comparison.to_numpy()[keep], f[keep], f_all, data.level)
        )
        row["labelled_without_prediction"] = int((~keep).sum())
        if len(f_all) and keep.sum() >= len(f_all):
            row["note"] = (
                "every scenario of this pair has human labels, so PPI reduces to the humans' "
                "mean (the judge adds nothing where humans already answered)"
            )
        rows.append(row)
    return rows


def _composite_block(data: ReleaseData, ids: list[int], groups: dict) -> dict:
    frame = data.composite
    overall = []
    for c in ids:
        values = frame.loc[frame["companion"] == c, "composite"].to_numpy(dtype=float)
        overall.append({"companion": c, **stats.mean_interval(values, data.level)})
    by_group = {}
    for scope, column in (("by_dimension", "dimension"), ("by_subtask", "subtask")):
        by_group[scope] = {}
        if frame.empty:
            continue
        labels = frame["scenario"].map(
            data.subtask if column == "subtask" else groups["dimension_of_scenario"]
        )
        for group in groups[column]:
            means = []
            for c in ids:
                values = frame.loc[
                    (frame["companion"] == c) & (labels == group), "composite"
                ].to_numpy(dtype=float)
                values = values[np.isfinite(values)]
                means.append(float(values.mean()) if len(values) else None)
            by_group[scope][group] = means
    return {
        "overall": overall,
        **by_group,
        "note": (
            f"{data.composite_note} Mean over each companion's responses to the release's "
            f"scenarios (one per scenario); {data.level:.0%} normal-approximation intervals over "
            "responses."
        ),
    }


def compute_results(data: ReleaseData) -> dict:
    """The numbers of a release, JSON-ready and deterministic for the same data and seed."""
    ids = [c for c, _ in data.companions]
    n = len(ids)
    index = {c: k for k, c in enumerate(ids)}
    dimension_of_scenario = {s: dimension_of(t) for s, t in data.subtask.items()}
    present_subtasks = set(data.subtask.values())
    groups = {
        "dimension": [
            d for d in Dimension.values if d in {dimension_of(t) for t in present_subtasks}
        ],
        "subtask": [t for t in Subtask.values if t in present_subtasks],
        "dimension_of_scenario": dimension_of_scenario,
    }
    votes = data.votes
    human = {"overall": _vote_block(votes, index, n, data, "human/overall", 0)}
    vote_dimension = votes["scenario"].map(dimension_of_scenario)
    vote_subtask = votes["scenario"].map(data.subtask)
    human["by_dimension"] = {
        d: _vote_block(votes[vote_dimension == d], index, n, data, f"human/{d}", MIN_GROUP_VOTES)
        for d in groups["dimension"]
    }
    human["by_subtask"] = {
        t: _vote_block(votes[vote_subtask == t], index, n, data, f"human/{t}", MIN_GROUP_VOTES)
        for t in groups["subtask"]
    }
    judge = None
    if data.population is not None:
        population = data.population
        judge = {
            **data.judge,
            "overall": _judge_block(population, index, n, data, "judge/overall", 2),
        }
        pop_dimension = population["scenario"].map(dimension_of_scenario)
        pop_subtask = population["scenario"].map(data.subtask)
        judge["by_dimension"] = {
            d: _judge_block(
                population[pop_dimension == d], index, n, data, f"judge/{d}", MIN_GROUP_SCENARIOS
            )
            for d in groups["dimension"]
        }
        judge["by_subtask"] = {
            t: _judge_block(
                population[pop_subtask == t], index, n, data, f"judge/{t}", MIN_GROUP_SCENARIOS
            )
            for t in groups["subtask"]
        }
    if len(votes):
        wins, games = stats.win_matrix(
            votes["companion_a"].map(index).to_numpy(),
            votes["companion_b"].map(index).to_numpy(),
            _outcome_a(votes["preference"]),
            n,
        )
    else:
        wins = games = np.zeros((n, n))
    composite = _composite_block(data, ids, groups)
    human_elo = human["overall"].get("elo") or [None] * n
    judge_elo = (judge["overall"].get("elo") if judge else None) or [None] * n
    composite_mean = [row["mean"] for row in composite["overall"]]

    def nan(values):
        return [math.nan if v is None else v for v in values]

    results = {
        "schema": RESULTS_SCHEMA,
        "level": data.level,
        "seed": data.seed,
        "n_boot": data.n_boot,
        "companions": [{"id": c, "name": name} for c, name in data.companions],
        "anchor": data.anchor,
        "dimensions": groups["dimension"],
        "subtasks": groups["subtask"],
        "counts": {
            "companions": n,
            "scenarios": len(data.subtask),
            "responses_scored": len(data.composite),
            "comparisons": int(votes["comparison"].nunique()) if len(votes) else 0,
            "votes": len(votes),
            "annotators": int(votes["annotator"].nunique()) if len(votes) else 0,
            "judge_pairs": len(data.population) if data.population is not None else 0,
        },
        "human": human,
        "judge": judge,
        "judge_note": None if judge else NO_JUDGE,
        "anchor_win_rate": {
            "anchor": data.anchor,
            "rows": _anchor_rows(data, ids),
            "note": (
                f"P(companion beats the anchor). Humans only: mean over the labelled comparisons "
                f"of the mean human outcome (tie = ½), {data.level:.0%} normal interval. Judge "
                "only: the calibrated judge's mean P over every release scenario (uncorrected, "
                f"so any bias of the judge stays in it). PPI++: prediction-powered inference "
                f"(power-tuned λ) combining the judge on every scenario with the humans on the "
                f"labelled subset, {data.level:.0%} interval; unbiased when the labelled "
                "comparisons are a random sample of the scenarios."
            ),
        },
        "composite": composite,
        "win_matrix": {"wins": wins, "games": games},
        "agreement": {
            "judge_vs_human_spearman": stats.rank_correlation(nan(judge_elo), nan(human_elo)),
            "composite_vs_human_spearman": stats.rank_correlation(
                nan(composite_mean), nan(human_elo)
            ),
        },
        "reliability": data.reliability,
        "notes": [
            f"Every interval is a {data.level:.0%} interval (ppi_py's own default would be 90%).",
            "Rank = 1 + the number of companions significantly better (the bootstrap "
            f"{data.level:.0%} interval of the Elo difference excludes 0); the significance "
            "matrix shows every pair.",
            "Elo scale: 1000 + 400·log10(e)·θ with Bradley–Terry log-strengths θ of mean 0; a "
            "difference of 100 means P(win) ≈ 0.64.",
            "Human votes count as win (1), tie (½) or loss (0); the 5-point strength is not "
            "used. Per dimension and subtask the same fit on that part's votes; parts with "
            f"fewer than {MIN_GROUP_VOTES} votes, or fewer than {MIN_VOTES_PER_COMPANION} per "
            "companion, are skipped (a few votes per model give unstable fits).",
            *data.notes,
        ],
    }
    if data.exclusions is not None:
        results["exclusions"] = data.exclusions
    if data.on_other_text is not None:  # releases frozen before it was counted: absent
        results["judgments_on_other_text"] = data.on_other_text
    return stats.json_safe(results)


# ---------------------------------------------------------------- creating, computing, checking


def create_release(
    *,
    name: str,
    campaign,
    anchor,
    companions=None,
    judge: CalibratedJudge | None = None,
    seed: int = 0,
    n_boot: int = stats.N_BOOT,
    description: str = "",
    user=None,
    is_demo: bool = False,
    compute_now: bool | None = None,
) -> Release:
    """Create a release and freeze + compute it: inline for small ones (or compute_now=True),
    as a background job for large ones (compute_now=None decides), not at all when False."""
    chosen = check_choices(campaign, companions, anchor, judge)
    with transaction.atomic():
        release = Release.objects.create(
            name=name,
            description=description,
            campaign=campaign,
            anchor=anchor,
            judge=judge,
            seed=seed,
            n_boot=n_boot,
            is_demo=is_demo,
            created_by=user,
        )
        release.companions.set(chosen)
    if compute_now is None:
        compute_now = not needs_job(release)
        if not compute_now:
            with transaction.atomic():
                queue_compute(release, user)
            return release
    if compute_now:
        with contextlib.suppress(ReleaseError):  # the release records it (FAILED, message)
            compute(release)
    return release


def freeze_release(release: Release, progress=None) -> None:
    """Compute missing reference metrics of the candidate responses, then freeze the inputs."""
    companion_ids = list(release.companions.values_list("pk", flat=True))
    candidates = candidate_responses(release.campaign, companion_ids)
    metric_jobs.compute(candidates, progress=progress)
    inputs = freeze(
        release.campaign,
        list(release.companions.all()),
        release.anchor,
        release.judge,
        release.seed,
        release.n_boot,
    )
    release.inputs = inputs
    release.fingerprint = fingerprint_of(inputs)
    release.frozen_at = timezone.now()
    release.save(update_fields=["inputs", "fingerprint", "frozen_at"])


def _fail(release: Release, message: str) -> None:
    """A release without numbers fails; one with stored numbers keeps them (they are the
    numbers of its frozen inputs) and records the failed recomputation as a failed check."""
    if ReleaseResult.objects.filter(release=release).exists():
        now = timezone.now()
        Release.objects.filter(pk=release.pk).update(
            state=Release.State.READY, checked_at=now, check_ok=False, check_message=message
        )
        release.state, release.checked_at, release.check_ok, release.check_message = (
            Release.State.READY,
            now,
            False,
            message,
        )
        return
    Release.objects.filter(pk=release.pk).update(state=Release.State.FAILED, message=message)
    release.state, release.message = Release.State.FAILED, message


def results_for(release: Release, progress=None) -> dict:
    """Verify the frozen inputs against the database, then compute the numbers."""
    problems = verify(release)
    if problems:
        raise InputsChanged(problems)
    return compute_results(load_data(release, progress))


def compute(release: Release, progress=None) -> ReleaseResult:
    """Freeze (if not yet), verify and compute a release, storing its numbers."""
    Release.objects.filter(pk=release.pk).update(state=Release.State.COMPUTING, message="")
    try:
        if not release.inputs:
            freeze_release(release, progress)
        start = time.perf_counter()
        data = results_for(release, progress)
    except ReleaseError as error:
        _fail(release, str(error))
        raise
    except Exception as error:
        _fail(release, f"{type(error).__name__}: {error}")
        raise
    seconds = time.perf_counter() - start
    text = canonical(data)
    with transaction.atomic():
        result, _ = ReleaseResult.objects.update_or_create(
            release=release,
            defaults={
                "data": json.loads(text),
                "data_sha256": sha256_text(text),
                "code_version": code_version(),
                "computed_at": timezone.now(),
                "seconds": round(seconds, 3),
            },
        )
        Release.objects.filter(pk=release.pk).update(
            state=Release.State.READY,
            message=f"computed in {seconds:.1f} s",
        )
    release.state = Release.State.READY
    release.message = f"computed in {seconds:.1f} s"
    release.result = result
    return result


@dataclass
class CheckOutcome:
    ok: bool
    message: str
    problems: list[str] = field(default_factory=list)


def first_difference(stored, recomputed, path: str = "") -> str | None:
    """The path of the first value that differs between two JSON documents."""
    if type(stored) is not type(recomputed):
        return path or "/"
    if isinstance(stored, dict):
        for key in sorted(set(stored) | set(recomputed)):
            if key not in stored or key not in recomputed:
                return f"{path}/{key}"
            found = first_difference(stored[key], recomputed[key], f"{path}/{key}")
            if found:
                return found
        return None
    if isinstance(stored, list):
        if len(stored) != len(recomputed):
            return f"{path} (length)"
        for k, (x, y) in enumerate(zip(stored, recomputed, strict=True)):
            found = first_difference(x, y, f"{path}/{k}")
            if found:
                return found
        return None
    return None if stored == recomputed else (path or "/")


def check(release: Release, progress=None, record: bool = True) -> CheckOutcome:
    """Recompute the release from its frozen inputs and compare with the stored numbers, bit for
    bit (the canonical JSON). Recorded on the release unless record=False."""
    stored = ReleaseResult.objects.filter(release=release).first()
    if stored is None:
        outcome = CheckOutcome(False, "the release has no stored numbers to check yet")
    else:
        try:
            recomputed = results_for(release, progress)
        except InputsChanged as error:
            outcome = CheckOutcome(False, str(error), error.problems)
        except ReleaseError as error:
            outcome = CheckOutcome(False, str(error), [str(error)])
        else:
            text = canonical(recomputed)
            if text == canonical(stored.data) and sha256_text(text) == stored.data_sha256:
                outcome = CheckOutcome(
                    True,
                    f"inputs unchanged (fingerprint {release.fingerprint[:12]}…) and the "
                    f"recomputed numbers equal the stored ones bit for bit (sha256 "
                    f"{stored.data_sha256[:12]}…)",
                )
            else:
                where = first_difference(stored.data, json.loads(text)) or "(encoding)"
                outcome = CheckOutcome(
                    False,
                    f"the recomputed numbers differ from the stored ones (first at {where}); "
                    f"stored with {stored.code_version}, recomputed with {code_version()}",
                )
    if record:
        now = timezone.now()
        Release.objects.filter(pk=release.pk).update(
            checked_at=now, check_ok=outcome.ok, check_message=outcome.message
        )
        release.checked_at, release.check_ok, release.check_message = (
            now,
            outcome.ok,
            outcome.message,
        )
    return outcome


def compute_or_check(release: Release, progress=None) -> str:
    """What the "compute / verify" button does: compute a release without numbers, else check
    it. Returns a sentence for the page."""
    if release.state != Release.State.READY or not has_result(release):
        try:
            compute(release, progress)
        except ReleaseError as error:
            return f"Not computed: {error}"
        return f"Computed: {release.message}."
    outcome = check(release, progress)
    return ("Verified: " if outcome.ok else "Check FAILED: ") + outcome.message + "."


def has_result(release: Release) -> bool:
    return ReleaseResult.objects.filter(release=release).exists()


# ---------------------------------------------------------------- the job


@shared_task
def run_release_job(job_id: int) -> None:
    job = jobs.start(job_id)
    release = Release.objects.select_related("campaign", "anchor", "judge").get(
        pk=job.params["release"]
    )

    def progress(done, total, message="scoring pairs with the judge"):
        jobs.report_progress(job_id, done, total, message)

    try:
        message = compute_or_check(release, progress)
    except Exception as error:
        jobs.finish(job_id, Job.State.FAILED, f"{type(error).__name__}: {error}")
        raise
    release.refresh_from_db()
    ok = release.state == Release.State.READY and release.check_ok is not False
    jobs.finish(
        job_id,
        Job.State.SUCCEEDED if ok else Job.State.FAILED,
        message,
        {"release": release.pk},
    )


def queue_compute(release: Release, user) -> Job:
    """A background job that computes (or verifies) the release, started after the commit."""
    job = Job.objects.create(
        kind=KIND, created_by=user, params={"release": release.pk, "release_name": release.name}
    )
    Release.objects.filter(pk=release.pk).update(
        job=job,
        state=(Release.State.COMPUTING if release.state != Release.State.READY else release.state),
    )
    transaction.on_commit(lambda: run_release_job.delay(job.pk))
    return job


def running_job(release: Release) -> Job | None:
    if release.job_id is None:
        return None
    job = Job.objects.filter(pk=release.job_id).first()
    return job if job is not None and not job.is_finished else None


# ---------------------------------------------------------------- files


def fmt_number(value, digits: int = 0) -> str:
    if value is None:
        return ""
    return f"{value:.{digits}f}"


def leaderboard_rows(release: Release, data: dict) -> list[dict]:
    """One row per companion per scope (overall, each dimension, each subtask): every number."""
    names = {c["id"]: c["name"] for c in data["companions"]}
    ids = [c["id"] for c in data["companions"]]
    anchor = {row["companion"]: row for row in data["anchor_win_rate"]["rows"]}
    composite = data["composite"]
    summary = data.get("exclusions")  # absent: frozen before exclusions existed
    excluded = {
        "excluded_judgments": summary["judgments"] if summary else None,
        "excluded_annotators": summary["annotators"] if summary else None,
        "exclusion_reasons": "; ".join(r["reason"] for r in summary["reasons"]) if summary else "",
    }
    rows = []
    scopes = [
        ("overall", "all", data["human"]["overall"], (data["judge"] or {}).get("overall"), None)
    ]
    for scope, key, order in (
        ("dimension", "by_dimension", data["dimensions"]),
        ("subtask", "by_subtask", data["subtasks"]),
    ):
        for group in order:
            block = data["human"][key].get(group) or {}
            judge_block = ((data["judge"] or {}).get(key) or {}).get(group)
            rows_composite = composite.get(key, {}).get(group)
            scopes.append((scope, group, block, judge_block, rows_composite))
    for scope, group, human, judge, composite_means in scopes:
        for k, c in enumerate(ids):
            row = {
                "release": release.name,
                "fingerprint": release.fingerprint,
                "scope": scope,
                "group": group,
                "companion_id": c,
                "companion": names[c],
                "is_anchor": c == data["anchor"],
            }
            row.update(_bt_columns("human", human, k, names, ids))
            row["human_votes"] = (human.get("games") or [None] * len(ids))[k] if human else None
            row["human_note"] = (human or {}).get("skipped", "")
            if data["judge"] is None:
                row.update(_bt_columns("judge", None, k, names, ids))
                row["judge_note"] = NO_JUDGE
            else:
                row.update(_bt_columns("judge", judge, k, names, ids))
                row["judge_note"] = (judge or {}).get("skipped", "")
            if scope == "overall":
                win = anchor.get(c)
                for method in ("ppi", "judge", "humans"):
                    estimate = (win or {}).get(method) or {}
                    prefix = f"winrate_{method}"
                    row[prefix] = estimate.get("estimate")
                    row[f"{prefix}_low"] = estimate.get("low")
                    row[f"{prefix}_high"] = estimate.get("high")
                overall = composite["overall"][k]
                row.update(
                    composite_mean=overall["mean"],
                    composite_low=overall["low"],
                    composite_high=overall["high"],
                    composite_n=overall["n"],
                )
            else:
                for method in ("ppi", "judge", "humans"):
                    for suffix in ("", "_low", "_high"):
                        row[f"winrate_{method}{suffix}"] = None
                row.update(
                    composite_mean=composite_means[k] if composite_means else None,
                    composite_low=None,
                    composite_high=None,
                    composite_n=None,
                )
            row["level"] = data["level"]
            row.update(excluded)
            rows.append(row)
    return rows


def _bt_columns(prefix: str, block, k: int, names, ids) -> dict:
    if not block or "elo" not in block or block["elo"][k] is None:
        return {
            f"{prefix}_elo": None,
            f"{prefix}_low": None,
            f"{prefix}_high": None,
            f"{prefix}_rank": None,
            f"{prefix}_better_than": "",
        }
    better = [names[ids[j]] for j, flag in enumerate(block["significant"][k]) if flag == 1]
    return {
        f"{prefix}_elo": block["elo"][k],
        f"{prefix}_low": block["low"][k],
        f"{prefix}_high": block["high"][k],
        f"{prefix}_rank": block["rank"][k],
        f"{prefix}_better_than": "; ".join(better),
    }


CSV_COLUMNS = [
    "release", "fingerprint", "scope", "group", "companion_id", "companion", "is_anchor",
    "human_elo", "human_low", "human_high", "human_rank", "human_votes", "human_better_than",
    "human_note", "judge_elo", "judge_low", "judge_high", "judge_rank", "judge_better_than",
    "judge_note", "winrate_ppi", "winrate_ppi_low", "winrate_ppi_high", "winrate_judge",
    "winrate_judge_low", "winrate_judge_high", "winrate_humans", "winrate_humans_low",
    "winrate_humans_high", "composite_mean", "composite_low", "composite_high", "composite_n",
    "level", "excluded_judgments", "excluded_annotators", "exclusion_reasons",
]  # fmt: skip


def to_csv(release: Release) -> str:
    rows = leaderboard_rows(release, release.result.data)
    return csvexport.text(
        CSV_COLUMNS, ({k: ("" if row[k] is None else row[k]) for k in CSV_COLUMNS} for row in rows)
    )


def metadata(release: Release) -> dict:
    result = release.result
    return {
        "name": release.name,
        "id": release.pk,
        "demo_data": release.is_demo,
        "fingerprint": release.fingerprint,
        "fingerprint_of": "sha256 of the canonical JSON of the frozen inputs (keys sorted, no "
        "spaces, UTF-8)",
        "campaign": {"id": release.campaign_id, "name": release.campaign.name},
        "anchor": release.anchor.name,
        "judge": (
            {"name": release.judge.name, "version": release.judge.version}
            if release.judge
            else None
        ),
        "seed": release.seed,
        "n_boot": release.n_boot,
        "level": LEVEL,
        "frozen_at": release.frozen_at.isoformat() if release.frozen_at else None,
        "computed_at": result.computed_at.isoformat(),
        "code_version": result.code_version,
        "results_sha256": result.data_sha256,
    }


def to_json(release: Release) -> str:
    document = {"release": metadata(release), "results": release.result.data}
    return json.dumps(document, ensure_ascii=False, indent=1, allow_nan=False) + "\n"


def _md(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _ci(value, low, high, digits=0) -> str:
    if value is None:
        return "—"
    if low is None or high is None:
        return fmt_number(value, digits)
    return f"{value:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def ordered(data: dict) -> list[int]:
    """Companion positions by human Elo (then judge Elo, then composite), best first."""
    n = len(data["companions"])

    def key(k):
        human = data["human"]["overall"].get("elo") or [None] * n
        judge = ((data["judge"] or {}).get("overall") or {}).get("elo") or [None] * n
        composite = data["composite"]["overall"][k]["mean"]
        return tuple(-(v if v is not None else -math.inf) for v in (human[k], judge[k], composite))

    return sorted(range(n), key=key)


def to_markdown(release: Release) -> str:
    data = release.result.data
    level = f"{data['level']:.0%}"
    rows = {(r["scope"], r["group"], r["companion_id"]): r for r in leaderboard_rows(release, data)}
    ids = [c["id"] for c in data["companions"]]
    demo = " (demo data)" if release.is_demo and "demo data" not in release.name else ""
    excluded = exclusion_note(data.get("exclusions"))
    other_text = other_text_note(data.get("judgments_on_other_text"))
    lines = [
        f"# {_md(release.name)}{demo}",
        "",
        f"Fingerprint `{release.fingerprint}` · seed {data['seed']} · {data['n_boot']} bootstrap "
        f"draws · all intervals {level} · anchor **{_md(release.anchor.name)}** · judge "
        + (
            f"{_md(release.judge.name)} v{release.judge.version}"
            if release.judge
            else f"— {NO_JUDGE}"
        ),
        "",
        *([_md(excluded), ""] if excluded else []),
        *([_md(other_text), ""] if other_text else []),
        f"| Rank | Companion | Human Elo ({level} CI) | Votes | Judge Elo ({level} CI) | "
        f"Win rate vs anchor, PPI++ ({level} CI) | Judge only, uncorrected ({level} CI) | "
        f"Humans only ({level} CI) | Composite ({level} CI) | Significantly better than |",
        "|---:|---|---|---:|---|---|---|---|---|---|",
    ]
    for k in ordered(data):
        row = rows[("overall", "all", ids[k])]
        anchor = " (anchor)" if row["is_anchor"] else ""
        judge = (
            _ci(row["judge_elo"], row["judge_low"], row["judge_high"])
            if data["judge"]
            else NO_JUDGE
        )
        if row["is_anchor"]:
            win = ["anchor"] * 3
        elif not data["judge"]:
            win = [NO_JUDGE, NO_JUDGE, _ci(*_triple(row, "humans"), 3)]
        else:
            win = [_ci(*_triple(row, m), 3) for m in ("ppi", "judge", "humans")]
        lines.append(
            f"| {row['human_rank'] or '—'} | {_md(row['companion'])}{anchor} | "
            f"{_ci(row['human_elo'], row['human_low'], row['human_high'])} | "
            f"{row['human_votes'] or 0:.0f} | {judge} | {win[0]} | {win[1]} | {win[2]} | "
            f"{_ci(row['composite_mean'], row['composite_low'], row['composite_high'], 3)} | "
            f"{_md(row['human_better_than']) or '—'} |"
        )
    lines += ["", "Notes:", ""]
    lines += [f"- {_md(note)}" for note in data["notes"] if note not in (excluded, other_text)]
    lines.append(f"- {_md(data['composite']['note'])}")
    for scope, key, title, groups in (
        ("dimension", "by_dimension", "Per dimension", data["dimensions"]),
        ("subtask", "by_subtask", "Per subtask", data["subtasks"]),
    ):
        if not groups:
            continue
        lines += ["", f"## {title} (human Elo, {level} CI; composite mean)", ""]
        header = "| Companion | " + " | ".join(_md(g) for g in groups) + " |"
        lines += [header, "|---|" + "---|" * len(groups)]
        for k in ordered(data):
            cells = []
            for group in groups:
                row = rows[(scope, group, ids[k])]
                human = (
                    _ci(row["human_elo"], row["human_low"], row["human_high"])
                    if row["human_elo"] is not None
                    else "—"
                )
                composite = fmt_number(row["composite_mean"], 3) or "—"
                cells.append(f"{human}; {composite}")
            lines.append(f"| {_md(data['companions'][k]['name'])} | " + " | ".join(cells) + " |")
        skipped = [
            f"{g}: {data['human'][key][g]['skipped']}"
            for g in groups
            if data["human"][key][g].get("skipped")
        ]
        if skipped:
            lines += ["", "Skipped (human Elo): " + "; ".join(_md(s) for s in skipped) + "."]
    return "\n".join(lines) + "\n"


def _triple(row, method):
    prefix = f"winrate_{method}"
    return row[prefix], row[f"{prefix}_low"], row[f"{prefix}_high"]


def file_stem(release: Release) -> str:
    slug = "".join(ch if ch.isalnum() else "-" for ch in release.name.lower()).strip("-")
    while "--" in slug:
        slug = slug.replace("--", "-")
    return f"release-{release.pk}-{slug[:60] or 'release'}"


FILES = {"csv": to_csv, "json": to_json, "md": to_markdown}
CONTENT_TYPES = {
    "csv": "text/csv; charset=utf-8",
    "json": "application/json",
    "md": "text/markdown; charset=utf-8",
}


def write_files(release: Release, directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for suffix, render in FILES.items():
        path = directory / f"{file_stem(release)}.{suffix}"
        path.write_text(render(release), encoding="utf-8")
        written.append(path)
    return written


def find_release(identifier: str) -> Release:
    """A release by id or exact name (for the management command)."""
    query = Q(name=identifier)
    if parse_int(str(identifier)) is not None:
        query |= Q(pk=parse_int(str(identifier)))
    release = Release.objects.select_related("campaign", "anchor", "judge").filter(query).first()
    if release is None:
        raise ReleaseError(f"no release {identifier!r} (give its id or exact name)")
    return release
