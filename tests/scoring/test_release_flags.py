"""Scores per scenario flag and each companion's explicit − implicit (stable − evolving)
difference (scoring.releases.flags through computing.compute_results, no database), on simulated
releases with a known truth: a companion whose Bradley–Terry strength drops by a known amount on
implicit-need scenarios. The difference's interval covers the truth in most seeds and excludes 0
for a large drop; without a drop it covers 0; renumbered ids and swapped sides change nothing;
a flag group with too few votes is skipped with its reason."""

import csv
import hashlib
import io
import json

import numpy as np
import pandas as pd
import pytest
from django.urls import reverse
from scipy.special import expit

from h2htalk.stats.bradley_terry import ELO_SCALE
from scenarios.models import Scenario
from scoring.models import Release
from scoring.releases import computing, flags, formats, freezing
from scoring.releases import data as release_data
from scoring.releases import service as releases
from tests.annotation import factories as campaign_factories
from tests.scoring.test_release_pipeline import make_release, rated_world

IDS = [10, 11, 12, 13]
STRENGTH = np.array([0.0, 0.4, -0.3, 0.2])
SUBTASKS = ["dialogue_base", "dialogue_emotion", "recollection_refine", "itinerary_basic"]
WEAK = 1  # position of the companion that struggles (id 11)


def true_difference(drop: float) -> np.ndarray:
    """Elo(explicit) − Elo(implicit) per companion, from the field's (the median companion's),
    when companion WEAK loses `drop` in log-strength on implicit needs: the drop itself for
    WEAK, 0 for the others (relative to the mean they would gain drop/n)."""
    shift = np.zeros(len(IDS))
    shift[WEAK] = drop
    return ELO_SCALE * (shift - np.median(shift))


def simulate(seed=0, drop=1.0, n_scenarios=400, n_boot=200, with_judge=False, risk_high=4):
    """Every pair of the four companions on every scenario, one human vote each, P(A wins) =
    σ(θ_A − θ_B) with θ_WEAK lowered by `drop` on implicit-need scenarios (40% of them; 30%
    have an evolving need, independently; `risk_high` are high-risk, the rest none). The judge
    (optional) gives σ(θ_A − θ_B) plus noise on every pair."""
    rng = np.random.default_rng(seed)
    scenarios = np.arange(1, n_scenarios + 1)
    implicit = rng.random(n_scenarios) < 0.4
    evolving = rng.random(n_scenarios) < 0.3
    risk = np.where(np.arange(n_scenarios) < risk_high, "high", "none")
    theta = np.tile(STRENGTH, (n_scenarios, 1))
    theta[implicit, WEAK] -= drop
    i, j = np.triu_indices(len(IDS), 1)
    rows = np.repeat(np.arange(n_scenarios), len(i))
    a, b = np.tile(i, n_scenarios), np.tile(j, n_scenarios)
    p = expit(theta[rows, a] - theta[rows, b])
    a_wins = rng.random(len(p)) < p
    ids = np.array(IDS)
    votes = pd.DataFrame(
        {
            "comparison": np.arange(1, len(p) + 1),
            "scenario": scenarios[rows],
            "companion_a": ids[a],
            "companion_b": ids[b],
            "annotator": 1,
            "preference": np.where(a_wins, -1, 1),
        }
    )
    population = labelled = None
    if with_judge:
        p_judge = np.clip(p + rng.normal(0, 0.1, len(p)), 0, 1)
        population = pd.DataFrame(
            {"scenario": scenarios[rows], "companion_a": ids[a], "companion_b": ids[b]}
        ).assign(p_a=p_judge)
        labelled = pd.DataFrame({"comparison": votes["comparison"], "p_a": p_judge})
    composite = pd.DataFrame(
        {
            "response": np.arange(n_scenarios * len(IDS)),
            "scenario": np.repeat(scenarios, len(IDS)),
            "companion": np.tile(IDS, n_scenarios),
            "composite": (0.3 + 0.05 * theta).ravel(),
        }
    )
    data = release_data.ReleaseData(
        companions=[(c, f"companion-{c}") for c in IDS],
        anchor=IDS[0],
        subtask={int(s): SUBTASKS[s % len(SUBTASKS)] for s in scenarios},
        votes=votes,
        composite=composite,
        composite_note="Simulated composite.",
        seed=seed,
        n_boot=n_boot,
        judge={"id": 1, "name": "judge", "version": 1, "document_sha256": "0" * 64}
        if with_judge
        else None,
        population=population,
        labelled=labelled,
        flags={
            "implicit_need": dict(zip(scenarios.tolist(), implicit.tolist(), strict=True)),
            "evolving_need": dict(zip(scenarios.tolist(), evolving.tolist(), strict=True)),
            "risk_level": dict(zip(scenarios.tolist(), risk.tolist(), strict=True)),
        },
        scenario_key={int(s): hashlib.sha256(f"text {s}".encode()).hexdigest() for s in scenarios},
    )
    return data


