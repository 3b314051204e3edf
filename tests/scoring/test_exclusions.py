"""Annotator exclusions: agreement, calibration fits and releases leave excluded annotators'
judgments out; the agreement page's actions, the REST endpoint and `manage.py
exclude_annotators`; who may exclude."""

import csv
import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from annotation import exclusions
from annotation.models import AnnotatorExclusion, Judgment
from h2htalk import provenance
from scoring.agreement import services as agreement
from scoring.calibration.fitting import fit
from scoring.metrics import features
from scoring.models import Release
from scoring.releases import formats, freezing, verifying
from scoring.releases import service as releases
from tests.annotation import factories as campaign_factories
from tests.conftest import make_user
from tests.scoring import test_agreement_report
from tests.scoring import test_calibration_support as support
from tests.scoring.test_release_pipeline import make_release, rated_world

rated = test_agreement_report.rated  # the fixture: 6 raters, one always clicks left
module_rated = test_agreement_report.module_rated  # (made once for the module)
researcher = test_agreement_report.researcher  # (made with it)


def _alpha(data, label="winner3"):
    return next(row["alpha"] for row in data["overall"] if row["label"] == label)


def _user(name):
    return get_user_model().objects.get(username=name)


@pytest.fixture
def stranger(roles, django_user_model):
    return make_user(django_user_model, "stranger", "researcher")


# ---------------------------------------------------------------- agreement


def test_excluding_changes_the_agreement_and_clearing_restores_it(rated, researcher):
    before = agreement.report_for(rated).data
    key_before = agreement.fingerprint(rated)
    clicker = _user("clicker")
    n_clicker = Judgment.objects.filter(annotator=clicker, comparison__campaign=rated).count()
    assert n_clicker > 0

    exclusions.exclude(rated, [clicker], "always picks the left side", by=researcher)
    assert agreement.fingerprint(rated) != key_before  # a new report, not the cached one
    after = agreement.report_for(rated).data
    assert after["judgments"] == before["judgments"] - n_clicker
    assert after["judgments_total"] == before["judgments"]
    assert after["excluded"] == {
        "judgments": n_clicker,
        "annotators": [
            {
                "annotator": "clicker",
                "reason": "always picks the left side",
                "judgments": n_clicker,
                "created_by": researcher.username,
            }
        ],
    }
    # The left clicker votes at random once votes are keyed by the pair: without it the
    # annotators agree more.
    assert _alpha(after) > _alpha(before)
    assert "clicker" not in after["heatmap"]["annotators"]
    rows = {row["annotator"]: row for row in after["annotators"]}
    assert rows["clicker"]["excluded"] and rows["clicker"]["flagged"]  # still shown, flagged
    assert not any(row["excluded"] for name, row in rows.items() if name != "clicker")

    assert exclusions.clear(rated) == 1
    assert agreement.fingerprint(rated) == key_before
    restored = agreement.report_for(rated).data
    assert restored["overall"] == before["overall"] and restored["excluded"]["judgments"] == 0


def test_a_changed_reason_is_a_new_report(rated, researcher):
    clicker = _user("clicker")
    exclusions.exclude(rated, [clicker], "first reason", by=researcher)
    first = agreement.fingerprint(rated)
    exclusions.exclude(rated, ["clicker"], "second reason", by=researcher)
    assert AnnotatorExclusion.objects.get().reason == "second reason"
    assert agreement.fingerprint(rated) != first
    assert agreement.report_for(rated).data["excluded"]["annotators"][0]["reason"] == (
        "second reason"
    )


def test_exclude_flagged_takes_exactly_the_flagged_annotators(rated, researcher):
    rows = agreement.report_for(rated).data["annotators"]
    flagged = {row["annotator"]: row["flag"] for row in rows if row["flagged"]}
    assert "clicker" in flagged and len(flagged) < len(rows)
    made = exclusions.exclude_flagged(rated, by=researcher)
    assert {m.annotator.username: m.reason for m in made} == {
        name: f"flagged by the agreement report: {flag}" for name, flag in flagged.items()
    }
    clicker = next(m for m in made if m.annotator.username == "clicker")
    assert "position: picks the left side in 100%" in clicker.reason
    # Flags do not depend on who is excluded: doing it again changes nothing.
    again = exclusions.exclude_flagged(rated, by=researcher)
    assert sorted(m.pk for m in again) == sorted(m.pk for m in made)
    assert AnnotatorExclusion.objects.count() == len(flagged)


