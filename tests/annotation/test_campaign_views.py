"""Researchers' campaign pages: create/edit, object-level access, states, gold, export, monitoring."""

import csv
import io
import re
from datetime import UTC, datetime, timedelta

import pytest
from django.db.models import F
from django.urls import reverse

from annotation import campaigns, queue
from annotation.campaign_forms import PAIRING_RULE
from annotation.markdown import render_markdown
from annotation.models import Assignment, Campaign, Comparison, Judgment
from h2htalk.models import Job
from h2htalk.roles import RESEARCHER
from scenarios.models import GenerationRun, Response, Scenario
from tests.annotation import factories
from tests.conftest import make_user
from tests.scenarios import factories as scenario_factories

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def raters(roles, django_user_model):
    return factories.annotators(django_user_model, 3)


@pytest.fixture
def colleague(roles, django_user_model):
    return make_user(django_user_model, "researcher2", RESEARCHER)


@pytest.fixture
def outsider(roles, django_user_model):
    return make_user(django_user_model, "researcher3", RESEARCHER)


@pytest.fixture
def campaign(researcher, raters, colleague):
    """4 scenarios × 3 companions, all pairs: 12 comparisons; colleague is a member."""
    created = factories.campaign(researcher, raters, n_scenarios=4, overlap=3, name="Empathy A/B")
    created.members.add(colleague)
    return created


def seed_responses(owner, n_scenarios=4, tag="pool"):
    models = factories.companions()
    run = GenerationRun.objects.create(name=f"imported {tag}", kind="import")
    for i in range(n_scenarios):
        scenario = scenario_factories.scenario(owner, state="approved", tags=[tag])
        for model in models:
            Response.objects.create(
                run=run, scenario=scenario, companion=model, text=f"{model.name} answer {i}"
            )
    return models, run


def form_data(campaign=None, **overrides):
    data = {
        "name": "New campaign",
        "description": "",
        "guidelines": "",
        "scenario_query": "",
        "companions": [],
        "runs": [],
        "pairing": "all_pairs",
        "pairs_per_scenario": 1,
        "overlap": 3,
        "gold_share": 0.0,
        "lease_minutes": 15,
        "seed": 0,
        "members": [],
        "annotators": [],
    }
    if campaign is not None:
        data.update(
            name=campaign.name,
            description=campaign.description,
            guidelines=campaign.guidelines,
            scenario_query=campaign.scenario_query,
            companions=list(campaign.companions.values_list("pk", flat=True)),
            runs=list(campaign.runs.values_list("pk", flat=True)),
            pairing=campaign.pairing,
            pairs_per_scenario=campaign.pairs_per_scenario,
            overlap=campaign.overlap,
            gold_share=campaign.gold_share,
            lease_minutes=campaign.lease_minutes,
            seed=campaign.seed,
            members=list(campaign.members.values_list("pk", flat=True)),
            annotators=list(campaign.annotators.values_list("pk", flat=True)),
        )
    data.update(overrides)
    return data


# Create and edit.


def test_create_builds_comparisons_in_a_tracked_job(
    researcher_client, researcher, raters, colleague, django_capture_on_commit_callbacks
):
    models, run = seed_responses(researcher)
    scenario_factories.scenario(researcher, state="draft", tags=["pool"])  # filtered out
    page = researcher_client.get(reverse("campaigns:create"))
    form = page.context["form"]
    assert form.initial["scenario_query"] == "state=approved"
    assert set(form.fields["annotators"].queryset) == set(raters)
    assert list(form.fields["members"].queryset) == [colleague]  # other researchers only
    assert PAIRING_RULE in page.content.decode()

    data = form_data(
        name="Pilot",
        guidelines="Prefer **warmth**.",
        scenario_query="/scenarios/?tags=pool&state=approved&page=2",
        companions=[m.pk for m in models],
        runs=[run.pk],
        gold_share=0.1,
        seed=7,
        members=[colleague.pk],
        annotators=[r.pk for r in raters[:2]],
    )
    with django_capture_on_commit_callbacks(execute=True):
        response = researcher_client.post(reverse("campaigns:create"), data)
    campaign = Campaign.objects.get(name="Pilot")
    job = Job.objects.get(kind="campaign_build")
    assert response.status_code == 302
    assert response["Location"] == reverse("campaigns:detail", args=[campaign.pk])
    job.refresh_from_db()
    assert job.state == Job.State.COMPLETED, job.message
    assert job.params["campaign_id"] == campaign.pk
    assert job.result == {"campaign_id": campaign.pk, "created": 12, "removed": 0, "total": 12}
    assert "12 new comparisons" in researcher_client.get(response["Location"]).content.decode()
    assert campaign.owner == researcher and campaign.state == Campaign.State.DRAFT
    assert campaign.scenario_query == "tags=pool&state=approved"  # pasted URL, page dropped
    assert list(campaign.members.all()) == [colleague]
    assert set(campaign.annotators.all()) == set(raters[:2])
    assert campaign.comparisons.count() == 4 * 3  # all pairs of 3 companions on 4 scenarios


