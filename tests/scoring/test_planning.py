"""The planner on the campaign page and in the API (scoring.planning): defaults from the
campaign and from an earlier campaign (α by the platform's agreement code), a stored plan, the
running campaign's separated pairs, and the campaign pages' access rules."""

import json

import numpy as np
import pytest
from django.urls import reverse

from annotation import exclusions
from annotation.models import Campaign, Judgment
from h2htalk.models import Job
from h2htalk.roles import RESEARCHER
from h2htalk.stats import planner
from scoring.agreement import services as agreement
from scoring.planning import services
from tests.annotation import factories
from tests.annotation.test_rating_api import token_client
from tests.conftest import make_user
from tests.scoring import test_agreement_report

rated = test_agreement_report.rated  # 6 raters on a 3-companion campaign (12 scenarios, k=4)
module_rated = test_agreement_report.module_rated
researcher = test_agreement_report.researcher
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def draft(rated, researcher, django_user_model):
    """A new draft campaign of the same researcher, 4 companions, 5 random pairs each."""
    models = factories.companions(("Ash", "Birch", "Cedar", "Dogwood"), start_id=55_000)
    return factories.campaign(
        researcher,
        [],
        n_scenarios=2,
        overlap=2,
        state=Campaign.State.DRAFT,
        companions=models,
        pairing=Campaign.Pairing.RANDOM_PAIRS,
        pairs_per_scenario=5,
        name="next study",
    )


def _plan_url(campaign, what=""):
    return f"/api/campaigns/{campaign.pk}/plan/{what + '/' if what else ''}"


def test_an_earlier_campaign_gives_the_agreement_reports_alpha_ties_and_time(rated):
    found = services.observed(rated)
    report = agreement.report_for(rated).data
    alpha = next(r["alpha"] for r in report["overall"] if r["label"] == "winner3")
    assert found["alpha"] == pytest.approx(alpha)
    assert found["judgments"] == report["judgments"]
    assert found["tie_rate"] == 0.0  # the simulated raters never tie
    times = Judgment.objects.filter(comparison__campaign=rated).values_list("time_on_task_ms")
    assert found["seconds_per_item"] == pytest.approx(np.median(list(times)) / 1000)
    # The response effects behind that α, its own companions' differences accounted for; or,
    # when α is below what independent votes would give (the pool's left-clicker can pull it
    # there, and which items each rater got is drawn at random), the reason why not.
    if found["sigma"] is None:
        assert "no response effect to carry over" in found["noise_note"]
    else:
        assert 0 < found["sigma"] < 3 and found["tau"] == 0.0  # no ties: no tie threshold


def test_a_stored_report_gives_the_same_alpha(rated):
    computed = services.observed(rated)["alpha"]  # no report stored yet: computed here
    report = agreement.report_for(rated).data
    stored = services.observed(rated)["alpha"]  # read from the stored report
    assert stored == next(r["alpha"] for r in report["overall"] if r["label"] == "winner3")
    assert computed == pytest.approx(stored)


def test_the_panel_prefills_the_campaign_design_and_the_earlier_figures(client, draft, rated):
    client.force_login(draft.owner)
    page = client.get(reverse("planning:campaign", args=[draft.pk]), **HTMX)
    assert page.status_code == 200
    form = page.context["form"]
    assert form.initial["n_companions"] == 4 and form.initial["overlap"] == 2
    assert form.initial["pairs_per_scenario"] == 5
    page = client.get(reverse("planning:campaign", args=[draft.pk]), {"earlier": rated.pk}, **HTMX)
    alpha = services.observed(rated)["alpha"]
    assert page.context["form"].initial["alpha"] == round(alpha, 3)
    assert rated.name in page.content.decode()


