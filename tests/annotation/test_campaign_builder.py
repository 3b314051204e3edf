"""Issue 23 point 1: the campaign builder picks its scenario set with filters, counts what it
will build before saving, refuses a set of 0 comparisons (page and API), lands on the
campaign's page, and calls a build "Completed" only when it made comparisons."""

from django.urls import reverse

from annotation.models import Campaign
from annotation.scenario_set import count_set
from annotation.tasks import queue_build
from h2htalk.models import Job
from scenarios.models import GenerationRun, Response
from tests.annotation import factories
from tests.annotation.test_campaign_api import CAMPAIGNS, _create_body, send
from tests.annotation.test_campaign_views import form_data, seed_responses
from tests.annotation.test_rating_api import token_client
from tests.scenarios import factories as scenario_factories


def picker(**chosen) -> dict:
    """The picker's fields as the page posts them (set-picker marks a page submission)."""
    data = {"set-picker": "1", "set-extra": ""}
    for name, values in chosen.items():
        data[f"set-{name}"] = values
    return data


def test_picker_stores_the_chosen_filters_as_the_scenario_query(
    researcher_client, researcher, django_capture_on_commit_callbacks
):
    models, run = seed_responses(researcher, n_scenarios=3, tag="pool")
    scenario_factories.scenario(researcher, state="approved", tags=["other"])  # not picked
    data = {
        **form_data(name="Picked", companions=[m.pk for m in models], runs=[run.pk]),
        "scenario_query": "",  # what the hidden field carries on a new page: the picker wins
        **picker(state=["approved"], subtask=["dialogue_emotion"], language=["en"], tags=["pool"]),
    }
    with django_capture_on_commit_callbacks(execute=True):
        response = researcher_client.post(reverse("campaigns:create"), data)
    campaign = Campaign.objects.get(name="Picked")
    assert response["Location"] == reverse("campaigns:detail", args=[campaign.pk])
    query = "subtask=dialogue_emotion&state=approved&language=en&tags=pool"
    assert campaign.scenario_query == query
    assert campaign.comparisons.count() == 3 * 3

    edit = researcher_client.get(reverse("campaigns:edit", args=[campaign.pk]))
    shown = edit.context["form"].scenario_set
    assert shown["tags"].value() == ["pool"] and shown["state"].value() == ["approved"]
    page = edit.content.decode()
    assert 'name="set-tags" value="pool"' in page and "checked" in page


def test_picker_keeps_filters_it_does_not_offer(researcher_client, researcher):
    models, run = seed_responses(researcher, n_scenarios=2, tag="pool")
    campaign = Campaign.objects.create(
        name="Old", owner=researcher, scenario_query="q=rough&tags=pool&state=approved"
    )
    campaign.companions.set(models)
    campaign.runs.set([run])
    form = researcher_client.get(reverse("campaigns:edit", args=[campaign.pk])).context["form"]
    assert form.scenario_set["extra"].value() == "q=rough"
    data = {
        **form_data(campaign),
        **picker(state=["approved"], tags=["pool"]),
        "set-extra": "q=rough",
    }
    researcher_client.post(reverse("campaigns:edit", args=[campaign.pk]), data)
    campaign.refresh_from_db()
    assert campaign.scenario_query == "state=approved&tags=pool&q=rough"


def test_live_count_says_what_the_build_will_make(researcher_client, researcher):
    models, run = seed_responses(researcher, n_scenarios=4, tag="pool")
    scenario_factories.scenario(researcher, state="draft", tags=["pool"])
    scenario_factories.scenario(researcher, state="draft", tags=["pool"])
    url = reverse("campaigns:set_count")
    base = {"companions": [m.pk for m in models], "runs": [run.pk], "pairing": "all_pairs"}

    page = researcher_client.get(url, {**base, **picker(state=["approved"], tags=["pool"])})
    count = page.context["count"]
    assert (count.scenarios, count.approved, count.comparisons) == (4, 4, 12)
    assert count.companions == sorted(m.name for m in models)
    assert count.not_approved_elsewhere == 2
    html = page.content.decode()
    assert '<dd id="set-comparisons">12</dd>' in html
    assert "2 more scenarios match these filters but are not approved yet" in html

    random = {**base, "pairing": "random_pairs", "pairs_per_scenario": 2}
    count = researcher_client.get(url, {**random, **picker(state=["approved"])}).context["count"]
    assert count.comparisons == 4 * 2

    only_drafts = researcher_client.get(url, {**base, **picker(state=["draft"])})
    refused = only_drafts.context["count"]
    assert (refused.scenarios, refused.comparisons) == (2, 0)
    assert "no responses from the chosen companions" in refused.reason
    assert 'id="set-refused"' in only_drafts.content.decode()


