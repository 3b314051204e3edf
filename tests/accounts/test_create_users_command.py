"""`manage.py create_users`: the happy path, errors naming line and field, all or nothing,
re-running, the links file."""

import csv
import io
import stat
from urllib.parse import urlsplit

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db import DatabaseError

from h2htalk.accounts import onboarding, users
from tests.annotation import factories as campaign_factories

HEADER = "username,email,role,campaigns\n"


@pytest.fixture
def pilot(researcher, annotator):
    return campaign_factories.campaign(researcher, [annotator], n_scenarios=1, name="Pilot")


@pytest.fixture
def main_study(researcher):
    return campaign_factories.campaign(researcher, [], n_scenarios=1, name="Main study")


def write(tmp_path, text, name="users.csv"):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


def run(*args):
    out, err = io.StringIO(), io.StringIO()
    call_command("create_users", *map(str, args), stdout=out, stderr=err)
    return out.getvalue()


def usernames():
    return set(get_user_model().objects.values_list("username", flat=True))


def test_creates_users_with_roles_campaigns_and_links(tmp_path, pilot, main_study, admin_user):
    path = write(
        tmp_path,
        "\ufeff" + HEADER + "ann1,ann1@example.org,annotator,Pilot;Main study\n"
        f"ann2,ann2@example.org,Annotator, {main_study.pk} \n"
        "res1,res1@example.org,researcher,Pilot\n"
        "\n"
        "boss,boss@example.org,admin,\n",
    )
    out = run(path, "--base-url", "https://h2h.example.org/")
    User = get_user_model()
    ann1, ann2, res1, boss = (
        User.objects.get(username=n) for n in ("ann1", "ann2", "res1", "boss")
    )
    assert users.role_names(ann1) == ["annotator"] and ann1.email == "ann1@example.org"
    assert set(ann1.rating_campaigns.values_list("name", flat=True)) == {"Pilot", "Main study"}
    assert list(ann2.rating_campaigns.all()) == [main_study]  # by id
    assert list(res1.member_campaigns.all()) == [pilot] and not res1.rating_campaigns.exists()
    assert users.role_names(boss) == ["admin"] and boss.is_staff and not ann1.is_staff
    for user in (ann1, ann2, res1, boss):
        assert not user.has_usable_password()  # they set it from their link
    lines = dict(line.split("\t") for line in out.splitlines() if "\t" in line)
    assert set(lines) == {"ann1", "ann2", "res1", "boss"}
    for link in lines.values():
        parts = urlsplit(link)
        assert (parts.scheme, parts.netloc) == ("https", "h2h.example.org")
        assert parts.path.startswith("/password/set/")
    assert "4 created, 0 already existed; 4 link(s)" in out


def test_links_out_writes_a_private_csv(tmp_path, pilot):
    path = write(tmp_path, HEADER + "ann1,ann1@example.org,annotator,Pilot\n")
    links_path = tmp_path / "links.csv"
    links_path.write_text("old")
    links_path.chmod(0o644)
    out = run(path, "--links-out", links_path)
    assert "/password/set/" not in out and f"written to {links_path}" in out
    assert stat.S_IMODE(links_path.stat().st_mode) == 0o600
    rows = list(csv.DictReader(io.StringIO(links_path.read_text())))
    assert [(r["username"], r["status"]) for r in rows] == [("ann1", "created")]
    assert "/password/set/" in rows[0]["link"]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("bad name!,a@example.org,annotator,", "line 3, field username: Enter a valid username"),
        (",a@example.org,annotator,", "line 3, field username: required"),
        ("x" * 151 + ",a@example.org,annotator,", "field username: longer than 150"),
        ("carl,not-an-email,annotator,", "line 3, field email: Enter a valid email address."),
        ("carl,,annotator,", "line 3, field email: required"),
        ("carl,c@example.org,boss,", "line 3, field role: 'boss' is not a role"),
        ("carl,c@example.org,annotator,Nope", "line 3, field campaigns: no campaign with"),
        ("carl,c@example.org,admin,Pilot", "line 3, field campaigns: admins see every campaign"),
        ("ann1,c@example.org,annotator,", "line 3, field username: repeats line 2"),
        ("ANN1,c@example.org,annotator,", "line 3, field username: repeats line 2"),
        ("Annotator1,c@example.org,annotator,", "differs only in case from the existing user"),
        ("carl,c@example.org,annotator,Pilot,extra", "line 3, field (csv): more cells"),
    ],
)
def test_a_bad_row_names_line_and_field_and_nothing_is_written(tmp_path, pilot, row, message):
    before = usernames()
    path = write(tmp_path, HEADER + "ann1,ann1@example.org,annotator,Pilot\n" + row + "\n")
    with pytest.raises(CommandError, match="nothing written") as raised:
        run(path)
    assert message in str(raised.value)
    assert usernames() == before  # ann1 on line 2 was fine, and is not created either
    assert list(pilot.annotators.values_list("username", flat=True)) == ["annotator1"]


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ("username,role,campaigns", "line 1, field email: required column is missing"),
        ("username,email,role,team", "line 1, field team: unknown column"),
        ("username,email,role,role", "line 1, field role: column appears twice"),
    ],
)
def test_a_bad_header_is_named(tmp_path, roles, header, message):
    path = write(tmp_path, header + "\nann1,ann1@example.org,annotator\n")
    with pytest.raises(CommandError, match="nothing written") as raised:
        run(path)
    assert message in str(raised.value)
    assert "ann1" not in usernames()


