"""The researchers' campaign API: a study set up by a script, validation through the pages'
forms, and the pages' access rules (annotators 403, other researchers 404, admins all)."""

import json

import pytest

from annotation import queue
from annotation.campaign_forms import PAIRING_RULE
from annotation.models import Campaign, Comparison
from h2htalk.models import Job
from h2htalk.roles import RESEARCHER
from tests.annotation import factories
from tests.annotation.test_campaign_views import seed_responses
from tests.annotation.test_rating_api import next_url, submit_url, token_client
from tests.conftest import make_user

CAMPAIGNS = "/api/campaigns/"


def url(campaign_id, what="") -> str:
    return f"{CAMPAIGNS}{campaign_id}/{what + '/' if what else ''}"


def send(client, method, path, data=None):
    body = {} if data is None else {"data": json.dumps(data), "content_type": "application/json"}
    return getattr(client, method)(path, **body)


@pytest.fixture
def raters(roles, django_user_model):
    return factories.annotators(django_user_model, 2)


@pytest.fixture
def colleague(roles, django_user_model):
    return make_user(django_user_model, "researcher2", RESEARCHER)


@pytest.fixture
def outsider(roles, django_user_model):
    return make_user(django_user_model, "researcher3", RESEARCHER)


@pytest.fixture
def campaign(researcher, raters, colleague):
    """4 scenarios × 3 companions, all pairs: 12 comparisons, open; colleague is a member."""
    created = factories.campaign(researcher, raters, n_scenarios=4, overlap=2, name="API A/B")
    created.members.add(colleague)
    return created


def _create_body(models, run, **overrides) -> dict:
    return {
        "name": "Scripted study",
        "scenario_query": "tags=pool",
        "companions": [m.name for m in models],
        "runs": [run.pk],
        **overrides,
    }


# A study set up entirely through the API.


def test_a_script_sets_up_runs_and_closes_a_study(
    researcher, raters, colleague, django_capture_on_commit_callbacks
):
    models, run = seed_responses(researcher)
    api = token_client(researcher)
    body = _create_body(
        models,
        run,
        description="Warmth pilot",
        guidelines="Prefer **warmth**.",
        overlap=2,
        seed=7,
        members=[colleague.username],
        annotators=[raters[0].username],
    )
    with django_capture_on_commit_callbacks(execute=True):
        created = send(api, "post", CAMPAIGNS, body)
    assert created.status_code == 201, created.json()
    study = created.json()
    assert study["state"] == "draft" and study["owner"] == researcher.username
    assert study["companions"] == sorted(m.name for m in models)
    assert (study["runs"], study["overlap"], study["seed"]) == ([run.pk], 2, 7)
    assert study["members"] == [colleague.username]
    assert study["annotators"] == [raters[0].username]
    # Fields left out take the page form's defaults.
    assert (study["pairing"], study["lease_minutes"], study["gold_share"]) == ("all_pairs", 15, 0)
    assert study["build"]["id"] == Job.objects.get(kind="campaign_build").pk
    assert study["actions"] == ["open", "close"]
    study_url = url(study["id"])
    shown = api.get(study_url).json()
    assert shown["build"]["state"] == "completed" and shown["build"]["result"]["total"] == 12
    assert shown["progress"] == {
        "comparisons": 12,
        "gold": 0,
        "judged": 0,
        "target": 24,
        "percent": 0.0,
    }

    pool = send(api, "post", url(study["id"], "annotators"), {"add": [raters[1].username]})
    assert pool.json() == {"usernames": [r.username for r in raters]}

    listed = api.get(url(study["id"], "comparisons")).json()
    assert listed["count"] == 12 and not any(c["is_gold"] for c in listed["results"])
    chosen = listed["results"][0]
    assert {chosen["companion_a"], chosen["companion_b"]} <= {m.name for m in models}
    gold = send(
        api,
        "post",
        url(study["id"], "gold"),
        {"comparison": chosen["id"], "gold_preference": 1, "gold_note": "B is kinder"},
    )
    assert gold.status_code == 200, gold.json()
    assert gold.json()["comparison"]["gold_preference"] == 1
    golds = api.get(url(study["id"], "gold")).json()
    assert [(c["id"], c["gold_note"]) for c in golds["results"]] == [(chosen["id"], "B is kinder")]

    opened = send(api, "post", url(study["id"], "transition"), {"action": "open"})
    assert opened.status_code == 200 and opened.json()["state"] == "open"
    assert opened.json()["actions"] == ["pause", "close"]

    rater = token_client(raters[0])
    item = send(rater, "post", next_url(study["id"]))
    assert item.status_code == 200
    vote = send(rater, "post", submit_url(item.json()["key"]), {"preference": -1})
    assert vote.status_code == 200

    progress = api.get(url(study["id"], "progress")).json()
    assert (progress["judged"], progress["target"], progress["regular"]) == (1, 22, 11)
    assert (progress["partial"], progress["untouched"], progress["gold"]) == (1, 10, 1)
    rows = {row["annotator"]: row for row in progress["annotators"]}
    assert rows[raters[0].username]["judgments"] == 1 and rows[raters[0].username]["in_pool"]
    assert rows[raters[1].username]["judgments"] == 0
    assert progress["overall"]["judgments"] == 1
    assert api.get(study_url).json()["progress"]["judged"] == 1

    closed = send(api, "post", url(study["id"], "transition"), {"action": "close"})
    assert closed.json()["state"] == "closed"
    assert send(rater, "post", next_url(study["id"])).status_code == 409
    assert Campaign.objects.get(pk=study["id"]).state == Campaign.State.CLOSED


