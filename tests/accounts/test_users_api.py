"""`/api/users/`: admins list, create (all or none, with one-time links) and deactivate users;
everyone else is refused and nothing changes."""

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from h2htalk.accounts import users
from tests.annotation import factories as campaign_factories

NEW = [
    {"username": "ann1", "email": "ann1@example.org", "role": "annotator", "campaigns": ["Pilot"]},
    {"username": "res1", "email": "res1@example.org", "role": "researcher"},
]


@pytest.fixture
def pilot(researcher, annotator):
    return campaign_factories.campaign(researcher, [annotator], n_scenarios=1, name="Pilot")


def client_for(user=None):
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


def count():
    return get_user_model().objects.count()


@pytest.mark.parametrize("who", ["anonymous", "annotator", "researcher", "nobody"])
def test_only_admins_may_list_create_or_deactivate(who, request, pilot, annotator):
    user = None if who == "anonymous" else request.getfixturevalue(who)
    client = client_for(user)
    expected = 401 if user is None else 403  # the token authenticator asks anonymous to log in
    before = count()
    assert client.get("/api/users/").status_code == expected
    assert client.get(f"/api/users/{annotator.pk}/").status_code == expected
    assert client.post("/api/users/", NEW, format="json").status_code == expected
    assert client.post(f"/api/users/{annotator.pk}/deactivate/").status_code == expected
    assert count() == before
    annotator.refresh_from_db()
    assert annotator.is_active


def test_admin_creates_users_and_gets_their_links(admin_user, pilot):
    response = client_for(admin_user).post("/api/users/", NEW, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert [(u["username"], u["status"], u["role"]) for u in body["users"]] == [
        ("ann1", "created", "annotator"),
        ("res1", "created", "researcher"),
    ]
    assert all(u["link"].startswith("http://testserver/password/set/") for u in body["users"])
    assert body["link_expires"]
    ann1 = get_user_model().objects.get(username="ann1")
    assert list(ann1.rating_campaigns.all()) == [pilot]
    assert users.role_names(ann1) == ["annotator"]

    again = client_for(admin_user).post("/api/users/", NEW, format="json").json()
    assert [u["status"] for u in again["users"]] == ["exists", "exists"]
    assert get_user_model().objects.filter(username__in=["ann1", "res1"]).count() == 2


def test_errors_name_the_item_and_field_and_nothing_is_created(admin_user, pilot):
    before = count()
    bad = [*NEW, {"username": "x y", "email": "x@example.org", "role": "annotator"}]
    bad.append({"username": "z", "email": "z@example.org", "role": "annotator", "campaigns": [99]})
    response = client_for(admin_user).post("/api/users/", bad, format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["detail"] == "2 error(s); nothing was created."
    assert [(e["where"], e["field"]) for e in body["errors"]] == [
        ("item 2", "username"),
        ("item 3", "campaigns"),
    ]
    assert count() == before


def test_a_malformed_body_is_a_400_in_the_same_shape(admin_user, roles):
    client = client_for(admin_user)
    response = client.post("/api/users/", {"username": "a"}, format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["where"] == "body"
    body = [NEW[1], {"username": "a", "campaigns": [["nested"]]}]
    response = client.post("/api/users/", body, format="json")
    assert response.status_code == 400
    assert response.json()["detail"] == "3 error(s); nothing was created."
    fields = [(e["where"], e["field"]) for e in response.json()["errors"]]
    assert fields == [("item 1", "email"), ("item 1", "role"), ("item 1", "campaigns")]
    assert not get_user_model().objects.filter(username="res1").exists()


@pytest.mark.parametrize("item", [None, 3, "x", []])
def test_an_item_that_is_not_an_object_is_a_400_naming_it(admin_user, roles, item):
    response = client_for(admin_user).post("/api/users/", [NEW[1], item], format="json")
    assert response.status_code == 400
    assert [(e["where"], e["field"]) for e in response.json()["errors"]] == [("item 1", "(item)")]


def test_deactivate_answers_with_a_format_suffix(admin_user, annotator):
    response = client_for(admin_user).post(f"/api/users/{annotator.pk}/deactivate.json")
    assert response.status_code == 200 and response.json()["is_active"] is False


def test_admin_lists_and_deactivates(admin_user, annotator, pilot):
    client = client_for(admin_user)
    rows = {row["username"]: row for row in client.get("/api/users/").json()["results"]}
    assert rows["annotator1"]["roles"] == ["annotator"]
    assert rows["annotator1"]["campaigns"] == ["Pilot"]
    assert rows["annotator1"]["is_active"] and rows["annotator1"]["has_password"]
    assert rows["admin1"]["roles"] == ["admin"]

    response = client.post(f"/api/users/{annotator.pk}/deactivate/")
    assert response.status_code == 200 and response.json()["is_active"] is False
    annotator.refresh_from_db()
    assert not annotator.is_active
    assert client.get(f"/api/users/{annotator.pk}/").json()["is_active"] is False


def test_an_admin_cannot_deactivate_themselves(admin_user):
    response = client_for(admin_user).post(f"/api/users/{admin_user.pk}/deactivate/")
    assert response.status_code == 400
    assert response.json()["detail"] == "You cannot deactivate yourself."
    admin_user.refresh_from_db()
    assert admin_user.is_active


def test_admin_with_a_token_works(admin_user, roles):
    token = Token.objects.create(user=admin_user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    assert client.get("/api/users/").status_code == 200


def test_the_endpoints_are_in_the_schema(admin_user):
    client = client_for(admin_user)
    schema = client.get("/api/schema/", {"format": "json"}).json()
    paths = schema["paths"]
    assert {"get", "post"} <= set(paths["/api/users/"])
    assert "post" in paths["/api/users/{id}/deactivate/"]
    request = paths["/api/users/"]["post"]["requestBody"]["content"]["application/json"]
    assert request["schema"]["type"] == "array"
    assert "400" in paths["/api/users/"]["post"]["responses"]