@pytest.mark.parametrize(
    ("pairing", "expected"),
    [
        ("random_pairs", 4 * 2),  # 2 pairs on each of the 4 scenarios
        ("adaptive", 3 * 2),  # burn-in: 2 per model pair (6), 2 per scenario; votes steer the rest
    ],
)
def test_random_and_adaptive_pairing_build_pairs_per_scenario(
    researcher_client, researcher, pairing, expected, django_capture_on_commit_callbacks
):
    models, run = seed_responses(researcher)
    data = form_data(
        scenario_query="tags=pool",
        companions=[m.pk for m in models],
        runs=[run.pk],
        pairing=pairing,
        pairs_per_scenario=2,
    )
    with django_capture_on_commit_callbacks(execute=True):
        researcher_client.post(reverse("campaigns:create"), data)
    assert Campaign.objects.get().comparisons.count() == expected


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"companions": "first"}, "companions", "at least two companions"),
        ({"scenario_query": "language=xx"}, "scenario_query", "scenario filter cannot be used"),
        ({"scenario_query": "q=nothing-has-this"}, "scenario_query", "No scenario matches"),
        ({"overlap": 0}, "overlap", "greater than or equal to 1"),
        ({"overlap": 11}, "overlap", "less than or equal to 10"),
        ({"gold_share": 0.6}, "gold_share", "less than or equal to 0.5"),
        ({"runs": []}, "runs", "required"),
    ],
)
def test_create_validation_errors(researcher_client, researcher, overrides, field, message):
    models, run = seed_responses(researcher)
    data = form_data(scenario_query="tags=pool", companions=[m.pk for m in models], runs=[run.pk])
    if overrides.get("companions") == "first":
        overrides = {"companions": [models[0].pk]}
    response = researcher_client.post(reverse("campaigns:create"), {**data, **overrides})
    assert response.status_code == 200
    assert message in str(response.context["form"].errors[field])
    assert not Campaign.objects.exists() and not Job.objects.exists()


def test_members_must_be_other_researchers(researcher_client, researcher, raters):
    models, run = seed_responses(researcher)
    data = form_data(
        scenario_query="tags=pool",
        companions=[m.pk for m in models],
        runs=[run.pk],
        members=[researcher.pk, raters[0].pk],
    )
    response = researcher_client.post(reverse("campaigns:create"), data)
    assert "not one of the available choices" in str(response.context["form"].errors["members"])


def _judge(campaign, rater, screen=-1):
    item = queue.next_assignment(rater, campaign)
    return queue.submit(rater, item.key, queue.Submission(screen))


def test_pairing_settings_are_frozen_once_judgments_exist(
    researcher_client, campaign, raters, django_capture_on_commit_callbacks
):
    _judge(campaign, raters[0])
    url = reverse("campaigns:edit", args=[campaign.pk])
    page = researcher_client.get(url).content.decode()
    assert "its comparison settings are frozen" in page

    companions = list(campaign.companions.values_list("pk", flat=True))
    for change in (
        {"companions": companions[:2]},
        {"pairing": "random_pairs"},
        {"seed": 99},
        {"scenario_query": "tags=campaign&language=en"},
    ):
        response = researcher_client.post(url, form_data(campaign, **change))
        form = response.context["form"]
        assert response.status_code == 200, change
        assert PAIRING_RULE in str(form.non_field_errors())
        field = next(iter(change))
        assert "already has 1 judgment(s)" in str(form.errors[field])
    campaign.refresh_from_db()
    assert campaign.companions.count() == 3 and campaign.seed == 0
    assert campaign.comparisons.count() == 12

    # The other settings still change, and nothing is rebuilt.
    with django_capture_on_commit_callbacks(execute=True):
        response = researcher_client.post(
            url, form_data(campaign, description="now with k = 5", overlap=5, lease_minutes=30)
        )
    assert response["Location"] == reverse("campaigns:detail", args=[campaign.pk])
    campaign.refresh_from_db()
    assert (campaign.overlap, campaign.lease_minutes) == (5, 30)
    assert not Job.objects.exists()