def test_unmarking_gold_and_rebuilding(
    researcher_client, campaign, django_capture_on_commit_callbacks
):
    comparison = campaign.comparisons.order_by("pk").first()
    gold_url = url(campaign.pk, "gold")
    send(researcher_client, "post", gold_url, {"comparison": comparison.pk, "gold_preference": 0})
    assert api_count(researcher_client, gold_url) == 1
    assert api_count(researcher_client, url(campaign.pk, "comparisons") + "?gold=0") == 11
    unmarked = send(
        researcher_client, "post", gold_url, {"comparison": comparison.pk, "action": "unmark"}
    )
    assert unmarked.status_code == 200 and unmarked.json()["comparison"]["is_gold"] is False
    assert api_count(researcher_client, gold_url) == 0

    with django_capture_on_commit_callbacks(execute=True):
        rebuilt = send(researcher_client, "post", url(campaign.pk, "rebuild"))
    assert rebuilt.status_code == 202 and rebuilt.json()["state"] == "queued"
    job = Job.objects.get(pk=rebuilt.json()["id"])
    assert job.state == Job.State.COMPLETED and job.result["created"] == 0


def api_count(client, path) -> int:
    return client.get(path).json()["count"]


def test_marking_gold_after_judgments_says_they_count_as_gold(researcher_client, campaign, raters):
    item = queue.next_assignment(raters[0], campaign)
    queue.submit(raters[0], item.key, queue.Submission(1))
    answer = send(
        researcher_client,
        "post",
        url(campaign.pk, "gold"),
        {"comparison": item.comparison_id, "gold_preference": -1},
    ).json()
    assert answer["comparison"]["judgment_count"] == 1
    assert "they now count as gold answers" in answer["notes"][1]


# Edits.


def test_edit_changes_only_the_given_fields(researcher_client, campaign, raters):
    response = send(
        researcher_client, "patch", url(campaign.pk), {"guidelines": "Be kind.", "overlap": 4}
    )
    assert response.status_code == 200, response.json()
    campaign.refresh_from_db()
    assert (campaign.guidelines, campaign.overlap, campaign.name) == ("Be kind.", 4, "API A/B")
    assert set(campaign.annotators.all()) == set(raters)
    assert campaign.companions.count() == 3
    assert not Job.objects.exists()  # no pairing setting changed: nothing rebuilt


def test_edit_of_the_pairing_before_judgments_rebuilds(
    researcher_client, campaign, django_capture_on_commit_callbacks
):
    two = [c.name for c in campaign.companions.order_by("pk")[:2]]
    with django_capture_on_commit_callbacks(execute=True):
        response = send(researcher_client, "patch", url(campaign.pk), {"companions": two})
    assert response.status_code == 200
    job = Job.objects.get(kind="campaign_build")
    assert job.params["reset"] is True and response.json()["build"]["id"] == job.pk
    assert campaign.comparisons.count() == 4


def test_edit_of_the_pairing_after_a_judgment_is_refused_by_field(
    researcher_client, campaign, raters
):
    item = queue.next_assignment(raters[0], campaign)
    queue.submit(raters[0], item.key, queue.Submission(0))
    response = send(researcher_client, "patch", url(campaign.pk), {"seed": 5, "name": "Renamed"})
    assert response.status_code == 400
    errors = response.json()
    assert "already has 1 judgment(s)" in errors["seed"][0]
    assert errors["__all__"] == [PAIRING_RULE]
    campaign.refresh_from_db()
    assert (campaign.seed, campaign.name) == (0, "API A/B")
    assert (
        send(researcher_client, "patch", url(campaign.pk), {"name": "Renamed"}).status_code == 200
    )


