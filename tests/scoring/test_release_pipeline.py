"""Benchmark releases end to end on the database: freezing, computing, reproducing bit for bit,
refusing after an input changed, the management command and its files, the background job, and
the demo release.

`rated_world` (also used by test_release_pages.py) builds a rated campaign with known companion
strengths, and `judge_document` a valid calibrated-judge document.
"""

import csv
import io
import json
import math
from dataclasses import dataclass

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from annotation.models import Assignment, Campaign, Comparison, Judgment
from annotation.pairing import build_comparisons
from h2htalk import provenance
from h2htalk.models import Job
from scenarios.models import CompanionModel, GenerationRun, Response, Scenario
from scoring import tasks
from scoring.calibration.document import SCHEMA, validate_document
from scoring.models import CalibratedJudge, MetricScore, Release, ReleaseResult
from scoring.releases import data as release_data
from scoring.releases import errors, formats, freezing
from scoring.releases import service as releases
from tests import simulators
from tests.annotation import factories as campaign_factories
from tests.scenarios import factories

SUBTASKS = ("dialogue_base", "dialogue_emotion", "recollection_refine", "itinerary_basic")
STRENGTHS = {"Strong-Sigma": 1.2, "Middle-Mu": 0.3, "Weak-Omega": -1.0}
REFERENCE = (
    "That sounds exhausting, and it makes sense you feel drained after such a long week. "
    "Want to tell me what happened, or shall we plan something small and kind for tonight?"
)


def reply(strength: float, i: int) -> str:
    """Stronger companions echo more of the reference (so reference metrics track strength)."""
    words = REFERENCE.split()
    keep = max(3, int(len(words) * (0.45 + 0.25 * strength)))
    return " ".join(words[:keep]) + f" (reply {i})"


def judge_document(name="Test judge", weights=(12.0, 0.0), reliability=True) -> dict:
    document = {
        "schema": SCHEMA,
        "name": name,
        "version": 1,
        "features": ["rouge1", "log_length"],
        "scaling": {"mean": [0.0, 0.0], "scale": [0.1, 0.5]},
        "weights": list(weights),
        "intercept": 0.0,
        "judge": None,
    }
    if reliability:
        document["heldout"] = {
            "judges": {
                "calibrated": {
                    "ece": 0.04,
                    "reliability": [
                        {"lo": 0.0, "hi": 0.5, "comparisons": 10, "mean_p": 0.3, "observed": 0.35},
                        {"lo": 0.5, "hi": 1.0, "comparisons": 12, "mean_p": 0.8, "observed": 0.75},
                    ],
                }
            }
        }
    return validate_document(document)


@dataclass
class World:
    campaign: Campaign
    companions: list
    raters: list
    judge: CalibratedJudge
    owner: object


def rated_world(
    owner,
    raters,
    n_scenarios=24,
    votes_per_comparison=3,
    seed=0,
    names=tuple(STRENGTHS),
    prefix="rel",
) -> World:
    """A campaign over `n_scenarios` approved scenarios (4 subtasks, 3 dimensions) with all
    pairs of three companions, each comparison voted by every rater from Bradley–Terry
    strengths (STRENGTHS, by name order), and a calibrated judge on rouge1."""
    rng = np.random.default_rng(seed)
    strengths = dict(zip(names, STRENGTHS.values(), strict=True))
    companions = [CompanionModel.objects.create(name=name, provider="imported") for name in names]
    run = GenerationRun.objects.create(name=f"{prefix} run", kind="import")
    for i in range(n_scenarios):
        scenario = factories.scenario(
            owner,
            tags=[prefix],
            state="approved",
            subtask=SUBTASKS[i % len(SUBTASKS)],
            reference_response=REFERENCE,
            user_message=f"I had a long week ({prefix} {i})",
        )
        for companion in companions:
            Response.objects.create(
                run=run,
                scenario=scenario,
                companion=companion,
                text=reply(strengths[companion.name], i),
            )
    campaign = Campaign.objects.create(
        name=f"{prefix} campaign",
        owner=owner,
        overlap=len(raters),
        state=Campaign.State.OPEN,
        scenario_query=f"tags={prefix}",
    )
    campaign.companions.set(companions)
    campaign.runs.set([run])
    campaign.annotators.set(raters)
    build_comparisons(campaign)
    now = timezone.now()
    comparisons = list(
        campaign.comparisons.select_related("response_a__companion", "response_b__companion")
    )
    votes = []
    for comparison in comparisons:
        gap = (
            strengths[comparison.response_a.companion.name]
            - strengths[comparison.response_b.companion.name]
        )
        for rater in raters[:votes_per_comparison]:
            a_wins = rng.random() < 1 / (1 + math.exp(-gap))
            preference = 0 if rng.random() < 0.1 else (-1 if a_wins else 1)
            votes.append(simulators.submitted_vote(comparison, rater, preference, now))
    simulators.save_votes(votes)
    for comparison in comparisons:
        Comparison.objects.filter(pk=comparison.pk).update(
            judgment_count=min(votes_per_comparison, len(raters))
        )
    judge = CalibratedJudge.objects.create(
        name=f"{prefix} judge",
        version=1,
        document=judge_document(f"{prefix} judge"),
        campaign=campaign,
        created_by=owner,
    )
    return World(campaign, companions, raters, judge, owner)


