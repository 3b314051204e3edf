"""The 500s of issue 12.5, one probe each: every one is now a 400 with a message, or the
parameter is ignored.

- a JSON body of 100,000 nested `[` (RecursionError in the JSON parser) to every DRF endpoint,
  the anonymous token endpoint included;
- `²` (passes `str.isdigit()`, fails `int()`) and a 30-digit number wherever an id or size comes
  from a query string or form by hand (now h2htalk.params);
- a NUL in the response filters (PostgreSQL cannot compare text holding one);
- `?table=%00` on the agreement CSV, which went into Content-Disposition;
- an upload named 200 × `é` (400 bytes: longer than a file name may be).
"""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from h2htalk.params import int_list, int_param, parse_int
from scenarios.models import Scenario
from tests import test_permissions
from tests.test_permissions import ADMIN, EXPECTED, urls_for

world = test_permissions.world  # the fixture: one object of every kind
module_world = test_permissions.module_world  # (made once for the module)

DEEP = "[" * 100_000
SUPERSCRIPT = "²"
HUGE = "9" * 30


@pytest.fixture
def admin_client(world):
    client = Client(raise_request_exception=False)
    client.force_login(world.users[ADMIN])
    return client


def test_parse_int_takes_ascii_digits_only():
    assert SUPERSCRIPT.isdigit()  # why isdigit() was not enough
    for bad in (SUPERSCRIPT, "١٢", "-1", "+1", " 1", "1 ", "1.0", "", None, HUGE, "0x1", "1_000"):
        assert parse_int(bad) is None, bad
    assert parse_int("007") == 7 and parse_int("9" * 18) == 10**18 - 1
    from django.http import QueryDict

    query = QueryDict("a=1&a=²&a=3&b=x")
    assert int_list(query, "a") == [1, 3] and int_param(query, "b", 5) == 5


def test_deeply_nested_json_to_the_token_endpoint_is_a_400():
    response = Client(raise_request_exception=False).post(
        "/api/token/", DEEP, content_type="application/json"
    )
    assert response.status_code == 400, response.status_code
    assert "nested too deeply" in response.json()["detail"]


def test_deeply_nested_json_to_every_api_endpoint_is_not_a_500(world, admin_client):
    names = [n for n in sorted(EXPECTED) if any("/api/" in u for u in urls_for(n, world, ADMIN))]
    assert len(names) > 20
    parsed = 0
    for name in names:
        for url in urls_for(name, world, ADMIN):
            for method in ("post", "put", "patch"):
                response = getattr(admin_client, method)(url, DEEP, content_type="application/json")
                assert response.status_code < 500, (method, url, response.status_code)
                if response.status_code == 400:
                    parsed += 1
                    assert "nested too deeply" in response.content.decode(), url
    assert parsed >= 10  # the body really was read by many of them


@pytest.mark.parametrize("value", [SUPERSCRIPT, HUGE])
@pytest.mark.parametrize(
    "url",
    [
        "/scenarios/?size={}",
        "/companions/responses/?scenario={}",
        "/companions/responses/?run={}",
        "/companions/responses/?companion={}",
        "/companions/responses/export/?format=csv&scenario={}&run={}&companion={}",
        "/releases/new/?campaign={}",
        "/calibration/new/?campaign={}",
        "/calibration/route/?judge={}",
        "/judges/new/?copy={}",
        "/judges/runs/?judge={}",
        "/judges/runs/new/?judge={}",
        "/judges/runs/new/?campaign={}",
    ],
)
def test_a_number_that_is_not_one_is_ignored(admin_client, url, value):
    response = admin_client.get(url.format(value, value, value))
    assert response.status_code == 200, response.status_code


def test_bulk_action_with_a_bad_id_changes_nothing(admin_client, world):
    response = admin_client.post(
        reverse("scenarios:bulk"), {"action": "submit", "ids": [SUPERSCRIPT, HUGE]}, follow=True
    )
    assert response.status_code == 200
    assert "no scenario was chosen" in response.content.decode()
    assert Scenario.objects.get(pk=world.scenario.pk).state == world.scenario.state