def test_changing_pairing_before_judgments_rebuilds_and_keeps_gold(
    researcher_client, campaign, django_capture_on_commit_callbacks
):
    first, second, _third = campaign.companions.order_by("pk")
    kept = (
        campaign.comparisons.filter(response_a__companion=first, response_b__companion=second)
        .order_by("pk")
        .first()
    )
    Comparison.objects.filter(pk=kept.pk).update(is_gold=True, gold_preference=1)
    url = reverse("campaigns:edit", args=[campaign.pk])
    data = form_data(campaign, companions=[first.pk, second.pk])
    page = researcher_client.post(url, data).content.decode()
    assert f"Change how {campaign.name} pairs responses (companions)?" in page
    assert "deleted, with any gold mark on them" in page
    assert campaign.companions.count() == 3 and not Job.objects.exists()  # nothing saved yet
    with django_capture_on_commit_callbacks(execute=True):
        response = researcher_client.post(url, {**data, "confirmed": "1"})
    job = Job.objects.get(kind="campaign_build")
    assert response["Location"] == reverse("campaigns:detail", args=[campaign.pk])
    job.refresh_from_db()
    assert job.params["reset"] is True and job.result["removed"] == 8
    assert campaign.comparisons.count() == 4  # one pair on each of the 4 scenarios
    kept.refresh_from_db()
    assert kept.is_gold and kept.gold_preference == 1


def test_rebuild_is_idempotent_and_adds_what_is_new(
    researcher_client, researcher, campaign, django_capture_on_commit_callbacks
):
    url = reverse("campaigns:rebuild", args=[campaign.pk])
    assert researcher_client.get(url).status_code == 405
    with django_capture_on_commit_callbacks(execute=True):
        response = researcher_client.post(url, {"confirmed": "1"})
    job = Job.objects.get()
    assert response["Location"] == reverse("campaigns:detail", args=[campaign.pk])
    job.refresh_from_db()
    assert job.result["created"] == 0 and campaign.comparisons.count() == 12

    run = campaign.runs.get()
    scenario = scenario_factories.scenario(researcher, state="approved", tags=["campaign"])
    for model in campaign.companions.all():
        Response.objects.create(run=run, scenario=scenario, companion=model, text="late answer")
    with django_capture_on_commit_callbacks(execute=True):
        researcher_client.post(url, {"confirmed": "1"})
    assert campaign.comparisons.count() == 15
    assert Job.objects.order_by("-pk").first().result["created"] == 3


# Object-level access.

OBJECT_PAGES = ["campaigns:detail", "campaigns:edit", "campaigns:gold", "campaigns:export"]


def test_other_researchers_get_404_everywhere(client, outsider, campaign):
    client.force_login(outsider)
    for name in OBJECT_PAGES:
        assert client.get(reverse(name, args=[campaign.pk])).status_code == 404, name
    before = (campaign.state, campaign.comparisons.count())
    for name, data in (
        ("campaigns:state", {"action": "close"}),
        ("campaigns:rebuild", {}),
        ("campaigns:edit", form_data(campaign, name="hijacked")),
        ("campaigns:gold", {"comparison": campaign.comparisons.first().pk, "action": "unmark"}),
    ):
        assert client.post(reverse(name, args=[campaign.pk]), data).status_code == 404, name
    campaign.refresh_from_db()
    assert (campaign.state, campaign.comparisons.count()) == before
    assert campaign.name == "Empathy A/B" and not Job.objects.exists()
    listing = client.get(reverse("campaigns:list"))
    assert listing.status_code == 200 and "Empathy A/B" not in listing.content.decode()


@pytest.mark.parametrize("who", ["owner", "member", "admin"])
def test_owner_member_and_admin_may_use_every_page(
    client, who, researcher, colleague, admin_user, campaign
):
    client.force_login({"owner": researcher, "member": colleague, "admin": admin_user}[who])
    for name in OBJECT_PAGES:
        assert client.get(reverse(name, args=[campaign.pk])).status_code == 200, name
    assert "Empathy A/B" in client.get(reverse("campaigns:list")).content.decode()


def test_annotators_and_anonymous_users_are_refused(client, annotator, campaign):
    urls = [reverse("campaigns:list"), reverse("campaigns:create")]
    urls += [reverse(name, args=[campaign.pk]) for name in OBJECT_PAGES]
    for url in urls:
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/login/")
    client.force_login(annotator)
    for url in urls:
        assert client.get(url).status_code == 403, url


# State changes.


def test_state_actions_follow_the_rules(researcher_client, researcher, raters):
    campaign = factories.campaign(researcher, raters, n_scenarios=1, state=Campaign.State.DRAFT)
    url = reverse("campaigns:state", args=[campaign.pk])
    assert researcher_client.get(url).status_code == 405

    def act(action):
        researcher_client.post(url, {"action": action, "confirmed": "1"})
        campaign.refresh_from_db()
        return campaign.state

    assert act("pause") == Campaign.State.DRAFT  # a draft cannot pause
    assert act("open") == Campaign.State.OPEN
    assert act("pause") == Campaign.State.PAUSED
    assert act("open") == Campaign.State.OPEN
    assert act("close") == Campaign.State.CLOSED
    assert act("pause") == Campaign.State.CLOSED
    assert act("launch") == Campaign.State.CLOSED  # unknown action
    page = researcher_client.get(reverse("campaigns:detail", args=[campaign.pk]))
    assert 'id="state-open"' in page.content.decode()  # reopen
    assert "Reopen" in page.content.decode()