def make_release(world, name="Test release", judge=True, **fields) -> Release:
    return releases.create_release(
        name=name,
        campaign=world.campaign,
        anchor=world.companions[1],
        judge=world.judge if judge else None,
        seed=fields.pop("seed", 0),
        n_boot=fields.pop("n_boot", 200),
        user=world.owner,
        **fields,
    )


@pytest.fixture
def world(researcher, django_user_model):
    raters = campaign_factories.annotators(django_user_model, 3, prefix="relrater")
    return rated_world(researcher, raters)


@pytest.fixture
def release(world):
    made = make_release(world)
    assert made.state == Release.State.READY, made.message
    return Release.objects.select_related("campaign", "anchor", "judge").get(pk=made.pk)


# ---------------------------------------------------------------- freezing and computing


def test_a_release_freezes_its_inputs_and_computes_its_numbers(release, world):
    inputs = release.inputs
    assert inputs["schema"] == freezing.INPUTS_SCHEMA
    assert release.fingerprint == freezing.fingerprint_of(inputs)
    assert len(inputs["scenarios"]["id"]) == 24
    assert len(inputs["responses"]["id"]) == 72 and sum(inputs["responses"]["population"]) == 72
    assert len(inputs["comparisons"]["id"]) == 72
    assert len(inputs["judgments"]["id"]) == 216
    assert inputs["judge"]["name"] == "rel judge" and len(inputs["judge"]["document_sha256"]) == 64
    assert inputs["anchor"] == world.companions[1].pk and inputs["seed"] == 0
    text = Response.objects.get(pk=inputs["responses"]["id"][0]).text
    assert inputs["responses"]["text_sha256"][0] == provenance.sha256_text(text)
    # Missing reference metrics were computed before freezing.
    assert MetricScore.objects.filter(response_id__in=inputs["responses"]["id"]).count() == 72

    data = release.result.data
    assert data["counts"] == {
        "companions": 3,
        "scenarios": 24,
        "responses_scored": 72,
        "comparisons": 72,
        "votes": 216,
        "annotators": 3,
        "judge_pairs": 72,
    }
    human = data["human"]["overall"]
    assert human["rank"] == [1, 2, 3] and human["elo"][0] > human["elo"][1] > human["elo"][2]
    assert human["significant"][0][2] == 1 and human["level"] == 0.95
    judge = data["judge"]["overall"]
    assert judge["elo"][0] > judge["elo"][2]  # the judge reads rouge1: longer echo = stronger
    assert set(data["human"]["by_dimension"]) == {"dialogue", "recollection", "itinerary"}
    assert data["anchor_win_rate"]["anchor"] == world.companions[1].pk
    strong = next(
        r for r in data["anchor_win_rate"]["rows"] if r["companion"] == world.companions[0].pk
    )
    assert strong["ppi"]["estimate"] > 0.5 and strong["humans"]["n_labelled"] == 24
    assert data["composite"]["overall"][0]["mean"] > data["composite"]["overall"][2]["mean"]
    assert "renormalised" in data["composite"]["note"]
    assert data["reliability"]["calibrated"]["ece"] == 0.04
    assert release.result.data_sha256 == provenance.sha256_text(provenance.canonical(data))
    assert release.result.code_version.startswith("h2htalk-platform")


