"""User names that cannot be confused (issue 25, points 1 and 2): one normal form (NFKC,
case-folded) for every check and every login, look-alikes from other scripts refused, and the
database refusing a clash that two requests at the same moment could not see."""

import threading

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import IntegrityError, connection, transaction
from django.test import Client
from rest_framework.test import APIClient

from h2htalk.accounts import names
from h2htalk.models import UsernameKey
from tests.conftest import PASSWORD

HEADER = "username,email,role,campaigns\n"
FULL_WIDTH_ADMIN = "\uff41\uff44\uff4d\uff49\uff4e"  # ａｄｍｉｎ
CYRILLIC_ADMIN = "\u0430dmin"  # аdmin: Cyrillic а, then Latin
CYRILLIC_ANNA = "\u0430nna"


def test_fold_and_skeleton():
    assert names.fold(FULL_WIDTH_ADMIN) == "admin"
    assert names.fold("Anna") == names.fold("ANNA") == "anna"
    assert names.fold("STRASSE") == names.fold("straße") == "strasse"  # full case folding
    assert names.fold(CYRILLIC_ADMIN) != "admin"  # another letter ...
    assert names.skeleton(CYRILLIC_ADMIN) == "admin"  # ... that looks the same
    assert names.skeleton("\u0420\u0410\u0423\u0420\u0410L") == "paypal"  # Cyrillic РАУРА
    assert names.skeleton("\u03bf\u03c1\u03b1") == "opa"  # Greek omicron rho alpha
    # a Latin name is its own skeleton: no two Latin names are ever taken for each other
    for name in ("anna", "annal", "anna1", "rn", "m", "vv", "w", "ohm"):
        assert names.skeleton(name) == names.fold(name) == name


@pytest.fixture
def admin(roles, django_user_model):
    from tests.conftest import make_user

    return make_user(django_user_model, "admin", "admin")


@pytest.fixture
def admin_client(admin):
    client = Client()
    client.force_login(admin)
    return client


def _upload(client, text: str):
    data = {"file": SimpleUploadedFile("users.csv", text.encode(), content_type="text/csv")}
    return client.post("/manage/users/create/", data)


def test_look_alike_names_are_refused_naming_row_and_field(admin_client):
    before = get_user_model().objects.count()
    text = (
        HEADER
        + f"{FULL_WIDTH_ADMIN},a@example.org,annotator,\n"
        + f"{CYRILLIC_ADMIN},b@example.org,annotator,\n"
        + "ADMIN,c@example.org,annotator,\n"
        + "fresh,d@example.org,annotator,\n"
        + "FRESH,e@example.org,annotator,\n"
        + "fr\u0435sh,f@example.org,annotator,\n"  # Cyrillic е
        + "\uff46\uff52\uff45\uff53\uff48\uff58,g@example.org,annotator,\n"  # ｆｒｅｓｈｘ
    )
    response = _upload(admin_client, text)
    assert response.status_code == 400
    errors = {(e.where, e.field): e.message for e in response.context["errors"]}
    assert errors == {
        ("line 2", "username"): "is the existing user 'admin' once normalised (Unicode NFKC, case)",
        ("line 3", "username"): "looks like the existing user 'admin' (letters of another script)",
        ("line 4", "username"): "differs only in case from the existing user 'admin'",
        ("line 6", "username"): "repeats line 5",
        ("line 7", "username"): "looks like the name of line 5 (letters of another script)",
        ("line 8", "username"): (
            "has compatibility characters (full-width or similar): write 'freshx'"
        ),
    }
    assert get_user_model().objects.count() == before


def test_the_api_refuses_look_alikes_too(admin):
    client = APIClient()
    client.force_authenticate(admin)
    body = [
        {"username": CYRILLIC_ADMIN, "email": "x@example.org", "role": "annotator"},
        {"username": "Admin", "email": "y@example.org", "role": "annotator"},
    ]
    response = client.post("/api/users/", body, format="json")
    assert response.status_code == 400
    assert [(e["where"], e["field"]) for e in response.json()["errors"]] == [
        ("item 0", "username"),
        ("item 1", "username"),
    ]


def test_every_login_path_finds_the_account_by_its_folded_name(admin):
    for typed in ("admin", "ADMIN", FULL_WIDTH_ADMIN):
        assert Client().login(username=typed, password=PASSWORD), typed
        answer = APIClient().post("/api/token/", {"username": typed, "password": PASSWORD})
        assert answer.status_code == 200, typed
    for typed in (CYRILLIC_ADMIN, "admin "[:-1] + "\u200b"):  # a look-alike is another name
        assert not Client().login(username=typed, password=PASSWORD), typed
        answer = APIClient().post("/api/token/", {"username": typed, "password": PASSWORD})
        assert answer.status_code == 400, typed


def test_the_database_refuses_a_clash_whatever_the_code_checked(roles, django_user_model):
    django_user_model.objects.create_user("Anna")
    for clash in ("anna", "ANNA", "\uff21nna", "\u0410nna"):  # case, full-width, Cyrillic А
        with pytest.raises(IntegrityError), transaction.atomic():
            django_user_model.objects.create_user(clash)
    assert UsernameKey.objects.count() == django_user_model.objects.count() == 1