def test_the_count_equals_what_the_build_makes(researcher):
    campaign = factories.campaign(researcher, [], n_scenarios=5, state=Campaign.State.DRAFT)
    count = count_set(
        campaign.scenario_query,
        campaign.companions.values_list("pk", flat=True),
        campaign.runs.values_list("pk", flat=True),
    )
    assert count.comparisons == campaign.comparisons.count() == 5 * 3


def test_a_set_of_zero_comparisons_is_refused_on_the_page(researcher_client, researcher):
    models, _run = seed_responses(researcher, n_scenarios=2, tag="pool")
    empty_run = GenerationRun.objects.create(name="nothing yet", kind="import")
    data = {
        **form_data(name="Empty", companions=[m.pk for m in models], runs=[empty_run.pk]),
        **picker(state=["approved"]),
    }
    response = researcher_client.post(reverse("campaigns:create"), data)
    assert response.status_code == 200
    errors = " ".join(response.context["form"].errors["scenario_query"])
    assert "This set gives 0 comparisons" in errors
    assert "no responses from the chosen companions in the chosen runs" in errors
    assert "This set gives 0 comparisons" in response.content.decode()
    assert not Campaign.objects.exists() and not Job.objects.exists()


def test_one_companion_with_answers_is_refused_with_its_reason(researcher_client, researcher):
    models, run = seed_responses(researcher, n_scenarios=2, tag="pool")
    Response.objects.exclude(companion=models[0]).delete()
    data = {
        **form_data(name="One", companions=[m.pk for m in models], runs=[run.pk]),
        **picker(state=["approved"]),
    }
    errors = researcher_client.post(reverse("campaigns:create"), data).context["form"].errors
    assert "no responses from two of the chosen companions" in errors["scenario_query"][0]


def test_the_api_refuses_zero_comparisons_naming_the_field(
    researcher, django_capture_on_commit_callbacks
):
    models, _run = seed_responses(researcher, n_scenarios=2, tag="pool")
    empty_run = GenerationRun.objects.create(name="nothing yet", kind="import")
    body = _create_body(models, empty_run)
    with django_capture_on_commit_callbacks(execute=True):
        response = send(token_client(researcher), "post", CAMPAIGNS, body)
    assert response.status_code == 400
    assert "0 comparisons" in " ".join(response.json()["scenario_query"]), response.json()
    assert not Campaign.objects.exists() and not Job.objects.exists()


def test_a_build_that_makes_nothing_is_a_failure_with_its_reason(
    researcher_client, researcher, django_capture_on_commit_callbacks
):
    campaign = factories.campaign(researcher, [], n_scenarios=2, state=Campaign.State.DRAFT)
    campaign.comparisons.all().delete()
    Response.objects.all().delete()  # the responses went away after the campaign was saved
    with django_capture_on_commit_callbacks(execute=True):
        job = queue_build(campaign, researcher)
    job.refresh_from_db()
    assert job.state == Job.State.FAILED
    assert job.message.startswith("0 comparisons: these scenarios have no responses")
    page = researcher_client.get(reverse("campaigns:detail", args=[campaign.pk])).content.decode()
    assert 'id="build-badge">Build failed</strong>' in page
    assert "Completed" not in page


def test_the_campaign_page_polls_a_running_build(researcher_client, researcher):
    campaign = factories.campaign(researcher, [], n_scenarios=2, state=Campaign.State.DRAFT)
    job = Job.objects.create(
        kind="campaign_build", created_by=researcher, params={"campaign_id": campaign.pk}
    )
    page = researcher_client.get(reverse("campaigns:detail", args=[campaign.pk])).content.decode()
    status_url = reverse("campaigns:build_status", args=[campaign.pk])
    assert f'hx-get="{status_url}?polling=1"' in page and "Building comparisons" in page
    assert "HX-Refresh" not in researcher_client.get(status_url, {"polling": "1"}).headers
    Job.objects.filter(pk=job.pk).update(state=Job.State.COMPLETED, message="6 new comparisons")
    finished = researcher_client.get(status_url, {"polling": "1"})
    assert finished.headers["HX-Refresh"] == "true"
    assert 'id="build-badge">Built</strong>' in finished.content.decode()
