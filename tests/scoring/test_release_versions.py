"""Leaderboard versions (scoring.releases.versioning): a version extends a computed release with
new companions or more votes, keeps its anchor and scale, and both stay verifiable bit for bit.

The known truth: rated_world's three companions (Bradley–Terry strengths 1.2, 0.3 = the anchor,
−1.0); a second campaign adds a newcomer (strength 0.8) voted only against the anchor on its own
scenarios. The likelihood then factorises, so the others' Elo relative to the anchor cannot move
beyond the bootstrap's own noise: the test allows 0.1 bootstrap SE for the point estimates and
0.5 SE for the interval ends (SE = the width of the parent's 95% interval of the difference to
the anchor / 3.92; with 1,000 draws a 2.5% quantile's Monte Carlo error is about 0.09 SE, so
two independent resamplings differ by about 0.12 SE)."""

import io
import math

import numpy as np
import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from annotation import exclusions
from annotation.models import Campaign, Comparison
from annotation.pairing import build_comparisons
from h2htalk.roles import ANNOTATOR, RESEARCHER
from scenarios.models import CompanionModel, GenerationRun, Response
from scoring.models import Release
from scoring.releases import computing, versioning
from scoring.releases import data as release_data
from scoring.releases import service as releases
from scoring.releases.errors import ReleaseError
from tests import simulators
from tests.annotation import factories as campaign_factories
from tests.conftest import make_user
from tests.scenarios import factories
from tests.scoring.test_release_flags import _renumbered
from tests.scoring.test_release_pipeline import REFERENCE, make_release, rated_world, reply

NEWCOMER = ("Newcomer-Nu", 0.8)
ANCHOR_STRENGTH = 0.3
Z = 1.959963984540054


def vote(comparisons, raters, strengths, rng, per_comparison=3):
    now = timezone.now()
    votes = []
    for comparison in comparisons:
        gap = (
            strengths[comparison.response_a.companion.name]
            - strengths[comparison.response_b.companion.name]
        )
        for rater in raters[:per_comparison]:
            a_wins = rng.random() < 1 / (1 + math.exp(-gap))
            preference = 0 if rng.random() < 0.1 else (-1 if a_wins else 1)
            votes.append(simulators.submitted_vote(comparison, rater, preference, now))
    simulators.save_votes(votes)


def newcomer_campaign(world, n_scenarios=24, seed=1) -> tuple[Campaign, CompanionModel]:
    """A second campaign: the newcomer and the anchor on scenarios of their own, every pair
    voted by the world's raters."""
    anchor = world.companions[1]
    newcomer = CompanionModel.objects.create(name=NEWCOMER[0], provider="imported")
    strengths = {NEWCOMER[0]: NEWCOMER[1], anchor.name: ANCHOR_STRENGTH}
    run = GenerationRun.objects.create(name="newcomer run", kind="import")
    for i in range(n_scenarios):
        scenario = factories.scenario(
            world.owner,
            tags=["newc"],
            state="approved",
            reference_response=REFERENCE,
            user_message=f"A new week (newcomer {i})",
        )
        for companion in (anchor, newcomer):
            Response.objects.create(
                run=run,
                scenario=scenario,
                companion=companion,
                text=reply(strengths[companion.name], i),
            )
    campaign = Campaign.objects.create(
        name="newcomer campaign",
        owner=world.owner,
        overlap=3,
        state=Campaign.State.OPEN,
        scenario_query="tags=newc",
    )
    campaign.companions.set([anchor, newcomer])
    campaign.runs.set([run])
    campaign.annotators.set(world.raters)
    build_comparisons(campaign)
    comparisons = campaign.comparisons.select_related(
        "response_a__companion", "response_b__companion"
    )
    vote(list(comparisons), world.raters, strengths, np.random.default_rng(seed))
    return campaign, newcomer


@pytest.fixture
def world(researcher, django_user_model):
    raters = campaign_factories.annotators(django_user_model, 3, prefix="verrater")
    return rated_world(researcher, raters, n_scenarios=32, prefix="ver")