def test_posting_the_form_plans_and_the_campaign_page_loads_the_panel(client, draft):
    client.force_login(draft.owner)
    detail = client.get(reverse("campaigns:detail", args=[draft.pk])).content.decode()
    assert reverse("planning:campaign", args=[draft.pk]) in detail
    assert reverse("planning:status", args=[draft.pk]) in detail
    data = {"n_companions": 4, "overlap": 2, "pairs_per_scenario": 5, "min_elo": 80}
    data.update(alpha=0.4, tie_rate=0.1, seconds_per_item=30, power=0.8)
    page = client.post(reverse("planning:campaign", args=[draft.pk]), data, **HTMX)
    assert page.status_code == 200
    job = Job.objects.get(kind=services.KIND, params__campaign=draft.pk)
    result = job.result
    assert result["n_comparisons"] == 5 * result["n_scenarios"]
    assert result["annotator_hours"] == pytest.approx(result["n_comparisons"] * 2 * 30 / 3600)
    assert result["planned_power"] >= 0.8
    assert f"{result['n_comparisons']}" in page.content.decode().replace(",", "")


def test_inputs_the_model_cannot_produce_are_answered_with_the_reason(client, draft):
    client.force_login(draft.owner)
    data = {"n_companions": 4, "overlap": 2, "min_elo": 300, "alpha": 0.05, "tie_rate": 0.1}
    data.update(seconds_per_item=30, power=0.8)
    page = client.post(reverse("planning:campaign", args=[draft.pk]), data, **HTMX)
    assert "below what the companions" in page.content.decode()
    assert not Job.objects.filter(kind=services.KIND).exists()


def test_the_api_plans_from_an_earlier_campaign_and_reads_the_latest_plan(draft, rated):
    client = token_client(draft.owner)
    empty = client.get(_plan_url(draft)).json()
    assert empty["latest"] is None and empty["defaults"]["n_companions"] == 4
    body = {"earlier": rated.pk, "min_elo": 60}
    answer = client.post(_plan_url(draft), json.dumps(body), content_type="application/json")
    assert answer.status_code == 201, answer.content
    plan = answer.json()
    assert plan["earlier"] == rated.pk
    assert plan["inputs"]["alpha"] == pytest.approx(round(services.observed(rated)["alpha"], 3))
    assert plan["inputs"]["n_companions"] == 4 and plan["inputs"]["pairs_per_scenario"] == 5
    sigma = services.observed(rated)["sigma"]
    assert plan["inputs"]["sigma"] == (None if sigma is None else round(sigma, 3))
    if sigma is not None:
        assert plan["result"]["model"]["sigma"] == plan["inputs"]["sigma"]  # carried over
    assert plan["result"]["n_votes"] == 2 * plan["result"]["n_comparisons"]
    assert client.get(_plan_url(draft)).json()["latest"]["id"] == plan["id"]
    bad = client.post(_plan_url(draft), json.dumps({"alpha": 2}), content_type="application/json")
    assert bad.status_code == 400 and "alpha" in bad.json()
    typo = client.post(_plan_url(draft), json.dumps({"alfa": 1}), content_type="application/json")
    assert typo.status_code == 400


def test_the_status_counts_the_campaigns_separated_pairs(rated):
    client = token_client(rated.owner)
    status = client.get(_plan_url(rated, "status")).json()
    votes = Judgment.objects.filter(comparison__campaign=rated, comparison__is_gold=False)
    assert status["ready"] and status["votes"] == votes.count()
    assert status["n_adjacent"] == 2 and status["min_elo"] == 50 and status["plan"] is None
    # The same numbers as the planner's function on the same votes.
    rows = services.campaign_votes(rated)
    scenario, a, b, preference = (np.asarray(c) for c in zip(*rows, strict=True))
    _ids, codes = np.unique(np.r_[a, b], return_inverse=True)
    outcome = np.where(preference < 0, 1.0, np.where(preference == 0, 0.5, 0.0))
    direct = planner.separation_status(scenario, codes[: len(a)], codes[len(a) :], outcome, 3, 50)
    assert status["n_separated"] == direct["n_separated"]
    assert status["more_votes"] == direct["more_votes"]
    # Excluding an annotator is a new status (its votes left out), as in the release.
    clicker = rated.annotators.get(username="clicker")
    exclusions.exclude(rated, [clicker], "always left", by=rated.owner)
    after = client.get(_plan_url(rated, "status")).json()
    assert after["votes"] == votes.exclude(annotator=clicker).count()


def test_the_status_line_on_the_page(client, rated):
    client.force_login(rated.owner)
    page = client.get(reverse("planning:status", args=[rated.pk]), **HTMX).content.decode()
    assert "Separated adjacent pairs:" in page and " of 2" in page