# Destructive actions ask first (h2htalk.confirmation).


def confirm_form(page: str) -> dict:
    """The fields the confirmation page posts (its hidden inputs), by name."""
    return dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page))


def test_close_asks_first_and_only_a_confirmed_post_closes(researcher_client, campaign):
    url = reverse("campaigns:state", args=[campaign.pk])
    response = researcher_client.post(url, {"action": "close"})
    page = response.content.decode()
    assert response.status_code == 200 and "Are you sure? Close the campaign" in page
    assert "an answer to an item already on someone&#x27;s screen is refused" in page
    assert 'id="confirm-yes"' in page and 'class="danger"' in page
    assert f'href="{reverse("campaigns:detail", args=[campaign.pk])}" id="confirm-cancel"' in page
    campaign.refresh_from_db()
    assert campaign.state == Campaign.State.OPEN  # nothing happened yet
    fields = confirm_form(page)
    assert fields["action"] == "close" and fields["confirmed"] == "1"
    fields.pop("csrfmiddlewaretoken", None)
    response = researcher_client.post(url, fields)
    assert response.status_code == 302
    campaign.refresh_from_db()
    assert campaign.state == Campaign.State.CLOSED


def test_the_confirmation_escapes_the_campaign_name(researcher_client, campaign):
    Campaign.objects.filter(pk=campaign.pk).update(name='<img src=x onerror="alert(1)">')
    url = reverse("campaigns:state", args=[campaign.pk])
    page = researcher_client.post(url, {"action": "close"}).content.decode()
    assert "<img src=x" not in page and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page
    detail = researcher_client.get(reverse("campaigns:detail", args=[campaign.pk]))
    assert 'data-confirm="Close the campaign &lt;img' in detail.content.decode()


def test_pausing_does_not_ask(researcher_client, campaign):
    researcher_client.post(reverse("campaigns:state", args=[campaign.pk]), {"action": "pause"})
    campaign.refresh_from_db()
    assert campaign.state == Campaign.State.PAUSED


def test_rebuild_asks_first(researcher_client, campaign):
    url = reverse("campaigns:rebuild", args=[campaign.pk])
    page = researcher_client.post(url).content.decode()
    assert "Are you sure? Rebuild the comparisons" in page and not Job.objects.exists()
    assert researcher_client.post(url, {"confirmed": "yes"}).status_code == 200  # only "1"
    assert not Job.objects.exists()
    assert researcher_client.post(url, confirm_form(page)).status_code == 302
    assert Job.objects.filter(kind="campaign_build").count() == 1


def test_destructive_buttons_look_dangerous_and_carry_their_question(researcher_client, campaign):
    page = researcher_client.get(reverse("campaigns:detail", args=[campaign.pk])).content.decode()
    close = re.search(r'<button[^>]*id="state-close"[^>]*>', page).group(0)
    assert 'class="danger"' in close and 'data-confirm="Close the campaign' in close
    rebuild = re.search(r'<button[^>]*id="rebuild"[^>]*>', page).group(0)
    assert "danger" in rebuild and "data-confirm=" in rebuild
    pause = re.search(r'<button[^>]*id="state-pause"[^>]*>', page).group(0)
    assert "danger" not in pause and "data-confirm" not in pause
    export = re.search(r"<a[^>]*>Export CSV</a>", page).group(0)
    assert "danger" not in export


def test_unmarking_gold_asks_first(researcher_client, campaign):
    comparison = campaign.comparisons.first()
    Comparison.objects.filter(pk=comparison.pk).update(is_gold=True, gold_preference=-1)
    url = reverse("campaigns:gold", args=[campaign.pk])
    gold_page = researcher_client.get(url).content.decode()
    assert 'class="small danger secondary" data-confirm="Unmark comparison' in gold_page
    data = {"comparison": comparison.pk, "action": "unmark", "query": "subtask=dialogue_base"}
    page = researcher_client.post(url, data).content.decode()
    assert f"Unmark comparison {comparison.pk} as gold?" in page
    assert f'href="{url}?subtask=dialogue_base" id="confirm-cancel"' in page
    assert Comparison.objects.get(pk=comparison.pk).is_gold
    researcher_client.post(url, confirm_form(page))
    assert not Comparison.objects.get(pk=comparison.pk).is_gold