def _se(data, companion, anchor) -> float:
    ids = [c["id"] for c in data["companions"]]
    k, a = ids.index(companion), ids.index(anchor)
    overall = data["human"]["overall"]
    return (overall["diff_high"][k][a] - overall["diff_low"][k][a]) / (2 * Z)


def test_a_companion_voted_only_against_the_anchor_leaves_the_others_unchanged(world):
    parent = make_release(world, name="v1", judge=False, n_boot=1000)
    assert parent.state == Release.State.READY, parent.message
    campaign, newcomer = newcomer_campaign(world)
    version = versioning.create_version(
        parent,
        name="v2",
        campaigns=[campaign],
        companions=[newcomer],
        user=world.owner,
        compute_now=True,
    )
    assert version.state == Release.State.READY, version.message
    version.refresh_from_db()
    section = version.inputs["version"]
    assert section["parent"] == parent.pk and section["parent_fingerprint"] == parent.fingerprint
    assert section["campaigns"] == sorted([world.campaign.pk, campaign.pk])
    assert section["new_companions"] == [newcomer.pk] and section["dropped_judgments"] == []
    # Same anchor, seed and draws; every parent vote is kept, the newcomer's 72 added.
    assert version.anchor_id == parent.anchor_id and version.inputs["seed"] == parent.seed
    assert version.inputs["n_boot"] == 1000
    assert set(parent.inputs["judgments"]["id"]) <= set(version.inputs["judgments"]["id"])
    assert len(version.inputs["judgments"]["id"]) == len(parent.inputs["judgments"]["id"]) + 72

    rows = {
        r["name"]: r for r in versioning.changes(parent.result.data, version.result.data, section)
    }
    anchor = world.companions[1]
    assert rows[anchor.name]["change"] == 0.0 and rows[anchor.name]["anchor"]
    assert rows[NEWCOMER[0]]["parent"] is None
    assert rows[NEWCOMER[0]]["reasons"] == [("new_companion", 0), ("new_votes", 72)]
    for companion in (world.companions[0], world.companions[2]):
        row = rows[companion.name]
        se = _se(parent.result.data, companion.pk, anchor.pk)
        assert 5 < se < 200
        assert abs(row["change"]) <= 0.1 * se, (companion.name, row["change"], se)
        assert abs(row["version"]["low"] - row["parent"]["low"]) <= 0.5 * se
        assert abs(row["version"]["high"] - row["parent"]["high"]) <= 0.5 * se
        assert row["reasons"] == [("through_others", 0)]
    # The newcomer lands near its true distance to the anchor (within 3 SE).
    truth = 400 * math.log10(math.e) * (NEWCOMER[1] - ANCHOR_STRENGTH)
    row = rows[NEWCOMER[0]]
    se = _se(version.result.data, newcomer.pk, anchor.pk)
    assert abs(row["version"]["elo"] - section["anchor_elo"] - truth) <= 3 * se

    # The parent and the version both reproduce bit for bit, by the service and the command.
    assert releases.check(parent).ok
    outcome = releases.check(version)
    assert outcome.ok, outcome.message
    call_command("benchmark_report", str(parent.pk), "--check", "--no-files", stdout=io.StringIO())
    call_command("benchmark_report", str(version.pk), "--check", "--no-files", stdout=io.StringIO())


