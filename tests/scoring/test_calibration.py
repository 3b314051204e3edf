"""Calibration from the database: fitting on a rated campaign (pages, job), the report, access."""

import math

import numpy as np
import pytest
from django.urls import reverse
from django.utils.html import escape

from annotation.models import Judgment
from h2htalk.models import Job
from h2htalk.stats.calibration.cross_validation import verdict_sentence
from h2htalk.stats.calibration.data import fingerprint
from scoring import charts, tasks
from scoring.calibration import fitting
from scoring.metrics import features
from scoring.models import CalibratedJudge, JudgeConfig, JudgeVerdict
from tests.annotation import factories as campaign_factories
from tests.conftest import make_user
from tests.scoring import test_calibration_support as support


@pytest.fixture(autouse=True)
def code_version(monkeypatch):
    monkeypatch.setenv("H2HTALK_CODE_VERSION", "test-version")


@pytest.fixture
def raters(roles, django_user_model):
    return campaign_factories.annotators(django_user_model, 3)


def fit_by_page(client, campaign, judge=None, **fields):
    data = {"campaign": campaign.pk, "folds": 5, "seed": 0, **fields}
    if judge is not None:
        data["judge"] = judge.pk
    response = client.post(reverse("calibration:create"), data)
    assert response.status_code == 302, response.context["form"].errors
    return response


def test_fit_from_the_page_and_the_report(researcher_client, researcher, raters):
    campaign, judge = support.rated_campaign(researcher, raters, n_scenarios=60, seed=1)
    response = fit_by_page(researcher_client, campaign, judge, name="sim judge")
    stored = CalibratedJudge.objects.get()
    assert response["Location"] == reverse("calibration:detail", args=[stored.pk])
    document = stored.document
    assert (stored.name, stored.version, stored.campaign) == ("sim judge", 1, campaign)
    assert document["schema"] == "h2htalk.calibrated-judge/1"
    assert document["features"] == [
        "rouge1",
        "rouge2",
        "rougeL",
        "bleu1",
        "bleu2",
        "bleu3",
        "bleu4",
        "log_length",
        *features.RUBRIC_FEATURES,
    ]
    assert document["judge"] == {"config": judge.name, "mode": "single"}
    assert document["code_version"] == "test-version"
    training = document["training"]
    assert training["comparisons"] == 180 and training["judgments"] == 540
    triples = Judgment.objects.values_list("comparison_id", "annotator_id", "preference")
    assert training["fingerprint"] == fingerprint(triples)
    judges = document["heldout"]["judges"]
    assert set(judges) == {"raw", "composite", "calibrated"} and all(judges.values())
    # The raw judge rewards length that humans dislike: the calibrated judge fixes that.
    assert judges["calibrated"]["log_loss"] < judges["raw"]["log_loss"]
    weights = dict(zip(document["features"], document["weights_per_unit"], strict=True))
    assert weights["log_length"] < 0 < weights["judge_empathy"]
    assert len(document["heldout"]["system"]["companions"]) == 3
    assert document["human_agreement"]["labels"]["winner3"]["level"] == "nominal"

    page = researcher_client.get(response["Location"])
    assert page.status_code == 200
    html = page.content.decode()
    for text in (
        "Raw LLM judge",
        "Paper composite",
        "Calibrated judge",
        "Cohen",
        "Kendall",
        "Krippendorff",
        "others' consensus",
        "<svg",
        "reliability diagram",
        escape(document["heldout"]["verdict"]),
        "Comp-A-1",
    ):
        assert text in html, text
    assert 'id="row-ece"' in html and "Download JSON" in html


def test_metrics_only_calibration_needs_no_llm_judge(researcher_client, researcher, raters):
    campaign, _ = support.rated_campaign(researcher, raters, judge_mode=None, seed=2)
    fit_by_page(researcher_client, campaign)
    document = CalibratedJudge.objects.get().document
    assert document["judge"] is None
    assert not any(f.startswith("judge_") for f in document["features"])
    assert document["heldout"]["judges"]["raw"] is None
    page = researcher_client.get(
        reverse("calibration:detail", args=[CalibratedJudge.objects.get().pk])
    )
    assert "no LLM judge" in page.content.decode()
    raw_cells = page.context["rows"][0]["cells"]
    assert raw_cells[0] == "—" and raw_cells[2] != "—"


