"""Style control in a release: the choice is frozen with the responses' presentation features,
the section is computed and reproduced bit for bit, an edited text fails the check, releases
without the choice (or frozen before it existed) check as before, and the page, the files and
the API show it."""

import csv
import dataclasses
import io

import pandas as pd
import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from h2htalk import provenance
from h2htalk.stats.style_features import FEATURES, features
from scenarios.models import Response
from scoring.models import Release, ReleaseResult
from scoring.releases import formats, freezing, style, style_tables
from scoring.releases import service as releases
from scoring.releases.computing import _outcome_a
from scoring.releases.data import load_data
from tests.annotation import factories as campaign_factories
from tests.scoring.test_release_pipeline import make_release, rated_world

DECORATION = ("", "？😊", "\n- 一\n- 二", "（抱抱你）?", "\n## 标题\n1、早上")


@pytest.fixture
def world(researcher, django_user_model):
    raters = campaign_factories.annotators(django_user_model, 3, prefix="stylerater")
    made = rated_world(researcher, raters, n_scenarios=16, prefix="style")
    # Presentation that varies within every companion, so every covariate has something to say.
    for k, response in enumerate(Response.objects.order_by("pk")):
        Response.objects.filter(pk=response.pk).update(
            text=response.text + DECORATION[k % len(DECORATION)] + "呀" * (k % 7)
        )
    return made


@pytest.fixture
def styled(world):
    made = make_release(world, name="Styled", judge=False, n_boot=100, style_control=True)
    assert made.state == Release.State.READY, made.message
    return Release.objects.get(pk=made.pk)


def test_the_choice_and_the_features_are_frozen_and_the_section_computed(styled, world):
    frozen = styled.inputs["style"]
    assert styled.style_control is True
    assert set(frozen) == {"id", *FEATURES}
    in_comparisons = set(styled.inputs["comparisons"]["response_a"]) | set(
        styled.inputs["comparisons"]["response_b"]
    )
    assert frozen["id"] == sorted(in_comparisons)
    text = Response.objects.get(pk=frozen["id"][4]).text
    assert [frozen[f][4] for f in FEATURES] == list(features(text))
    section = styled.result.data["style_control"]
    assert section["votes"] == 144 and section["scenarios"] == 16
    assert [c["feature"] for c in section["covariates"]] == list(FEATURES)
    assert all(c["used"] for c in section["covariates"])  # every one varies here
    assert len(section["controlled"]["elo"]) == 3 and section["plain"]["rank"][0] == 1
    assert section["rank_change"] == [
        p - c for p, c in zip(section["plain"]["rank"], section["controlled"]["rank"], strict=True)
    ]
    # The plain fit of the section ranks as the leaderboard's human fit does here.
    human = styled.result.data["human"]["overall"]["elo"]
    plain = section["plain"]["elo"]
    assert sorted(range(3), key=lambda k: -human[k]) == sorted(range(3), key=lambda k: -plain[k])


def test_a_styled_release_checks_bit_for_bit_and_an_edited_text_fails(styled):
    outcome = releases.check(styled)
    assert outcome.ok, outcome.message
    again = releases.results_for(styled)
    assert provenance.canonical(again) == provenance.canonical(styled.result.data)
    pk = styled.inputs["style"]["id"][0]
    Response.objects.filter(pk=pk).update(text="（换了）" * 5)
    outcome = releases.check(styled)
    assert not outcome.ok and f"1 response(s) changed (text; id {pk})" in outcome.message


def test_the_frozen_features_are_covered_by_the_fingerprint(styled):
    inputs = styled.inputs
    changed = {**inputs["style"], "emoji": [v + 1 for v in inputs["style"]["emoji"]]}
    Release.objects.filter(pk=styled.pk).update(inputs={**inputs, "style": changed})
    styled.refresh_from_db()
    outcome = releases.check(styled)
    assert not outcome.ok and "do not match the release's fingerprint" in outcome.message


def test_without_the_choice_nothing_changes_and_older_releases_still_check(world):
    plain = make_release(world, name="Plain", judge=False, n_boot=100)
    assert plain.inputs["style"] is None and "style_control" not in plain.result.data
    assert releases.check(plain).ok
    # A release frozen before the choice existed: no `style` key in its inputs at all.
    older = {k: v for k, v in plain.inputs.items() if k != "style"}
    Release.objects.filter(pk=plain.pk).update(
        inputs=older, fingerprint=freezing.fingerprint_of(older)
    )
    plain.refresh_from_db()
    outcome = releases.check(plain)
    assert outcome.ok, outcome.message
    assert formats.FILES["style.csv"](plain).count("\n") == 1  # the header only