def test_service_refuses_unknown_annotators_and_empty_reasons(rated, researcher, annotator):
    with pytest.raises(exclusions.ExclusionError, match="nobody-here: not an annotator"):
        exclusions.exclude(rated, ["nobody-here"], "x", by=researcher)
    with pytest.raises(exclusions.ExclusionError, match="annotator1: not an annotator"):
        exclusions.exclude(rated, [annotator], "x", by=researcher)  # not in this campaign
    with pytest.raises(exclusions.ExclusionError, match="give a reason"):
        exclusions.exclude(rated, ["clicker"], "  ", by=researcher)
    with pytest.raises(exclusions.ExclusionError, match="NUL"):
        exclusions.exclude(rated, ["click\x00er"], "x", by=researcher)
    with pytest.raises(exclusions.ExclusionError, match="reason cannot contain a NUL"):
        exclusions.exclude(rated, ["clicker"], "a\x00b", by=researcher)
    assert not AnnotatorExclusion.objects.exists()


# ---------------------------------------------------------------- the agreement page


def test_page_excludes_chosen_and_flagged_annotators_and_brings_them_back(researcher_client, rated):
    page = reverse("scoring:agreement", args=[rated.pk])
    action = reverse("scoring:agreement_exclusions", args=[rated.pk])
    shown = researcher_client.get(page).content.decode()
    assert 'id="exclude-flagged"' in shown and 'form="exclude-form"' in shown

    rater = rated.annotators.exclude(username="clicker").order_by("username").first()
    response = researcher_client.post(
        action, {"action": "exclude", "annotators": [rater.username], "reason": "trial rater"}
    )
    assert response.status_code == 302 and response["Location"] == page
    exclusion = AnnotatorExclusion.objects.get()
    assert exclusion.annotator == rater and exclusion.reason == "trial rater"
    text = researcher_client.get(page).content.decode()
    assert 'id="exclusion-table"' in text and "trial rater" in text
    n = Judgment.objects.filter(annotator=rater).count()
    assert f"{n} judgments of 1 excluded annotator left out" in text

    researcher_client.post(action, {"action": "exclude_flagged"})
    flagged = {row["annotator"] for row in agreement.annotator_flags(rated) if row["flagged"]}
    assert "clicker" in flagged
    excluded = set(AnnotatorExclusion.objects.values_list("annotator__username", flat=True))
    assert excluded == flagged | {rater.username}
    researcher_client.post(action, {"action": "clear", "annotators": ["clicker"]})
    assert set(AnnotatorExclusion.objects.values_list("annotator__username", flat=True)) == (
        excluded - {"clicker"}
    )
    # No reason: nothing changes, and the page says why.
    response = researcher_client.post(
        action, {"action": "exclude", "annotators": ["clicker"]}, follow=True
    )
    assert "Nothing changed: give a reason" in response.content.decode()
    for hostile in (
        {"annotators": ["click\x00er"], "reason": "r"},
        {"annotators": ["clicker"], "reason": "r\x00"},
    ):
        response = researcher_client.post(action, {"action": "exclude", **hostile}, follow=True)
        assert response.status_code == 200 and "Nothing changed" in response.content.decode()
    researcher_client.post(action, {"action": "clear", "annotators": ["x\x00"]})
    researcher_client.post(action, {"action": "clear"})
    assert not AnnotatorExclusion.objects.exists()
    assert "None: every judgment counts." in researcher_client.get(page).content.decode()


