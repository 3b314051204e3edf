"""Issue 25, points 3 to 8: a NUL in a users CSV, the cap on the upload, a new set-password
link cancelling the earlier ones (and an admin revoking them), `--links-out` refusing links,
and the set-password token kept out of the access log."""

import os
from urllib.parse import urlsplit

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.test import Client
from rest_framework.test import APIClient

from h2htalk.accounts import links, onboarding
from h2htalk.redact import MARK, RedactingFilter, RedactSecrets, redact
from tests.annotation import factories as campaign_factories

HEADER = "username,email,role,campaigns\n"
NEW_PASSWORD = "a long and unusual passphrase 7"


@pytest.fixture
def admin_client(admin_user):
    client = Client()
    client.force_login(admin_user)
    return client


@pytest.fixture
def pilot(researcher, annotator):
    return campaign_factories.campaign(researcher, [annotator], n_scenarios=1, name="Pilot")


def _upload(client, content: bytes):
    data = {"file": SimpleUploadedFile("users.csv", content, content_type="text/csv")}
    return client.post("/manage/users/create/", data)


# ---------------------------------------------------------------- 3. a NUL in the CSV


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ("ann\x00x,a@example.org,annotator,Pilot", "username"),
        ("annx,a@example.org,annotator,Pi\x00lot", "campaigns"),
        ("annx,a\x00@example.org,annotator,", "email"),
        ("annx,a@example.org,anno\x00tator,", "role"),
    ],
)
def test_a_nul_is_an_error_naming_line_and_field(admin_client, pilot, row, field, tmp_path):
    """On PostgreSQL the NUL reached a query and answered 500 (DataError)."""
    before = get_user_model().objects.count()
    content = (HEADER + "ok1,ok@example.org,annotator,Pilot\n" + row + "\n").encode()
    response = _upload(admin_client, content)
    assert response.status_code == 400
    errors = [(e.where, e.field, e.message) for e in response.context["errors"]]
    assert errors == [("line 3", field, "contains a NUL character (\\0)")]
    path = tmp_path / "users.csv"
    path.write_bytes(content)
    with pytest.raises(CommandError, match=rf"line 3, field {field}: contains a NUL"):
        call_command("create_users", str(path))
    assert get_user_model().objects.count() == before


# ---------------------------------------------------------------- 5. the cap on the upload


def test_the_upload_is_capped_like_the_api_naming_the_cap(admin_client, roles):
    limit = onboarding.MAX_USERS
    lines = [f"u{i},u{i}@example.org,annotator," for i in range(limit + 1)]
    response = _upload(admin_client, (HEADER + "\n".join(lines) + "\n").encode())
    assert response.status_code == 400
    (error,) = response.context["errors"]
    assert (error.where, error.field) == (f"line {limit + 2}", "(rows)")
    assert "at most 10,000 per file or request (MAX_USERS)" in error.message
    assert get_user_model().objects.count() == 1  # the admin


# ---------------------------------------------------------------- 4. a new link cancels


def _works(link: str) -> bool:
    """Whether the link opens the set-password form (without using it)."""
    client = Client()
    opened = client.get(urlsplit(link).path)
    if opened.status_code != 302:
        return False
    return bool(client.get(opened["Location"]).context["validlink"])


def test_a_new_link_makes_every_earlier_one_unusable(roles):
    row = onboarding.make_row("item 0", "ann1", "ann1@example.org", "annotator", [])
    (first,) = onboarding.create_users([row], "http://testserver/")
    (second,) = onboarding.create_users([row], "http://testserver/")  # re-issued
    (third,) = onboarding.create_users([row], "http://testserver/")
    assert [_works(o.link) for o in (first, second, third)] == [False, False, True]
    # an opened but unused earlier link (its token already moved into the session) too
    client = Client()
    opened = client.get(urlsplit(third.link).path)
    (fourth,) = onboarding.create_users([row], "http://testserver/")
    page = client.get(opened["Location"])
    assert not page.context["validlink"]
    assert _works(fourth.link)


