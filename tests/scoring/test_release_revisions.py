"""A release counts only judgments made on the scenario text it freezes, and says how many it
left out (issue 11.5)."""

from datetime import timedelta

import pytest
from django.urls import reverse

from annotation.models import Assignment, Judgment
from h2htalk import provenance
from scenarios import services
from scenarios.models import Scenario
from scoring.models import Release
from scoring.releases import formats, freezing, verifying
from scoring.releases import service as releases
from tests.annotation import factories as campaign_factories
from tests.scoring.test_release_pipeline import make_release, rated_world


@pytest.fixture
def world(researcher, django_user_model, monkeypatch):
    monkeypatch.setenv("H2HTALK_CODE_VERSION", "test")
    raters = campaign_factories.annotators(django_user_model, 3, prefix="revrater")
    return rated_world(researcher, raters, n_scenarios=12, prefix="rev")


def scenarios_of(world) -> list[Scenario]:
    ids = world.campaign.comparisons.values("scenario_id")
    return list(Scenario.objects.filter(pk__in=ids).order_by("pk"))


def judgments_on(scenario):
    return Judgment.objects.filter(comparison__scenario=scenario)


def record_hashes(world):
    """As the queue does now: every judgment names the content hash of the text it was shown."""
    for scenario in scenarios_of(world):
        judgments_on(scenario).update(scenario_hash=scenario.content_hash)


def edit_and_reapprove(scenario, author, text):
    scenario = Scenario.objects.get(pk=scenario.pk)
    before = services.snapshot(scenario)
    scenario.user_message = text
    services.update_scenario(scenario, author, before)
    assert Scenario.objects.get(pk=scenario.pk).state == Scenario.State.IN_REVIEW
    services.transition(scenario, author, "approve")


def test_judgments_on_an_earlier_text_are_left_out_and_counted(
    world, researcher, researcher_client
):
    record_hashes(world)
    before = make_release(world, name="Before the edit", judge=False)
    assert before.inputs["judgments_on_other_text"] == 0
    every = len(before.inputs["judgments"]["id"])

    edited = scenarios_of(world)[0]
    stale = judgments_on(edited).count()
    assert stale == 9  # 3 pairs × 3 raters
    edit_and_reapprove(edited, researcher, "A rewritten message the raters never saw")
    # One rater has since judged a comparison on the new text: that judgment counts.
    fresh = judgments_on(edited).first()
    Judgment.objects.filter(pk=fresh.pk).update(
        scenario_hash=Scenario.objects.get(pk=edited.pk).content_hash
    )

    release = make_release(world, name="After the edit", judge=False)
    assert release.state == Release.State.READY, release.message
    inputs = release.inputs
    assert inputs["judgments_on_other_text"] == stale - 1
    assert len(inputs["judgments"]["id"]) == every - (stale - 1)
    assert fresh.pk in inputs["judgments"]["id"]
    assert not set(judgments_on(edited).exclude(pk=fresh.pk).values_list("pk", flat=True)) & set(
        inputs["judgments"]["id"]
    )
    scenarios = inputs["scenarios"]
    frozen = dict(zip(scenarios["id"], scenarios["content_sha256"], strict=True))
    assert frozen[edited.pk] == Scenario.objects.get(pk=edited.pk).content_hash
    assert release.fingerprint != before.fingerprint

    data = release.result.data
    assert data["judgments_on_other_text"] == 8
    assert data["counts"]["votes"] == every - 8
    sentence = "8 human judgments made on an earlier text of their scenario (edited since) are"
    assert any(note.startswith(sentence) for note in data["notes"])
    assert formats.to_markdown(release).count(sentence) == 1
    assert '"judgments_on_other_text": 8' in formats.to_json(release)
    page = researcher_client.get(reverse("releases:detail", args=[release.pk])).content.decode()
    assert "8 human judgments made on an earlier text of their scenario left out" in page
    page = researcher_client.get(reverse("releases:detail", args=[before.pk])).content.decode()
    assert "Every human judgment was made on the scenario text this release freezes" in page
    assert releases.check(release).ok


def test_judgments_from_before_hashes_count_only_if_the_text_did_not_change_since(
    world, researcher
):
    """Judgments stored without a hash (older code): counted when no revision changed the
    scenario's content at or after their item was handed out."""
    first, second, third = scenarios_of(world)[:3]
    assert not Judgment.objects.exclude(scenario_hash="").exists()
    edit_and_reapprove(first, researcher, "Edited after the votes")
    edit_and_reapprove(second, researcher, "Edited before the votes")
    later = Scenario.objects.get(pk=second.pk).revisions.first().created_at + timedelta(seconds=1)
    Assignment.objects.filter(comparison__scenario=second).update(issued_at=later)
    services.transition(third, researcher, "retire")  # state only: no content change
    services.transition(third, researcher, "reopen")
    services.transition(third, researcher, "submit")
    services.transition(third, researcher, "approve")

    release = make_release(world, name="Legacy judgments", judge=False)
    assert release.state == Release.State.READY, release.message
    kept = set(release.inputs["judgments"]["id"])
    assert not set(judgments_on(first).values_list("pk", flat=True)) & kept
    assert set(judgments_on(second).values_list("pk", flat=True)) <= kept
    assert set(judgments_on(third).values_list("pk", flat=True)) <= kept
    assert release.inputs["judgments_on_other_text"] == 9


def test_releases_frozen_before_the_count_still_check(world):
    """A release frozen by older code has no count: it verifies and recomputes the same."""
    release = make_release(world, name="Old", judge=False)
    inputs = dict(release.inputs)
    inputs.pop("judgments_on_other_text")
    Release.objects.filter(pk=release.pk).update(
        inputs=inputs, fingerprint=freezing.fingerprint_of(inputs)
    )
    result = release.result
    data = dict(result.data)
    data.pop("judgments_on_other_text")
    result.data = data
    result.data_sha256 = provenance.sha256_text(provenance.canonical(data))
    result.save()
    release = Release.objects.get(pk=release.pk)
    assert verifying.verify(release) == []
    recomputed = releases.results_for(release)
    assert "judgments_on_other_text" not in recomputed
    assert provenance.canonical(recomputed) == provenance.canonical(data)
