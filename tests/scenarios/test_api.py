"""The REST API for scenarios and personas: auth, roles, filters, writes, transitions, schema."""

from html.parser import HTMLParser

import pytest
import yaml
from django.contrib.staticfiles import finders
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from drf_spectacular.drainage import GENERATOR_STATS
from drf_spectacular.generators import SchemaGenerator
from rest_framework.authtoken.models import Token

from scenarios.models import Persona, Revision, Scenario, Tag
from tests.conftest import PASSWORD
from tests.scenarios import factories

SCENARIOS = "/api/scenarios/"
PERSONAS = "/api/personas/"


def detail(pk):
    return f"{SCENARIOS}{pk}/"


def transition(pk):
    return f"{SCENARIOS}{pk}/transition/"


def ids(response):
    assert response.status_code == 200, response.content
    return sorted(item["id"] for item in response.json()["results"])


@pytest.fixture
def api(researcher_client):
    """A researcher's session client; JSON bodies by default."""
    return researcher_client


def post_json(client, url, data, **extra):
    return client.post(url, data, content_type="application/json", **extra)


def patch_json(client, url, data, **extra):
    return client.patch(url, data, content_type="application/json", **extra)


# ---------------------------------------------------------------- authentication and roles


def test_token_auth(researcher, annotator):
    anonymous = Client()
    response = anonymous.post("/api/token/", {"username": "researcher1", "password": PASSWORD})
    assert response.status_code == 200
    key = response.json()["token"]
    assert Token.objects.get(user=researcher).key == key

    wrong_password = anonymous.post("/api/token/", {"username": "researcher1", "password": "x"})
    assert wrong_password.status_code == 400 and "token" not in wrong_password.json()

    with_token = Client(headers={"Authorization": f"Token {key}"})
    assert with_token.get(SCENARIOS).status_code == 200
    # Token requests need no CSRF token, unlike session ones.
    scenario = factories.scenario(researcher)
    strict = Client(enforce_csrf_checks=True, headers={"Authorization": f"Token {key}"})
    assert strict.post(transition(scenario.pk), {"action": "submit"}).status_code == 200

    wrong = Client(headers={"Authorization": "Token " + "0" * 40})
    response = wrong.get(SCENARIOS)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    assert anonymous.get(SCENARIOS).status_code == 401

    # An annotator can get a token, but it opens nothing.
    annotator_key = anonymous.post(
        "/api/token/", {"username": "annotator1", "password": PASSWORD}
    ).json()["token"]
    as_annotator = Client(headers={"Authorization": f"Token {annotator_key}"})
    assert as_annotator.get(SCENARIOS).status_code == 403


def test_session_auth(api, researcher):
    factories.scenario(researcher)
    response = api.get(SCENARIOS)
    assert response.status_code == 200 and response.json()["count"] == 1
    assert Client().get(SCENARIOS).status_code == 401


def test_annotators_get_403_everywhere(annotator_client, researcher):
    scenario = factories.scenario(researcher)
    persona = factories.persona("Lin")
    before = (
        Scenario.objects.count(),
        Persona.objects.count(),
        Revision.objects.count(),
        Scenario.objects.get().state,
    )
    requests = [
        ("get", SCENARIOS, None),
        ("post", SCENARIOS, {"subtask": "dialogue_base", "user_message": "hi"}),
        ("get", detail(scenario.pk), None),
        ("put", detail(scenario.pk), {"subtask": "dialogue_base", "user_message": "hi"}),
        ("patch", detail(scenario.pk), {"user_message": "changed"}),
        ("post", transition(scenario.pk), {"action": "submit"}),
        ("get", PERSONAS, None),
        ("post", PERSONAS, {"name": "Mo"}),
        ("get", f"{PERSONAS}{persona.pk}/", None),
        ("patch", f"{PERSONAS}{persona.pk}/", {"summary": "changed"}),
    ]
    for method, url, data in requests:
        kwargs = {"content_type": "application/json"} if data is not None else {}
        response = getattr(annotator_client, method)(url, data, **kwargs)
        assert response.status_code == 403, (method, url, response.status_code)
    after = (
        Scenario.objects.count(),
        Persona.objects.count(),
        Revision.objects.count(),
        Scenario.objects.get().state,
    )
    assert after == before
    assert Scenario.objects.get().user_message == scenario.user_message