def test_removing_annotators_on_edit_asks_first_and_keeps_every_field(
    researcher_client, campaign, raters
):
    url = reverse("campaigns:edit", args=[campaign.pk])
    staying = [rater.pk for rater in raters[1:]]
    data = form_data(campaign, annotators=staying, description="two lines\nof text")
    page = researcher_client.post(url, data).content.decode()
    assert f"Remove {raters[0].username} from the annotator pool" in page
    assert campaign.annotators.count() == len(raters)  # nothing saved yet
    campaign.refresh_from_db()
    assert campaign.description == ""
    fields = re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page)
    assert sorted(int(v) for name, v in fields if name == "annotators") == sorted(staying)
    confirmed = {}
    for name, value in fields:
        confirmed.setdefault(name, []).append(value)
    assert researcher_client.post(url, confirmed).status_code == 302
    campaign.refresh_from_db()
    assert set(campaign.annotators.values_list("pk", flat=True)) == set(staying)
    assert campaign.description == "two lines\nof text"
    # Adding someone back asks nothing.
    back = form_data(campaign, annotators=[rater.pk for rater in raters])
    assert researcher_client.post(url, back).status_code == 302
    assert campaign.annotators.count() == len(raters)


def test_settings_count_what_they_list(researcher_client, campaign, colleague):
    page = researcher_client.get(reverse("campaigns:detail", args=[campaign.pk])).content.decode()
    n = campaign.annotators.count()
    assert f"Annotator pool ({n})" in page and f"{n} in the pool" in page
    assert f"Researchers sharing it ({campaign.members.count()})" in page


def test_opening_needs_comparisons(researcher_client, researcher):
    empty = Campaign.objects.create(name="empty", owner=researcher)
    response = researcher_client.post(
        reverse("campaigns:state", args=[empty.pk]), {"action": "open"}, follow=True
    )
    assert "no comparisons" in response.content.decode()
    empty.refresh_from_db()
    assert empty.state == Campaign.State.DRAFT


# Gold items.


def test_gold_page_marks_and_unmarks_with_the_pair_keyed_answer(researcher_client, campaign):
    comparison = campaign.comparisons.select_related(
        "response_a__companion", "response_b__companion"
    ).first()
    url = reverse("campaigns:gold", args=[campaign.pk])
    page = researcher_client.get(url).content.decode()
    assert comparison.response_a.companion.name in page  # researchers see model names
    assert comparison.response_a.text in page and comparison.response_b.text in page

    response = researcher_client.post(
        url,
        {
            "comparison": comparison.pk,
            "action": "mark",
            "gold_preference": "1",
            "gold_note": " B follows SAP ",
            "query": "subtask=dialogue_emotion&page=1&next=https://evil.example",
        },
    )
    assert response["Location"] == f"{url}?subtask=dialogue_emotion&page=1"
    comparison.refresh_from_db()
    assert (comparison.is_gold, comparison.gold_preference, comparison.gold_note) == (
        True,
        1,
        "B follows SAP",
    )
    page = researcher_client.get(url).content.decode()
    assert f'id="comparison-{comparison.pk}" class="is-gold"' in page

    # No answer chosen: refused with a reason.
    other = campaign.comparisons.exclude(pk=comparison.pk).first()
    response = researcher_client.post(
        url, {"comparison": other.pk, "action": "mark", "gold_preference": ""}, follow=True
    )
    assert "Choose the known answer" in response.content.decode()
    assert not Comparison.objects.get(pk=other.pk).is_gold

    researcher_client.post(url, {"comparison": comparison.pk, "action": "unmark", "confirmed": "1"})
    comparison.refresh_from_db()
    assert (comparison.is_gold, comparison.gold_preference, comparison.gold_note) == (
        False,
        None,
        "",
    )


def test_gold_marking_only_reaches_comparisons_of_this_campaign(
    researcher_client, researcher, raters, campaign
):
    elsewhere = factories.campaign(researcher, raters, n_scenarios=1, name="elsewhere")
    foreign = elsewhere.comparisons.first()
    researcher_client.post(
        reverse("campaigns:gold", args=[campaign.pk]),
        {"comparison": foreign.pk, "action": "mark", "gold_preference": "0"},
    )
    assert not Comparison.objects.get(pk=foreign.pk).is_gold