def test_more_votes_and_a_changed_exclusion_list_say_why(world, django_user_model):
    parent = make_release(world, name="v1", judge=False)
    late = campaign_factories.annotators(django_user_model, 1, prefix="verlate")
    comparisons = list(
        world.campaign.comparisons.select_related("response_a__companion", "response_b__companion")
    )
    strengths = {"Strong-Sigma": 1.2, "Middle-Mu": 0.3, "Weak-Omega": -1.0}
    vote(comparisons[:10], late, strengths, np.random.default_rng(3), per_comparison=1)
    exclusions.exclude(world.campaign, [world.raters[0]], "straight-lining", by=world.owner)
    version = versioning.create_version(parent, name="v1.1", user=world.owner, compute_now=True)
    assert version.state == Release.State.READY, version.message
    version.refresh_from_db()
    section = version.inputs["version"]
    dropped = [
        pk
        for pk, annotator in zip(
            parent.inputs["judgments"]["id"], parent.inputs["judgments"]["annotator"], strict=True
        )
        if annotator == world.raters[0].pk
    ]
    assert section["dropped_judgments"] == dropped and len(dropped) == 96
    assert version.inputs["exclusions"]["annotator"] == [world.raters[0].pk]
    expected = len(parent.inputs["judgments"]["id"]) - 96 + 10
    assert len(version.inputs["judgments"]["id"]) == expected
    rows = versioning.changes(parent.result.data, version.result.data, section)
    by_name = {r["name"]: dict(r["reasons"]) for r in rows}
    new = {name: reasons.get("new_votes", 0) for name, reasons in by_name.items()}
    assert sum(new.values()) == 20  # each vote involves two companions
    assert all(reasons["dropped_votes"] == 64 for reasons in by_name.values())
    texts = [versioning.reason_text(code, n) for r in rows for code, n in r["reasons"]]
    assert any("left out" in text for text in texts)
    # The parent still checks after its child exists; so does the child.
    assert releases.check(parent).ok and releases.check(version).ok
    # Versions of versions keep the first release's anchor Elo.
    grandchild = versioning.create_version(version, name="v1.2", compute_now=True)
    grandchild.refresh_from_db()
    assert grandchild.inputs["version"]["anchor_elo"] == section["anchor_elo"]
    assert [r.name for r in versioning.lineage(version)] == ["v1", "v1.1", "v1.2"]


def test_a_version_with_a_judge_checks_bit_for_bit_and_refuses_a_changed_parent(world):
    parent = make_release(world, name="v1 judged")
    campaign, newcomer = newcomer_campaign(world, n_scenarios=8)
    version = versioning.create_version(
        parent, name="v2 judged", campaigns=[campaign], companions=[newcomer], compute_now=True
    )
    assert version.state == Release.State.READY, version.message
    assert version.result.data["judge"] is not None
    assert version.result.data["counts"]["companions"] == 4
    assert releases.check(version).ok and releases.check(parent).ok
    Release.objects.filter(pk=parent.pk).update(fingerprint="0" * 64)
    outcome = releases.check(version, record=False)
    assert not outcome.ok and "parent release" in outcome.message


def test_choices_are_validated(world):
    parent = make_release(world, name="v1", judge=False)
    stranger = CompanionModel.objects.create(name="Stranger", provider="imported")
    with pytest.raises(ReleaseError, match="Stranger"):
        versioning.create_version(parent, name="bad", companions=[stranger])
    pending = Release.objects.create(
        name="pending", campaign=world.campaign, anchor=world.companions[1]
    )
    with pytest.raises(ReleaseError, match="computed"):
        versioning.create_version(pending, name="bad2")


def test_renumbered_ids_give_the_same_change_table(world):
    parent = make_release(world, name="v1", judge=False, n_boot=200)
    campaign, newcomer = newcomer_campaign(world, n_scenarios=8)
    version = versioning.create_version(
        parent, name="v2", campaigns=[campaign], companions=[newcomer], compute_now=True
    )
    version.refresh_from_db()
    section = version.inputs["version"]
    base = versioning.changes(parent.result.data, version.result.data, section)
    parent_data = release_data.load_data(parent)
    version_data = release_data.load_data(version)
    ids = [c for c, _ in version_data.companions]
    cmap = dict(zip(ids, reversed([i + 500 for i in ids]), strict=True))
    smap = {s: 90_000 - s for s in version_data.subtask}
    renumbered_section = {
        **section,
        "new_companions": [cmap[c] for c in section["new_companions"]],
        "changes": {
            **section["changes"],
            "companion": [cmap[c] for c in section["changes"]["companion"]],
        },
    }
    again = versioning.changes(
        computing.compute_results(_renumbered(parent_data, cmap, smap)),
        computing.compute_results(_renumbered(version_data, cmap, smap)),
        renumbered_section,
    )
    strip = [{k: v for k, v in row.items() if k != "id"} for row in base]
    assert sorted(strip, key=lambda r: r["name"]) == sorted(
        ({k: v for k, v in row.items() if k != "id"} for row in again), key=lambda r: r["name"]
    )
    assert Comparison.objects.filter(campaign=campaign).count() == 8


