"""The agreement report and the calibration report from the database: the same α on the same
judgments, and the same figures however the companions are numbered."""

import random

import numpy as np
import pandas as pd
import pytest
from django.utils import timezone

from annotation.models import Comparison, Judgment
from h2htalk.stats.agreement.krippendorff_alpha import alpha
from h2htalk.stats.agreement.labels import rating_matrix
from scoring.agreement import services as agreement
from scoring.calibration.fitting import fit
from scoring.calibration.heldout import human_agreement
from scoring.models import CalibratedJudge
from tests.annotation import factories
from tests.scoring import test_calibration_support as support
from tests.simulators import save_votes, submitted_vote

STRENGTH = {"Strong": 2.0, "Middle": 0.0, "Weak": -0.5}
N_SCENARIOS = 14


@pytest.fixture
def raters(roles, django_user_model):
    return factories.annotators(django_user_model, 4)


def rate_by_content(campaign, raters):
    """Judgments that depend only on what was compared (scenario, companion names, rater), not
    on ids: 'Strong' wins most comparisons, each rater agrees with the truth 85% of the time,
    the screen side of each companion is drawn from the content too."""
    comparisons = list(
        Comparison.objects.filter(campaign=campaign)
        .select_related("response_a__companion", "response_b__companion")
        .order_by("pk")
    )
    scenario_rank = {pk: i for i, pk in enumerate(sorted({c.scenario_id for c in comparisons}))}
    now = timezone.now()
    votes = []
    for comparison in comparisons:
        name_a = comparison.response_a.companion.name.split("-")[0]
        name_b = comparison.response_b.companion.name.split("-")[0]
        first, second = sorted([name_a, name_b])
        key = f"{scenario_rank[comparison.scenario_id]}:{first}:{second}"
        truth_rng = random.Random(key)
        gap = STRENGTH[first] - STRENGTH[second]
        truth = -1 if truth_rng.random() < 1 / (1 + np.exp(-3 * gap)) else 1  # −1: `first` wins
        for rater in raters[:3] if truth_rng.random() < 0.5 else raters[1:]:
            rng = random.Random(f"{key}:{rater.username}")
            label = truth if rng.random() < 0.85 else rng.choice([-1, 0, 1])
            strength = label * rng.choice([1, 2])
            preference = strength if first == name_a else -strength  # keyed A = lower id
            left_is_a = (rng.random() < 0.5) == (first == name_a)  # `first` left half the time
            votes.append(
                submitted_vote(
                    comparison,
                    rater,
                    preference,
                    now,
                    left_is_a=left_is_a,
                    time_on_task_ms=rng.randint(20_000, 60_000),
                )
            )
    save_votes(votes)


def campaign_with_ids(owner, raters, names_in_id_order, start_id, tag):
    companions = factories.companions(
        names=[f"{name}-{tag}" for name in names_in_id_order], start_id=start_id
    )
    campaign = factories.campaign(
        owner, raters, n_scenarios=N_SCENARIOS, overlap=3, companions=companions, name=tag
    )
    rate_by_content(campaign, raters)
    return campaign


def comparable(report: dict) -> dict:
    """The figures of an agreement report (names, not ids)."""
    return {
        key: report[key]
        for key in ("overall", "by_dimension", "by_subtask", "annotators", "heatmap", "aggregation")
    }


def test_renumbering_the_companions_changes_no_figure_of_either_report(researcher, raters):
    """The same judgments of the same content, once with 'Strong' the lowest id and once the
    highest: every figure of the agreement report and the calibration report's human–human
    agreement are equal (with A = the lower id the first campaign's labels are mostly A)."""
    strong_first = campaign_with_ids(researcher, raters, ["Strong", "Middle", "Weak"], 810_000, "x")
    strong_last = campaign_with_ids(researcher, raters, ["Weak", "Middle", "Strong"], 820_000, "y")
    keyed = Judgment.objects.filter(comparison__campaign=strong_first)
    assert keyed.filter(preference__lt=0).count() > 1.5 * keyed.filter(preference__gt=0).count()
    first = agreement.compute_report(strong_first, n_boot=200)
    last = agreement.compute_report(strong_last, n_boot=200)
    assert first["judgments"] == last["judgments"] > 100
    assert comparable(first) == comparable(last)
    humans = [
        human_agreement(human_frame(campaign), n_boot=200)
        for campaign in (strong_first, strong_last)
    ]
    assert humans[0] == humans[1]


def human_frame(campaign) -> pd.DataFrame:
    """(comparison, annotator, preference) of the regular judgments, as the calibration fit
    reads them (scoring.metrics.features.comparison_table)."""
    rows = Judgment.objects.filter(
        comparison__campaign=campaign, comparison__is_gold=False
    ).values_list("comparison_id", "annotator_id", "preference")
    return pd.DataFrame(list(rows), columns=["comparison", "annotator", "preference"])


@pytest.fixture(autouse=True)
def code_version(monkeypatch):
    monkeypatch.setenv("H2HTALK_CODE_VERSION", "test-version")


def test_calibration_report_and_agreement_report_give_the_same_alpha(researcher, raters):
    """A fitted calibrated judge's human–human agreement and the campaign's agreement report
    (page, API, command, export) come from the same judgments: the same α, CI, Fleiss' κ and
    percent agreement for the 5-point and the A/tie/B labels."""
    campaign, judge = support.rated_campaign(researcher, raters, n_scenarios=30, seed=4)
    stored = fit(campaign, judge=judge, name="same alpha")
    assert CalibratedJudge.objects.filter(pk=stored.pk).exists()
    humans = stored.document["human_agreement"]["labels"]
    overall = {row["label"]: row for row in agreement.report_for(campaign).data["overall"]}
    for label in ("preference5", "winner3"):
        for key in ("alpha", "low", "high", "percent_agreement", "fleiss_kappa", "n_units"):
            assert humans[label][key] == pytest.approx(overall[label][key], rel=1e-12), (
                label,
                key,
            )
    # And both are the mirrored α of the stored (A = lower id) judgments.
    frame = human_frame(campaign)
    matrix = rating_matrix(frame, "winner3").to_numpy()
    mirrored = alpha(np.hstack([matrix, -matrix]), "nominal")
    assert overall["winner3"]["alpha"] == pytest.approx(mirrored)
