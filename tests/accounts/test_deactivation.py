"""Deactivating an annotator keeps their judgments, and agreement and releases count them as
before; they can no longer log in, keep a session or use their API token."""

import pytest
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.models import Judgment
from h2htalk.accounts import users
from scoring.agreement import services as agreement
from tests.annotation import factories as campaign_factories
from tests.conftest import PASSWORD
from tests.scoring.test_release_pipeline import make_release, rated_world


@pytest.fixture
def world(researcher, django_user_model, monkeypatch):
    monkeypatch.setenv("H2HTALK_CODE_VERSION", "test")
    raters = campaign_factories.annotators(django_user_model, 3, prefix="deact")
    return rated_world(researcher, raters, n_scenarios=12, prefix="deact")


def test_judgments_stay_and_count_in_agreement_and_leaderboard(world, admin_user):
    leaving = world.raters[2]
    judgments = sorted(Judgment.objects.filter(annotator=leaving).values_list("pk", flat=True))
    assert judgments
    report_before = agreement.report_for(world.campaign).data
    key_before = agreement.fingerprint(world.campaign)
    release_before = make_release(world, name="Before", judge=False)

    users.set_active(leaving, False, by=admin_user)
    leaving.refresh_from_db()
    assert not leaving.is_active

    after = sorted(Judgment.objects.filter(annotator=leaving).values_list("pk", flat=True))
    assert after == judgments
    assert agreement.fingerprint(world.campaign) == key_before
    report_after = agreement.report_for(world.campaign).data
    assert report_after["judgments"] == report_before["judgments"]
    assert report_after["overall"] == report_before["overall"]
    names = {row["annotator"] for row in report_after["annotators"]}
    assert leaving.username in names
    release_after = make_release(world, name="After", judge=False)
    assert release_after.fingerprint == release_before.fingerprint
    assert leaving.pk in release_after.inputs["judgments"]["annotator"]
    data_after, data_before = release_after.result.data, release_before.result.data
    assert data_after["counts"] == data_before["counts"]
    assert data_after["human"]["overall"] == data_before["human"]["overall"]


def test_a_deactivated_user_cannot_log_in_keep_a_session_or_use_a_token(annotator, admin_user):
    token = Token.objects.create(user=annotator)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    session = Client()
    session.force_login(annotator)
    assert api.get("/api/rate/campaigns/").status_code == 200
    assert session.get("/rate/").status_code == 200

    users.set_active(annotator, False, by=admin_user)

    assert api.get("/api/rate/campaigns/").status_code == 401
    response = session.get("/rate/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")
    assert not Client().login(username=annotator.username, password=PASSWORD)
    response = Client().post("/login/", {"username": annotator.username, "password": PASSWORD})
    assert response.status_code == 200 and not response.wsgi_request.user.is_authenticated
    token_answer = APIClient().post(
        "/api/token/", {"username": annotator.username, "password": PASSWORD}
    )
    assert token_answer.status_code == 400

    users.set_active(annotator, True, by=admin_user)
    # the old session and token ended with the deactivation: they do not come back
    assert api.get("/api/rate/campaigns/").status_code == 401
    response = session.get("/rate/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")
    assert not Token.objects.filter(user=annotator).exists()
    # the control: logging in again and a new token work
    assert Client().login(username=annotator.username, password=PASSWORD)
    token_answer = APIClient().post(
        "/api/token/", {"username": annotator.username, "password": PASSWORD}
    )
    assert token_answer.status_code == 200 and token_answer.json()["token"] != token.key