def test_renaming_a_user_moves_their_key(roles, django_user_model):
    user = django_user_model.objects.create_user("Anna")
    user.username = "Berta"
    user.save()
    assert UsernameKey.objects.get(user=user).folded == "berta"
    django_user_model.objects.create_user("anna")  # the old name is free again


def _post_in_parallel(admin, bodies) -> list:
    """POST each body to /api/users/ from its own thread (its own database connection) at
    once; the answers in order."""
    barrier, answers = threading.Barrier(len(bodies)), [None] * len(bodies)

    def send(index, body):
        client = APIClient()
        client.force_authenticate(admin)
        try:
            barrier.wait()
            answers[index] = client.post("/api/users/", body, format="json")
        finally:
            connection.close()

    threads = [threading.Thread(target=send, args=(i, b)) for i, b in enumerate(bodies)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def _users(prefix: str, n: int) -> list[dict]:
    return [
        {"username": f"{prefix}_{i}", "email": f"{i}@example.org", "role": "annotator"}
        for i in range(n)
    ]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("second", ["case", "Case"], ids=["differ-in-case", "same-names"])
def test_two_admins_creating_clashing_users_at_once(second, django_user_model):
    """Point 1's probe, smaller: two lists at once, which clash name for name. One is taken
    whole; the other is refused whole with a JSON 400 or 409 naming its items, never a 500,
    and the database holds no two names that fold alike."""
    if connection.vendor != "postgresql":
        pytest.skip("concurrent writers need PostgreSQL (SQLite serialises the whole database)")
    from django.contrib.auth.models import Group

    from h2htalk.roles import ensure_role_groups

    ensure_role_groups()
    admin = django_user_model.objects.create_user("boss", is_staff=True, is_superuser=True)
    admin.groups.add(Group.objects.get(name="admin"))
    n = 150
    answers = _post_in_parallel(admin, [_users("Case", n), _users(second, n)])
    codes = sorted(answer.status_code for answer in answers)
    assert codes in ([201, 400], [201, 409]), [a.content[:300] for a in answers]
    refused = next(a for a in answers if a.status_code != 201)
    assert refused["Content-Type"] == "application/json"
    wheres = {e["where"] for e in refused.json()["errors"]}
    assert wheres == {f"item {i}" for i in range(n)}
    folded = [names.fold(u) for u in django_user_model.objects.values_list("username", flat=True)]
    assert len(folded) == len(set(folded)) == n + 1


def test_the_django_admin_refuses_a_clashing_name_with_a_form_error(admin_client, admin):
    """Its user forms check names as the onboarding does: an error on the form, not a 500."""
    get_user_model().objects.create_user("Anna")
    password = "a long and unusual passphrase 7"
    for name, message in (
        ("ANNA", "A user with that username already exists."),  # Django's own check
        ("\u0410nna", "Looks like the user Anna"),  # Cyrillic А
    ):
        data = {"username": name, "password1": password, "password2": password}
        response = admin_client.post(
            "/django-admin/auth/user/add/", {**data, "usable_password": "true"}
        )
        assert response.status_code == 200, name
        assert message in response.content.decode(), name
    response = admin_client.post(
        f"/django-admin/auth/user/{admin.pk}/change/",
        {"username": "anna", "date_joined_0": "2026-01-01", "date_joined_1": "00:00"},
    )
    assert response.status_code == 200
    assert "The same name as the user Anna" in response.content.decode()
    assert get_user_model().objects.filter(username__iexact="anna").count() == 1


@pytest.mark.django_db(transaction=True)
def test_the_migration_keys_existing_users_and_keeps_clashing_ones(capsys):
    """Existing users (here with names that already clash, as issue 25's probes left them) get
    their keys; the oldest of a clashing group keeps the plain key, the others `<key>#<id>`."""
    from django.db.migrations.executor import MigrationExecutor

    def migrate(target):
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate([("h2htalk", target)])

    migrate("0004_job_state_completed")
    try:
        User = get_user_model()
        User.objects.bulk_create(  # no signal: the table of keys does not exist yet
            [User(username=name) for name in ("Anna", "anna", CYRILLIC_ANNA, "bob")]
        )
        migrate("0006_username_key")
        keys = dict(UsernameKey.objects.values_list("user__username", "folded"))
        ids = dict(User.objects.values_list("username", "pk"))
        assert keys == {
            "Anna": "anna",
            "anna": f"anna#{ids['anna']}",
            CYRILLIC_ANNA: f"{CYRILLIC_ANNA}#{ids[CYRILLIC_ANNA]}",
            "bob": "bob",
        }
        assert "2 user name(s) clash with an older one: 'anna', 'аnna'" in capsys.readouterr().out
        assert UsernameKey.objects.get(folded="anna").user.username == "Anna"
    finally:
        migrate("0006_username_key")
