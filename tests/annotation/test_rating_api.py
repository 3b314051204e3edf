"""The annotators' rating API: the flow, idempotency, skips, errors, roles and blindness."""

import itertools
import json
import re
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.authtoken.models import Token

from annotation import candidates, queue
from annotation.models import RATING_DIMENSIONS, Assignment, Campaign, Comparison, Judgment
from scenarios.models import CompanionModel, Response, Scenario
from tests.annotation import factories
from tests.scenarios.factories import persona

CAMPAIGNS = "/api/rate/campaigns/"
DIMENSIONS = [name for name, _ in RATING_DIMENSIONS]


def next_url(campaign_id) -> str:
    return reverse("rate-campaign-next", kwargs={"pk": campaign_id})


def submit_url(key) -> str:
    return reverse("rate-assignment-submit", kwargs={"key": key})


def skip_url(key) -> str:
    return reverse("rate-assignment-skip", kwargs={"key": key})


def token_client(user) -> Client:
    """A client as an external front end: token auth, and CSRF checks on (tokens need none)."""
    token, _ = Token.objects.get_or_create(user=user)
    return Client(enforce_csrf_checks=True, headers={"Authorization": f"Token {token.key}"})


def post(client, url, data=None):
    if data is None:
        return client.post(url)
    return client.post(url, json.dumps(data), content_type="application/json")


class Layouts:
    """Stands in for `random` in the queue (gold or not) and in the claim (the side):
    left = A and left = B in turn, two draws each.

    With a gold share every hand-out draws twice (gold?, then the side), so the pairs keep
    the layouts alternating; gold_share 1.0 still always asks for gold.
    """

    def __init__(self):
        self._values = itertools.cycle([0.1, 0.1, 0.9, 0.9])

    def random(self):
        return next(self._values)


@pytest.fixture
def layouts(monkeypatch):
    draws = Layouts()
    monkeypatch.setattr(queue, "random", draws)
    monkeypatch.setattr(candidates, "random", draws)


@pytest.fixture
def raters(roles, django_user_model):
    return factories.annotators(django_user_model, 3)


@pytest.fixture
def campaign(researcher, raters):
    return factories.campaign(researcher, raters, n_scenarios=2, overlap=3)  # 6 comparisons


@pytest.fixture
def api(raters):
    return token_client(raters[0])


def take(client, campaign) -> dict:
    response = post(client, next_url(campaign.pk))
    assert response.status_code == 200, response.content
    return response.json()


def with_context(campaign):
    """Give the campaign's scenarios a persona, history, memory and schedule to show."""
    lin = persona("Lin", summary="A calm friend who remembers things")
    Scenario.objects.filter(pk__in=campaign.comparisons.values("scenario")).update(
        persona=lin,
        history=[{"role": "user", "content": "Morning!"}, {"role": "assistant", "content": "Hi"}],
        memory=[{"content": "Has a cat called Miso", "category": "pets", "importance": 2}],
        schedule=[{"time": "09:30", "activity": "Stand-up meeting"}],
    )


# ---------------------------------------------------------------- the flow


