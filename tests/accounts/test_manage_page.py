"""The users page /manage/: the CSV upload (admins only, CSRF, links shown once), errors
naming line and field, deactivating and reactivating."""

import csv
import io
from urllib.parse import unquote

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from h2htalk.accounts import users
from tests.annotation import factories as campaign_factories

CSV = b"username,email,role,campaigns\nann1,ann1@example.org,annotator,Pilot\n"


def upload(content=CSV, name="users.csv"):
    return {"file": SimpleUploadedFile(name, content, content_type="text/csv")}


@pytest.fixture
def pilot(researcher, annotator):
    return campaign_factories.campaign(researcher, [annotator], n_scenarios=1, name="Pilot")


@pytest.fixture
def admin_client(client, admin_user):
    client.force_login(admin_user)
    return client


def test_the_page_offers_the_upload(admin_client, pilot):
    text = admin_client.get("/manage/").content.decode()
    assert 'action="/manage/users/create/"' in text and 'enctype="multipart/form-data"' in text
    assert "username,email,role,campaigns" in text


def test_upload_creates_users_and_shows_the_links_once(admin_client, pilot):
    response = admin_client.post("/manage/users/create/", upload())
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]  # the links are not kept by any cache
    ann1 = get_user_model().objects.get(username="ann1")
    assert list(ann1.rating_campaigns.all()) == [pilot]
    (outcome,) = response.context["outcomes"]
    assert outcome.link.startswith("http://testserver/password/set/")
    text = response.content.decode()
    assert f"ann1\t{outcome.link}" in text  # the copy-friendly list
    href = text.split('id="links-download" download="user-links.csv" href="')[1].split('"')[0]
    assert href.startswith("data:text/csv;charset=utf-8,")
    rows = list(csv.DictReader(io.StringIO(unquote(href.split(",", 1)[1]))))
    assert [(r["username"], r["status"], r["link"]) for r in rows] == [
        ("ann1", "created", outcome.link)
    ]
    # Shown once: the users page itself never shows a link.
    assert "/password/set/" not in admin_client.get("/manage/").content.decode()


def test_upload_errors_name_line_and_field_and_create_nobody(admin_client, pilot):
    content = CSV + b"bob,bob@example.org,annotator,Nope\n"
    response = admin_client.post("/manage/users/create/", upload(content))
    assert response.status_code == 400
    text = response.content.decode()
    assert "Nothing was created: fix 1 error" in text
    assert "<td>line 3</td><td><code>campaigns</code></td>" in text
    assert not get_user_model().objects.filter(username__in=["ann1", "bob"]).exists()


def test_upload_without_a_file_is_a_form_error(admin_client, roles):
    response = admin_client.post("/manage/users/create/", {})
    assert response.status_code == 400 and "This field is required" in response.content.decode()


def test_upload_over_the_size_limit_is_refused(admin_client, roles, settings):
    settings.MAX_UPLOAD_BYTES = 10
    response = admin_client.post("/manage/users/create/", upload())
    assert response.status_code == 400 and "the limit is 10" in response.content.decode()
    assert not get_user_model().objects.filter(username="ann1").exists()


@pytest.mark.parametrize("who", ["researcher", "annotator"])
def test_others_may_not_upload(who, request, client, pilot):
    client.force_login(request.getfixturevalue(who))
    assert client.post("/manage/users/create/", upload()).status_code == 403
    assert not get_user_model().objects.filter(username="ann1").exists()


def test_upload_needs_a_csrf_token(admin_user, pilot):
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    assert client.post("/manage/users/create/", upload()).status_code == 403
    assert not get_user_model().objects.filter(username="ann1").exists()
    client.get("/manage/")
    token = client.cookies["csrftoken"].value
    response = client.post("/manage/users/create/", {**upload(), "csrfmiddlewaretoken": token})
    assert response.status_code == 200
    assert get_user_model().objects.filter(username="ann1").exists()


def test_deactivate_and_reactivate_from_the_page(admin_client, annotator, admin_user):
    assert (
        admin_client.post(f"/manage/users/{annotator.pk}/active/", {"active": "0"}).status_code
        == 302
    )
    annotator.refresh_from_db()
    assert not annotator.is_active
    assert "deactivated" in admin_client.get("/manage/").content.decode()
    admin_client.post(f"/manage/users/{annotator.pk}/active/", {"active": "1"})
    annotator.refresh_from_db()
    assert annotator.is_active
    response = admin_client.post(
        f"/manage/users/{admin_user.pk}/active/", {"active": "0"}, follow=True
    )
    assert "You cannot deactivate yourself." in response.content.decode()
    admin_user.refresh_from_db()
    assert admin_user.is_active


def test_set_roles_still_sets_exactly_the_roles(admin_client, annotator):
    admin_client.post(f"/manage/users/{annotator.pk}/roles/", {"roles": ["admin", "researcher"]})
    annotator.refresh_from_db()
    assert users.role_names(annotator) == ["admin", "researcher"] and annotator.is_staff
    admin_client.post(f"/manage/users/{annotator.pk}/roles/", {"roles": ["annotator"]})
    annotator.refresh_from_db()
    assert users.role_names(annotator) == ["annotator"] and not annotator.is_staff


def test_the_page_lists_users_in_a_bounded_number_of_queries(
    admin_client, pilot, django_user_model, django_assert_max_num_queries
):
    campaign_factories.annotators(django_user_model, 30, prefix="many")
    with django_assert_max_num_queries(12):
        assert admin_client.get("/manage/").status_code == 200