def test_numbers_are_reproduced_bit_for_bit(release, world):
    outcome = releases.check(release)
    assert outcome.ok, outcome.message
    assert "bit for bit" in outcome.message
    release.refresh_from_db()
    assert release.check_ok is True and release.checked_at is not None
    again = releases.results_for(release)
    assert provenance.canonical(again) == provenance.canonical(release.result.data)
    # A release only reads its frozen inputs: a vote added to the campaign afterwards changes
    # nothing (and is not an "input changed").
    comparison = world.campaign.comparisons.first()
    extra = campaign_factories.annotators(world.raters[0].__class__, 1, prefix="late")[0]
    assignment = Assignment.objects.create(
        comparison=comparison,
        annotator=extra,
        left_is_a=True,
        state=Assignment.State.SUBMITTED,
        lease_expires_at=timezone.now(),
    )
    Judgment.objects.create(
        assignment=assignment,
        comparison=comparison,
        annotator=extra,
        screen_preference=2,
        preference=2,
        time_on_task_ms=1,
    )
    assert releases.check(release).ok


def test_the_same_inputs_and_seed_give_identical_numbers_in_a_second_release(release, world):
    twin = make_release(world, name="Twin release")
    assert twin.fingerprint != release.fingerprint or twin.inputs == release.inputs
    assert twin.inputs == release.inputs  # the same inputs (release name is not an input)
    assert provenance.canonical(twin.result.data) == provenance.canonical(release.result.data)
    other_seed = make_release(world, name="Other seed", seed=1)
    assert other_seed.fingerprint != release.fingerprint
    assert (
        other_seed.result.data["human"]["overall"]["low"]
        != (release.result.data["human"]["overall"]["low"])
    )


def _change_judgment(world, release):
    judgment = Judgment.objects.get(pk=release.inputs["judgments"]["id"][5])
    judgment.preference = -judgment.preference if judgment.preference else 2
    judgment.save()
    return f"1 judgment(s) changed (preference; id {judgment.pk})"


def _delete_judgment(world, release):
    pk = release.inputs["judgments"]["id"][0]
    Judgment.objects.filter(pk=pk).delete()
    return f"1 judgment(s) deleted (id {pk})"


def _change_response(world, release):
    pk = release.inputs["responses"]["id"][3]
    Response.objects.filter(pk=pk).update(text="Edited after the release was frozen.")
    return f"1 response(s) changed (text; id {pk})"


def _change_scenario(world, release):
    scenario = Scenario.objects.get(pk=release.inputs["scenarios"]["id"][2])
    scenario.reference_response = "A new reference answer."
    scenario.save()
    return f"1 scenario(s) changed (content; id {scenario.pk})"


def _change_scenario_flag(world, release):
    pk = release.inputs["scenarios"]["id"][4]
    Scenario.objects.filter(pk=pk).update(implicit_need=True)  # the content hash stays
    return f"1 scenario(s) changed (implicit-need flag; id {pk})"


def _rename_companion(world, release):
    CompanionModel.objects.filter(pk=world.companions[2].pk).update(name="Renamed")
    return "1 companion(s) changed (name"


def _change_judge(world, release):
    judge = world.judge
    judge.document = {**judge.document, "weights": [3.0, 1.0]}
    judge.save()
    return "document changed"


def _change_metrics(world, release):
    score = MetricScore.objects.get(response_id=release.inputs["responses"]["id"][0])
    score.values = {**score.values, "rouge1": 0.999}
    score.save()
    return "stored reference metrics"


@pytest.mark.parametrize(
    "change",
    [
        _change_judgment,
        _delete_judgment,
        _change_response,
        _change_scenario,
        _change_scenario_flag,
        _rename_companion,
        _change_judge,
        _change_metrics,
    ],
)
def test_check_and_compute_refuse_clearly_after_an_input_changed(change, release, world):
    expected = change(world, release)
    outcome = releases.check(release)
    assert not outcome.ok
    assert expected in outcome.message, outcome.message
    assert "cannot be reproduced" in outcome.message
    release.refresh_from_db()
    assert release.check_ok is False and expected in release.check_message
    with pytest.raises(CommandError, match="CHECK FAILED") as failure:
        call_command(
            "benchmark_report",
            str(release.pk),
            "--check",
            "--no-files",
            stdout=io.StringIO(),
            stderr=io.StringIO(),
        )
    assert expected in str(failure.value)
    # Computing refuses too, and says why; the stored numbers (those of the frozen inputs)
    # stay, with the failure recorded as a failed check.
    stored = provenance.canonical(release.result.data)
    with pytest.raises(errors.InputsChanged):
        releases.compute(release)
    release.refresh_from_db()
    assert release.state == Release.State.READY
    assert release.check_ok is False and expected in release.check_message
    assert provenance.canonical(ReleaseResult.objects.get(release=release).data) == stored


