"""The agreement report of a campaign: page, cache, background job, command, API, exports."""

import copy
import io
import random

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.urls import reverse

from annotation import queue
from annotation.models import Assignment, Judgment
from h2htalk.models import Job
from h2htalk.roles import RESEARCHER, ensure_role_groups
from scoring.agreement import services as agreement
from scoring.models import AgreementReport
from tests.annotation import factories
from tests.conftest import make_user


@pytest.fixture(scope="module")
def module_rated(module_db):
    """Made once per module (rating 144 items takes a while): the researcher and `rated`."""
    with module_db():
        ensure_role_groups()
        researcher = make_user(get_user_model(), "researcher1", RESEARCHER)
        return researcher, rate_campaign(researcher)


@pytest.fixture
def researcher(module_rated, db):
    """The researcher of tests/conftest.py, who owns `rated` here (made with it)."""
    return copy.deepcopy(module_rated[0])


@pytest.fixture
def rated(module_rated, db):
    """6 annotators rate a 3-model campaign; the model with the higher id is better, except
    that 'clicker' always picks the left side."""
    return copy.deepcopy(module_rated[1])


def rate_campaign(researcher):
    django_user_model = get_user_model()
    raters = factories.annotators(django_user_model, 5)
    clicker = make_user(django_user_model, "clicker", "annotator")
    raters.append(clicker)
    campaign = factories.campaign(researcher, raters, n_scenarios=12, overlap=4)
    rng = random.Random(5)
    active = list(raters)
    while active:  # round robin, so everyone rates a share
        for rater in list(active):
            item = queue.next_assignment(rater, campaign)
            if item is None:
                active.remove(rater)
                continue
            if rater == clicker:
                choice = -1
            else:
                truth = 1 if rng.random() < 0.85 else -1  # B (higher id) better, with noise
                choice = truth if item.left_is_a else -truth  # screen terms
            queue.submit(rater, item.key, queue.Submission(choice))
    for judgment in Judgment.objects.all():  # realistic reading times
        judgment.time_on_task_ms = rng.randint(20_000, 60_000)
        judgment.save(update_fields=["time_on_task_ms"])
    return campaign


def test_page_shows_alpha_annotators_with_flags_and_heatmap(researcher_client, rated):
    response = researcher_client.get(reverse("scoring:agreement", args=[rated.pk]))
    assert response.status_code == 200
    report = response.context["report"]
    overall = {row["label"]: row for row in report["overall"]}
    assert set(overall) >= {"preference5", "winner3"}
    winner = overall["winner3"]
    assert winner["level"] == "nominal" and winner["low"] <= winner["alpha"] <= winner["high"]
    assert {row["group"] for row in report["by_dimension"]} == {"dialogue"}
    flagged = {row["annotator"]: row["flag"] for row in report["annotators"] if row["flagged"]}
    assert "clicker" in flagged and "left" in flagged["clicker"]
    page = response.content.decode()
    assert "<svg" in page and "clicker" in page and "95% CI" in page


def test_report_is_cached_until_new_judgments_arrive(researcher_client, rated, researcher):
    url = reverse("scoring:agreement", args=[rated.pk])
    researcher_client.get(url)
    researcher_client.get(url)
    assert AgreementReport.objects.count() == 1
    latecomer = factories.annotators(get_user_model(), 1, "late")[0]
    rated.annotators.add(latecomer)
    rated.overlap = 5
    rated.save()
    item = queue.next_assignment(latecomer, rated)
    queue.submit(latecomer, item.key, queue.Submission(0))
    researcher_client.get(url)
    assert AgreementReport.objects.count() == 2
    assert AgreementReport.objects.first().fingerprint == agreement.fingerprint(rated)


def test_large_campaign_is_computed_by_a_job(
    researcher_client, rated, monkeypatch, django_capture_on_commit_callbacks
):
    monkeypatch.setattr(agreement, "INLINE_LIMIT", 10)
    url = reverse("scoring:agreement", args=[rated.pk])
    with django_capture_on_commit_callbacks(execute=True):
        first = researcher_client.get(url)
    assert first.context["job"] is not None and first.context["report"] is None
    job = Job.objects.get(kind="agreement")
    assert job.state == Job.State.COMPLETED and job.result["report"]
    assert researcher_client.get(url).context["report"]["judgments"] > 10


def test_other_researchers_cannot_see_it(client, rated, roles, django_user_model):
    stranger = make_user(django_user_model, "stranger", "researcher")
    client.force_login(stranger)
    assert client.get(reverse("scoring:agreement", args=[rated.pk])).status_code == 404
    assert client.get(reverse("campaign-agreement", args=[rated.pk])).status_code == 404


def test_exports_api_and_command_agree(researcher_client, rated):
    as_json = researcher_client.get(reverse("scoring:agreement_export", args=[rated.pk, "json"]))
    data = as_json.json()
    api = researcher_client.get(reverse("campaign-agreement", args=[rated.pk])).json()
    assert api["overall"] == data["overall"] and api["fingerprint"] == agreement.fingerprint(rated)
    csv_alpha = researcher_client.get(
        reverse("scoring:agreement_export", args=[rated.pk, "csv"])
    ).content.decode()
    assert csv_alpha.splitlines()[0].startswith("scope,group,label,level,alpha,low,high")
    csv_people = researcher_client.get(
        reverse("scoring:agreement_export", args=[rated.pk, "csv"]), {"table": "annotators"}
    ).content.decode()
    assert "clicker" in csv_people
    out = io.StringIO()
    call_command("agreement", rated.name, stdout=out)
    text = out.getvalue()
    winner = next(row for row in data["overall"] if row["label"] == "winner3")
    assert f"{winner['alpha']:.3f}" in text and "clicker" in text and "position" in text


def test_pair_keying_reaches_the_report(researcher_client, rated):
    """Flip every layout: screen votes change meaning, pair-keyed α must not change."""
    before = researcher_client.get(reverse("campaign-agreement", args=[rated.pk])).json()
    for assignment in Assignment.objects.select_related("judgment"):
        judgment = assignment.judgment
        assignment.left_is_a = not assignment.left_is_a
        assignment.save(update_fields=["left_is_a"])
        judgment.screen_preference = -judgment.screen_preference
        judgment.save(update_fields=["screen_preference"])
    AgreementReport.objects.all().delete()
    after = researcher_client.get(reverse("campaign-agreement", args=[rated.pk])).json()
    assert [r["alpha"] for r in after["overall"]] == [r["alpha"] for r in before["overall"]]
