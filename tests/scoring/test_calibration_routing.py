"""Routing comparisons to humans: a draft campaign of exactly the routed comparisons."""

import numpy as np
import pytest
from django.urls import reverse

from annotation.models import Campaign, Comparison, Judgment
from scoring.calibration import routing
from scoring.calibration.fitting import fit
from scoring.calibration.prediction import score_pairs
from scoring.models import MetricScore
from tests.annotation import factories as campaign_factories
from tests.scoring import test_calibration_support as support


@pytest.fixture(autouse=True)
def code_version(monkeypatch):
    monkeypatch.setenv("H2HTALK_CODE_VERSION", "test-version")


@pytest.fixture
def half_rated(researcher, roles, django_user_model):
    """A campaign whose first half of comparisons humans rated; a judge fitted on them."""
    raters = campaign_factories.annotators(django_user_model, 3)
    campaign, judge = support.rated_campaign(
        researcher, raters, n_scenarios=24, seed=31, judged_share=0.5
    )
    return campaign, judge, fit(campaign, judge=judge, user=researcher)


def pairs_of(campaign):
    return set(campaign.comparisons.values_list("scenario_id", "response_a_id", "response_b_id"))


def test_least_confident_comparisons_become_a_draft_campaign(half_rated, researcher_client):
    source, _, judge = half_rated
    unjudged = list(
        source.comparisons.filter(judgment_count=0)
        .order_by("pk")
        .values_list("pk", "scenario_id", "response_a_id", "response_b_id")
    )
    assert len(unjudged) == 36
    p, _ = score_pairs(judge.document, [(a, b) for _, _, a, b in unjudged])
    expected = sorted(zip(np.abs(p - 0.5), unjudged, strict=True))[:10]
    response = researcher_client.post(
        reverse("calibration:route"),
        {
            "source": source.pk,
            "mode": "uncertain",
            "judge": judge.pk,
            "count": 10,
            "exclude_judged": "on",
            "name": "routed uncertain",
        },
    )
    routed = Campaign.objects.get(name="routed uncertain")
    assert response.status_code == 302
    assert response["Location"] == reverse("campaigns:detail", args=[routed.pk])
    assert pairs_of(routed) == {(s, a, b) for _, (_, s, a, b) in expected}
    assert routed.comparisons.count() == 10
    assert routed.state == Campaign.State.DRAFT and routed.owner.username == "researcher1"
    assert not Judgment.objects.filter(comparison__campaign=routed).exists()
    assert "least confident" in routed.description and judge.name in routed.description
    assert set(routed.companions.all()) == set(source.companions.all())
    assert list(routed.runs.all()) == list(source.runs.all())
    assert routed.overlap == source.overlap and routed.guidelines == source.guidelines
    # The source campaign is untouched.
    assert source.comparisons.count() == 72


def test_judged_comparisons_can_be_included(half_rated):
    source, _, judge = half_rated
    campaign, plan = routing.route(
        source,
        routing.UNCERTAIN,
        "all candidates",
        source.owner,
        judge=judge,
        count=1000,
        exclude_judged=False,
    )
    assert plan.candidates == 72 and campaign.comparisons.count() == 72


def test_low_composite_comparisons(half_rated, researcher):
    source, _, _ = half_rated
    composite = dict(MetricScore.objects.values_list("response_id", "values__composite"))
    rows = source.comparisons.filter(judgment_count=0).values_list(
        "pk", "response_a_id", "response_b_id"
    )
    lows = {pk: min(composite[a], composite[b]) for pk, a, b in rows}
    threshold = float(np.median(list(lows.values())))
    campaign, plan = routing.route(
        source, routing.COMPOSITE, "low composite", researcher, threshold=threshold, count=1000
    )
    expected = {pk for pk, low in lows.items() if low < threshold}
    assert set(plan.comparisons) == expected and len(expected) > 5
    assert campaign.comparisons.count() == len(expected)
    assert plan.values == sorted(plan.values) and max(plan.values) < threshold
    assert "below" in campaign.description and "paper's protocol" in campaign.description
    capped, _ = routing.route(
        source, routing.COMPOSITE, "lowest three", researcher, threshold=threshold, count=3
    )
    lowest = sorted(expected, key=lambda pk: (lows[pk], pk))[:3]
    assert set(capped.comparisons.values_list("response_a_id", "response_b_id")) == set(
        Comparison.objects.filter(pk__in=lowest).values_list("response_a_id", "response_b_id")
    )


def test_nothing_to_route_creates_nothing(half_rated, researcher_client):
    source, _, _ = half_rated
    before = Campaign.objects.count()
    response = researcher_client.post(
        reverse("calibration:route"),
        {
            "source": source.pk,
            "mode": "composite",
            "threshold": 0.0,
            "count": 10,
            "exclude_judged": "on",
            "name": "empty",
        },
    )
    assert response.status_code == 200
    assert "nothing to send to humans" in str(response.context["form"].errors)
    assert Campaign.objects.count() == before


def test_routing_form_checks_its_fields(half_rated, researcher_client):
    source, _, _ = half_rated
    response = researcher_client.post(
        reverse("calibration:route"),
        {"source": source.pk, "mode": "uncertain", "count": 10, "name": source.name},
    )
    errors = response.context["form"].errors
    assert "judge" in errors and "name" in errors


def test_metrics_missing_for_routing_are_computed(researcher, roles):
    source = campaign_factories.campaign(researcher, [], n_scenarios=2)
    assert not MetricScore.objects.exists()
    campaign, _plan = routing.route(
        source, routing.COMPOSITE, "routed", researcher, threshold=1.0, count=100
    )
    assert MetricScore.objects.count() == 6 and campaign.comparisons.count() == 6


def test_the_route_page_preselects_the_judge_and_its_campaign(half_rated, researcher_client):
    source, _, judge = half_rated
    page = researcher_client.get(reverse("calibration:route") + f"?judge={judge.pk}")
    form = page.context["form"]
    assert form.initial["judge"] == judge.pk and form.initial["source"] == source.pk