# Validation errors name the field.


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"name": ""}, "name", "required"),
        ({"companions": "first"}, "companions", "at least two companions"),
        ({"companions": ["Zephyr-Alpha-77", "nobody"]}, "companions", "No such companion: nobody"),
        ({"runs": [999999]}, "runs", "not one of the available choices"),
        ({"scenario_query": "q=nothing-has-this"}, "scenario_query", "No scenario matches"),
        ({"overlap": 0}, "overlap", "greater than or equal to 1"),
        ({"overlap": "many"}, "overlap", "valid integer"),
        ({"gold_share": 0.6}, "gold_share", "less than or equal to 0.5"),
        ({"pairing": "fixed"}, "pairing", "not one of the available choices"),
        ({"annotators": ["researcher1"]}, "annotators", "annotator role"),
        ({"members": ["researcher1"]}, "members", "researchers but the owner"),
        ({"colour": "red"}, "colour", "Unknown field"),
    ],
)
def test_create_validation_errors_name_the_field(
    researcher, raters, overrides, field, message, django_capture_on_commit_callbacks
):
    models, run = seed_responses(researcher)
    if overrides.get("companions") == "first":
        overrides = {"companions": [models[0].name]}
    body = {**_create_body(models, run), **overrides}
    with django_capture_on_commit_callbacks(execute=True):
        response = send(token_client(researcher), "post", CAMPAIGNS, body)
    assert response.status_code == 400
    assert message in " ".join(response.json()[field]), response.json()
    assert not Campaign.objects.exists() and not Job.objects.exists()


def test_names_are_unique(researcher, campaign):
    models, run = seed_responses(researcher)
    response = send(
        token_client(researcher), "post", CAMPAIGNS, _create_body(models, run, name=campaign.name)
    )
    assert response.status_code == 400 and "already exists" in response.json()["name"][0]


def test_transition_refusals_are_the_pages(researcher_client, researcher, campaign):
    paused = send(researcher_client, "post", url(campaign.pk, "transition"), {"action": "pause"})
    assert paused.json()["state"] == "paused"
    again = send(researcher_client, "post", url(campaign.pk, "transition"), {"action": "pause"})
    assert again.status_code == 409 and again.json()["detail"] == "A paused campaign cannot pause."
    bogus = send(researcher_client, "post", url(campaign.pk, "transition"), {"action": "retire"})
    assert bogus.status_code == 400 and "action" in bogus.json()

    empty = factories.campaign(researcher, [], n_scenarios=1, state=Campaign.State.DRAFT)
    empty.comparisons.all().delete()
    refused = send(researcher_client, "post", url(empty.pk, "transition"), {"action": "open"})
    assert refused.status_code == 409 and "no comparisons" in refused.json()["detail"]
    assert Campaign.objects.get(pk=empty.pk).state == Campaign.State.DRAFT


def test_gold_validation_is_the_gold_pages(researcher_client, researcher, campaign):
    gold_url = url(campaign.pk, "gold")
    comparison = campaign.comparisons.order_by("pk").first()
    unanswered = send(researcher_client, "post", gold_url, {"comparison": comparison.pk})
    assert unanswered.status_code == 400
    assert "Choose the known answer" in unanswered.json()["__all__"][0]
    wrong = send(
        researcher_client, "post", gold_url, {"comparison": comparison.pk, "gold_preference": 2}
    )
    assert wrong.status_code == 400 and "gold_preference" in wrong.json()
    other = factories.campaign(researcher, [], n_scenarios=1)
    elsewhere = other.comparisons.first()
    for pk in (elsewhere.pk, 10**20):  # another campaign's; beyond any integer column
        missing = send(
            researcher_client, "post", gold_url, {"comparison": pk, "gold_preference": 1}
        )
        assert missing.status_code == 404
    assert not Comparison.objects.filter(is_gold=True).exists()


def test_people_changes_are_all_or_nothing(researcher_client, campaign, raters, colleague):
    pool_url = url(campaign.pk, "annotators")
    response = send(
        researcher_client,
        "post",
        pool_url,
        {"add": ["researcher2"], "remove": [raters[0].username]},
    )
    assert response.status_code == 400 and "annotator role" in response.json()["add"][0]
    assert set(campaign.annotators.all()) == set(raters)
    absent = send(researcher_client, "post", pool_url, {"remove": ["ghost"]})
    assert absent.status_code == 400 and "ghost" in absent.json()["remove"][0]
    removed = send(researcher_client, "post", pool_url, {"remove": [raters[0].username]})
    assert removed.json() == {"usernames": [raters[1].username]}

    members_url = url(campaign.pk, "members")
    owner = send(researcher_client, "post", members_url, {"add": ["researcher1"]})
    assert owner.status_code == 400 and "researchers but the owner" in owner.json()["add"][0]
    left = send(researcher_client, "post", members_url, {"remove": [colleague.username]})
    assert left.json() == {"usernames": []}
    assert not campaign.members.exists()


