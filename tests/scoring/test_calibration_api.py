"""The calibration REST API: list, fit, document, score, import, route."""

import json

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import Campaign
from h2htalk.models import Job
from scoring.calibration import fitting
from scoring.calibration.fitting import fit
from scoring.calibration.prediction import score_pairs
from scoring.models import CalibratedJudge
from tests.annotation import factories as campaign_factories
from tests.scoring import test_calibration_support as support


@pytest.fixture(autouse=True)
def code_version(monkeypatch):
    monkeypatch.setenv("H2HTALK_CODE_VERSION", "test-version")


@pytest.fixture
def api(researcher):
    client = APIClient()
    client.force_authenticate(researcher)
    return client


@pytest.fixture
def rated(researcher, roles, django_user_model):
    raters = campaign_factories.annotators(django_user_model, 3)
    return support.rated_campaign(researcher, raters, n_scenarios=12, seed=41, judged_share=0.75)


def test_fit_list_document_and_score(api, rated):
    campaign, judge = rated
    response = api.post(
        reverse("calibration-judge-list"),
        {"campaign": campaign.pk, "judge": judge.pk, "name": "api judge", "folds": 3},
        format="json",
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    stored = CalibratedJudge.objects.get(pk=body["id"])
    assert body["name"] == "api judge" and body["version"] == 1
    assert (
        body["heldout"]["calibrated"]["log_loss"]
        == stored.document["heldout"]["judges"]["calibrated"]["log_loss"]
    )
    assert (
        body["worse_than_composite"]
        is stored.document["heldout"]["comparison"]["composite"]["worse"]
    )
    listing = api.get(reverse("calibration-judge-list")).json()
    assert [row["id"] for row in listing] == [stored.pk]
    document = api.get(reverse("calibration-judge-detail", args=[stored.pk])).json()
    assert document == stored.document

    pairs = list(campaign.comparisons.values_list("response_a_id", "response_b_id")[:3])
    query = "&".join(f"pair={a},{b}" for a, b in pairs)
    scored = api.get(reverse("calibration-judge-score", args=[stored.pk]) + "?" + query).json()
    expected, _ = score_pairs(stored.document, pairs)
    assert [row["p"] for row in scored["pairs"]] == list(expected)
    assert api.get(reverse("calibration-judge-score", args=[stored.pk])).json()["pairs"] == []
    bad = api.get(reverse("calibration-judge-score", args=[stored.pk]) + "?pair=1;2")
    assert bad.status_code == 400


def test_fit_errors_and_background_job(api, rated, monkeypatch, django_capture_on_commit_callbacks):
    campaign, judge = rated
    url = reverse("calibration-judge-list")
    assert api.post(url, {"campaign": 999999}, format="json").status_code == 400
    refused = api.post(
        url,
        {"campaign": campaign.pk, "features": ["judge_win_share"], "judge": judge.pk},
        format="json",
    )
    assert refused.status_code == 400 and "cannot be used" in refused.json()["detail"]
    monkeypatch.setattr(fitting, "INLINE_COMPARISONS", 5)
    with django_capture_on_commit_callbacks(execute=True):
        accepted = api.post(url, {"campaign": campaign.pk}, format="json")
    assert accepted.status_code == 202
    job = Job.objects.get(pk=accepted.json()["job"])
    assert job.state == Job.State.COMPLETED and CalibratedJudge.objects.count() == 1


def test_import_via_api(api, researcher):
    original = support.stored_judge(None, researcher, name="to copy")
    url = reverse("calibration-judge-import")
    again = api.post(url, {"document": original.document}, format="json")
    assert again.status_code == 200 and again.json()["id"] == original.pk
    copy = api.post(url, {"document": json.dumps(original.document), "name": "copied"})
    assert copy.status_code == 201 and copy.json()["name"] == "copied"
    assert (
        CalibratedJudge.objects.get(name="copied").document["weights"]
        == original.document["weights"]
    )
    broken = api.post(url, {"document": {"schema": "nope"}}, format="json")
    assert broken.status_code == 400 and "schema" in broken.json()["detail"]


def test_route_via_api(api, rated, researcher):
    campaign, judge = rated
    stored = fit(campaign, judge=judge, user=researcher, folds=3)
    response = api.post(
        reverse("calibration-route"),
        {
            "source_campaign": campaign.pk,
            "mode": "uncertain",
            "judge": stored.pk,
            "count": 4,
            "name": "api routed",
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    routed = Campaign.objects.get(pk=body["campaign"])
    assert body["comparisons"] == 4 == routed.comparisons.count()
    assert body["candidates"] == 9  # a quarter of the 36 comparisons has no judgment
    missing = api.post(
        reverse("calibration-route"),
        {"source_campaign": campaign.pk, "mode": "uncertain", "name": "no judge"},
        format="json",
    )
    assert missing.status_code == 400


def test_annotators_and_strangers_are_refused(rated, annotator, researcher, django_user_model):
    stored = support.stored_judge(rated[0], researcher)
    client = APIClient()
    client.force_authenticate(annotator)
    assert client.get(reverse("calibration-judge-list")).status_code == 403
    assert client.get(reverse("calibration-judge-detail", args=[stored.pk])).status_code == 403
    from tests.conftest import make_user

    stranger = make_user(django_user_model, "researcher9", "researcher")
    client.force_authenticate(stranger)
    assert client.get(reverse("calibration-judge-detail", args=[stored.pk])).status_code == 404
    assert client.get(reverse("calibration-judge-list")).json() == []