@pytest.mark.parametrize("name", ["companions:run_resume", "judges:run_resume"])
def test_a_token_budget_that_is_not_a_number_is_refused_with_a_message(admin_client, world, name):
    url = urls_for(name, world, ADMIN)[0]
    response = admin_client.post(url, {"token_budget": SUPERSCRIPT}, follow=True)
    assert response.status_code == 200
    assert "The token budget must be a whole number." in response.content.decode()


@pytest.mark.parametrize("pair", [f"{SUPERSCRIPT},1", f"{HUGE},1", "1", "a,b"])
def test_score_api_bad_pair_is_a_400(admin_client, world, pair):
    url = reverse("calibration-judge-score", args=[world.calibrated_judge.pk])
    response = admin_client.get(url, {"pair": pair})
    assert response.status_code == 400, response.status_code
    assert "pair must be" in response.json()["detail"]


@pytest.mark.parametrize("param", ["status", "subtask"])
@pytest.mark.parametrize("page", ["companions:responses", "companions:response_export"])
def test_a_nul_in_a_response_filter_is_a_400(admin_client, param, page):
    response = admin_client.get(reverse(page), {param: "ok\x00", "format": "csv"})
    assert response.status_code == 400, response.status_code
    assert f"{param}: " in response.content.decode()
    # A real value still filters.
    good = {"status": "ok", "subtask": "dialogue_emotion"}[param]
    assert admin_client.get(reverse(page), {param: good}).status_code == 200


@pytest.mark.parametrize("table", ["\x00", "x\r\nSet-Cookie: a=b", "../../etc"])
def test_agreement_csv_table_is_an_allow_list(admin_client, world, table):
    url = reverse("scoring:agreement_export", args=[world.campaign.pk, "csv"])
    response = admin_client.get(url, {"table": table})
    assert response.status_code == 400
    assert "table must be one of alpha, annotators" in response.content.decode()
    assert not response.has_header("Content-Disposition")
    for table in ("alpha", "annotators"):
        response = admin_client.get(url, {"table": table})
        assert response["Content-Disposition"].endswith(f'-{table}.csv"')


@pytest.mark.parametrize(
    "url_name, fields",
    [
        ("scenarios:import", {"format": "auto", "initial_state": "draft"}),
        ("companions:response_import", {"run_name": "long name run"}),
        ("judges:import", {"judge": "judge", "run_name": ""}),
    ],
)
def test_an_upload_with_a_very_long_name_is_stored(admin_client, url_name, fields, settings):
    name = "é" * 200 + ".jsonl"  # 406 bytes in UTF-8; a file name may have 255
    upload = SimpleUploadedFile(name, b"\n")
    response = admin_client.post(reverse(url_name), {**fields, "file": upload})
    assert response.status_code == 302, response.status_code


# Found by the page fuzzer (test_page_fuzz.py): a 20-digit id in a multiple-choice field was
# looked up with `pk__in`, and SQLite raised OverflowError.
@pytest.mark.parametrize(
    "url_name, field",
    [
        ("campaigns:create", "companions"),
        ("campaigns:create", "runs"),
        ("campaigns:create", "annotators"),
        ("campaigns:create", "members"),
        ("companions:run_create", "companions"),
        ("judges:run_create", "companions"),
        ("judges:run_create", "response_runs"),
        ("releases:create", "companions"),
    ],
)
def test_an_id_past_the_database_integers_is_an_invalid_choice(admin_client, url_name, field):
    response = admin_client.post(reverse(url_name), {field: [HUGE, "1"]})
    assert response.status_code == 200, response.status_code
    assert f"“{HUGE}” is not a valid value." in str(response.context["form"].errors[field])


@pytest.mark.parametrize(
    "command, arguments",
    [
        ("agreement", [SUPERSCRIPT]),
        ("exclude_annotators", [SUPERSCRIPT, "someone", "--reason", "r"]),
        ("compute_metrics", ["--campaign", SUPERSCRIPT]),
        ("compute_metrics", ["--run", SUPERSCRIPT]),
        ("export_judge_weights", [SUPERSCRIPT]),
        ("benchmark_report", [SUPERSCRIPT]),
    ],
)
def test_commands_take_an_id_that_is_not_a_number_as_a_name(db, command, arguments):
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="²"):
        call_command(command, *arguments)