# ---------------------------------------------------------------- list, filters, pagination


@pytest.fixture
def bank(researcher):
    lin = factories.persona("Lin")
    made = [
        factories.scenario(researcher, tags=["work"], persona=lin),
        factories.scenario(
            researcher,
            subtask="itinerary_basic",
            language="zh",
            user_message="明天去杭州看西湖",
            tags=["travel"],
        ),
        factories.scenario(
            researcher,
            subtask="recollection_refine",
            user_message="I keep forgetting my sister's birthday",
            tags=["travel", "family"],
        ),
    ]
    return made


def test_list_filters_and_search(api, researcher, bank):
    from scenarios import services

    services.transition(bank[2], researcher, "submit")

    def query(params):
        return ids(api.get(SCENARIOS, params))

    every = sorted(s.pk for s in bank)
    assert query({}) == every
    assert query({"subtask": "itinerary_basic"}) == [bank[1].pk]
    assert query({"subtask": ["itinerary_basic", "recollection_refine"]}) == [
        bank[1].pk,
        bank[2].pk,
    ]
    assert query({"state": "in_review"}) == [bank[2].pk]
    assert query({"state": "draft"}) == [bank[0].pk, bank[1].pk]
    assert query({"language": "zh"}) == [bank[1].pk]
    assert query({"language": "en"}) == [bank[0].pk, bank[2].pk]
    assert query({"tags": "travel"}) == [bank[1].pk, bank[2].pk]
    assert query({"tags": "family"}) == [bank[2].pk]
    assert query({"q": "杭州"}) == [bank[1].pk]
    assert query({"q": "西湖 杭州"}) == [bank[1].pk]
    assert query({"q": "SISTER birthday"}) == [bank[2].pk]
    assert query({"q": "sister 杭州"}) == []
    assert query({"q": "lin"}) == [bank[0].pk]  # the persona's name is searched too
    assert query({"tags": "travel", "language": "en"}) == [bank[2].pk]

    # A bad filter value is a 400 naming the parameter, not an empty list.
    response = api.get(SCENARIOS, {"subtask": "nonsense"})
    assert response.status_code == 400 and "subtask" in response.json()
    response = api.get(SCENARIOS, {"tags": "no-such-tag"})
    assert response.status_code == 400 and "tags" in response.json()


def test_list_representation(api, researcher, bank):
    item = api.get(detail(bank[2].pk)).json()
    assert item["tags"] == ["family", "travel"]
    assert item["subtask"] == "recollection_refine" and item["dimension"] == "recollection"
    assert item["state"] == "draft" and item["reviewer"] is None
    assert api.get(detail(bank[0].pk)).json()["persona"] == "Lin"


def test_pagination(api, researcher):
    made = [factories.scenario(researcher) for _ in range(53)]
    first = api.get(SCENARIOS).json()
    assert first["count"] == 53 and len(first["results"]) == 50
    assert first["previous"] is None and "page=2" in first["next"]
    assert [r["id"] for r in first["results"]] == [s.pk for s in made[:50]]
    second = api.get(first["next"]).json()
    assert [r["id"] for r in second["results"]] == [s.pk for s in made[50:]]
    assert second["next"] is None and second["previous"] is not None


def test_list_query_count_does_not_grow_with_the_page(
    api, researcher, django_assert_max_num_queries
):
    personas = [factories.persona(f"P{i}") for i in range(3)]
    for i in range(2):
        factories.scenario(researcher, tags=[f"t{i}", "x"], persona=personas[i])
    with CaptureQueriesContext(connection) as small:
        assert len(api.get(SCENARIOS).json()["results"]) == 2

    for i in range(58):
        factories.scenario(researcher, tags=[f"t{i % 4}", "x"], persona=personas[i % 3])
    # Session, user, roles, tag lookup, count, page, tags prefetch: 7 whatever the page size.
    with django_assert_max_num_queries(7), CaptureQueriesContext(connection) as full:
        response = api.get(SCENARIOS, {"tags": "x"})
    results = response.json()["results"]
    assert len(results) == 50 and all(r["persona"] and r["tags"] for r in results)
    assert len(full) <= len(small) + 1  # the tag filter may add a lookup, never one per row


