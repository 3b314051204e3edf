"""Who may open the judge pages and endpoints: researchers and admins only, every URL name of
`judges:` and the `judge-*` API. (The project-wide table in tests/test_permissions.py is the
contract; this covers the same decisions for the judge URLs with their own objects.)"""

from urllib.parse import parse_qs, urlsplit

import pytest
from django.urls import URLResolver, get_resolver, reverse

from h2htalk.models import Job
from scenarios.models import CompanionModel, GenerationRun, Response
from scoring.models import JudgeConfig, JudgeRun, JudgeVerdict
from tests.scenarios import factories

ROLES = ("anonymous", "norole", "annotator", "researcher", "admin")
ALLOWED = {"researcher", "admin"}
POST_ONLY = {
    "judges:run_cancel",
    "judges:run_resume",
    "judges:import_confirm",
    "judge-run-cancel",
    "judge-run-resume",
}
# URL parameter -> the world object it refers to, per URL name.
PK_OBJECT = {
    "judges:edit": "config",
    "judges:bias": "config",
    "judge-config-detail": "config",
    "judge-config-bias": "config",
    "judges:run": "run",
    "judges:run_progress": "run",
    "judges:run_resume": "run",
    "judges:run_export": "run",
    "judge-run-detail": "run",
    "judge-run-resume": "run",
    "judges:run_cancel": "active_run",
    "judge-run-cancel": "active_run",
    "judge-verdict-detail": "verdict",
}


def judge_url_names() -> dict[str, frozenset]:
    found = {}

    def walk(patterns, namespace, params):
        for entry in patterns:
            here = params | frozenset(entry.pattern.regex.groupindex)
            if isinstance(entry, URLResolver):
                if entry.namespace == "admin":
                    continue
                inner = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
                walk(entry.url_patterns, inner, here)
            elif entry.name:
                found[f"{namespace}{entry.name}"] = here

    walk(get_resolver().url_patterns, "", frozenset())
    return {n: p for n, p in found.items() if n.startswith(("judges:", "judge-"))}


EXPECTED_NAMES = {
    "judges:list",
    "judges:create",
    "judges:edit",
    "judges:bias",
    "judges:runs",
    "judges:run_create",
    "judges:run",
    "judges:run_progress",
    "judges:run_cancel",
    "judges:run_resume",
    "judges:run_export",
    "judges:import",
    "judges:import_job",
    "judges:import_confirm",
    "judge-config-list",
    "judge-config-detail",
    "judge-config-bias",
    "judge-run-list",
    "judge-run-detail",
    "judge-run-cancel",
    "judge-run-resume",
    "judge-verdict-list",
    "judge-verdict-detail",
}


def test_the_judge_url_names_are_these():
    assert set(judge_url_names()) == EXPECTED_NAMES
    assert POST_ONLY <= EXPECTED_NAMES and set(PK_OBJECT) <= EXPECTED_NAMES


@pytest.fixture
def world(admin_user, researcher, annotator, nobody):
    scenario = factories.scenario(researcher)
    config = JudgeConfig.objects.create(
        name="judge", base_url="http://127.0.0.1:9/v1", model_id="m", rubric="r"
    )
    run = JudgeRun.objects.create(name="old", judge=config, state=JudgeRun.State.CANCELLED)
    active = JudgeRun.objects.create(name="new", judge=config, state=JudgeRun.State.QUEUED)
    responses = GenerationRun.objects.create(name="responses", kind="import")
    model = CompanionModel.objects.create(name="alpha", provider="imported")
    response = Response.objects.create(run=responses, scenario=scenario, companion=model, text="x")
    verdict = JudgeVerdict.objects.create(run=run, response=response, parse="strict")
    job = Job.objects.create(
        kind="judge_import",
        state=Job.State.COMPLETED,
        created_by=researcher,
        params={
            "path": "imports/x/v.jsonl",
            "filename": "v.jsonl",
            "judge": "j",
            "run_name": "",
            "dry_run": True,
        },
        result={"rows": 1, "created": 1, "updated": 0, "errors": [], "error_count": 0},
    )
    users = {
        "norole": nobody,
        "annotator": annotator,
        "researcher": researcher,
        "admin": admin_user,
    }
    return {
        "users": users,
        "config": config,
        "run": run,
        "active_run": active,
        "verdict": verdict,
        "job": job,
    }


def url_of(name, world):
    kwargs = {}
    for param in judge_url_names()[name]:
        if param == "pk":
            kwargs["pk"] = world[PK_OBJECT[name]].pk
        elif param == "job_id":
            kwargs["job_id"] = world["job"].pk
        else:
            raise AssertionError(f"no value for {param} of {name}")
    return reverse(name, kwargs=kwargs)


def run_state(world, key):
    run = JudgeRun.objects.get(pk=world[key].pk)
    return run.state, run.cancel_requested


PROBES = {  # POST data, and the state it changes when allowed
    "judges:run_cancel": ({}, lambda w: run_state(w, "active_run")),
    "judge-run-cancel": ({}, lambda w: run_state(w, "active_run")),
    "judges:run_resume": ({}, lambda w: run_state(w, "run")),
    "judge-run-resume": ({}, lambda w: run_state(w, "run")),
    "judges:import_confirm": ({}, lambda w: Job.objects.count()),
}


def denied(response, role, url) -> bool:
    if url.startswith("/api/"):
        return response.status_code in ({401, 403} if role == "anonymous" else {403})
    if role == "anonymous":
        location = urlsplit(response.get("Location", ""))
        return (
            response.status_code == 302
            and location.path == reverse("login")
            and parse_qs(location.query).get("next") == [url]
        )
    return response.status_code == 403


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("name", sorted(EXPECTED_NAMES))
def test_access(name, role, world, client):
    if role != "anonymous":
        client.force_login(world["users"][role])
    url = url_of(name, world)
    response = client.get(url)
    if role in ALLOWED:
        assert response.status_code == (405 if name in POST_ONLY else 200), (
            url,
            response.status_code,
        )
        return
    if not (name in POST_ONLY and response.status_code == 405):
        assert denied(response, role, url), (role, url, response.status_code)
    if name in POST_ONLY:
        data, state = PROBES[name]
        before = state(world)
        assert denied(client.post(url, data), role, url)
        assert state(world) == before


@pytest.mark.parametrize("role", sorted(ALLOWED))
@pytest.mark.parametrize("name", sorted(PROBES))
def test_probes_change_something_when_allowed(name, role, world, client):
    client.force_login(world["users"][role])
    data, state = PROBES[name]
    before = state(world)
    response = client.post(url_of(name, world), data)
    assert response.status_code in (200, 201, 302)
    assert state(world) != before


def test_the_judges_link_is_in_the_nav_for_researchers_only(client, world):
    client.force_login(world["users"]["researcher"])
    assert 'href="/judges/">Judges</a>' in client.get(reverse("judges:runs")).content.decode()
    client.force_login(world["users"]["annotator"])
    assert 'href="/judges/"' not in client.get(reverse("annotation:home")).content.decode()