def test_page_action_needs_a_managing_researcher_and_a_csrf_token(
    client, rated, stranger, researcher
):
    action = reverse("scoring:agreement_exclusions", args=[rated.pk])
    data = {"action": "exclude", "annotators": ["clicker"], "reason": "r"}
    rater = rated.annotators.order_by("username").first()
    client.force_login(rater)
    assert client.post(action, data).status_code == 403
    client.force_login(stranger)
    assert client.post(action, data).status_code == 404
    assert client.post(action, {"action": "exclude_flagged"}).status_code == 404
    assert not AnnotatorExclusion.objects.exists()
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(researcher)
    assert strict.post(action, data).status_code == 403
    assert not AnnotatorExclusion.objects.exists()
    strict.get(reverse("scoring:agreement", args=[rated.pk]))
    token = strict.cookies["csrftoken"].value
    assert strict.post(action, {**data, "csrfmiddlewaretoken": token}).status_code == 302
    assert AnnotatorExclusion.objects.count() == 1


# ---------------------------------------------------------------- REST API


def test_api_lists_adds_and_removes_exclusions(researcher_client, rated):
    url = reverse("campaign-agreement-exclusions", args=[rated.pk])
    assert researcher_client.get(url).json() == {
        "campaign": rated.pk,
        "excluded_judgments": 0,
        "exclusions": [],
    }
    response = researcher_client.post(
        url, {"annotators": ["clicker"], "reason": "left clicker"}, content_type="application/json"
    )
    assert response.status_code == 200, response.content
    body = response.json()
    n = Judgment.objects.filter(annotator__username="clicker").count()
    assert body["excluded_judgments"] == n
    assert body["exclusions"][0]["annotator"] == "clicker"
    assert body["exclusions"][0]["reason"] == "left clicker"
    # The agreement endpoint now leaves them out.
    report = researcher_client.get(reverse("campaign-agreement", args=[rated.pk])).json()
    assert report["excluded"]["judgments"] == n and ":x" in report["fingerprint"]

    for payload, field in (
        ({"annotators": ["ghost"], "reason": "r"}, "detail"),
        ({"annotators": ["clicker"]}, "reason"),
        ({}, "annotators"),
        ({"annotators": ["clicker"], "reason": "r", "flagged": True}, "non_field_errors"),
    ):
        bad = researcher_client.post(url, payload, content_type="application/json")
        assert bad.status_code == 400 and field in bad.json(), (payload, bad.json())
    assert (
        "ghost"
        in researcher_client.post(
            url, {"annotators": ["ghost"], "reason": "r"}, content_type="application/json"
        ).json()["detail"]
    )

    body = researcher_client.delete(f"{url}?annotator=clicker").json()
    assert body["exclusions"] == [] and body["excluded_judgments"] == 0
    body = researcher_client.post(url, {"flagged": True}, content_type="application/json").json()
    flagged = [row["annotator"] for row in agreement.annotator_flags(rated) if row["flagged"]]
    assert [row["annotator"] for row in body["exclusions"]] == sorted(flagged)
    assert "clicker" in flagged
    assert all(
        r["reason"].startswith("flagged by the agreement report") for r in body["exclusions"]
    )
    assert researcher_client.delete(url).json()["exclusions"] == []


def test_api_access_and_schema(client, researcher_client, rated, stranger):
    url = reverse("campaign-agreement-exclusions", args=[rated.pk])
    payload = {"annotators": ["clicker"], "reason": "r"}
    client.force_login(rated.annotators.order_by("username").first())
    assert client.get(url).status_code == 403
    assert client.post(url, payload, content_type="application/json").status_code == 403
    client.force_login(stranger)
    assert client.get(url).status_code == 404
    assert client.post(url, payload, content_type="application/json").status_code == 404
    exclusions.exclude(rated, ["clicker"], "kept", by=None)
    assert client.delete(url).status_code == 404
    assert AnnotatorExclusion.objects.count() == 1
    schema = researcher_client.get(reverse("api_schema"), {"format": "json"}).json()
    path = schema["paths"]["/api/campaigns/{campaign_id}/agreement/exclusions/"]
    assert {"get", "post", "delete"} <= set(path)
    assert any(p["name"] == "annotator" for p in path["delete"]["parameters"])


# ---------------------------------------------------------------- the command