# Access: the pages' rules.


def _every_request(campaign):
    """(method, path, body) of every operation of the campaign API."""
    comparison = campaign.comparisons.order_by("pk").first()
    return [
        ("get", CAMPAIGNS, None),
        ("post", CAMPAIGNS, {"name": "x"}),
        ("get", url(campaign.pk), None),
        ("patch", url(campaign.pk), {"name": "Taken over"}),
        ("post", url(campaign.pk, "transition"), {"action": "pause"}),
        ("post", url(campaign.pk, "rebuild"), None),
        ("get", url(campaign.pk, "progress"), None),
        ("get", url(campaign.pk, "annotators"), None),
        ("post", url(campaign.pk, "annotators"), {"remove": ["rater0"]}),
        ("get", url(campaign.pk, "members"), None),
        ("get", url(campaign.pk, "comparisons"), None),
        ("get", url(campaign.pk, "gold"), None),
        ("post", url(campaign.pk, "gold"), {"comparison": comparison.pk, "gold_preference": 1}),
        ("post", url(campaign.pk, "members"), {"remove": ["researcher2"]}),  # last: a member leaves
    ]


def _snapshot(campaign):
    campaign = Campaign.objects.get(pk=campaign.pk)
    return (
        campaign.name,
        campaign.state,
        sorted(campaign.annotators.values_list("username", flat=True)),
        sorted(campaign.members.values_list("username", flat=True)),
        Comparison.objects.filter(is_gold=True).count(),
        Job.objects.count(),
        Campaign.objects.count(),
    )


def test_annotators_get_403_on_every_operation(campaign, raters):
    rater = token_client(raters[0])
    before = _snapshot(campaign)
    for method, path, body in _every_request(campaign):
        response = send(rater, method, path, body)
        assert response.status_code == 403, (method, path, response.status_code)
        text = response.content.decode()
        assert not any(c.name in text for c in campaign.companions.all()), (method, path)
    assert _snapshot(campaign) == before


def test_other_researchers_get_404_and_an_empty_list(campaign, outsider):
    other = token_client(outsider)
    before = _snapshot(campaign)
    for method, path, body in _every_request(campaign)[2:]:
        response = send(other, method, path, body)
        assert response.status_code == 404, (method, path, response.status_code)
    assert other.get(CAMPAIGNS).json()["results"] == []
    assert _snapshot(campaign) == before


def test_anonymous_requests_get_401(client, campaign):
    for method, path, body in _every_request(campaign):
        assert send(client, method, path, body).status_code == 401, (method, path)


@pytest.mark.parametrize("who", ["owner", "member", "admin"])
def test_owner_member_and_admin_may_use_every_operation(
    who, campaign, researcher, colleague, admin_user, django_capture_on_commit_callbacks
):
    user = {"owner": researcher, "member": colleague, "admin": admin_user}[who]
    api = token_client(user)
    assert [c["id"] for c in api.get(CAMPAIGNS).json()["results"]] == [campaign.pk]
    with django_capture_on_commit_callbacks(execute=True):
        answers = [send(api, m, p, b) for m, p, b in _every_request(campaign)[2:]]
    assert [a.status_code for a in answers] == [200] * 3 + [202] + [200] * 8
    campaign.refresh_from_db()
    assert (campaign.name, campaign.state) == ("Taken over", Campaign.State.PAUSED)
    assert not campaign.members.exists()
    assert campaign.comparisons.filter(is_gold=True).count() == 1


def test_admins_see_every_campaign(admin_user, researcher, outsider):
    mine = factories.campaign(researcher, [], n_scenarios=1, name="mine")
    theirs = factories.campaign(outsider, [], n_scenarios=1, name="theirs")
    listed = token_client(admin_user).get(CAMPAIGNS).json()["results"]
    assert {c["id"] for c in listed} == {mine.pk, theirs.pk}
    assert token_client(researcher).get(CAMPAIGNS + "?state=open").json()["count"] == 1
    assert token_client(researcher).get(CAMPAIGNS + "?state=draft").json()["count"] == 0


def test_list_query_count_is_constant(
    researcher, raters, django_user_model, django_assert_max_num_queries
):
    for n in range(4):
        created = factories.campaign(researcher, raters, n_scenarios=1, name=f"c{n}")
        created.members.add(make_user(django_user_model, f"member{n}", RESEARCHER))
    api = token_client(researcher)
    with django_assert_max_num_queries(12):
        listed = api.get(CAMPAIGNS).json()
    assert listed["count"] == 4
    assert all(len(c["members"]) == 1 and len(c["companions"]) == 3 for c in listed["results"])
