"""The Django admin (/django-admin/) lists every main model of the four apps; rows that services
keep consistent (votes, campaigns, releases, runs, scenarios) are read-only there."""

import pytest
from django.contrib import admin
from django.urls import reverse

from tests.annotation import factories

APPS = ("h2htalk", "annotation", "scenarios", "scoring")
MAIN_MODELS = {
    "h2htalk.Job",
    "annotation.Campaign",
    "annotation.Comparison",
    "annotation.Assignment",
    "annotation.Judgment",
    "annotation.StudyLink",
    "annotation.Participant",
    "scenarios.Persona",
    "scenarios.Scenario",
    "scenarios.CompanionModel",
    "scenarios.GenerationRun",
    "scenarios.Response",
    "scoring.JudgeConfig",
    "scoring.JudgeRun",
    "scoring.JudgeVerdict",
    "scoring.MetricScore",
    "scoring.CalibratedJudge",
    "scoring.Release",
    "scoring.ReleaseResult",
}
EDITABLE = {"scenarios.Persona", "scenarios.CompanionModel", "scoring.JudgeConfig"}


def ours():
    return [model for model in admin.site._registry if model._meta.app_label in APPS]


def url(model, view, *args):
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


def test_the_main_models_are_registered():
    assert {model._meta.label for model in ours()} >= MAIN_MODELS


@pytest.fixture
def staff_client(client, admin_user, researcher, annotator):
    factories.campaign(researcher, [annotator], n_scenarios=2)
    client.force_login(admin_user)
    return client


def test_every_list_and_row_page_renders(staff_client):
    for model in ours():
        response = staff_client.get(url(model, "changelist"))
        assert response.status_code == 200, model._meta.label
        row = model.objects.first()
        if row is not None:
            response = staff_client.get(url(model, "change", row.pk))
            assert response.status_code == 200, model._meta.label


def test_only_configuration_is_editable(staff_client):
    for model in ours():
        editable = model._meta.label in EDITABLE
        response = staff_client.get(url(model, "add"))
        assert response.status_code == (200 if editable else 403), model._meta.label


@pytest.mark.django_db
def test_a_campaign_cannot_be_changed_or_deleted_from_the_admin(staff_client):
    from annotation.models import Campaign

    campaign = Campaign.objects.get()
    response = staff_client.post(url(Campaign, "change", campaign.pk), {"state": "closed"})
    assert response.status_code == 403
    response = staff_client.post(url(Campaign, "delete", campaign.pk), {"post": "yes"})
    assert response.status_code == 403
    campaign.refresh_from_db()
    assert campaign.state == Campaign.State.OPEN


def test_a_judge_with_runs_keeps_its_fixed_fields_in_the_admin(staff_client):
    from scoring.models import JudgeConfig, JudgeRun

    judge = JudgeConfig.objects.create(name="fixed judge", mode="single", rubric="Score it.")
    JudgeRun.objects.create(name="a run", judge=judge, imported=True)
    form = {
        "name": "renamed judge",
        "mode": "pairwise",
        "base_url": "",
        "model_id": "",
        "api_key_env": "",
        "rubric": "Another rubric.",
        "temperature": "0.5",
        "samples": "1",
        "params": "{}",
        "max_concurrency": "4",
        "timeout_seconds": "60",
    }
    response = staff_client.post(url(JudgeConfig, "change", judge.pk), form)
    assert response.status_code == 302, response.context["adminform"].form.errors
    judge.refresh_from_db()
    assert judge.name == "renamed judge"  # not a fixed field
    assert (judge.mode, judge.rubric, judge.temperature) == ("single", "Score it.", 0.0)


def test_a_companion_is_checked_by_the_platform_form(staff_client):
    from scenarios.models import CompanionModel

    form = {
        "name": "no endpoint",
        "provider": CompanionModel.Provider.OTHER,
        "base_url": "",
        "model_id": "",
        "api_key_env": "",
        "params": "{}",
        "max_concurrency": "2",
        "timeout_seconds": "60",
        "notes": "",
    }
    response = staff_client.post(url(CompanionModel, "add"), form)
    assert response.status_code == 200  # the form again, with the error
    assert "needs a base URL and a model id" in response.content.decode()
    assert not CompanionModel.objects.filter(name="no endpoint").exists()