def test_command_excludes_lists_and_clears(rated):
    out = io.StringIO()
    call_command("exclude_annotators", rated.name, "clicker", reason="always left", stdout=out)
    n = Judgment.objects.filter(annotator__username="clicker").count()
    assert AnnotatorExclusion.objects.get().reason == "always left"
    assert f"1 annotator(s), {n} judgment(s)" in out.getvalue()
    out = io.StringIO()
    call_command("agreement", rated.name, "--boot", "50", stdout=out)
    assert f"{n} judgment(s) of excluded annotators left out: clicker" in out.getvalue()
    assert "[excluded] " in out.getvalue()
    out = io.StringIO()
    call_command("exclude_annotators", str(rated.pk), stdout=out)  # just the list
    assert "clicker" in out.getvalue() and "always left" in out.getvalue()
    call_command("exclude_annotators", rated.name, "--clear", stdout=io.StringIO())
    assert not AnnotatorExclusion.objects.exists()
    call_command("exclude_annotators", rated.name, "--flagged", stdout=io.StringIO())
    flagged = {row["annotator"] for row in agreement.annotator_flags(rated) if row["flagged"]}
    excluded = set(AnnotatorExclusion.objects.values_list("annotator__username", flat=True))
    assert "clicker" in excluded and excluded == flagged
    call_command("exclude_annotators", rated.name, "clicker", "--clear", stdout=io.StringIO())
    assert not AnnotatorExclusion.objects.filter(annotator__username="clicker").exists()
    call_command("exclude_annotators", rated.name, "--clear", stdout=io.StringIO())
    assert not AnnotatorExclusion.objects.exists()
    with pytest.raises(CommandError, match="--reason"):
        call_command("exclude_annotators", rated.name, "clicker")
    with pytest.raises(CommandError, match="ghost: not an annotator"):
        call_command("exclude_annotators", rated.name, "ghost", reason="r")
    with pytest.raises(CommandError, match="no campaign"):
        call_command("exclude_annotators", "no such campaign", "clicker", reason="r")
    assert not AnnotatorExclusion.objects.exists()


# ---------------------------------------------------------------- calibration


def test_calibration_fit_leaves_excluded_judgments_out(researcher, roles, django_user_model):
    raters = campaign_factories.annotators(django_user_model, 3, prefix="fitrater")
    campaign, _ = support.rated_campaign(researcher, raters, judge_mode=None, seed=2)
    everyone = features.comparison_table(campaign)
    first = fit(campaign, user=researcher, name="with everyone")
    exclusions.exclude(campaign, [raters[0]], "misread the guidelines", by=researcher)
    table = features.comparison_table(campaign)
    n = Judgment.objects.filter(annotator=raters[0]).count()
    assert len(table.judgments) == len(everyone.judgments) - n
    assert raters[0].pk not in set(table.judgments["annotator"])
    assert (table.frame["n_votes"] == 2).all() and (everyone.frame["n_votes"] == 3).all()
    assert table.info["excluded_judgments"] == n and table.info["excluded_annotators"] == 1
    second = fit(campaign, user=researcher, name="without the first rater")
    trained = second.document["training"]
    assert trained["judgments"] == first.document["training"]["judgments"] - n
    assert trained["fingerprint"] != first.document["training"]["fingerprint"]
    assert trained["left_out"]["excluded_judgments"] == n
    assert second.document["weights"] != first.document["weights"]
    exclusions.clear(campaign)
    assert len(features.comparison_table(campaign).judgments) == len(everyone.judgments)


# ---------------------------------------------------------------- releases


@pytest.fixture
def release_world(researcher, django_user_model, monkeypatch):
    monkeypatch.setenv("H2HTALK_CODE_VERSION", "test")
    raters = campaign_factories.annotators(django_user_model, 3, prefix="exrater")
    return rated_world(researcher, raters, n_scenarios=12, prefix="excl")