def test_pairwise_judge_uses_both_orders(researcher_client, researcher, raters):
    campaign, judge = support.rated_campaign(
        researcher, raters, judge_mode=JudgeConfig.Mode.PAIRWISE, seed=3
    )
    table = features.comparison_table(campaign, judge)
    assert table.features[-1] == "judge_win_share"
    row = table.frame.iloc[0]
    verdicts = JudgeVerdict.objects.filter(run__judge=judge)
    a, b = int(row["response_a"]), int(row["response_b"])
    wins = sum(
        1
        for v in verdicts
        if (v.first_id, v.second_id, v.winner) in {(a, b, "first"), (b, a, "second")}
    )
    total = verdicts.filter(first_id__in=[a, b], second_id__in=[a, b]).count()
    assert total == 2 and row["raw"] == pytest.approx(wins / total)
    assert row["d_judge_win_share"] == pytest.approx(2 * wins / total - 1)
    fit_by_page(researcher_client, campaign, judge)
    assert CalibratedJudge.objects.get().document["judge"]["mode"] == "pairwise"


def test_unusable_verdicts_are_ignored_and_missing_ones_drop_comparisons(researcher, raters):
    campaign, judge = support.rated_campaign(researcher, raters, n_scenarios=12, seed=4)
    response = campaign.comparisons.order_by("pk").first().response_a
    JudgeVerdict.objects.filter(response=response).update(parse=JudgeVerdict.Parse.FAILED)
    table = features.comparison_table(campaign, judge)
    assert table.info["without_judge_verdicts"] == 2  # its two comparisons
    assert len(table.frame) == 36 - 2
    assert response.pk not in set(table.frame["response_a"]) | set(table.frame["response_b"])


def test_worse_than_composite_sentence_on_the_page(researcher_client, researcher):
    judge = support.stored_judge(None, researcher)
    document = judge.document
    document["heldout"]["comparison"]["composite"]["worse"] = True
    document["heldout"]["verdict"] = verdict_sentence(
        document["heldout"]["judges"], document["heldout"]["comparison"]
    )
    judge.save(update_fields=["document"])
    html = researcher_client.get(reverse("calibration:detail", args=[judge.pk])).content.decode()
    assert 'class="rule locked"' in html
    assert "The calibrated judge is worse than the paper&#x27;s composite on held-out data" in html
    listing = researcher_client.get(reverse("calibration:list")).content.decode()
    assert "worse than the composite" in listing


def test_fit_as_a_background_job(
    researcher_client, researcher, raters, monkeypatch, django_capture_on_commit_callbacks
):
    campaign, judge = support.rated_campaign(researcher, raters, n_scenarios=12, seed=5)
    monkeypatch.setattr(fitting, "INLINE_COMPARISONS", 10)
    with django_capture_on_commit_callbacks(execute=True):
        response = fit_by_page(researcher_client, campaign, judge)
    job = Job.objects.get(kind=fitting.KIND)
    assert response["Location"] == f"{reverse('calibration:list')}#job-{job.pk}"
    assert job.state == Job.State.COMPLETED, job.message
    stored = CalibratedJudge.objects.get(pk=job.result["calibrated_judge"])
    assert stored.created_by == researcher
    listing = researcher_client.get(reverse("calibration:list")).content.decode()
    assert reverse("calibration:detail", args=[stored.pk]) in listing


def test_a_failing_job_says_why(researcher, raters, django_capture_on_commit_callbacks):
    campaign, _ = support.rated_campaign(researcher, raters, n_scenarios=3, seed=6, votes=1)
    with django_capture_on_commit_callbacks(execute=True):
        job = tasks.queue_fit_job(researcher, campaign)
    job.refresh_from_db()
    assert job.state == Job.State.FAILED and "too few" in job.message


def test_versions_are_numbered_per_name(researcher_client, researcher, raters):
    campaign, _ = support.rated_campaign(
        researcher, raters, n_scenarios=12, seed=7, judge_mode=None
    )
    for _ in range(2):
        fit_by_page(researcher_client, campaign, name="same name")
    assert list(CalibratedJudge.objects.values_list("version", flat=True)) == [2, 1]
    latest = CalibratedJudge.objects.get(version=2)
    html = researcher_client.get(reverse("calibration:detail", args=[latest.pk])).content.decode()
    assert reverse("calibration:detail", args=[CalibratedJudge.objects.get(version=1).pk]) in html


def test_form_refuses_judge_features_without_judge(researcher_client, researcher, raters):
    campaign, _ = support.rated_campaign(researcher, raters, n_scenarios=4, seed=8, judge_mode=None)
    response = researcher_client.post(
        reverse("calibration:create"),
        {"campaign": campaign.pk, "folds": 5, "seed": 0, "features": ["rouge1", "judge_safety"]},
    )
    assert response.status_code == 200
    assert "no LLM judge was chosen" in str(response.context["form"].errors)
    assert not CalibratedJudge.objects.exists()


