"""Blindness: nothing an annotator can reach names a companion, a run, a response or a comparison,
or shows another annotator's vote.

A campaign is built with searchable identities (companion names like "Zephyr-Alpha-77", companion
ids 987650+, a run called "Nimbus-Run-5521", response ids 7310000+, comparison ids 8420000+, a gold
note), two other annotators vote on it with recognisable rationales, and then one annotator walks
through every page, partial and error path (and the rating API) until nothing is left. Every
answer body, header and redirect target is searched for all of those strings.
"""

import json
import re
import uuid

import pytest
from django.test import Client
from django.urls import reverse

from annotation import queue
from annotation.blinding import HIDDEN_NAME
from annotation.models import Assignment, Campaign, Comparison, Judgment
from scenarios.models import GenerationRun, Response, Scenario
from tests.annotation import factories

HTMX = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "item"}
RUN_NAME = "Nimbus-Run-5521"
RESPONSE_BASE = 7_310_000
COMPARISON_BASE = 8_420_000
OTHER_RATIONALE = "RATIONALE-OF-ANOTHER-ANNOTATOR"
GOLD_NOTE = "GOLD-NOTE-FOR-RESEARCHERS"
REFERENCE = "THE-REFERENCE-ANSWER"


def renumber(campaign):
    """Give responses and comparisons large, unmistakable ids (before anything refers to them
    but the comparisons; foreign keys are checked at commit, and the test never commits)."""
    responses = Response.objects.filter(run__in=campaign.runs.all()).order_by("pk")
    for i, old in enumerate(list(responses.values_list("pk", flat=True))):
        new = RESPONSE_BASE + i
        Response.objects.filter(pk=old).update(id=new)
        Comparison.objects.filter(response_a_id=old).update(response_a_id=new)
        Comparison.objects.filter(response_b_id=old).update(response_b_id=new)
    for i, old in enumerate(list(campaign.comparisons.order_by("pk").values_list("pk", flat=True))):
        Comparison.objects.filter(pk=old).update(id=COMPARISON_BASE + i)


@pytest.fixture
def world(researcher, roles, django_user_model):
    me, other, third = factories.annotators(django_user_model, 3)
    campaign = factories.campaign(
        researcher,
        [me, other, third],
        n_scenarios=5,
        overlap=2,
        name="Blind study",
        description="Which reply is kinder?",
        guidelines="Judge **warmth** and safety.",
    )
    GenerationRun.objects.filter(campaigns=campaign).update(name=RUN_NAME)
    Scenario.objects.filter(tags__name="campaign").update(reference_response=REFERENCE)
    renumber(campaign)
    gold = campaign.comparisons.order_by("pk").last()
    Comparison.objects.filter(pk=gold.pk).update(
        is_gold=True, gold_preference=-1, gold_note=GOLD_NOTE
    )
    Campaign.objects.filter(pk=campaign.pk).update(gold_share=0.3)
    campaign.refresh_from_db()
    # Two other annotators vote first, with rationales that must never reach `me`.
    for rater, count in ((other, 6), (third, 2)):  # some items full, some half-voted
        for _ in range(count):
            item = queue.next_assignment(rater, campaign)
            queue.submit(
                rater,
                item.key,
                queue.Submission(-2, rationale=f"{OTHER_RATIONALE} by {rater.username}"),
            )
    return {"campaign": campaign, "me": me, "others": [other, third]}


def secrets(world) -> list[str]:
    campaign = world["campaign"]
    found = ["Zephyr", "Quokka", "Marlin", "Nimbus", RUN_NAME]
    found += [str(pk) for pk in campaign.companions.values_list("pk", flat=True)]  # 987650+
    found += [GOLD_NOTE, OTHER_RATIONALE, REFERENCE, "gold"]
    found += [
        str(pk)
        for pk in Response.objects.filter(run__campaigns=campaign).values_list("pk", flat=True)
    ]
    found += [str(pk) for pk in campaign.comparisons.values_list("pk", flat=True)]
    found += [other.username for other in world["others"]]
    found += [
        str(key)
        for key in Assignment.objects.filter(annotator__in=world["others"]).values_list(
            "key", flat=True
        )
    ]
    # Field names that would mean a model object leaked into a page or an answer.
    found += [
        "response_a",
        "response_b",
        "left_is_a",
        "comparison_id",
        "companion",
        "judgment_count",
    ]
    return found