def test_only_those_who_manage_the_campaign_may_plan(rated, roles, django_user_model):
    outsider = make_user(django_user_model, "outsider9", RESEARCHER)
    rater = rated.annotators.first()
    for user, code in ((outsider, 404), (rater, 403)):
        client = token_client(user)
        assert client.get(_plan_url(rated, "status")).status_code == code
        assert client.post(_plan_url(rated), {}).status_code == code
    client = token_client(outsider)
    draft_of_outsider = factories.campaign(
        outsider, [], n_scenarios=1, state=Campaign.State.DRAFT, name="theirs"
    )
    # An earlier campaign one does not manage is not a source.
    body = json.dumps({"earlier": rated.pk})
    answer = client.post(_plan_url(draft_of_outsider), body, content_type="application/json")
    assert answer.status_code == 400 and "earlier" in answer.json()


def test_a_large_design_is_planned_by_a_job_the_panel_follows(
    client, draft, monkeypatch, django_capture_on_commit_callbacks
):
    monkeypatch.setattr(services, "INLINE_CELLS", 0)  # every design counts as large here
    api = token_client(draft.owner)
    body = json.dumps({"min_elo": 80, "alpha": 0.4})
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        answer = api.post(_plan_url(draft), body, content_type="application/json")
    assert answer.status_code == 202 and answer.json()["state"] == "queued"
    overview = api.get(_plan_url(draft)).json()
    assert overview["latest"] is None and overview["running"]["id"] == answer.json()["id"]
    client.force_login(draft.owner)
    panel = client.get(reverse("planning:campaign", args=[draft.pk]), **HTMX).content.decode()
    assert "planning in the background" in panel and 'hx-trigger="every 2s"' in panel
    for callback in callbacks:
        callback()  # the worker's turn (eager here)
    job = Job.objects.get(pk=answer.json()["id"])
    assert job.state == Job.State.COMPLETED and job.result["n_comparisons"] > 0
    overview = api.get(_plan_url(draft)).json()
    assert overview["latest"]["id"] == job.pk and overview["running"] is None
    panel = client.get(reverse("planning:campaign", args=[draft.pk]), **HTMX).content.decode()
    assert "Latest plan:" in panel and "every 2s" not in panel


def test_the_api_and_the_panel_plan_a_flag_gap(client, draft):
    """The flag-gap mode (h2htalk.stats.gap_planner) through the API: its answer is the plain
    function's for the campaign's seed, kept as the latest plan and shown on the panel; a
    design whose field is not a majority is refused with the reason."""
    from h2htalk.stats import gap_planner

    api = token_client(draft.owner)
    body = {"effect": "flag_gap", "min_gap": 220, "flag_share": 0.4, "alpha": 0.3, "tie_rate": 0.1}
    answer = api.post(_plan_url(draft), json.dumps(body), content_type="application/json")
    assert answer.status_code == 201, answer.content
    plan = answer.json()
    setting = gap_planner.GapSetting(
        4, overlap=2, pairs_per_scenario=5, alpha=0.3, tie_rate=0.1, min_gap=220, flag_share=0.4
    )
    expected = gap_planner.plan(setting, seed=draft.seed)
    assert plan["result"]["n_scenarios"] == expected.n_scenarios
    assert plan["result"]["n_flagged"] == int(0.4 * expected.n_scenarios + 1e-9)
    assert plan["result"]["n_comparisons"] == 5 * expected.n_scenarios
    assert plan["inputs"]["weakened"] == 1 == plan["result"]["setting"]["weakened"]  # default
    assert "flag gap exceeds the field's by 220 Elo" in plan["summary"]
    client.force_login(draft.owner)
    panel = client.get(reverse("planning:campaign", args=[draft.pk]), **HTMX).content.decode()
    assert "Latest plan (flag gap)" in panel and f"{expected.n_flagged} with the flag" in panel
    body["weakened"] = 2  # two of four: no majority left to be the field
    refused = api.post(_plan_url(draft), json.dumps(body), content_type="application/json")
    assert refused.status_code == 400 and "fewer than half" in refused.json()["detail"]