# ---------------------------------------------------------------- pages, API and roles


def test_new_version_from_the_page_shows_the_change_table(client, world):
    parent = make_release(world, name="Page v1", judge=False, n_boot=200)
    campaign, newcomer = newcomer_campaign(world, n_scenarios=8)
    client.force_login(world.owner)
    page = client.get(reverse("releases:detail", kwargs={"pk": parent.pk})).content.decode()
    form_url = reverse("releases:version_create", kwargs={"pk": parent.pk})
    assert form_url in page
    assert client.get(form_url).status_code == 200
    refused = client.post(form_url, {"name": "Page v2", "companions": [newcomer.pk]})
    assert refused.status_code == 200 and "Newcomer-Nu" in refused.content.decode()
    assert not Release.objects.filter(name="Page v2").exists()
    response = client.post(
        form_url, {"name": "Page v2", "campaigns": [campaign.pk], "companions": [newcomer.pk]}
    )
    version = Release.objects.get(name="Page v2")
    assert response.status_code == 302 and response["Location"].endswith(f"/{version.pk}/")
    page = client.get(response["Location"]).content.decode()
    assert 'id="version-changes"' in page and "new companion" in page
    assert "Page v1" in page and "24 new votes" in page
    parent_page = client.get(reverse("releases:detail", kwargs={"pk": parent.pk})).content
    assert b"Page v2" in parent_page  # the parent lists its versions
    client.cookies.load({"django_language": "zh-hans"})
    page = client.get(response["Location"], HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "新增同伴" in page


def test_the_api_creates_a_version_and_reads_its_lineage(world):
    parent = make_release(world, name="Api v1", judge=False, n_boot=200)
    campaign, newcomer = newcomer_campaign(world, n_scenarios=8)
    api = APIClient()
    api.force_authenticate(world.owner)
    bad = api.post(
        f"/api/releases/{parent.pk}/versions/",
        {"name": "x", "companions": [newcomer.pk]},
        format="json",
    )
    assert bad.status_code == 400 and "Newcomer-Nu" in str(bad.json())
    made = api.post(
        f"/api/releases/{parent.pk}/versions/",
        {"name": "Api v2", "campaigns": [campaign.pk], "companions": [newcomer.pk]},
        format="json",
    )
    assert made.status_code == 201, made.json()
    body = made.json()
    assert body["parent"] == parent.pk and body["state"] == "ready"
    lineage = api.get(f"/api/releases/{body['id']}/lineage/").json()
    assert [r["name"] for r in lineage["releases"]] == ["Api v1", "Api v2"]
    by_name = {row["name"]: row for row in lineage["changes"]}
    assert by_name["Newcomer-Nu"]["reasons"][0] == {"code": "new_companion", "votes": 0}
    assert by_name[world.companions[1].name]["change"] == 0.0
    assert api.get(f"/api/releases/{parent.pk}/lineage/").json()["changes"] is None


def test_outsiders_and_annotators_cannot_make_or_read_versions(client, world, django_user_model):
    parent = make_release(world, name="Roles v1", judge=False, n_boot=100)
    outsider = make_user(django_user_model, "veroutsider", RESEARCHER)
    form_url = reverse("releases:version_create", kwargs={"pk": parent.pk})
    client.force_login(outsider)
    assert client.get(form_url).status_code == 404
    assert client.post(form_url, {"name": "Sneaky"}).status_code == 404
    api = APIClient()
    api.force_authenticate(outsider)
    assert api.post(f"/api/releases/{parent.pk}/versions/", {"name": "Sneaky"}).status_code == 404
    assert api.get(f"/api/releases/{parent.pk}/lineage/").status_code == 404
    rater = make_user(django_user_model, "verrater9", ANNOTATOR)
    client.force_login(rater)
    assert client.get(form_url).status_code == 403
    assert not Release.objects.filter(name="Sneaky").exists()