def test_full_flow_over_the_api_with_a_token(campaign, raters, api, layouts):
    with_context(campaign)
    guidelines = "Judge **warmth** first.\n\n<script>alert(1)</script>"
    Campaign.objects.filter(pk=campaign.pk).update(guidelines=guidelines)
    listed = api.get(CAMPAIGNS)
    assert listed.status_code == 200, listed.content
    [entry] = listed.json()["results"]
    assert entry["id"] == campaign.pk and entry["name"] == campaign.name
    assert entry["guidelines"] == guidelines  # the Markdown source
    assert "<strong>warmth</strong>" in entry["guidelines_html"]
    assert "<script" not in entry["guidelines_html"]  # sanitised
    assert entry["progress"] == {
        "done_today": 0,
        "done_total": 0,
        "left_for_me": 6,
        "campaign_done": 0,
        "campaign_target": 18,
    }
    assert [d["name"] for d in entry["dimensions"]] == DIMENSIONS
    assert {r["reason"] for r in entry["skip_reasons"]} == {r for r, _ in queue.ALL_SKIP_REASONS}
    assert "rather_not" in {r["reason"] for r in entry["skip_reasons"]}

    keys, layouts_seen = [], set()
    while (response := post(api, next_url(campaign.pk))).status_code == 200:
        item = response.json()
        assert take(api, campaign)["key"] == item["key"]  # asking again: the same item
        assignment = Assignment.objects.select_related(
            "comparison__response_a", "comparison__response_b", "comparison__scenario"
        ).get(key=item["key"])
        assert assignment.annotator == raters[0]
        layouts_seen.add(assignment.left_is_a)
        comparison = assignment.comparison
        a, b = comparison.response_a.text, comparison.response_b.text
        assert (item["left"], item["right"]) == ((a, b) if assignment.left_is_a else (b, a))
        assert item["campaign"] == campaign.pk
        assert item["scenario"] == {
            "subtask": "dialogue_emotion",
            "language": "en",
            "persona": {"name": "Lin", "summary": "A calm friend who remembers things"},
            "history": [
                {"role": "user", "content": "Morning!"},
                {"role": "assistant", "content": "Hi"},
            ],
            "memory": [{"content": "Has a cat called Miso", "category": "pets", "importance": 2}],
            "schedule": [{"time": "09:30", "activity": "Stand-up meeting"}],
            "user_message": comparison.scenario.user_message,
        }
        assert comparison.scenario.reference_response not in response.content.decode()
        assert item["progress"]["done_total"] == len(keys)

        preference = [-2, -1, 0, 1, 2][len(keys) % 5]
        body = {
            "preference": preference,
            "both_unacceptable": preference == 0,
            "ratings": {"left": {"empathy": 5, "safety": 4}, "right": {"empathy": 2}},
            "rationale": f"reason {len(keys)}",
            "client_time_ms": 1500,
        }
        submitted = post(api, submit_url(item["key"]), body)
        assert submitted.status_code == 200, submitted.content
        got = submitted.json()
        assert got["key"] == item["key"]
        # As given on screen, whatever the layout; none with "both unacceptable" (instead of one)
        assert got["preference"] == (None if preference == 0 else preference)
        assert got["both_unacceptable"] == (preference == 0)
        assert got["ratings"] == body["ratings"]
        assert got["rationale"] == f"reason {len(keys)}" and got["created_at"]
        assert got["progress"]["done_total"] == len(keys) + 1

        stored = Judgment.objects.get(assignment=assignment)
        left, right = ("a", "b") if assignment.left_is_a else ("b", "a")
        assert stored.preference == (preference if assignment.left_is_a else -preference)
        assert stored.ratings == {left: {"empathy": 5, "safety": 4}, right: {"empathy": 2}}
        assert stored.client_time_ms == 1500 and stored.annotator == raters[0]
        keys.append(item["key"])

    assert response.status_code == 204 and response.content == b""
    assert len(keys) == len(set(keys)) == 6
    assert layouts_seen == {True, False}  # both layouts went through the mapping
    assert Judgment.objects.filter(annotator=raters[0]).count() == 6
    assert set(Comparison.objects.values_list("judgment_count", flat=True)) == {1}
    progress = api.get(CAMPAIGNS).json()["results"][0]["progress"]
    assert progress == {
        "done_today": 6,
        "done_total": 6,
        "left_for_me": 0,
        "campaign_done": 6,
        "campaign_target": 18,
    }
    # Another annotator still has the whole campaign to do.
    assert post(token_client(raters[1]), next_url(campaign.pk)).status_code == 200


def test_session_auth_works_and_needs_csrf(campaign, raters):
    session = Client()
    session.force_login(raters[0])
    assert session.get(CAMPAIGNS).status_code == 200
    assert post(session, next_url(campaign.pk)).status_code == 200
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(raters[0])
    refused = post(strict, next_url(campaign.pk))
    assert refused.status_code == 403 and "CSRF" in refused.json()["detail"]


