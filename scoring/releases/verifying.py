"""Verifying a frozen release: the same inputs read from the database now, compared with the
frozen ones section by section, so that a refusal says what changed or was deleted."""

from annotation.models import Comparison, Judgment
from scenarios.models import CompanionModel
from scoring.models import CalibratedJudge, Release
from scoring.releases.errors import ReleaseError
from scoring.releases.freezing import (
    RESPONSE_COLUMNS,
    columns_of,
    fingerprint_of,
    judge_entry,
    metrics_digest,
    rows_by_id,
    scenario_columns,
    scenario_rows,
    text_hashes,
)


def rows_of(section: dict, names) -> dict:
    """{id: (the named columns…)} of a columnar section (columns by name: jsonb does not keep
    the order of an object's keys)."""
    return {pk: tuple(section[n][k] for n in names) for k, pk in enumerate(section["id"])}


def current_inputs(release: Release) -> dict:
    """The release's inputs as the database holds them now, for the frozen ids only."""
    stored = release.inputs
    out = {key: stored[key] for key in ("schema", "campaign", "seed", "n_boot", "level", "anchor")}
    companion_ids = stored["companions"]["id"]
    names = dict(CompanionModel.objects.filter(pk__in=companion_ids).values_list("pk", "name"))
    out["companions"] = columns_of(
        [(pk, names[pk]) for pk in companion_ids if pk in names], ("id", "name")
    )
    schema = stored["schema"]
    out["scenarios"] = columns_of(
        scenario_rows(stored["scenarios"]["id"], schema), scenario_columns(schema)
    )
    response_ids = stored["responses"]["id"]
    texts = text_hashes(response_ids)
    flags = dict(zip(response_ids, stored["responses"]["population"], strict=True))
    out["responses"] = columns_of(
        sorted((pk, *texts[pk], flags[pk]) for pk in response_ids if pk in texts),
        RESPONSE_COLUMNS,
    )
    rows = rows_by_id(
        Comparison, stored["comparisons"]["id"], ("scenario_id", "response_a_id", "response_b_id")
    )
    out["comparisons"] = columns_of(rows, ("id", "scenario", "response_a", "response_b"))
    rows = rows_by_id(
        Judgment, stored["judgments"]["id"], ("comparison_id", "annotator_id", "preference")
    )
    out["judgments"] = columns_of(rows, ("id", "comparison", "annotator", "preference"))
    if "exclusions" in stored:  # the choice made at freezing (releases before it have none)
        out["exclusions"] = stored["exclusions"]
    if "style" in stored:  # the choice and the features counted at freezing (texts: above)
        out["style"] = stored["style"]
    if "version" in stored:  # a version's record of its parent and its choices
        out["version"] = stored["version"]
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
    "scenarios": ("scenario", ("subtask", "content_sha256")),  # + the flags from schema /2 on
    "responses": ("response", RESPONSE_COLUMNS[1:]),
    "comparisons": ("comparison", ("scenario", "response_a", "response_b")),
    "judgments": ("judgment", ("comparison", "annotator", "preference")),
}


WHAT = {
    "name": "name",
    "subtask": "subtask",
    "content_sha256": "content",
    "implicit_need": "implicit-need flag",
    "evolving_need": "evolving-need flag",
    "risk_level": "risk level",
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
    sections = {
        **SECTIONS,
        "scenarios": ("scenario", scenario_columns(stored["schema"])[1:]),
    }
    for section, (label, names) in sections.items():
        if all(stored[section][n] == current[section][n] for n in ("id", *names)):
            continue  # unchanged, column by column (no row dictionaries to build)
        before, now = rows_of(stored[section], names), rows_of(current[section], names)
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
    problems += parent_problems(stored)
    if stored["metrics_sha256"] != current["metrics_sha256"]:
        problems.append(
            "the stored reference metrics of the release's responses changed (recomputed, "
            "deleted or added since the release was frozen)"
        )
    return problems


def parent_problems(stored: dict) -> list[str]:
    """A version's parent must still be there with the fingerprint the version extended."""
    section = stored.get("version")
    if not section:
        return []
    parent = Release.objects.filter(pk=section["parent"]).values_list("fingerprint", flat=True)
    if not parent:
        return [f"the parent release {section['parent']} was deleted"]
    if parent[0] != section["parent_fingerprint"]:
        return [f"the parent release {section['parent']}'s fingerprint changed"]
    return []


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