CSRF = re.compile(r'(csrfmiddlewaretoken" value="|"X-CSRFToken": ")[^"]+')


class Recorder:
    """Everything the annotator's client received: bodies, headers, redirect targets."""

    def __init__(self, client):
        self.client = client
        self.seen: list[tuple[str, str]] = []

    def _keep(self, label, response):
        body = response.content.decode() if response.content else ""
        headers = "\n".join(f"{k}: {v}" for k, v in response.headers.items())
        chain = " ".join(url for url, _ in getattr(response, "redirect_chain", []))
        self.seen.append((label, CSRF.sub(r"\1<token>", f"{headers}\n{chain}\n{body}")))
        return response

    def get(self, url, **kwargs):
        return self._keep(f"GET {url}", self.client.get(url, **kwargs))

    def post(self, url, data=None, **kwargs):
        return self._keep(f"POST {url}", self.client.post(url, data or {}, **kwargs))


def key_in(text) -> str:
    return re.search(r"/rate/a/([0-9a-f-]{36})/submit/", text).group(1)


def check(recorder, world):
    assert recorder.seen
    words = secrets(world)
    # "companion" is a plain English word in the page ("the companion speaks first"), and the
    # persona is labelled as such; what must not appear is the model-side field name.
    words.remove("companion")
    for label, text in recorder.seen:
        lowered = text.lower()
        for word in words:
            assert word.lower() not in lowered, f"{word!r} leaked in {label}"
        assert not re.search(r"companion_?id|\"companion\"|companion=", lowered), label