# ---------------------------------------------------------------- create and update


def test_create_with_persona_by_name_and_tags(api, researcher):
    factories.persona("Lin")
    data = {
        "subtask": "dialogue_schedule",
        "external_id": "s1",
        "persona": "Lin",
        "language": "en",
        "history": [{"role": "user", "content": "Morning!"}],
        "schedule": [{"time": "09:30", "activity": "dentist"}],
        "user_message": "I'm nervous about today",
        "tags": ["anxiety", "health", "anxiety"],
    }
    response = post_json(api, SCENARIOS, data)
    assert response.status_code == 201, response.content
    body = response.json()
    scenario = Scenario.objects.get(pk=body["id"])
    assert scenario.persona.name == "Lin" and scenario.created_by == researcher
    assert scenario.dimension == "dialogue" and scenario.state == "draft"
    assert sorted(t.name for t in scenario.tags.all()) == ["anxiety", "health"]
    assert body["tags"] == ["anxiety", "health"] and body["persona"] == "Lin"
    revision = scenario.revisions.get()
    assert revision.action == "created" and revision.author == researcher


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        (
            "history",
            [{"role": "user", "content": "a"}, {"role": "robot", "content": "b"}],
            "history[1].role: 'robot' is not one of",
        ),
        ("history", [{"role": "user", "content": ""}], "history[0].content: is required"),
        ("history", "not a list", "history: must be a list"),
        ("memory", [{"content": "likes tea", "importance": 7}], "memory[0].importance: 7 is not"),
        ("schedule", [{"time": "25:00", "activity": "run"}], "schedule[0].time: '25:00'"),
        ("tags", ["ok", "x" * 61], "{'1': ['Ensure this field has no more than 60 characters.']}"),
        ("subtask", "dialogue_nonsense", "not a valid choice"),
        ("persona", "Nobody", "name=Nobody does not exist"),
        ("user_message", "x" * 20_001, "user_message: is 20,001 characters"),
    ],
)
def test_create_rejects_bad_fields_naming_them(api, field, value, message):
    data = {"subtask": "dialogue_base", "user_message": "hi", "tags": ["t"], field: value}
    response = post_json(api, SCENARIOS, data)
    assert response.status_code == 400
    errors = response.json()
    assert list(errors) == [field]
    assert message in str(errors[field])
    assert Scenario.objects.count() == Revision.objects.count() == Tag.objects.count() == 0


def test_patch_records_revision_with_changed_fields_and_author(api, researcher, admin_user):
    scenario = factories.scenario(admin_user, tags=["old"], user_message="old words")
    factories.persona("Mo")
    response = patch_json(
        api,
        detail(scenario.pk),
        {"user_message": "new words", "tags": ["new", "old"], "persona": "Mo"},
    )
    assert response.status_code == 200, response.content
    assert response.json()["tags"] == ["new", "old"]
    revision = scenario.revisions.first()
    assert revision.number == 2 and revision.action == "edited"
    assert revision.author == researcher
    assert revision.changes == {
        "user_message": ["old words", "new words"],
        "tags": [["old"], ["new", "old"]],
        "persona": ["", "Mo"],
    }
    scenario.refresh_from_db()
    assert scenario.user_message == "new words" and scenario.persona.name == "Mo"
    assert "new words" in scenario.search_text

    # Nothing changed: no new revision. State is read-only (transitions change it).
    response = patch_json(api, detail(scenario.pk), {"user_message": "new words"})
    assert response.status_code == 200 and scenario.revisions.count() == 2
    response = patch_json(api, detail(scenario.pk), {"state": "approved"})
    assert response.status_code == 200 and response.json()["state"] == "draft"
    assert Scenario.objects.get(pk=scenario.pk).state == "draft"

    response = patch_json(api, detail(scenario.pk), {"history": [{"role": "bot"}]})
    assert response.status_code == 400 and "history[0].role" in response.json()["history"][0]
    assert scenario.revisions.count() == 2