def test_replayed_submission_returns_the_same_judgment(campaign, api):
    key = take(api, campaign)["key"]
    first = post(api, submit_url(key), {"preference": -2, "rationale": "clear"})
    again = post(
        api,
        submit_url(key),
        {"preference": 2, "rationale": "changed my mind", "both_unacceptable": True},
    )
    assert first.status_code == again.status_code == 200
    assert again.json() == first.json()
    assert again.json()["preference"] == -2 and again.json()["rationale"] == "clear"
    assert Judgment.objects.count() == 1
    assert Assignment.objects.get(key=key).comparison.judgment_count == 1


def test_skip(campaign, api):
    key = take(api, campaign)["key"]
    skipped = post(api, skip_url(key), {"reason": "language", "note": "Chinese"})
    assert skipped.status_code == 200, skipped.content
    assert skipped.json()["key"] == key and skipped.json()["reason"] == "language"
    assert skipped.json()["progress"]["left_for_me"] == 5
    assignment = Assignment.objects.get(key=key)
    assert assignment.state == Assignment.State.SKIPPED
    assert assignment.skip_reason == "language: Chinese"
    assert assignment.comparison.judgment_count == 0

    replay = post(api, skip_url(key), {"reason": "other"})
    assert replay.status_code == 200 and replay.json()["reason"] == "language"

    following = take(api, campaign)
    assert following["key"] != key
    assert Assignment.objects.get(key=following["key"]).comparison_id != assignment.comparison_id

    late = post(api, submit_url(key), {"preference": 0})
    assert late.status_code == 409 and late.json() == {"detail": "This item was already skipped."}
    answered = post(api, submit_url(following["key"]), {"preference": 1})
    assert answered.status_code == 200
    refused = post(api, skip_url(following["key"]), {"reason": "other"})
    assert refused.status_code == 409 and "already submitted" in refused.json()["detail"]
    assert not Judgment.objects.filter(assignment__key=key).exists()


# ---------------------------------------------------------------- 404 and 409


def test_someone_elses_key_or_campaign_is_404(campaign, raters, researcher, api):
    take(api, campaign)
    theirs = take(token_client(raters[1]), campaign)["key"]
    missing = str(uuid.uuid4())
    for key in (theirs, missing):
        for url, body in (
            (submit_url(key), {"preference": 0}),
            (skip_url(key), {"reason": "other"}),
        ):
            response = post(api, url, body)
            assert response.status_code == 404, (url, response.content)
            assert response.json() == {"detail": "No such item."}  # the same for both: no leak
    assert Assignment.objects.get(key=theirs).state == Assignment.State.OPEN
    assert not Judgment.objects.exists()
    assert (
        post(api, "/api/rate/assignments/not-a-key/submit/", {"preference": 0}).status_code == 404
    )

    elsewhere = factories.campaign(researcher, [raters[1]], n_scenarios=1)
    assert post(api, next_url(elsewhere.pk)).status_code == 404
    assert post(api, next_url(elsewhere.pk + 1000)).status_code == 404
    assert [c["id"] for c in api.get(CAMPAIGNS).json()["results"]] == [campaign.pk]
    assert not Assignment.objects.filter(comparison__campaign=elsewhere).exists()
    assert post(token_client(raters[1]), next_url(elsewhere.pk)).status_code == 200  # control


def test_items_of_a_campaign_you_were_taken_out_of_are_404(campaign, raters, api):
    key = take(api, campaign)["key"]
    campaign.annotators.remove(raters[0])
    for url, body in ((submit_url(key), {"preference": 0}), (skip_url(key), {"reason": "other"})):
        response = post(api, url, body)
        assert response.status_code == 404 and response.json() == {"detail": "No such item."}
    assert post(api, next_url(campaign.pk)).status_code == 404
    assert api.get(CAMPAIGNS).json()["results"] == []
    assert Assignment.objects.get(key=key).state == Assignment.State.OPEN
    campaign.annotators.add(raters[0])
    assert post(api, submit_url(key), {"preference": 0}).status_code == 200  # control