def test_no_page_partial_or_error_unblinds(world, client):
    campaign, me = world["campaign"], world["me"]
    client.force_login(me)
    seen = Recorder(client)
    rate = reverse("annotation:rate", args=[campaign.pk])

    seen.get(reverse("annotation:home"))
    page = seen.get(rate).content.decode()
    key = key_in(page)
    while Assignment.objects.get(key=key).comparison.is_gold:  # the gold item: rate it first
        page = seen.post(f"/rate/a/{key}/submit/", {"preference": "-1"}, **HTMX).content.decode()
        key = key_in(page)

    # Bad input, with and without htmx, and a skip without a reason.
    seen.post(f"/rate/a/{key}/submit/", {"preference": "9"}, **HTMX)
    seen.post(f"/rate/a/{key}/submit/", {"preference": "1", "left_empathy": "8"})
    seen.post(f"/rate/a/{key}/skip/", {"preference": "1"}, **HTMX)
    # Someone else's key, a made-up key, a GET on a POST-only URL, a campaign not mine.
    theirs = Assignment.objects.filter(annotator__in=world["others"]).first().key
    assert seen.post(f"/rate/a/{theirs}/submit/", {"preference": "0"}, **HTMX).status_code == 404
    assert seen.post(f"/rate/a/{theirs}/skip/", {"skip_reason": "other"}).status_code == 404
    assert seen.post(f"/rate/a/{uuid.uuid4()}/submit/", {"preference": "0"}).status_code == 404
    assert seen.get(f"/rate/a/{key}/submit/").status_code == 405
    assert seen.get(reverse("annotation:rate", args=[campaign.pk + 1000])).status_code == 404

    # A comparison that filled up while my lease ran out.
    Assignment.objects.filter(key=key).update(lease_expires_at="2000-01-01T00:00:00Z")
    full = Assignment.objects.get(key=key).comparison
    for rater in world["others"]:
        if not Assignment.objects.filter(comparison=full, annotator=rater).exists():
            taken = Assignment.objects.create(
                comparison=full,
                annotator=rater,
                left_is_a=True,
                lease_expires_at="2999-01-01T00:00:00Z",
            )
            queue.submit(rater, taken.key, queue.Submission(1, rationale=OTHER_RATIONALE))
    answer = seen.post(f"/rate/a/{key}/submit/", {"preference": "-1"}, **HTMX).content.decode()
    assert "enough votes" in answer
    key = key_in(answer)

    # Submit (htmx), skip (htmx), submit and skip without htmx, a replay.
    answer = seen.post(f"/rate/a/{key}/submit/", {"preference": "2", "rationale": "mine"}, **HTMX)
    seen.post(f"/rate/a/{key}/submit/", {"preference": "2"}, **HTMX)
    key = key_in(answer.content.decode())
    answer = seen.post(f"/rate/a/{key}/skip/", {"skip_reason": "other", "skip_note": "x"}, **HTMX)
    key = key_in(answer.content.decode())
    seen.post(f"/rate/a/{key}/submit/", {"preference": "0"}, follow=True)
    key = key_in(seen.get(rate).content.decode())
    seen.post(f"/rate/a/{key}/skip/", {"skip_reason": "broken"}, follow=True)
    key = key_in(seen.get(rate).content.decode())

    # A paused campaign: the page, and a submit of the item already on screen.
    Campaign.objects.filter(pk=campaign.pk).update(state=Campaign.State.PAUSED)
    seen.get(rate)
    answer = seen.post(f"/rate/a/{key}/submit/", {"preference": "1"}, **HTMX).content.decode()
    assert "not open" in answer
    Campaign.objects.filter(pk=campaign.pk).update(state=Campaign.State.OPEN)

    # Then every remaining item, until the all-done panel.
    answer = seen.get(rate).content.decode()
    for _ in range(20):
        if "data-all-done" in answer:
            break
        key = key_in(answer)
        answer = seen.post(f"/rate/a/{key}/submit/", {"preference": "-1"}, **HTMX).content.decode()
    assert "data-all-done" in answer
    seen.get(rate)
    seen.get(reverse("annotation:home"))
    assert Judgment.objects.filter(annotator=me).count() >= 5
    # I rated items the others had voted on (with their rationales stored beside mine).
    mine = Judgment.objects.filter(annotator=me).values("comparison_id")
    assert Judgment.objects.filter(comparison_id__in=mine, rationale__contains=OTHER_RATIONALE)

    check(seen, world)


def test_the_rating_api_is_blind_too(world, client):
    campaign, me = world["campaign"], world["me"]
    client.force_login(me)
    seen = Recorder(client)
    listing = seen.get("/api/rate/campaigns/")
    assert listing.status_code == 200 and "Blind study" in listing.content.decode()
    nxt = f"/api/rate/campaigns/{campaign.pk}/next/"
    item = seen.post(nxt)
    assert item.status_code == 200
    key = json.loads(item.content)["key"]
    submit = f"/api/rate/assignments/{key}/submit/"
    skip = f"/api/rate/assignments/{key}/skip/"
    assert seen.post(submit, {"preference": 7}, content_type="application/json").status_code == 400
    theirs = Assignment.objects.filter(annotator__in=world["others"]).first().key
    seen.post(
        f"/api/rate/assignments/{theirs}/submit/",
        {"preference": 0},
        content_type="application/json",
    )
    seen.post(submit, {"preference": 1, "rationale": "ok"}, content_type="application/json")
    seen.post(submit, {"preference": 1}, content_type="application/json")  # a replay
    seen.post(skip, {"reason": "other"}, content_type="application/json")  # already answered
    for _ in range(20):
        answer = seen.post(nxt)
        if answer.status_code == 204:
            break
        key = json.loads(answer.content)["key"]
        seen.post(
            f"/api/rate/assignments/{key}/skip/",
            {"reason": "other"},
            content_type="application/json",
        )
    assert answer.status_code == 204
    Campaign.objects.filter(pk=campaign.pk).update(state=Campaign.State.PAUSED)
    assert seen.post(nxt).status_code == 409
    check(seen, world)