def _covers(block, k, value):
    return block["low"][k] <= value <= block["high"][k]


def test_a_known_drop_on_implicit_needs_is_covered_and_significant_across_seeds():
    truth = true_difference(1.0)
    covered = np.zeros(len(IDS), dtype=int)
    significant = 0
    for seed in range(20):
        results = computing.compute_results(simulate(seed=200 + seed, drop=1.0, n_boot=200))
        block = results["flag_differences"]["implicit_need"]["human"]
        covered += [_covers(block, k, truth[k]) for k in range(len(IDS))]
        significant += block["significant"][WEAK] == 1
    assert (covered >= 17).all(), covered  # ≈ 95% of 20 (P(≥ 17) ≈ 0.98 per companion)
    assert significant >= 19, significant


def test_without_a_drop_the_difference_covers_zero_in_most_seeds():
    covers_zero = np.zeros(len(IDS), dtype=int)
    for seed in range(20):
        results = computing.compute_results(simulate(seed=400 + seed, drop=0.0, n_boot=200))
        block = results["flag_differences"]["implicit_need"]["human"]
        covers_zero += [_covers(block, k, 0.0) for k in range(len(IDS))]
        # No drop on evolving needs either (that flag is independent of the drop).
        evolving = results["flag_differences"]["evolving_need"]["human"]
        assert evolving["difference"][WEAK] is not None
    assert (covers_zero >= 17).all(), covers_zero


def test_the_judge_sees_the_drop_too_and_the_slices_are_the_leaderboard_fits():
    data = simulate(seed=7, drop=1.5, with_judge=True, n_boot=100)
    results = computing.compute_results(data)
    judge = results["flag_differences"]["implicit_need"]["judge"]
    assert judge["significant"][WEAK] == 1
    assert judge["low"][WEAK] <= true_difference(1.5)[WEAK] <= judge["high"][WEAK]
    assert results["flags"] == {
        "implicit_need": ["explicit", "implicit"],
        "evolving_need": ["stable", "evolving"],
        "risk_level": ["none", "high"],
    }
    implicit = results["human"]["by_implicit_need"]["implicit"]
    explicit = results["human"]["by_implicit_need"]["explicit"]
    human = results["flag_differences"]["implicit_need"]["human"]
    relative = np.subtract(explicit["elo"], implicit["elo"])
    assert human["relative"] == pytest.approx(relative.tolist())
    field = human["field"]["difference"]
    assert field == pytest.approx(flags.biweight(relative[None, :])[0][0])
    assert human["difference"] == pytest.approx((relative - field).tolist())
    assert human["field"]["low"] <= field <= human["field"]["high"]
    assert implicit["votes"] + explicit["votes"] == len(data.votes)
    assert "resamples of the" in results["judge"]["by_implicit_need"]["implicit"]["method"]
    assert set(results["composite"]["by_risk_level"]) == {"none", "high"}
    assert flags.slice_note() in results["notes"]


def test_a_flag_group_with_too_few_votes_is_skipped_with_its_reason():
    results = computing.compute_results(simulate(seed=3, n_boot=50, risk_high=4))
    high = results["human"]["by_risk_level"]["high"]
    assert high["votes"] == 24 and "only 24 human votes" in high["skipped"]
    assert "elo" in results["human"]["by_risk_level"]["none"]
    # A difference needs both of its groups: a release with hardly any implicit need skips it.
    data = simulate(seed=3, n_boot=50)
    data.flags["implicit_need"] = {s: s <= 3 for s in data.flags["implicit_need"]}
    skipped = computing.compute_results(data)["flag_differences"]["implicit_need"]["human"]
    assert skipped["skipped"].startswith("implicit need: only 18 human votes")
    data.flags["implicit_need"] = dict.fromkeys(data.flags["implicit_need"], False)
    results = computing.compute_results(data)
    assert results["flags"]["implicit_need"] == ["explicit"]
    skipped = results["flag_differences"]["implicit_need"]["human"]["skipped"]
    assert skipped == "no scenario of the release is in the group implicit need"