def test_irregular_scenario_data_is_shown_as_the_page_shows_it(campaign, api):
    Scenario.objects.filter(pk__in=campaign.comparisons.values("scenario")).update(
        history=[{"role": "user"}, "not a turn", {"role": "assistant", "content": "Hello"}],
        memory=["Likes tea", {"category": "empty"}, 7, {"content": "Cat", "importance": True}],
        schedule=[{"activity": "Gym"}, ["09:00", "x"]],
    )
    scenario = take(api, campaign)["scenario"]
    assert scenario["persona"] is None
    assert scenario["history"] == [
        {"role": "user", "content": ""},
        {"role": "assistant", "content": "Hello"},
    ]
    assert scenario["memory"] == [{"content": "Likes tea"}, {"content": "Cat"}]
    assert scenario["schedule"] == [{"time": "", "activity": "Gym"}]


@pytest.mark.parametrize("state", [Campaign.State.PAUSED, Campaign.State.DRAFT])
def test_a_campaign_that_is_not_open_is_409(campaign, api, state):
    Campaign.objects.filter(pk=campaign.pk).update(state=state)
    response = post(api, next_url(campaign.pk))
    assert response.status_code == 409
    assert response.json() == {"detail": "This campaign is not open for rating right now."}
    assert api.get(CAMPAIGNS).json()["results"] == []
    assert not Assignment.objects.exists()
    Campaign.objects.filter(pk=campaign.pk).update(state=Campaign.State.OPEN)
    assert post(api, next_url(campaign.pk)).status_code == 200  # control


def test_a_full_comparison_after_an_expired_lease_is_409(campaign, raters, api):
    Campaign.objects.filter(pk=campaign.pk).update(overlap=1)
    late = take(api, campaign)["key"]
    Assignment.objects.filter(key=late).update(lease_expires_at=timezone.now() - timedelta(1))
    other_api = token_client(raters[1])
    other = take(other_api, campaign)["key"]
    late_assignment = Assignment.objects.get(key=late)
    while Assignment.objects.get(key=other).comparison_id != late_assignment.comparison_id:
        assert post(other_api, skip_url(other), {"reason": "other"}).status_code == 200
        other = take(other_api, campaign)["key"]  # items come in random order; 204 if never
    assert Assignment.objects.get(key=other).comparison_id == late_assignment.comparison_id
    assert post(other_api, submit_url(other), {"preference": 2}).status_code == 200

    refused = post(api, submit_url(late), {"preference": -2, "rationale": "too late"})
    assert refused.status_code == 409
    assert "enough votes" in refused.json()["detail"]
    comparison = Comparison.objects.get(pk=late_assignment.comparison_id)
    assert comparison.judgment_count == comparison.judgments.count() == 1
    assert Assignment.objects.get(key=late).state == Assignment.State.REJECTED
    again = post(api, submit_url(late), {"preference": -2})
    assert again.status_code == 409 and "already rejected" in again.json()["detail"]


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("body", "path", "message"),
    [
        ({"preference": 3}, ["preference"], "less than or equal to 2"),
        ({"preference": -3}, ["preference"], "greater than or equal to -2"),
        ({"preference": "left"}, ["preference"], "valid integer"),
        ({}, ["preference"], "required"),
        (
            {"preference": 0, "ratings": {"left": {"empathy": 9}}},
            ["ratings", "left", "empathy"],
            "less than or equal to 5",
        ),
        (
            {"preference": 0, "ratings": {"right": {"safety": 0}}},
            ["ratings", "right", "safety"],
            "greater than or equal to 1",
        ),
        (
            {"preference": 0, "ratings": {"left": {"charm": 3}}},
            ["ratings", "left", "charm"],
            "Unknown field",
        ),
        (
            {"preference": 0, "ratings": {"middle": {"empathy": 3}}},
            ["ratings", "middle"],
            "Unknown field",
        ),
        ({"preference": 0, "ratings": [1, 2]}, ["ratings", "non_field_errors"], "dictionary"),
        ({"preference": 0, "prefrence": 1}, ["prefrence"], "Unknown field"),
        ({"preference": 0, "rationale": "x" * 5001}, ["rationale"], "no more than 5000"),
        ({"preference": 0, "client_time_ms": -5}, ["client_time_ms"], "greater than or equal to 0"),
    ],
)
def test_bad_submissions_are_400_with_a_message(campaign, api, body, path, message):
    key = take(api, campaign)["key"]
    response = post(api, submit_url(key), body)
    assert response.status_code == 400, response.content
    errors = response.json()
    for step in path:
        errors = errors[step]
    assert any(message in text for text in errors), errors
    assert not Judgment.objects.exists()
    assert Assignment.objects.get(key=key).state == Assignment.State.OPEN
    assert post(api, submit_url(key), {"preference": 0}).status_code == 200  # control


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"reason": "bored"}, "reason", "not a valid choice"),
        ({}, "reason", "required"),
        ({"reason": "other", "note": "n" * 301}, "note", "no more than 300"),
        ({"reason": "other", "why": "x"}, "why", "Unknown field"),
    ],
)
def test_bad_skips_are_400_with_a_message(campaign, api, body, field, message):
    key = take(api, campaign)["key"]
    response = post(api, skip_url(key), body)
    assert response.status_code == 400, response.content
    assert any(message in text for text in response.json()[field])
    assert Assignment.objects.get(key=key).state == Assignment.State.OPEN
    assert post(api, skip_url(key), {"reason": "other"}).status_code == 200  # control