def test_gold_page_filters_by_subtask_and_paginates(researcher_client, campaign, monkeypatch):
    scenario = Scenario.objects.get(pk=campaign.comparisons.first().scenario_id)
    Scenario.objects.filter(pk=scenario.pk).update(subtask="dialogue_base")
    url = reverse("campaigns:gold", args=[campaign.pk])
    page = researcher_client.get(url, {"subtask": "dialogue_base"})
    assert {c.scenario_id for c in page.context["page"].object_list} == {scenario.pk}
    assert len(page.context["page"].object_list) == 3
    assert [s for s, _ in page.context["subtasks"]] == ["dialogue_base", "dialogue_emotion"]

    monkeypatch.setattr(campaigns, "GOLD_PAGE_SIZE", 5)
    last = researcher_client.get(url, {"page": 3})
    assert last.context["page"].paginator.num_pages == 3
    assert len(last.context["page"].object_list) == 2
    Comparison.objects.filter(pk=campaign.comparisons.first().pk).update(is_gold=True)
    assert len(researcher_client.get(url, {"gold": "1"}).context["page"].object_list) == 1


# CSV export.


def test_export_names_the_companions_by_the_side_shown(researcher_client, campaign, raters):
    first = queue.next_assignment(raters[0], campaign)
    Assignment.objects.filter(pk=first.pk).update(left_is_a=False)
    queue.submit(
        raters[0],
        first.key,
        queue.Submission(
            -2,
            ratings={"left": {"empathy": 5, "safety": 4}, "right": {"empathy": 1}},
            rationale="the left one was kinder, also =1+1",
            client_time_ms=1234,
        ),
    )
    second = queue.next_assignment(raters[1], campaign)
    assert second.comparison_id == first.comparison_id
    Assignment.objects.filter(pk=second.pk).update(left_is_a=True)
    queue.submit(raters[1], second.key, queue.Submission(None, both_unacceptable=True))
    Comparison.objects.filter(pk=first.comparison_id).update(is_gold=True, gold_preference=-1)
    for rater in raters:  # some more, for the general check below
        for _ in range(3):
            _judge(campaign, rater, screen=-1)

    response = researcher_client.get(reverse("campaigns:export", args=[campaign.pk]))
    assert response["Content-Type"] == "text/csv"
    assert response["Content-Disposition"].startswith(
        f'attachment; filename="campaign-{campaign.pk}-judgments-'
    )
    body = b"".join(response.streaming_content).decode()
    rows = list(csv.DictReader(io.StringIO(body)))
    assert len(rows) == Judgment.objects.count() == 11
    assert list(rows[0])[:11] == [
        "campaign",
        "comparison_id",
        "subtask",
        "external_id",
        "companion_a",
        "companion_b",
        "shown_left",
        "left_companion",
        "screen_preference",
        "preference",
        "both_unacceptable",
    ]
    comparison = Comparison.objects.select_related(
        "scenario", "response_a__companion", "response_b__companion"
    ).get(pk=first.comparison_id)
    name_a = comparison.response_a.companion.name
    name_b = comparison.response_b.companion.name
    by_annotator = {(r["annotator"], r["comparison_id"]): r for r in rows}
    mine = by_annotator[(raters[0].username, str(comparison.pk))]
    assert mine == {
        **mine,
        "campaign": "Empathy A/B",
        "subtask": "dialogue_emotion",
        "external_id": comparison.scenario.external_id,
        "companion_a": name_a,
        "companion_b": name_b,
        "shown_left": "b",
        "left_companion": name_b,
        "screen_preference": "-2",
        "preference": "2",  # left (= B) much better
        "both_unacceptable": "0",
        "b_empathy": "5",
        "b_safety": "4",
        "a_empathy": "1",
        "a_safety": "",
        "rationale": "the left one was kinder, also =1+1",
        "client_time_ms": "1234",
        "is_gold": "1",
        "gold_preference": "-1",
    }
    theirs = by_annotator[(raters[1].username, str(comparison.pk))]
    assert (theirs["shown_left"], theirs["left_companion"]) == ("a", name_a)
    assert (theirs["screen_preference"], theirs["preference"]) == ("0", "0")  # the tie point
    assert theirs["both_unacceptable"] == "1" and theirs["client_time_ms"] == ""

    names = {c.pk: c.name for c in campaign.companions.all()}
    for row in rows:
        judgment = Judgment.objects.select_related(
            "assignment", "comparison__response_a", "comparison__response_b"
        ).get(annotator__username=row["annotator"], comparison_id=row["comparison_id"])
        assert row["companion_a"] == names[judgment.comparison.response_a.companion_id]
        assert row["companion_b"] == names[judgment.comparison.response_b.companion_id]
        left_is_a = judgment.assignment.left_is_a
        assert row["shown_left"] == ("a" if left_is_a else "b")
        assert row["left_companion"] == (row["companion_a"] if left_is_a else row["companion_b"])
        sign = 1 if left_is_a else -1
        assert int(row["preference"]) == sign * int(row["screen_preference"])
        assert int(row["time_on_task_ms"]) == judgment.time_on_task_ms
        assert datetime.fromisoformat(row["created_at"]) == judgment.created_at