def _renumbered(data, companion_map=None, scenario_map=None):
    """The same release with other companion ids and scenario ids (default: ids + 100)."""
    cmap = companion_map or {c: c + 100 for c, _ in data.companions}
    smap = scenario_map or {s: s for s in data.subtask}
    votes = data.votes.assign(
        scenario=data.votes["scenario"].map(smap),
        companion_a=data.votes["companion_a"].map(cmap),
        companion_b=data.votes["companion_b"].map(cmap),
    )
    composite = data.composite.assign(
        scenario=data.composite["scenario"].map(smap),
        companion=data.composite["companion"].map(cmap),
    )
    population = None
    if data.population is not None:
        population = data.population.assign(
            scenario=data.population["scenario"].map(smap),
            companion_a=data.population["companion_a"].map(cmap),
            companion_b=data.population["companion_b"].map(cmap),
        )
    return release_data.ReleaseData(
        companions=sorted((cmap[c], name) for c, name in data.companions),
        anchor=cmap[data.anchor],
        subtask={smap[s]: t for s, t in data.subtask.items()},
        votes=votes,
        composite=composite,
        composite_note=data.composite_note,
        seed=data.seed,
        n_boot=data.n_boot,
        judge=data.judge,
        population=population,
        labelled=data.labelled,
        flags={f: {smap[s]: v for s, v in values.items()} for f, values in data.flags.items()},
        scenario_key={smap[s]: key for s, key in data.scenario_key.items()},
    )


def test_renumbered_ids_and_swapped_sides_give_the_same_differences():
    data = simulate(seed=11, n_boot=100)
    base = computing.compute_results(data)["flag_differences"]
    rng = np.random.default_rng(0)
    shuffled = rng.permutation(len(data.subtask)) + 5_000
    scenario_map = dict(zip(data.subtask, shuffled.tolist(), strict=True))
    renumbered = computing.compute_results(_renumbered(data, scenario_map=scenario_map))
    assert renumbered["flag_differences"] == base  # scenarios are drawn in content order
    swapped = simulate(seed=11, n_boot=100)
    swapped.votes = swapped.votes.assign(
        companion_a=data.votes["companion_b"],
        companion_b=data.votes["companion_a"],
        preference=-data.votes["preference"],
    )
    assert computing.compute_results(swapped)["flag_differences"] == base


def _by_name(results, source="human"):
    """{companion name: (difference, low, high)} of the implicit-need difference."""
    block = results["flag_differences"]["implicit_need"][source]
    return {
        c["name"]: (block["difference"][k], block["low"][k], block["high"][k])
        for k, c in enumerate(results["companions"])
    }


def _fits_by_name(results, source):
    """Every fit of a side (overall and each group) and its flag differences, companions (and
    the rows and columns of each matrix) keyed by name instead of by position."""
    names = [c["name"] for c in results["companions"]]
    order = sorted(range(len(names)), key=names.__getitem__)
    section = results[source]
    blocks = {"overall": section["overall"]}
    for scope, groups in section.items():
        if scope.startswith("by_"):
            blocks.update({f"{scope}/{g}": block for g, block in groups.items()})
    for flag, entry in results["flag_differences"].items():
        if flag != "note":
            blocks[f"difference/{flag}"] = entry[source]
    out = {}
    for key, block in blocks.items():
        fit = {}
        for field, values in block.items():
            if isinstance(values, list) and len(values) == len(names):
                if values and isinstance(values[0], list):
                    values = [[values[i][j] for j in order] for i in order]
                else:
                    values = [values[k] for k in order]
            fit[field] = values
        out[key] = fit
    return out


def test_renumbered_companions_and_scenarios_give_identical_intervals():
    """Fits run in content order (companions by name, scenarios by text hash): reversing the
    companions' ids and shuffling the scenarios' ids changes no number, bit for bit, for the
    humans and the judge, overall, per group and in the flag differences."""
    data = simulate(seed=13, with_judge=True, n_boot=100)
    data.population = data.population.assign(p_a=np.round(data.population["p_a"] * 1024) / 1024)
    base = computing.compute_results(data)
    reverse = {c: 1_000 - c for c, _ in data.companions}
    shuffled = np.random.default_rng(1).permutation(len(data.subtask)) + 9_000
    scenario_map = dict(zip(data.subtask, shuffled.tolist(), strict=True))
    moved = computing.compute_results(
        _renumbered(data, companion_map=reverse, scenario_map=scenario_map)
    )
    assert [c["name"] for c in moved["companions"]] != [c["name"] for c in base["companions"]]
    for source in ("human", "judge"):
        before, after = _fits_by_name(base, source), _fits_by_name(moved, source)
        assert len(before) >= 10 and "elo" in before["by_implicit_need/implicit"]
        assert after == before, source
    for flag in ("implicit_need", "evolving_need"):  # the field's shift, on the composite here
        shared = base["flag_differences"][flag]["shared"]
        assert shared["source"] == "composite" and "difference" in shared
        assert moved["flag_differences"][flag]["shared"] == shared