# ---------------------------------------------------------------- roles


def test_only_annotators_and_admins_may_rate(campaign, raters, researcher, nobody, admin_user):
    key = take(token_client(raters[0]), campaign)["key"]
    campaign.annotators.add(researcher, nobody, admin_user)  # membership alone is not enough
    requests = [
        ("get", CAMPAIGNS, None),
        ("post", next_url(campaign.pk), None),
        ("post", submit_url(key), {"preference": 0}),
        ("post", skip_url(key), {"reason": "other"}),
    ]
    for user in (researcher, nobody):
        client = token_client(user)
        for method, url, body in requests:
            response = client.get(url) if method == "get" else post(client, url, body)
            assert response.status_code == 403, (user, url, response.status_code)
    for method, url, body in requests:
        response = Client().get(url) if method == "get" else post(Client(), url, body)
        assert response.status_code == 401, (url, response.status_code)
    assert not Assignment.objects.exclude(annotator=raters[0]).exists()
    assert Assignment.objects.get(key=key).state == Assignment.State.OPEN
    assert not Judgment.objects.exists()

    admin_api = token_client(admin_user)  # admins pass every role check
    assert [c["id"] for c in admin_api.get(CAMPAIGNS).json()["results"]] == [campaign.pk]
    item = take(admin_api, campaign)
    assert post(admin_api, submit_url(item["key"]), {"preference": 1}).status_code == 200


def test_get_is_not_allowed_on_the_actions(campaign, api):
    key = take(api, campaign)["key"]
    for url in (next_url(campaign.pk), submit_url(key), skip_url(key)):
        assert api.get(url).status_code == 405


# ---------------------------------------------------------------- blindness


def start_ids_at(model, start):
    """Make the next primary key of `model` large and distinctive, so a body can be searched."""
    table = model._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT setval(pg_get_serial_sequence(%s, 'id'), %s, false)", [table, start]
            )
        elif connection.vendor == "sqlite":  # AUTOINCREMENT tables continue after `seq`
            cursor.execute("DELETE FROM sqlite_sequence WHERE name = %s", [table])
            cursor.execute(
                "INSERT INTO sqlite_sequence (name, seq) VALUES (%s, %s)", [table, start - 1]
            )
        else:
            pytest.skip(f"no sequence trick for {connection.vendor}")