def test_external_id_is_unique_per_subtask(api, researcher):
    taken = factories.scenario(researcher, subtask="dialogue_base", external_id="q001")
    data = {"subtask": "dialogue_base", "external_id": "q001", "user_message": "again"}
    response = post_json(api, SCENARIOS, data)
    assert response.status_code == 400
    assert response.json() == {"external_id": ["dialogue_base/q001 already exists"]}
    assert Scenario.objects.count() == 1

    # The same id in another subtask is fine; so is saving a scenario with its own id.
    other = post_json(api, SCENARIOS, {**data, "subtask": "dialogue_emotion"})
    assert other.status_code == 201
    assert patch_json(api, detail(taken.pk), {"external_id": "q001"}).status_code == 200

    # Moving the other one into the taken subtask, or renaming onto the taken id, clashes.
    other_id = other.json()["id"]
    response = patch_json(api, detail(other_id), {"subtask": "dialogue_base"})
    assert response.status_code == 400 and "already exists" in response.json()["external_id"][0]
    second = factories.scenario(researcher, subtask="dialogue_base", external_id="q002")
    response = patch_json(api, detail(second.pk), {"external_id": "q001"})
    assert response.status_code == 400
    assert Scenario.objects.get(pk=second.pk).external_id == "q002"
    assert Scenario.objects.get(pk=other_id).subtask == "dialogue_emotion"

    # Empty ids never clash.
    for _ in range(2):
        response = post_json(api, SCENARIOS, {"subtask": "dialogue_base", "user_message": "x"})
        assert response.status_code == 201


# ---------------------------------------------------------------- review transitions


def test_transition_submit_then_approve(api, researcher):
    scenario = factories.scenario(researcher)
    response = post_json(api, transition(scenario.pk), {"action": "submit"})
    assert response.status_code == 200 and response.json()["state"] == "in_review"
    response = post_json(api, transition(scenario.pk), {"action": "approve", "comment": "Good."})
    assert response.status_code == 200
    assert response.json()["state"] == "approved" and response.json()["reviewer"] == "researcher1"
    scenario.refresh_from_db()
    assert scenario.state == "approved" and scenario.reviewer == researcher
    assert scenario.comments.get().body == "Good."
    assert [r.action for r in scenario.revisions.order_by("number")] == [
        "created",
        "state",
        "state",
    ]


def test_transition_errors(api, researcher):
    scenario = factories.scenario(researcher)
    response = post_json(api, transition(scenario.pk), {"action": "approve"})
    assert response.status_code == 409
    assert response.json() == {"detail": "cannot approve a scenario that is draft"}

    post_json(api, transition(scenario.pk), {"action": "submit"})
    response = post_json(api, transition(scenario.pk), {"action": "request_changes"})
    assert response.status_code == 409 and "comment is required" in response.json()["detail"]
    response = post_json(
        api, transition(scenario.pk), {"action": "request_changes", "comment": "   "}
    )
    assert response.status_code == 409
    scenario.refresh_from_db()
    assert scenario.state == "in_review" and scenario.comments.count() == 0

    response = post_json(
        api, transition(scenario.pk), {"action": "request_changes", "comment": "Warmer."}
    )
    assert response.status_code == 200 and response.json()["state"] == "draft"

    response = post_json(api, transition(scenario.pk), {"action": "publish"})
    assert response.status_code == 400 and "action" in response.json()
    assert post_json(api, transition(scenario.pk + 1000), {"action": "submit"}).status_code == 404
    assert Scenario.objects.get(pk=scenario.pk).state == "draft"


# ---------------------------------------------------------------- personas


def test_personas_list_create_update(api):
    factories.persona("Lin", language="zh")
    factories.persona("Ada", language="en", sap_enabled=False)
    listing = api.get(PERSONAS).json()
    assert listing["count"] == 2 and [p["name"] for p in listing["results"]] == ["Ada", "Lin"]
    assert [p["name"] for p in api.get(PERSONAS, {"language": "zh"}).json()["results"]] == ["Lin"]
    assert [p["name"] for p in api.get(PERSONAS, {"sap_enabled": "false"}).json()["results"]] == [
        "Ada"
    ]

    response = post_json(api, PERSONAS, {"name": "Mo", "summary": "A cheerful cousin"})
    assert response.status_code == 201, response.content
    mo = Persona.objects.get(name="Mo")
    assert mo.sap_enabled and mo.sap_block.startswith("Secure Attachment Persona")
    assert response.json()["id"] == mo.pk

    duplicate = post_json(api, PERSONAS, {"name": "Mo"})
    assert duplicate.status_code == 400 and "name" in duplicate.json()
    assert Persona.objects.count() == 3

    response = patch_json(api, f"{PERSONAS}{mo.pk}/", {"sap_enabled": False, "language": "en"})
    assert response.status_code == 200 and response.json()["sap_enabled"] is False
    mo.refresh_from_db()
    assert not mo.sap_enabled and mo.language == "en"
    response = patch_json(api, f"{PERSONAS}{mo.pk}/", {"language": "fr"})
    assert response.status_code == 400 and "language" in response.json()
    assert api.get(f"{PERSONAS}{mo.pk}/").json()["name"] == "Mo"