def test_export_of_an_empty_campaign_is_just_the_header(researcher_client, campaign):
    response = researcher_client.get(reverse("campaigns:export", args=[campaign.pk]))
    lines = b"".join(response.streaming_content).decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("campaign,comparison_id,")
    assert lines[0].endswith("created_at,is_gold,gold_preference")


# Monitoring on the detail page.


def _vote(campaign, comparison, rater, left_is_a, screen, minute, time_ms, client_ms=None):
    assignment = Assignment.objects.create(
        comparison=comparison,
        annotator=rater,
        left_is_a=left_is_a,
        lease_expires_at=T0,
        state=Assignment.State.SUBMITTED,
    )
    judgment = Judgment.objects.create(
        assignment=assignment,
        comparison=comparison,
        annotator=rater,
        screen_preference=screen,
        preference=screen if left_is_a else -screen,
        time_on_task_ms=time_ms,
        client_time_ms=client_ms,
    )
    Judgment.objects.filter(pk=judgment.pk).update(created_at=T0 + timedelta(minutes=minute))
    Comparison.objects.filter(pk=comparison.pk).update(judgment_count=F("judgment_count") + 1)


def hand_made_votes(campaign, raters):
    """12 comparisons (c0…c11), c11 gold "A better"; two raters vote, a third only skips.

    rater0: c0 (A left, -1), c1 (B left, -2), c2 (A left, tie), gold c11 (B left, +1 = A: right)
      at minutes 0, 2, 4, 6, taking 60, 120, 180, 60 s; browser times 50 and 70 s on c0, c2.
    rater1: c0…c7 and gold c11, all "left better", A and B alternating on the left, one a
      minute, 30 s each; on c11 B was left, so the vote is B: wrong.
    rater2: skipped c8 ("language: zh").
    """
    c = list(campaign.comparisons.order_by("pk"))
    Comparison.objects.filter(pk=c[11].pk).update(is_gold=True, gold_preference=-1)
    r0, r1, r2 = raters
    _vote(campaign, c[0], r0, True, -1, 0, 60_000, 50_000)
    _vote(campaign, c[1], r0, False, -2, 2, 120_000)
    _vote(campaign, c[2], r0, True, 0, 4, 180_000, 70_000)
    _vote(campaign, c[11], r0, False, 1, 6, 60_000)
    for i in range(8):
        _vote(campaign, c[i], r1, i % 2 == 0, -1, i, 30_000)
    _vote(campaign, c[11], r1, False, -1, 8, 30_000)
    Assignment.objects.create(
        comparison=c[8],
        annotator=r2,
        left_is_a=True,
        lease_expires_at=T0,
        state=Assignment.State.SKIPPED,
        skip_reason="language: zh",
    )


def test_detail_page_shows_hand_computed_monitoring_numbers(researcher_client, campaign, raters):
    hand_made_votes(campaign, raters)
    response = researcher_client.get(reverse("campaigns:detail", args=[campaign.pk]))
    page = response.content.decode()
    overview = response.context["overview"]
    # Regular c0…c10 with k = 3: c0, c1, c2 have 2 votes, c3…c7 one, c8…c10 none.
    assert (overview["complete"], overview["partial"], overview["untouched"]) == (0, 8, 3)
    assert (overview["judged"], overview["target"]) == (11, 33)
    assert (overview["gold"], overview["gold_judgments"]) == (1, 2)
    assert 'id="n-partial">8<' in page and 'id="n-untouched">3<' in page
    assert 'id="n-gold">1<' in page
    assert "11 / 33 judgments (33.3%)" in page

    rows = {row["annotator"]: row for row in response.context["rows"]}
    r0, r1, r2 = (rows[r.username] for r in raters)
    # rater0: visible times 50 (browser), 120 (lease), 70 (browser), 60 (lease) s: median
    # 65 s from mixed clocks; 300 s on items -> 4 / (300/3600) = 48 an hour.
    assert r0["per_hour"] == pytest.approx(48.0)
    assert r0["median_time_ms"] == 65_000 and r0["time_source"] == "mixed"
    assert r0["median_server_ms"] == 90_000  # 60, 60, 120, 180 s
    assert (r0["gold_correct"], r0["gold_n"]) == (1, 1)
    assert (r0["left"], r0["non_tie"]) == (2, 3) and r0["left_p"] == pytest.approx(1.0)
    assert not r0["flagged"]
    # rater1: 9 × 30 s -> 120 an hour; 9 of 9 left: p = 2/512 < 0.01, outside 35–65%.
    assert r1["per_hour"] == pytest.approx(120.0)
    assert (r1["gold_correct"], r1["gold_n"]) == (0, 1)
    assert r1["left_p"] == pytest.approx(2 / 512) and r1["flagged"]
    assert r1["flag"].startswith("position: picks the left side in 100% of 9 non-tie votes")
    assert r2["judgments"] == 0 and r2["skips"] == 1

    def cells(username):
        start = page.index(f'id="annotator-{username}"')
        return page[start : page.index("</tr>", start)]

    row0 = cells(raters[0].username)
    assert '"per-hour">48.0<' in row0 and "1 min 5 s" in row0 and "1 min 30 s" in row0
    assert '"gold">1 of 1 (100%)<' in row0 and "(67%) <span" in row0
    assert "position" not in row0
    row1 = cells(raters[1].username)
    assert '"per-hour">120.0<' in row1 and "30.0 s" in row1 and '"gold">0 of 1 (0%)<' in row1
    assert (
        "9 of 9 (100%) <span" in row1 and "· p=0.004" in row1 and "position: picks the left" in row1
    )
    row2 = cells(raters[2].username)
    assert "(language: 1)" in row2 and '"per-hour">—<' in row2
    assert "judgments over the hours spent on them" in page