def test_every_error_is_reported_at_once(tmp_path, roles):
    path = write(tmp_path, HEADER + "a b,x,boss,\nok,ok@example.org,annotator,Nope\n")
    with pytest.raises(CommandError) as raised:
        run(path)
    text = str(raised.value)
    assert "4 error(s)" in text
    for part in ("line 2, field username", "line 2, field email", "line 2, field role"):
        assert part in text
    assert "line 3, field campaigns" in text


def test_not_utf8_and_overlong_lines_are_named(tmp_path, roles, settings):
    path = tmp_path / "latin1.csv"
    path.write_bytes(HEADER.encode() + "jos\xe9,j@example.org,annotator,\n".encode("latin-1"))
    with pytest.raises(CommandError, match=r"line 2, field \(encoding\): not valid UTF-8"):
        run(path)
    settings.MAX_LINE_BYTES = 100
    path = write(tmp_path, HEADER + "a" * 200 + ",a@example.org,annotator,\n")
    with pytest.raises(CommandError, match=r"line 2, field \(line\): line 2 is longer"):
        run(path)
    assert usernames() == set()


def test_a_failure_while_writing_leaves_nothing_behind(tmp_path, pilot, monkeypatch):
    """Checks pass, then the database fails on the third user: the first two are rolled back."""
    before = usernames()
    path = write(
        tmp_path,
        HEADER + "".join(f"u{i},u{i}@example.org,annotator,Pilot\n" for i in range(5)),
    )
    create = onboarding._create
    calls = []

    def failing(row):
        calls.append(row.username)
        if len(calls) == 3:
            raise DatabaseError("disk full")
        return create(row)

    monkeypatch.setattr(onboarding, "_create", failing)
    with pytest.raises(DatabaseError):
        run(path)
    assert calls == ["u0", "u1", "u2"]
    assert usernames() == before
    assert list(pilot.annotators.values_list("username", flat=True)) == ["annotator1"]


def test_rerunning_the_same_file_creates_nobody_twice(tmp_path, pilot, main_study):
    path = write(
        tmp_path, HEADER + "ann1,ann1@example.org,annotator,Pilot\nres1,r@example.org,researcher,\n"
    )
    run(path)
    users_before = sorted(get_user_model().objects.values_list("pk", "username", "password"))
    out = run(path)
    assert "ann1: exists\n" in out and "res1: exists\n" in out
    assert "0 created, 2 already existed; 2 link(s)" in out  # no password set yet: new links
    users_after = sorted(get_user_model().objects.values_list("pk", "username", "password"))
    assert [row[:2] for row in users_after] == [row[:2] for row in users_before]
    # the new links cancelled the first ones: a new unusable password, still unusable
    changed = {row[1] for row in set(users_after) - set(users_before)}
    assert changed == {"ann1", "res1"}
    assert all(row[2].startswith("!") for row in users_after if row[1] in changed)
    assert pilot.annotators.filter(username="ann1").count() == 1


def test_rerun_adds_roles_and_campaigns_and_keeps_the_rest(tmp_path, pilot, main_study, annotator):
    """annotator1 exists with a password and rates in Pilot: the row adds a campaign and a
    role, keeps the email, password and Pilot, and needs no link."""
    password = annotator.password
    path = write(
        tmp_path,
        HEADER + "annotator1,new@example.org,annotator,Main study;Pilot\n"
        "annotator1x,x@example.org,annotator,\n",
    )
    out = run(path)
    assert "annotator1: exists (joined campaign 'Main study')" in out
    annotator.refresh_from_db()
    assert annotator.email == "" and annotator.password == password
    assert set(annotator.rating_campaigns.all()) == {pilot, main_study}
    assert "annotator1\t" not in out  # has a password: no link
    path = write(tmp_path, HEADER + "annotator1,a@example.org,researcher,Pilot\n", "again.csv")
    out = run(path)
    assert "annotator1: exists (role researcher added; joined campaign 'Pilot')" in out
    assert users.role_names(annotator) == ["researcher", "annotator"]
    assert list(annotator.member_campaigns.all()) == [pilot]


def test_a_deactivated_user_stays_deactivated_and_gets_no_link(tmp_path, roles, admin_user):
    path = write(tmp_path, HEADER + "ann1,ann1@example.org,annotator,\n")
    run(path)
    user = get_user_model().objects.get(username="ann1")
    users.set_active(user, False, by=admin_user)
    out = run(path)
    assert "ann1: exists (deactivated: no link)" in out and "ann1\t" not in out
    user.refresh_from_db()
    assert not user.is_active


def test_dry_run_checks_and_writes_nothing(tmp_path, pilot):
    path = write(tmp_path, HEADER + "ann1,ann1@example.org,annotator,Pilot\n")
    assert "1 row(s), no errors [dry run" in run(path, "--dry-run")
    assert "ann1" not in usernames()
    bad = write(tmp_path, HEADER + "ann1,ann1@example.org,annotator,Nope\n", "bad.csv")
    with pytest.raises(CommandError, match="line 2, field campaigns"):
        run(bad, "--dry-run")


def test_a_missing_file_is_a_command_error(tmp_path, roles):
    with pytest.raises(CommandError, match="No such file"):
        run(tmp_path / "nope.csv")


def test_many_rows_take_a_bounded_number_of_queries(
    tmp_path, pilot, main_study, django_assert_max_num_queries
):
    """Group and campaign memberships are added in bulk, not one query per user and campaign."""
    rows = [f"u{i},u{i}@example.org,annotator,Pilot;Main study" for i in range(200)]
    path = write(tmp_path, HEADER + "\n".join(rows) + "\n")
    with django_assert_max_num_queries(200 + 40):
        run(path)
    assert pilot.annotators.count() == 201 and main_study.annotators.count() == 200