def key_paths(value, prefix=""):
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from key_paths(inner, f"{prefix}.{key}" if prefix else key)
    elif isinstance(value, list):
        for inner in value:
            yield from key_paths(inner, f"{prefix}[]")
    else:
        yield prefix


PROGRESS = {"done_today", "done_total", "left_for_me", "campaign_done", "campaign_target"}
SCENARIO = {
    "subtask",
    "language",
    "persona.name",
    "persona.summary",
    "history[].role",
    "history[].content",
    "memory[].content",
    "memory[].category",
    "memory[].importance",
    "schedule[].time",
    "schedule[].activity",
    "user_message",
}
ALLOWED_PATHS = (
    {"count", "next", "previous"}
    | {f"results[].{f}" for f in ("id", "name", "description", "guidelines", "guidelines_html")}
    | {f"results[].progress.{f}" for f in PROGRESS}
    | {f"results[].dimensions[].{f}" for f in ("name", "label")}
    | {f"results[].skip_reasons[].{f}" for f in ("reason", "label")}
    | {"key", "campaign", "left", "right", "lease_expires_at"}
    | {f"scenario.{f}" for f in SCENARIO}
    | {f"progress.{f}" for f in PROGRESS}
    | {"preference", "both_unacceptable", "rationale", "created_at", "reason"}
    | {"reasons", "confidence", "results[].asks_confidence"}
    | {f"results[].{f}" for f in ("support_text", "support_text_html", "break_after_minutes")}
    | {"content_note"}
    | {f"content_note.{f}" for f in ("level", "label", "text")}
    | {f"results[].reasons[].{f}" for f in ("key", "label")}
    | {f"ratings.{side}.{d}" for side in ("left", "right") for d in DIMENSIONS}
    | {"detail"}
)