def test_detail_page_query_count_does_not_grow_with_judgments(
    researcher_client, researcher, raters, django_user_model, django_assert_max_num_queries
):
    campaign = factories.campaign(researcher, raters, n_scenarios=10, gold_share=0.2)
    campaign.members.add(make_user(django_user_model, "researcher9", RESEARCHER))
    url = reverse("campaigns:detail", args=[campaign.pk])
    with django_assert_max_num_queries(MAX_DETAIL_QUERIES):
        researcher_client.get(url)
    Comparison.objects.filter(pk__in=campaign.comparisons.values("pk")[:3]).update(
        is_gold=True, gold_preference=0
    )
    for rater in raters:
        for screen in (-2, -1, 0, 1, 2, -1, -1, 1, 0, -2):
            _judge(campaign, rater, screen)
        queue.skip(rater, queue.next_assignment(rater, campaign).key, "other", "tired")
    assert Judgment.objects.count() == 30
    with django_assert_max_num_queries(MAX_DETAIL_QUERIES):
        response = researcher_client.get(url)
    assert response.status_code == 200 and len(response.context["rows"]) == 3


# Session, user, roles, campaign; judgments, skips, pool, exclusions, build job, overview and
# its excluded judgments, companions, runs, members, owner (15); care for raters: exposure
# (2), raters short for risk comparisons (pool with opt-outs, risk comparisons, their
# assignments: 3): 20 at most, whatever the number of judgments, annotators or comparisons
# (the annotators' qualification phases are read only where the campaign requires it).
MAX_DETAIL_QUERIES = 20


def test_list_shows_progress_and_annotator_count(researcher_client, campaign, raters):
    hand_made_votes(campaign, raters)
    response = researcher_client.get(reverse("campaigns:list"))
    (row,) = response.context["campaigns"]
    assert (row.n_regular, row.n_gold, row.n_judged, row.n_annotators) == (11, 1, 11, 3)
    assert row.target == 33 and row.percent == pytest.approx(100 / 3)
    assert "11 / 33 (33%)" in response.content.decode()


def test_list_query_count_is_constant(
    researcher_client, researcher, raters, django_assert_max_num_queries
):
    for i in range(4):
        factories.campaign(researcher, raters, n_scenarios=1, name=f"c{i}")
    with django_assert_max_num_queries(4):  # session, user, roles, campaigns with counts
        researcher_client.get(reverse("campaigns:list"))


# Guidelines.


def test_guidelines_are_rendered_from_markdown_and_sanitised(researcher_client, campaign):
    campaign.guidelines = (
        "## How to rate\n\nPrefer **warm** answers. [SAP](https://example.org/sap)\n\n"
        "<script>alert('x')</script>\n\n<img src=x onerror=alert(1)>\n\n"
        '<a href="javascript:alert(2)" onclick="alert(3)">click</a>'
    )
    campaign.save()
    page = researcher_client.get(reverse("campaigns:detail", args=[campaign.pk])).content.decode()
    start = page.index('id="guidelines"')
    block = page[start : page.index("</div>", start)]
    assert "<h2>How to rate</h2>" in block and "<strong>warm</strong>" in block
    assert 'href="https://example.org/sap"' in block
    for bad in ("<script", "alert(", "onerror", "onclick", "javascript:", "<img"):
        assert bad not in block, bad


def test_render_markdown_drops_scripts_and_handlers():
    html = render_markdown('<script>steal()</script><b onmouseover="x()">hi</b> *ok*')
    assert "<script" not in html and "steal" not in html and "onmouseover" not in html
    assert "<b>hi</b>" in html and "<em>ok</em>" in html