def test_an_admin_revokes_a_user_s_open_links(admin_user, roles):
    row = onboarding.make_row("item 0", "ann1", "ann1@example.org", "annotator", [])
    (outcome,) = onboarding.create_users([row], "http://testserver/")
    user = outcome.user
    page = Client()
    page.force_login(admin_user)
    assert f'action="/manage/users/{user.pk}/revoke-links/"' in page.get("/manage/").text
    response = page.post(f"/manage/users/{user.pk}/revoke-links/")
    assert response.status_code == 302
    assert not _works(outcome.link)

    link = links.password_link(user, "http://testserver/")
    api = APIClient()
    api.force_authenticate(admin_user)
    answer = api.post(f"/api/users/{user.pk}/revoke-links/")
    assert answer.status_code == 200 and answer.json() == {"revoked": True}
    assert not _works(link)
    assert not get_user_model().objects.get(pk=user.pk).has_usable_password()  # still none


# ---------------------------------------------------------------- 6. --links-out


def test_links_out_refuses_a_symlink_and_never_writes_through_a_link(tmp_path, roles):
    users_csv = tmp_path / "users.csv"
    users_csv.write_text(HEADER + "ann1,ann1@example.org,annotator,\n")
    target = tmp_path / "precious"
    target.write_text("keep me")
    symlink = tmp_path / "links.csv"
    symlink.symlink_to(target)
    with pytest.raises(CommandError, match="symbolic link"):
        call_command("create_users", str(users_csv), "--links-out", str(symlink))
    assert target.read_text() == "keep me" and symlink.is_symlink()
    assert not get_user_model().objects.filter(username="ann1").exists()  # refused first

    hard = tmp_path / "hard.csv"
    os.link(target, hard)  # a hard link: the new file replaces the name, not the content
    call_command("create_users", str(users_csv), "--links-out", str(hard))
    assert target.read_text() == "keep me"
    assert "/password/set/" in hard.read_text()
    assert oct(hard.stat().st_mode & 0o777) == "0o600"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".links-")] == []


# ---------------------------------------------------------------- 8. the token and the logs


def test_the_token_leaves_the_environ_the_server_logs_from(roles):
    row = onboarding.make_row("item 0", "ann1", "ann1@example.org", "annotator", [])
    (outcome,) = onboarding.create_users([row], "http://testserver/")
    path = urlsplit(outcome.link).path
    uid, token = path.split("/")[3:5]
    seen = {}

    def application(environ, start_response):
        seen["path"] = environ["PATH_INFO"]  # the application sees the real path
        start_response("302 Found", [])
        return [b""]

    environ = {"PATH_INFO": path, "RAW_URI": path + "?a=1", "HTTP_REFERER": "http://x" + path}
    RedactSecrets(application)(environ, lambda *args: None)
    assert seen["path"] == path
    for key in ("PATH_INFO", "RAW_URI", "HTTP_REFERER"):
        assert token not in environ[key] and f"/password/set/{uid}/{MARK}" in environ[key]
    assert redact(f"/password/set/{uid}/set-password/") == f"/password/set/{uid}/set-password/"
    record = __import__("logging").LogRecord("x", 30, "", 0, "Not Found: %s", (path,), None)
    assert RedactingFilter().filter(record) and token not in record.getMessage()


# ---------------------------------------------------------------- 7. deactivation ends sessions


def test_deactivating_by_a_full_save_ends_sessions_and_tokens_too(annotator):
    """The Django admin's user form saves the whole user: that deactivation ends them too."""
    from rest_framework.authtoken.models import Token

    Token.objects.create(user=annotator)
    session = Client()
    session.force_login(annotator)
    other = Client()
    other.force_login(annotator)
    assert session.get("/rate/").status_code == 200
    annotator.is_active = False
    annotator.save()
    annotator.is_active = True
    annotator.save()
    assert not Token.objects.filter(user=annotator).exists()
    for client in (session, other):
        response = client.get("/rate/")
        assert response.status_code == 302 and response["Location"].startswith("/login/")
