"""A database that goes away mid-request answers 503 + Retry-After (JSON on the API, text on
htmx requests, the error page in the layout for pages), never a 500; bench/faults.py restarts a real PostgreSQL under load."""

import pytest
from django.db import OperationalError
from django.test import Client
from django.urls import reverse

from annotation import queue
from h2htalk.middleware import MESSAGE
from tests.annotation import factories
from tests.annotation.test_rating_api import next_url, post, token_client
from tests.test_error_pages import assert_in_layout


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
    url = reverse("annotation:rate", args=[campaign.pk])
    response = client.get(url)
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert response["Content-Type"].startswith("text/html")
    html = response.content.decode()
    assert_in_layout(html)
    assert MESSAGE in html and "nothing was changed" in html
    assert f'<a href="{url}">Try again</a>' in html


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


def test_other_errors_on_a_page_answer_the_500_page(campaign, rater, monkeypatch):
    def broken(*args, **kwargs):
        raise ValueError("a bug")

    monkeypatch.setattr(queue, "next_assignment", broken)
    client = Client(raise_request_exception=False)
    client.force_login(rater)
    response = client.get(reverse("annotation:rate", args=[campaign.pk]))
    assert response.status_code == 500
    html = response.content.decode()
    assert_in_layout(html)
    assert "The error was logged" in html
    assert "a bug" not in html