def test_no_answer_reveals_models_responses_comparisons_runs_or_other_votes(
    researcher, raters, layouts
):
    start_ids_at(Response, 7_310_000)
    start_ids_at(Comparison, 7_420_000)
    start_ids_at(Judgment, 7_530_000)
    start_ids_at(Assignment, 7_640_000)
    companions = factories.companions()
    CompanionModel.objects.filter(pk=companions[2].pk).update(model_id="marlin-gamma-42-chat")
    campaign = factories.campaign(
        researcher, raters, n_scenarios=3, overlap=3, gold_share=1.0, companions=companions
    )
    with_context(campaign)
    run_name = campaign.runs.get().name
    # Researchers' texts and responses that name the models are shown with the names hidden.
    Campaign.objects.filter(pk=campaign.pk).update(
        name=f"Zephyr-Alpha-77 vs Quokka-Beta-13 ({campaign.pk})",
        description="Is Marlin-Gamma-42 kinder than the others?",
        guidelines=f"Never guess whether *zephyr-alpha-77* wrote it (run {run_name}).",
    )
    for response in Response.objects.filter(companion=companions[2]):
        response.text += " (Generated by marlin-gamma-42-chat, aka Marlin-Gamma-42.)"
        response.save()
    gold = campaign.comparisons.order_by("pk").first()
    Comparison.objects.filter(pk=gold.pk).update(
        is_gold=True, gold_preference=-2, gold_note="Gold-Note-Pelican-31"
    )
    # Another annotator has voted on the first items, with a rationale of their own.
    other_rationale = "Private-Rationale-Of-Rater-One-8842"
    for _ in range(3):
        theirs = queue.next_assignment(raters[1], campaign)
        queue.submit(raters[1], theirs.key, queue.Submission(2, rationale=other_rationale))
    open_elsewhere = queue.next_assignment(raters[2], campaign)

    api = token_client(raters[0])
    answers = []  # (status, body) of every response of the flow

    def record(response):
        answers.append((response.status_code, response.content.decode()))
        return response

    record(api.get(CAMPAIGNS))
    record(post(api, next_url(campaign.pk)))
    record(post(api, submit_url(open_elsewhere.key), {"preference": 0}))  # 404
    record(post(api, skip_url(open_elsewhere.key), {"reason": "other"}))  # 404
    shown, layouts_seen = 0, set()
    while (response := record(post(api, next_url(campaign.pk)))).status_code == 200:
        key = response.json()["key"]
        record(post(api, next_url(campaign.pk)))  # the same item again
        assignment = Assignment.objects.get(key=key)
        if shown == 0:
            assert assignment.comparison.is_gold  # gold is served like any item
        if shown == 2:
            record(post(api, submit_url(key), {"preference": 3}))  # 400
            record(post(api, skip_url(key), {"reason": "other", "note": "unclear"}))
            record(post(api, skip_url(key), {"reason": "other"}))  # replay
            record(post(api, submit_url(key), {"preference": 1}))  # 409: skipped
        else:
            body = {
                "preference": None if shown == 3 else [-2, 1, 0, 2, -1][shown % 5],
                "both_unacceptable": shown == 3,
                "ratings": {"left": {"empathy": 4}, "right": {"fluency": 2, "safety": 5}},
                "rationale": f"my reason {shown}",
                "client_time_ms": 900,
            }
            submitted = record(post(api, submit_url(key), body))
            assert submitted.status_code == 200
            # Screen terms whatever the layout: the pair-keyed preference would reveal it.
            assert submitted.json()["preference"] == body["preference"]
            assert submitted.json()["ratings"] == body["ratings"]
            layouts_seen.add(assignment.left_is_a)
            record(post(api, submit_url(key), body))  # replay
        shown += 1
    record(api.get(CAMPAIGNS))
    Campaign.objects.filter(pk=campaign.pk).update(state=Campaign.State.PAUSED)
    record(post(api, next_url(campaign.pk)))  # 409

    assert shown == 1 + 8  # the gold item and the 3 × 3 - 1 regular ones
    assert layouts_seen == {True, False}
    mine = Judgment.objects.filter(annotator=raters[0]).values("comparison")
    assert Judgment.objects.filter(comparison__in=mine, rationale=other_rationale).exists()
    statuses = {status for status, _ in answers}
    assert statuses == {200, 204, 400, 404, 409}, statuses

    forbidden = [c.name for c in companions]
    forbidden += [str(c.pk) for c in companions]
    forbidden += [str(pk) for pk in Response.objects.values_list("pk", flat=True)]
    forbidden += [str(pk) for pk in Comparison.objects.values_list("pk", flat=True)]
    forbidden += [str(pk) for pk in Judgment.objects.values_list("pk", flat=True)]
    forbidden += [str(pk) for pk in Assignment.objects.values_list("pk", flat=True)]
    forbidden += [run_name, "marlin-gamma-42-chat"]
    forbidden += [other_rationale, "Gold-Note-Pelican-31", "rater1", "rater2"]
    forbidden += list(
        Scenario.objects.filter(pk__in=campaign.comparisons.values("scenario")).values_list(
            "reference_response", flat=True
        )
    )
    assert min(int(s) for s in forbidden if s.isdigit()) >= 987650  # all distinctive
    everything = "\n".join(body for _, body in answers)
    for secret in set(forbidden):
        found = re.search(
            rf"(?<![\w.-]){re.escape(secret)}(?![\w-])", everything, flags=re.IGNORECASE
        )
        assert found is None, (
            f"{secret!r} leaked: …{everything[found.start() - 80 : found.end() + 80]}…"
        )
    assert "my reason 1" in everything and "Answer number" in everything  # the search works
    assert "Is [name hidden] kinder than the others?" in everything
    assert "(Generated by [name hidden], aka [name hidden].)" in everything

    for status, body in answers:
        if status in (200, 404, 409) and body:
            unexpected = set(key_paths(json.loads(body))) - ALLOWED_PATHS
            assert not unexpected, (status, unexpected)