# ---------------------------------------------------------------- schema and docs


def test_schema_is_openapi_3_with_the_scenario_paths(api):
    response = api.get(reverse("api_schema"))
    assert response.status_code == 200
    schema = yaml.safe_load(response.content)
    assert schema["openapi"].startswith("3.")
    paths = schema["paths"]
    for path in (
        "/api/scenarios/",
        "/api/scenarios/{id}/",
        "/api/scenarios/{id}/transition/",
        "/api/personas/",
        "/api/personas/{id}/",
    ):
        assert path in paths, path
    assert {"get", "post"} <= set(paths["/api/scenarios/"])
    assert {"get", "put", "patch"} <= set(paths["/api/scenarios/{id}/"])
    transition_op = paths["/api/scenarios/{id}/transition/"]["post"]
    assert {"200", "409"} <= set(transition_op["responses"])
    parameters = {p["name"] for p in paths["/api/scenarios/"]["get"]["parameters"]}
    assert {"q", "subtask", "state", "language", "tags", "page"} <= parameters


def test_schema_generates_without_warnings_and_validates(tmp_path):
    GENERATOR_STATS.reset()
    out = tmp_path / "schema.yml"
    # Raises on any drf-spectacular warning or error, or if the document is not valid OpenAPI.
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    assert not GENERATOR_STATS
    assert "/api/scenarios/{id}/transition/" in yaml.safe_load(out.read_text())["paths"]


def test_every_operation_has_a_one_line_summary():
    """The docs page lists operations by their summary: none may be missing or run on."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    operations = [
        (method.upper(), path, operation)
        for path, methods in schema["paths"].items()
        for method, operation in methods.items()
    ]
    assert len(operations) > 50
    for method, path, operation in operations:
        summary = operation.get("summary", "")
        assert summary.strip(), f"{method} {path} has no summary"
        assert "\n" not in summary and len(summary) <= 80, f"{method} {path}: {summary!r}"


class _Assets(HTMLParser):
    def __init__(self):
        super().__init__()
        self.scripts, self.links = [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "script" and attrs.get("src"):
            self.scripts.append(attrs["src"])
        if tag == "link" and attrs.get("href"):
            self.links.append(attrs["href"])


def _assert_local_static(urls, static_url):
    for url in urls:
        assert not url.startswith(("http://", "https://", "//")), url
        assert url.startswith(static_url), url
        assert finders.find(url.removeprefix(static_url)), f"{url} is not a static file"


def test_docs_render_from_local_static_files(api, settings):
    response = api.get(reverse("api_docs"))
    assert response.status_code == 200
    html = response.content.decode()
    assets = _Assets()
    assets.feed(html)
    assert len(assets.scripts) >= 2 and assets.links, "Swagger UI's bundle and css are missing"
    # The site's own JavaScript catalogue (base.html) is served by Django, not a static file.
    catalogue = reverse("javascript_catalog") + "?"
    scripts = [url for url in assets.scripts if not url.startswith(catalogue)]
    assert len(scripts) == len(assets.scripts) - 1
    _assert_local_static(scripts + assets.links, "/" + settings.STATIC_URL.lstrip("/"))
    assert reverse("api_schema") in html


def test_docs_page_sends_a_browser_without_a_session_to_log_in(client):
    response = client.get(reverse("api_docs"))
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next={reverse('api_docs')}"


def test_docs_page_has_the_site_navigation(api):
    html = api.get(reverse("api_docs")).content.decode()
    assert '<header class="topbar">' in html
    assert f'<a href="{reverse("scenarios:list")}">Scenarios</a>' in html
    assert '<div id="swagger-ui"></div>' in html