def test_form_needs_two_judged_scenarios(researcher_client, researcher, roles):
    campaign = campaign_factories.campaign(researcher, [], n_scenarios=2)
    response = researcher_client.post(
        reverse("calibration:create"), {"campaign": campaign.pk, "folds": 5, "seed": 0}
    )
    assert "at least two scenarios" in str(response.context["form"].errors)


def test_pages_have_bounded_query_counts(
    researcher_client, researcher, django_assert_max_num_queries
):
    judges = [support.stored_judge(None, researcher, name=f"judge {i}") for i in range(2)]
    with django_assert_max_num_queries(8):
        assert researcher_client.get(reverse("calibration:list")).status_code == 200
    judges += [support.stored_judge(None, researcher, name=f"more {i}") for i in range(4)]
    with django_assert_max_num_queries(8):
        page = researcher_client.get(reverse("calibration:list"))
    assert len(page.context["judges"]) == 6
    with django_assert_max_num_queries(6):
        assert (
            researcher_client.get(reverse("calibration:detail", args=[judges[0].pk])).status_code
            == 200
        )
    for name in ("calibration:create", "calibration:route", "calibration:import"):
        with django_assert_max_num_queries(12):
            assert researcher_client.get(reverse(name)).status_code == 200


def test_other_researchers_do_not_see_a_campaigns_judge(
    client, researcher, raters, django_user_model
):
    campaign, _ = support.rated_campaign(
        researcher, raters, n_scenarios=10, seed=9, judge_mode=None
    )
    mine = fitting.fit(campaign, user=researcher)
    other = make_user(django_user_model, "researcher2", "researcher")
    client.force_login(other)
    assert client.get(reverse("calibration:detail", args=[mine.pk])).status_code == 404
    assert client.get(reverse("calibration:download", args=[mine.pk])).status_code == 404
    assert mine not in client.get(reverse("calibration:list")).context["judges"]
    campaign.members.add(other)
    assert client.get(reverse("calibration:detail", args=[mine.pk])).status_code == 200
    # Without its campaign a judge stays its creator's; one loaded by the command is everyone's.
    campaign.members.remove(other)
    CalibratedJudge.objects.filter(pk=mine.pk).update(campaign=None)
    assert client.get(reverse("calibration:detail", args=[mine.pk])).status_code == 404
    CalibratedJudge.objects.filter(pk=mine.pk).update(created_by=None)
    assert client.get(reverse("calibration:detail", args=[mine.pk])).status_code == 200


def test_annotators_cannot_use_the_pages(annotator_client, researcher):
    judge = support.stored_judge(None, researcher)
    for url in (
        reverse("calibration:list"),
        reverse("calibration:detail", args=[judge.pk]),
        reverse("calibration:create"),
        reverse("calibration:route"),
    ):
        assert annotator_client.get(url).status_code == 403


def test_reliability_svg_draws_each_judge_and_escapes(researcher):
    judge = support.stored_judge(None, researcher)
    svg = str(charts.reliability_svg(judge.document["heldout"]["judges"]))
    assert svg.count("<polyline") == 3 and "perfect calibration" in svg
    weird = {"<b>": judge.document["heldout"]["judges"]["calibrated"]}
    assert "<b>" not in str(charts.reliability_svg(weird)).replace("&lt;b&gt;", "")


def test_side_features_follow_the_documented_definitions(researcher, raters):
    campaign, judge = support.rated_campaign(researcher, raters, n_scenarios=3, seed=10)
    comparison = campaign.comparisons.select_related("response_a__metrics").first()
    sides = features.side_features([(comparison.response_a_id, comparison.response_b_id)], judge)
    values = comparison.response_a.metrics.values
    assert sides.a.loc[0, "log_length"] == pytest.approx(math.log1p(values["length_chars"]))
    scores = JudgeVerdict.objects.get(response=comparison.response_a).scores
    assert sides.a.loc[0, "judge_safety"] == scores["safety"]
    rubric_b = JudgeVerdict.objects.get(response_id=comparison.response_b_id).scores
    assert sides.raw[0] == pytest.approx(
        1 / (1 + math.exp(-(np.mean(list(scores.values())) - np.mean(list(rubric_b.values())))))
    )
    assert sides.composite_a[0] == pytest.approx(values["composite"])