def test_names_written_into_campaign_text_or_responses_are_hidden(world, client):
    """Researchers' text and a self-naming response pass through the same filter."""
    campaign, me = world["campaign"], world["me"]
    Campaign.objects.filter(pk=campaign.pk).update(
        name="Zephyr-Alpha-77 vs the rest",
        description=f"Runs from {RUN_NAME}",
        guidelines="Ignore that **Quokka-Beta-13** is verbose.",
    )
    Response.objects.filter(run__campaigns=campaign).update(
        text="Hi, I am zephyr-alpha-77 and I care."
    )
    client.force_login(me)
    seen = Recorder(client)
    seen.get(reverse("annotation:home"))
    page = seen.get(reverse("annotation:rate", args=[campaign.pk])).content.decode()
    assert f"I am {HIDDEN_NAME} and I care." in page
    assert f"<title>Rate · {HIDDEN_NAME} vs the rest" in page
    answer = seen.post(f"/rate/a/{key_in(page)}/submit/", {"preference": "0"}, **HTMX)
    assert HIDDEN_NAME in answer.content.decode()
    check(seen, world)


def test_the_search_would_find_an_id(world):
    """A control for the checks above: a page does carry its own key, and the search finds it."""
    client = Client()
    client.force_login(world["me"])
    seen = Recorder(client)
    seen.get(reverse("annotation:rate", args=[world["campaign"].pk]))
    mine = str(queue.current_assignment(world["me"], world["campaign"]).key)
    assert mine in seen.seen[0][1]
    world["others"][0] = world["me"]  # pretend my own key were someone else's
    with pytest.raises(AssertionError, match="leaked"):
        check(seen, world)


@pytest.mark.parametrize(
    "text, hidden",
    [
        ("Hi, I am Qwen2.5-7B.", f"Hi, I am {HIDDEN_NAME}."),
        ("我是Qwen2.5-7B，很高兴认识你", f"我是{HIDDEN_NAME}，很高兴认识你"),
        ("我是小暖呀", f"我是{HIDDEN_NAME}呀"),
        ("私はqwen2.5-7bです", f"私は{HIDDEN_NAME}です"),
        ("Nimbus-Run-5521: 저는 小暖입니다", f"{HIDDEN_NAME}: 저는 {HIDDEN_NAME}입니다"),
        ("Qwen2.5-7Bx and xQwen2.5-7B stay", "Qwen2.5-7Bx and xQwen2.5-7B stay"),  # other words
        ("小暖和", f"{HIDDEN_NAME}和"),
    ],
)
def test_names_are_hidden_as_whole_words_also_inside_chinese_text(text, hidden):
    """Chinese, Japanese and Korean put no spaces between words: a name touching them counts."""
    from annotation.blinding import blind_text

    assert blind_text(text, ["Nimbus-Run-5521", "Qwen2.5-7B", "小暖"]) == hidden


def test_the_api_submits_read_without_names_still_finds_them_when_asked(world):
    """The API's submit reads its item without the campaign's name lists (`answer_statement`):
    the progress it reads is the full read's, and the names, should anything ask, are the
    campaign's all the same."""
    from annotation.blinding import blind_names
    from annotation.rating_reads import (
        answer_statement,
        assignment_from_row,
        assignment_statement,
    )
    from h2htalk.rows import bound_cursor

    me, campaign = world["me"], world["campaign"]
    key = queue.next_assignment(me, campaign).key
    read = {}
    for statement in (assignment_statement, answer_statement):
        with bound_cursor() as cursor:
            cursor.execute(*statement(me, key))
            read[statement] = assignment_from_row(cursor.fetchone()).comparison.campaign
    full, unnamed = read[assignment_statement], read[answer_statement]
    assert not hasattr(unnamed, "run_names") and hasattr(full, "run_names")
    assert unnamed.progress == full.progress
    assert blind_names(unnamed) == blind_names(full)
    assert RUN_NAME in blind_names(unnamed)