def test_a_release_freezes_the_exclusions_and_leaves_their_judgments_out(
    release_world, researcher, researcher_client
):
    world = release_world
    plain = make_release(world, name="Everyone", judge=False)
    assert plain.state == Release.State.READY, plain.message
    assert plain.inputs["exclusions"] == {"annotator": [], "reason": [], "judgments": []}
    assert plain.result.data["exclusions"] == {"judgments": 0, "annotators": 0, "reasons": []}

    left_out = world.raters[2]
    exclusions.exclude(world.campaign, [left_out], "failed the gold check", by=researcher)
    n = len(plain.inputs["judgments"]["id"]) // 3
    excluded = make_release(world, name="Without one rater", judge=False)
    assert excluded.state == Release.State.READY, excluded.message
    inputs = excluded.inputs
    assert excluded.fingerprint != plain.fingerprint
    assert inputs["exclusions"] == {
        "annotator": [left_out.pk],
        "reason": ["failed the gold check"],
        "judgments": [n],
    }
    assert len(inputs["judgments"]["id"]) == 2 * n
    assert left_out.pk not in inputs["judgments"]["annotator"]
    data = excluded.result.data
    assert data["counts"]["votes"] == 2 * n and data["counts"]["annotators"] == 2
    assert data["counts"]["votes"] != plain.result.data["counts"]["votes"]
    assert data["human"]["overall"]["elo"] != plain.result.data["human"]["overall"]["elo"]
    assert data["exclusions"] == {
        "judgments": n,
        "annotators": 1,
        "reasons": [{"reason": "failed the gold check", "annotators": 1, "judgments": n}],
    }
    sentence = f"{n} human judgment(s) of 1 annotator(s) excluded by the researchers are left out"
    assert any(note.startswith(sentence) for note in data["notes"])

    # Reproduced bit for bit, also after the exclusion is cleared (the release keeps its list).
    assert releases.check(excluded).ok
    exclusions.clear(world.campaign)
    outcome = releases.check(excluded)
    assert outcome.ok, outcome.message
    again = make_release(world, name="Everyone again", judge=False)
    assert again.fingerprint == plain.fingerprint

    # The leaderboard says how many and why: Markdown, CSV, JSON and the page.
    markdown = formats.to_markdown(excluded)
    assert markdown.count(sentence) == 1 and "failed the gold check" in markdown
    rows = list(csv.DictReader(io.StringIO(formats.to_csv(excluded))))
    assert {r["excluded_judgments"] for r in rows} == {str(n)}
    assert {r["exclusion_reasons"] for r in rows} == {"failed the gold check"}
    assert {
        r["excluded_judgments"] for r in csv.DictReader(io.StringIO(formats.to_csv(plain)))
    } == {"0"}
    assert '"exclusions"' in formats.to_json(excluded)
    page = researcher_client.get(reverse("releases:detail", args=[excluded.pk])).content.decode()
    assert f"{n} human judgments of 1 excluded annotator left out" in page
    assert "failed the gold check" in page
    page = researcher_client.get(reverse("releases:detail", args=[plain.pk])).content.decode()
    assert "No annotator was excluded" in page


def test_comparisons_judged_only_by_excluded_annotators_are_left_out(release_world, researcher):
    world = release_world
    exclusions.exclude(world.campaign, world.raters, "pilot raters", by=researcher)
    release = make_release(world, name="Nobody counts", judge=False)
    assert release.inputs["judgments"]["id"] == [] and release.inputs["comparisons"]["id"] == []
    assert release.inputs["exclusions"]["judgments"] == [36, 36, 36]


def test_releases_frozen_before_exclusions_still_check(release_world):
    """A release frozen by older code has no exclusions section: it verifies and recomputes
    the same numbers."""
    release = make_release(release_world, name="Old", judge=False)
    inputs = dict(release.inputs)
    inputs.pop("exclusions")
    fingerprint = freezing.fingerprint_of(inputs)
    Release.objects.filter(pk=release.pk).update(inputs=inputs, fingerprint=fingerprint)
    data = dict(release.result.data)
    data.pop("exclusions")
    data["notes"] = list(data["notes"])
    result = release.result
    result.data = data
    result.data_sha256 = provenance.sha256_text(provenance.canonical(data))
    result.save()
    release = Release.objects.get(pk=release.pk)
    assert verifying.verify(release) == []
    recomputed = releases.results_for(release)
    assert "exclusions" not in recomputed
    assert provenance.canonical(recomputed) == provenance.canonical(data)
