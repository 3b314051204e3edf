"""A database that goes away mid-request answers 503 + Retry-After (JSON on the API, text on
htmx requests, the error page in the layout for pages), never a 500; bench/faults.py restarts a real PostgreSQL under load."""

import pytest
from django.db import OperationalError
from django.urls import reverse

from annotation import queue
from tests.annotation import factories
from tests.annotation.test_rating_api import next_url, post, token_client


@pytest.fixture
def rater(roles, django_user_model):
    return factories.annotators(django_user_model, 1)[0]


@pytest.fixture
def campaign(researcher, rater):
    return factories.campaign(researcher, [rater], n_scenarios=2)


@pytest.fixture
def database_away(monkeypatch):
    def lost(*args, **kwargs):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(queue, "next_assignment", lost)


def test_the_api_answers_503_with_retry_after(campaign, rater, database_away):
    response = post(token_client(rater), next_url(campaign.pk))
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert "not reachable" in response.json()["detail"]


def test_the_rating_page_answers_503_with_the_error_page(campaign, rater, client, database_away):
    client.force_login(rater)
    response = client.get(reverse("annotation:rate", args=[campaign.pk]))
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert response["Content-Type"].startswith("text/html")
    assert "nothing was changed" in response.content.decode()


def test_an_htmx_request_gets_503_in_plain_text(campaign, rater, client, database_away):
    client.force_login(rater)
    response = client.get(reverse("annotation:rate", args=[campaign.pk]), HTTP_HX_REQUEST="true")
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert response["Content-Type"].startswith("text/plain")
    assert "nothing was changed" in response.content.decode()


def test_other_errors_are_left_alone(campaign, rater, monkeypatch):
    def broken(*args, **kwargs):
        raise ValueError("a bug")

    monkeypatch.setattr(queue, "next_assignment", broken)
    with pytest.raises(ValueError):
        post(token_client(rater), next_url(campaign.pk))