def test_a_tampered_stored_inputs_document_is_detected(release):
    Release.objects.filter(pk=release.pk).update(
        inputs={**release.inputs, "seed": release.inputs["seed"] + 1}
    )
    release.refresh_from_db()
    outcome = releases.check(release)
    assert not outcome.ok and "do not match the release's fingerprint" in outcome.message


def test_stored_numbers_that_differ_are_reported_with_where(release):
    result = release.result
    data = json.loads(json.dumps(result.data))
    data["human"]["overall"]["elo"][0] += 1e-9
    ReleaseResult.objects.filter(pk=result.pk).update(data=data)
    outcome = releases.check(release)
    assert not outcome.ok
    assert "/human/overall/elo/0" in outcome.message


def test_a_release_without_a_judge_still_ranks_and_says_so(world):
    release = make_release(world, name="Metrics only", judge=False)
    assert release.state == Release.State.READY, release.message
    data = release.result.data
    assert data["judge"] is None and data["judge_note"] == release_data.NO_JUDGE
    assert release.inputs["judge"] is None
    assert all(row["ppi"] is None for row in data["anchor_win_rate"]["rows"])
    assert releases.check(release).ok
    markdown = formats.to_markdown(release)
    assert f"— {release_data.NO_JUDGE}" in markdown


def test_choices_are_validated(world, researcher):
    outsider = CompanionModel.objects.create(name="Outsider")
    with pytest.raises(errors.ReleaseError, match="not a companion of campaign"):
        releases.create_release(
            name="x",
            campaign=world.campaign,
            anchor=outsider,
            companions=[*world.companions, outsider],
        )
    with pytest.raises(errors.ReleaseError, match="anchor must be one"):
        releases.create_release(
            name="x",
            campaign=world.campaign,
            anchor=world.companions[2],
            companions=world.companions[:2],
        )
    with pytest.raises(errors.ReleaseError, match="at least two"):
        releases.create_release(
            name="x",
            campaign=world.campaign,
            anchor=world.companions[0],
            companions=world.companions[:1],
        )
    assert not Release.objects.exists()


def test_an_empty_campaign_gives_a_release_that_says_there_are_no_votes(researcher, annotator):
    campaign = campaign_factories.campaign(researcher, [annotator], n_scenarios=2)
    companions = list(campaign.companions.order_by("pk"))
    release = releases.create_release(
        name="No votes", campaign=campaign, anchor=companions[0], user=researcher, n_boot=100
    )
    assert release.state == Release.State.READY, release.message
    data = release.result.data
    assert data["human"]["overall"]["skipped"] == "no human votes"
    assert data["counts"]["votes"] == 0 and data["composite"]["overall"][0]["n"] == 2
    assert releases.check(release).ok


# ---------------------------------------------------------------- the command and its files