def test_the_judge_differences_do_not_depend_on_sides_or_shifted_ids():
    data = simulate(seed=12, with_judge=True, n_boot=100)
    base = _by_name(computing.compute_results(data), "judge")
    shifted = _renumbered(data, scenario_map={s: s + 7_000 for s in data.subtask})
    assert _by_name(computing.compute_results(shifted), "judge") == base
    swapped = simulate(seed=12, with_judge=True, n_boot=100)
    swapped.population = data.population.assign(
        companion_a=data.population["companion_b"],
        companion_b=data.population["companion_a"],
        p_a=1 - data.population["p_a"],
    )
    for name, values in _by_name(computing.compute_results(swapped), "judge").items():
        assert values == pytest.approx(base[name], abs=1e-6)


def test_a_release_frozen_without_flags_has_no_flag_sections():
    data = simulate(seed=1, n_boot=20)
    data.flags = None
    results = computing.compute_results(data)
    assert "flags" not in results and "flag_differences" not in results
    assert "by_implicit_need" not in results["human"]
    assert flags.slice_note() not in results["notes"]


# ---------------------------------------------------------------- on the database


@pytest.fixture
def flagged_release(researcher, django_user_model):
    """A rated release (test_release_pipeline.rated_world) whose scenarios carry flags: every
    other one an implicit need, every third an evolving need, two high risk."""
    raters = campaign_factories.annotators(django_user_model, 3, prefix="flagrater")
    world = rated_world(researcher, raters, prefix="flag")
    scenarios = list(Scenario.objects.filter(tags__name="flag").order_by("pk"))
    for k, scenario in enumerate(scenarios):
        Scenario.objects.filter(pk=scenario.pk).update(
            implicit_need=k % 2 == 0,
            evolving_need=k % 3 == 0,
            risk_level="high" if k < 2 else "none",
        )
    release = make_release(world, n_boot=100)
    assert release.state == Release.State.READY, release.message
    return Release.objects.select_related("campaign", "anchor", "judge").get(pk=release.pk)


@pytest.mark.django_db
def test_flags_are_frozen_and_a_changed_flag_fails_the_check(flagged_release):
    inputs = flagged_release.inputs
    assert inputs["schema"] == "h2htalk.release-inputs/2"
    scenarios = inputs["scenarios"]
    assert sum(scenarios["implicit_need"]) == 12 and sum(scenarios["evolving_need"]) == 8
    assert scenarios["risk_level"].count("high") == 2
    data = flagged_release.result.data
    assert data["flags"]["implicit_need"] == ["explicit", "implicit"]
    assert data["human"]["by_implicit_need"]["implicit"]["votes"] == 108
    assert "skipped" in data["human"]["by_risk_level"]["high"]  # 2 scenarios: 18 votes
    assert data["flag_differences"]["implicit_need"]["human"]["difference"][0] is not None
    assert releases.check(flagged_release).ok
    flagged = scenarios["id"][0]
    Scenario.objects.filter(pk=flagged).update(implicit_need=False)
    outcome = releases.check(flagged_release)
    assert not outcome.ok
    assert f"1 scenario(s) changed (implicit-need flag; id {flagged})" in outcome.message
    Scenario.objects.filter(pk=flagged).update(implicit_need=True, risk_level="medium")
    assert "(risk level; id" in releases.check(flagged_release).message


