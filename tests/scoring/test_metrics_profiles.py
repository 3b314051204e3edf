"""The metrics profiles end to end: chosen in `compute_metrics`, the metrics job page and the API;
stored with the metrics; named in composites, calibrated-judge documents and releases; never
mixed."""

import io

import pytest
from django.core.management import call_command
from django.urls import reverse

from h2htalk.models import Job
from scenarios.models import GenerationRun, Response
from scoring.calibration.document import DocumentError
from scoring.calibration.prediction import score_pairs
from scoring.metrics import catalogue, composite, paper_profile, profiles
from scoring.metrics import jobs as metric_jobs
from scoring.metrics.features import side_features
from scoring.models import MetricScore, Release
from scoring.releases import service as releases
from tests.annotation import factories as campaign_factories
from tests.scenarios import factories
from tests.scoring.test_release_pipeline import make_release, rated_world

QUIET = {"stdout": io.StringIO(), "stderr": io.StringIO()}


@pytest.fixture
def campaign(researcher, roles):
    return campaign_factories.campaign(researcher, [], n_scenarios=3)


def _compute(campaign, *options) -> str:
    out = io.StringIO()
    call_command(
        "compute_metrics", "--campaign", str(campaign.pk), "--embedding", "none", *options,
        stdout=out, stderr=io.StringIO(),
    )  # fmt: skip
    return out.getvalue()


def test_the_command_stores_the_paper_profile_and_switches_back(campaign):
    assert "(paper profile) computed for 9 response(s)" in _compute(campaign, "--profile", "paper")
    stored = MetricScore.objects.select_related("response__scenario").first()
    response = stored.response
    expected = paper_profile.score_pair(response.text, response.scenario.reference_response)
    assert stored.profile == "paper" and stored.values["profile"] == "paper"
    for key in paper_profile.RATIOS:
        assert stored.values[key] == pytest.approx(expected[key], abs=1e-12), key
    # No renormalisation: the two model terms are missing and count 0.
    assert stored.values["composite"] == pytest.approx(
        sum(composite.PAPER_WEIGHTS[k] * expected[k] for k in paper_profile.RATIOS), abs=1e-12
    )
    assert "paper profile" in stored.composite_note and "count 0" in stored.composite_note
    # Without --profile the stored profile is kept; naming the other one computes them again.
    assert "(paper profile) computed for 0 response(s)" in _compute(campaign)
    assert "(platform profile) computed for 9 response(s)" in _compute(
        campaign, "--profile", "platform"
    )
    stored.refresh_from_db()
    assert stored.profile == "platform" and "profile" not in stored.values
    assert "renormalised" in stored.composite_note


def test_an_empty_answer_is_left_out_under_the_paper_profile(researcher, roles):
    scenario = factories.scenario(researcher, reference_response="我在这里陪着你。")
    run = GenerationRun.objects.create(name="r", kind="import")
    companion = campaign_factories.companions()[0]
    Response.objects.create(run=run, scenario=scenario, companion=companion, text=" \r\n ")
    metric_jobs.compute(Response.objects.all(), embedding="none", profile="paper")
    values = MetricScore.objects.get().values
    assert values["excluded"] is True and values["composite"] is None
    assert all(values[key] is None for key in paper_profile.RATIOS)
    metric_jobs.compute(Response.objects.all(), embedding="none", profile="platform")
    values = MetricScore.objects.get().values
    assert values["rouge1"] == 0.0 and "excluded" not in values  # the platform counts it 0


def test_the_page_and_the_api_choose_the_profile(
    researcher_client, campaign, django_capture_on_commit_callbacks
):
    page = researcher_client.get(reverse("calibration:list"))
    assert 'name="profile"' in page.content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        researcher_client.post(
            reverse("calibration:metrics"),
            {"campaign": campaign.pk, "embedding": "none", "profile": "paper"},
        )
    job = Job.objects.get()
    assert job.params["profile"] == "paper" and job.result == {"scored": 9, "profile": "paper"}
    assert set(MetricScore.objects.values_list("profile", flat=True)) == {"paper"}
    url = reverse("calibration-metrics")
    with django_capture_on_commit_callbacks(execute=True):
        answer = researcher_client.post(
            url,
            {"campaign": campaign.pk, "embedding": "none", "profile": "platform"},
            content_type="application/json",
        )
    assert answer.status_code == 202 and answer.json()["profile"] == "platform"
    assert set(MetricScore.objects.values_list("profile", flat=True)) == {"platform"}
    bad = researcher_client.post(
        url, {"campaign": campaign.pk, "profile": "nltk"}, content_type="application/json"
    )
    assert bad.status_code == 400
    other = researcher_client.post(url, {"campaign": 10**6}, content_type="application/json")
    assert other.status_code == 400


def test_the_api_lists_every_embedding_backend():
    assert tuple(sorted(composite.EMBEDDING_BACKENDS)) == catalogue.EMBEDDING_BACKEND_NAMES
    assert profiles.check(None) == "platform"
    with pytest.raises(ValueError):
        profiles.check("nltk")


def test_mixed_profiles_are_refused_and_a_judge_keeps_its_profile(campaign):
    _compute(campaign, "--profile", "paper")
    comparison = campaign.comparisons.first()
    pair = [(comparison.response_a_id, comparison.response_b_id)]
    sides = side_features(pair)
    assert sides.profile == "paper" and "paper profile" in sides.composite_note
    document = {"metrics_profile": "platform", "features": ["rouge1"], "judge": None}
    with pytest.raises(DocumentError, match="fitted on reference metrics of the platform"):
        score_pairs(document, pair)
    MetricScore.objects.filter(response_id=comparison.response_a_id).update(profile="platform")
    with pytest.raises(catalogue.FeatureError, match="different profiles"):
        side_features(pair)


def test_a_release_names_the_paper_profile(researcher, django_user_model):
    raters = campaign_factories.annotators(django_user_model, 3, prefix="profrater")
    world = rated_world(researcher, raters, n_scenarios=8, prefix="prof")
    world.judge.document = {**world.judge.document, "metrics_profile": "paper"}
    world.judge.save()
    made = make_release(world, n_boot=50)
    assert made.state == Release.State.READY, made.message
    data = made.result.data
    assert data["composite"]["profile"] == "paper"
    assert "paper profile" in data["composite"]["note"]
    assert set(MetricScore.objects.values_list("profile", flat=True)) == {"paper"}
    assert releases.check(made).ok
    # A judge fitted on the platform profile cannot score paper-profile metrics.
    world.judge.document = {**world.judge.document, "metrics_profile": "platform"}
    world.judge.save()
    refused = make_release(world, name="Other", n_boot=50)
    assert refused.state != Release.State.READY and "profile" in refused.message


def test_a_calibrated_judge_records_and_shows_its_profile(
    researcher_client, researcher, django_user_model
):
    from scoring.calibration import fitting

    raters = campaign_factories.annotators(django_user_model, 3, prefix="pagerater")
    world = rated_world(researcher, raters, n_scenarios=8, prefix="page")
    metric_jobs.compute(
        metric_jobs.campaign_responses(world.campaign), embedding="none", profile="paper"
    )
    judge = fitting.fit(world.campaign, features=["rouge1", "log_length"], user=researcher)
    assert judge.document["metrics_profile"] == "paper"
    assert "paper profile" in judge.document["composite"]["note"]
    page = researcher_client.get(reverse("calibration:detail", args=[judge.pk])).content.decode()
    assert "Reference metrics profile: <code>paper</code>" in page and "paper profile" in page