def test_command_prints_the_table_and_writes_csv_json_and_markdown(release, tmp_path):
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "benchmark_report", str(release.pk), "--out", str(tmp_path), stdout=out, stderr=err
    )
    printed = out.getvalue()
    assert "| Rank | Companion | Human Elo (95% CI) |" in printed
    assert "Strong-Sigma" in printed and release.fingerprint in printed
    stem = formats.file_stem(release)
    markdown = (tmp_path / f"{stem}.md").read_text(encoding="utf-8")
    assert markdown == printed
    lines = [line for line in markdown.splitlines() if line.startswith("| 1 | Strong-Sigma")]
    assert len(lines) == 1 and "Middle-Mu; Weak-Omega" in lines[0]
    document = json.loads((tmp_path / f"{stem}.json").read_text(encoding="utf-8"))
    assert document["results"] == release.result.data
    assert document["release"]["fingerprint"] == release.fingerprint
    assert document["release"]["results_sha256"] == release.result.data_sha256
    assert document["release"]["level"] == 0.95
    rows = list(csv.DictReader(io.StringIO((tmp_path / f"{stem}.csv").read_text("utf-8"))))
    data = release.result.data
    flag_groups = sum(len(groups) for groups in data["flags"].values())  # e.g. explicit, implicit
    groups = 1 + len(data["dimensions"]) + len(data["subtasks"]) + flag_groups
    assert len(rows) == 3 * groups
    assert list(rows[0]) == formats.CSV_COLUMNS
    overall = {r["companion"]: r for r in rows if r["scope"] == "overall"}
    strong = overall["Strong-Sigma"]
    assert float(strong["human_elo"]) == data["human"]["overall"]["elo"][0]
    assert strong["human_rank"] == "1" and strong["level"] == "0.95"
    assert (
        float(strong["winrate_ppi_low"])
        < float(strong["winrate_ppi"])
        < float(strong["winrate_ppi_high"])
    )
    assert overall["Middle-Mu"]["is_anchor"] == "True" and overall["Middle-Mu"]["winrate_ppi"] == ""
    assert "wrote" in err.getvalue()


def test_command_check_passes_by_name_and_computes_a_release_without_numbers(world, tmp_path):
    release = make_release(world, name="Later", compute_now=False)
    assert release.state == Release.State.PENDING and not release.inputs
    err = io.StringIO()
    call_command("benchmark_report", "Later", "--no-files", stdout=io.StringIO(), stderr=err)
    release.refresh_from_db()
    assert release.state == Release.State.READY and "computing them now" in err.getvalue()
    err = io.StringIO()
    call_command(
        "benchmark_report", "Later", "--check", "--no-files", stdout=io.StringIO(), stderr=err
    )
    assert "Check passed" in err.getvalue() and "bit for bit" in err.getvalue()
    with pytest.raises(CommandError, match="no release"):
        call_command("benchmark_report", "nope", stdout=io.StringIO())


# ---------------------------------------------------------------- the background job


def test_a_large_release_is_frozen_and_computed_by_a_job(
    world, monkeypatch, django_capture_on_commit_callbacks
):
    monkeypatch.setattr(releases, "INLINE_RESPONSES", 10)
    with django_capture_on_commit_callbacks(execute=True):
        release = make_release(world, name="Big")
    release.refresh_from_db()
    job = Job.objects.get(pk=release.job_id)
    assert job.kind == releases.KIND and job.state == Job.State.COMPLETED, job.message
    assert release.state == Release.State.READY
    # The job's "compute" on a release with numbers is the reproducibility check.
    with django_capture_on_commit_callbacks(execute=True):
        tasks.queue_release_job(release, world.owner)
    release.refresh_from_db()
    assert release.check_ok is True


# ---------------------------------------------------------------- the demo


def test_load_demo_ends_with_a_populated_demo_release(client, django_user_model):
    call_command("load_demo", stdout=io.StringIO())
    release = Release.objects.get(name="Demo release (demo data)")
    assert release.is_demo and release.state == Release.State.READY, release.message
    assert release.anchor.name == "demo-brief-v1" and release.seed == 0
    data = release.result.data
    assert [c["name"] for c in data["companions"]] == sorted(
        ["demo-warmth-v2", "demo-brief-v1", "demo-eager-v0"],
        key=lambda n: CompanionModel.objects.get(name=n).pk,
    )
    assert data["counts"]["votes"] == 243
    names = [c["name"] for c in data["companions"]]
    order = [names[k] for k in formats.ordered(data)]
    assert order == ["demo-warmth-v2", "demo-brief-v1", "demo-eager-v0"]
    client.force_login(django_user_model.objects.get(username="researcher"))
    page = client.get(f"/releases/{release.pk}/").content.decode()
    assert "demo data" in page and "demo-warmth-v2" in page and "<svg" in page
    fingerprint = release.fingerprint
    call_command("load_demo", stdout=io.StringIO())  # idempotent
    assert Release.objects.filter(name="Demo release (demo data)").count() == 1
    assert Release.objects.get(pk=release.pk).fingerprint == fingerprint