def test_the_page_and_the_files_show_style_control(client, researcher, styled):
    client.force_login(researcher)
    page = client.get(reverse("releases:detail", kwargs={"pk": styled.pk})).content.decode()
    for needle in (
        'id="style-control"',
        'id="style-ranks"',
        'id="style-covariates"',
        'id="style-plot"',
        "Style-controlled Elo",
        "Length (log ratio of characters)",
        "Persona actions in (…) or （…）",
        "leaderboard.style.csv",
    ):
        assert needle in page, needle
    rows = list(csv.DictReader(io.StringIO(formats.FILES["style.csv"](styled))))
    kinds = [row["kind"] for row in rows]
    assert kinds == ["companion"] * 3 + ["covariate"] * len(FEATURES)
    assert {row["name"] for row in rows[3:]} == set(FEATURES)
    assert float(rows[0]["controlled_elo"]) >= float(rows[1]["controlled_elo"])
    markdown = formats.to_markdown(styled)
    assert "## Style control" in markdown and "| Markdown list items |" in markdown
    download = client.get(reverse("releases:export", kwargs={"pk": styled.pk, "fmt": "style.csv"}))
    assert download.status_code == 200 and download["Content-Disposition"].endswith('.style.csv"')


def test_the_page_says_when_the_section_was_skipped(client, researcher, styled):
    result = ReleaseResult.objects.get(release=styled)
    data = {**result.data, "style_control": {**result.data["style_control"], "skipped": "why"}}
    for key in ("plain", "controlled", "covariates", "rank_change"):
        data["style_control"].pop(key)
    ReleaseResult.objects.filter(pk=result.pk).update(data=data)
    client.force_login(researcher)
    page = client.get(reverse("releases:detail", kwargs={"pk": styled.pk})).content.decode()
    assert 'id="style-skipped"' in page and 'id="style-ranks"' not in page
    styled.refresh_from_db()
    assert style_tables.csv_rows(styled, data)[0]["kind"] == "skipped"


def test_the_form_and_the_api_take_the_choice(client, researcher, world):
    client.force_login(researcher)
    response = client.post(
        reverse("releases:create"),
        {
            "name": "From the form",
            "campaign": world.campaign.pk,
            "anchor": world.companions[1].pk,
            "seed": 0,
            "n_boot": 100,
            "style_control": "on",
        },
    )
    assert response.status_code == 302
    made = Release.objects.get(name="From the form")
    assert made.style_control and made.inputs["style"] is not None
    api = APIClient()
    api.force_authenticate(researcher)
    body = {"name": "From the API", "campaign": world.campaign.pk, "anchor": world.companions[1].pk}
    created = api.post("/api/releases/", {**body, "n_boot": 100, "style_control": True})
    assert created.status_code == 201, created.content
    assert created.json()["style_control"] is True
    assert created.json()["results"]["style_control"]["covariates"][0]["feature"] == "length"
    default = api.post("/api/releases/", {**body, "name": "Default", "n_boot": 100})
    assert default.json()["style_control"] is False
    assert "style_control" not in default.json()["results"]


def test_renumbered_companions_and_scenarios_give_the_same_section_bit_for_bit(styled):
    data = load_data(styled)
    companion = {pk: 1000 - pk for pk, _ in data.companions}  # reversed order of ids
    scenario = {pk: 50_000 - pk for pk in data.style.scenario_keys}
    votes = data.votes.assign(
        companion_a=data.votes["companion_a"].map(companion),
        companion_b=data.votes["companion_b"].map(companion),
        scenario=data.votes["scenario"].map(scenario),
    )
    keys = {
        scenario[pk]: f"{key.split('/')[0]}/{scenario[pk]:012d}"
        for pk, key in data.style.scenario_keys.items()
    }
    renumbered = dataclasses.replace(
        data,
        companions=sorted((companion[pk], name) for pk, name in data.companions),
        votes=votes,
        style=dataclasses.replace(data.style, scenario_keys=keys),
    )
    before = style.section(
        data, pd.Index([c for c, _ in data.companions]), _outcome_a(votes["preference"])
    )
    ids = [c for c, _ in renumbered.companions]
    after = style.section(renumbered, pd.Index(ids), _outcome_a(votes["preference"]))
    back = [ids.index(companion[pk]) for pk, _ in data.companions]  # old position → new
    for fit in ("plain", "controlled"):
        for key in ("elo", "low", "high", "rank", "games"):
            assert [after[fit][key][k] for k in back] == before[fit][key]
    assert after["covariates"] == before["covariates"]
    assert before["plain"]["elo"] == styled.result.data["style_control"]["plain"]["elo"]