@pytest.mark.django_db
def test_a_release_frozen_before_flags_still_checks_and_shows_no_flag_sections(flagged_release):
    inputs = json.loads(json.dumps(flagged_release.inputs))
    inputs["schema"] = "h2htalk.release-inputs/1"
    for column in freezing.FLAG_COLUMNS:
        del inputs["scenarios"][column]
    Release.objects.filter(pk=flagged_release.pk).update(
        inputs=inputs, fingerprint=freezing.fingerprint_of(inputs)
    )
    release = Release.objects.select_related("campaign", "anchor", "judge").get(
        pk=flagged_release.pk
    )
    releases.compute(release)
    data = release.result.data
    assert "flag_differences" not in data and "by_implicit_need" not in data["human"]
    Scenario.objects.filter(pk=inputs["scenarios"]["id"][0]).update(implicit_need=False)
    assert releases.check(release).ok  # flags were not frozen then: not part of the check
    assert "Where companions struggle" not in formats.to_markdown(release)
    assert formats.to_differences_csv(release).count("\n") == 1  # the header only


@pytest.mark.django_db
def test_the_page_and_the_files_show_the_flag_slices_and_differences(
    client, researcher, flagged_release, django_assert_max_num_queries
):
    client.force_login(researcher)
    with django_assert_max_num_queries(12):
        page = client.get(reverse("releases:detail", kwargs={"pk": flagged_release.pk}))
    text = page.content.decode()
    for needle in (
        'id="by-scenario-flag"',
        'id="flag-meanings"',
        '<strong>implicit need</strong> <span class="muted">(implicit-need flag, 108 human votes)',
        'id="where-companions-struggle"',
        'id="flag-differences"',
        'id="struggles-meanings"',
        "Human Elo, explicit need − implicit need",
        "Judge Elo, stable need − evolving need",
    ):
        assert needle in text, needle
    assert "<strong>risk high (e.g. self-harm)</strong>" in text
    # (the stored reason is English: marked so on the page)
    assert '(risk level, 18 human votes: skipped, <span lang="en">only 18 human votes' in text
    rows = list(csv.DictReader(io.StringIO(formats.to_csv(flagged_release))))
    implicit = [r for r in rows if r["scope"] == "implicit_need" and r["group"] == "implicit"]
    assert len(implicit) == 3 and all(r["human_elo"] for r in implicit)
    assert any(r["scope"] == "risk_level" and r["human_note"] for r in rows)
    url = reverse("releases:export", kwargs={"pk": flagged_release.pk, "fmt": "differences.csv"})
    download = client.get(url)
    assert download.status_code == 200
    assert download["Content-Disposition"].endswith('.differences.csv"')
    differences = list(csv.DictReader(io.StringIO(download.content.decode())))
    assert len(differences) == 2 * 2 * 3 + 2  # 2 flags × humans and judge × 3 companions
    shared = [r for r in differences if r["source"].startswith("shared")]  # once per flag
    assert [r["flag"] for r in shared] == ["implicit_need", "evolving_need"]
    assert shared[0]["baseline"] == "absolute" and not shared[0]["companion"]
    assert {r["baseline"] for r in differences} == {"field", "absolute"}
    for needle in ('id="shared-shift"', 'id="struggles-baseline"', "from the field"):
        assert needle in text, needle
    data = flagged_release.result.data["flag_differences"]
    first = next(r for r in differences if r["flag"] == "implicit_need" and r["source"] == "human")
    assert float(first["difference"]) == pytest.approx(
        data["implicit_need"]["human"]["difference"][0]
    )
    markdown = formats.to_markdown(flagged_release)
    for heading in ("## Per implicit need", "## Per evolving need", "## Per risk level"):
        assert heading in markdown
    assert "## Where companions struggle" in markdown
    assert "Field's shared shift, explicit − implicit" in markdown
    assert "Each number is relative to the field" in markdown
    assert "Human Elo, explicit − implicit, from the field (95% CI)" in markdown
    assert data["implicit_need"]["shared"]["source"] == "judge"  # it scores responses one by one
    assert "flag_differences" in formats.to_json(flagged_release)


@pytest.mark.django_db
def test_numbers_stored_by_the_vote_level_method_fail_the_check_saying_why(flagged_release):
    """Results of schema /1 (human intervals from reweighting vote counts, fits in id order)
    cannot be reproduced by this code: the check says so instead of only 'differ'."""
    from scoring.models import ReleaseResult

    stored = ReleaseResult.objects.get(release=flagged_release)
    assert stored.data["schema"] == computing.RESULTS_SCHEMA == "h2htalk.release-results/2"
    ReleaseResult.objects.filter(pk=stored.pk).update(
        data={**stored.data, "schema": "h2htalk.release-results/1"}
    )
    outcome = releases.check(flagged_release)
    assert not outcome.ok
    assert "results schema h2htalk.release-results/1" in outcome.message
    assert "this code computes h2htalk.release-results/2" in outcome.message
