"""Calibration fit with 5-fold cross-validation by scenario on 50,000 human comparisons.

1. Statistics only (h2htalk.stats.calibration, no database): 50,000 simulated comparisons
   (3 votes each, 12,500 scenarios, a length-biased single-answer judge), the nested
   5-fold GroupKFold cross-validation (held-out raw / composite / calibrated, C chosen by an
   inner 5-fold GroupKFold over 7 values) plus the final model: wall time, with the held-out
   figures and how far the fitted weights are from the known ones.
2. End to end from the database (scoring.calibration.services.fit): BENCH_CALIBRATION_DB comparisons
   (default 50,000: 5,000 scenarios × all 10 pairs of 5 companions, 150,000 judgments,
   25,000 responses with stored metrics and rubric verdicts) bulk-inserted first (not timed),
   then the comparison table from the database, and the whole fit (table, cross-validation,
   final model, human–human agreement with 1,000 bootstrap draws, the stored document).

BENCH_CALIBRATION_N changes the size of part 1; BENCH_CALIBRATION_DB=0 skips part 2.
"""

import itertools
import math
import os

import numpy as np

from bench._common import env_int, log, throughput_row, timed

N_STATS = env_int("BENCH_CALIBRATION_N", 50_000)
N_DB = env_int("BENCH_CALIBRATION_DB", 50_000)
SEED = 7
N_COMPANIONS = 5
FEATURES = ["metric_1", "metric_2", "rubric", "log_length"]


def stats_only() -> list[dict]:
    from h2htalk.stats.calibration.cross_validation import cross_validate
    from h2htalk.stats.calibration.data import design_matrix, votes_of
    from h2htalk.stats.calibration.model import fit_model
    from tests import simulators

    frame, weights = simulators.simulate_comparisons(
        n_comparisons=N_STATS, judge="single", seed=SEED
    )
    log(f"simulated {len(frame):,} comparisons, {int(frame['n_votes'].sum()):,} votes")
    seconds_cv, result = timed(cross_validate, frame, FEATURES, folds=5)
    seconds_final, (model, _) = timed(
        fit_model,
        design_matrix(frame, FEATURES),
        votes_of(frame),
        frame["scenario"].to_numpy(),
        FEATURES,
    )
    error = max(abs(w - weights[f]) for f, w in zip(FEATURES, model.raw_weights, strict=True))
    figures = ", ".join(
        f"{name} {result.metrics[name]['accuracy_without_ties']:.3f}/"
        f"{result.metrics[name]['ece']:.3f}"
        for name in ("raw", "composite", "calibrated")
    )
    log(f"cross-validation {seconds_cv:.1f} s, final model {seconds_final:.1f} s")
    return [
        throughput_row(
            "calibration fit, statistics: 5-fold CV by scenario + final model",
            len(frame),
            seconds_cv + seconds_final,
            f"{result.n_scenarios:,} scenarios, {result.n_votes:,} votes; CV {seconds_cv:.1f} s "
            f"(5 outer × 5 inner folds × 7 C), final {seconds_final:.1f} s; held-out accuracy/"
            f"ECE {figures}; largest weight error {error:.3f}; C = {model.C:g}",
        )
    ]


def build_database(n_comparisons: int):
    """Bulk-insert a rated campaign; returns (campaign, judge)."""
    from django.contrib.auth import get_user_model

    from annotation.models import Campaign
    from scenarios.models import CompanionModel, GenerationRun
    from scoring.models import JudgeConfig

    rng = np.random.default_rng(SEED)
    user_model = get_user_model()
    owner = user_model.objects.create_user("bench-owner")
    raters = [user_model.objects.create_user(f"bench-rater{i}") for i in range(3)]
    companions = [
        CompanionModel.objects.create(name=f"bench-{i}", provider="imported")
        for i in range(N_COMPANIONS)
    ]
    run = GenerationRun.objects.create(name="bench responses", kind="import")
    scenarios = _scenarios(math.ceil(n_comparisons / math.comb(N_COMPANIONS, 2)))
    judge = JudgeConfig.objects.create(name="bench judge", rubric="Grade it.")
    responses, utility = _scored_responses(rng, run, scenarios, companions, judge)
    campaign = Campaign.objects.create(name="bench calibration", owner=owner, overlap=3)
    campaign.companions.set(companions)
    campaign.runs.set([run])
    comparisons = _comparisons(campaign, responses, n_comparisons)
    _votes(rng, comparisons, raters, utility)
    return campaign, judge


def _scenarios(n: int) -> list:
    from scenarios.models import Scenario

    scenarios = []
    for i in range(n):
        scenario = Scenario(
            external_id=f"cal{i:06d}",
            subtask="dialogue_base",
            language="en",
            state="approved",
            user_message=f"message {i}",
            reference_response=f"reference {i}",
        )
        scenario.refresh_derived()
        scenarios.append(scenario)
    return Scenario.objects.bulk_create(scenarios, batch_size=5000)


def _scored_responses(rng, run, scenarios, companions, judge):
    """A response of every companion to every scenario, with reference metrics and a rubric
    verdict that follow a latent quality and length; the responses and each one's utility
    (what the simulated raters prefer)."""
    from scenarios.models import Response
    from scoring.judges.parsing import DIMENSIONS
    from scoring.metrics import composite
    from scoring.models import JudgeRun, JudgeVerdict, MetricScore

    judge_run = JudgeRun.objects.create(name="bench judge run", judge=judge)
    responses, latent = [], []
    for scenario in scenarios:
        for c, companion in enumerate(companions):
            responses.append(Response(run=run, scenario=scenario, companion=companion, text="r"))
            latent.append((rng.normal(0.15 * c, 1), rng.normal(4.5, 0.4)))
    Response.objects.bulk_create(responses, batch_size=5000)
    metrics, verdicts, utility = [], [], {}
    for response, (quality, log_length) in zip(responses, latent, strict=True):
        rouge = float(np.clip(0.35 + 0.08 * quality + rng.normal(0, 0.05), 0.01, 0.99))
        values = {
            "rouge1": rouge,
            "rouge2": rouge * 0.6,
            "rougeL": rouge * 0.9,
            "bleu1": rouge * 0.8,
            "bleu2": rouge * 0.5,
            "bleu3": rouge * 0.3,
            "bleu4": rouge * 0.2,
            "length_chars": round(math.expm1(log_length)),
        }
        values["composite"] = composite.composite(values).score
        metrics.append(MetricScore(response=response, values=values))
        score = int(np.clip(round(5.5 + 1.5 * quality + 2 * (log_length - 4.5)), 1, 10))
        scores = dict.fromkeys(DIMENSIONS, score)
        verdicts.append(
            JudgeVerdict(run=judge_run, response=response, parse="strict", scores=scores)
        )
        utility[response.pk] = 8 * rouge + 0.6 * scores["empathy"] - 1.5 * log_length
    MetricScore.objects.bulk_create(metrics, batch_size=5000)
    JudgeVerdict.objects.bulk_create(verdicts, batch_size=5000)
    return responses, utility


def _comparisons(campaign, responses, n_comparisons: int) -> list:
    """Every pair of companions on each scenario in turn, up to n_comparisons."""
    from annotation.models import Comparison

    comparisons = []
    for start in range(0, len(responses), N_COMPANIONS):
        own = responses[start : start + N_COMPANIONS]
        for i, j in itertools.combinations(range(N_COMPANIONS), 2):
            if len(comparisons) < n_comparisons:
                comparisons.append(
                    Comparison(
                        campaign=campaign,
                        scenario_id=own[i].scenario_id,
                        response_a=own[i],
                        response_b=own[j],
                        judgment_count=3,
                    )
                )
    return Comparison.objects.bulk_create(comparisons, batch_size=5000)


def _votes(rng, comparisons, raters, utility) -> None:
    """Every rater votes on every comparison by the utilities (ties near even), 10,000
    comparisons at a time."""
    from django.utils import timezone
    from scipy.special import expit

    from tests.simulators import save_votes, submitted_vote

    now = timezone.now()
    for start in range(0, len(comparisons), 10_000):
        votes = []
        for comparison in comparisons[start : start + 10_000]:
            p = expit(utility[comparison.response_a_id] - utility[comparison.response_b_id])
            for rater in raters:
                draw = rng.random()
                preference = -1 if draw < p - 0.05 else (0 if draw < p + 0.05 else 1)
                votes.append(submitted_vote(comparison, rater, preference, now))
        save_votes(votes)


def database() -> list[dict]:
    from scoring.calibration.fitting import fit
    from scoring.metrics import features

    os.environ.setdefault("H2HTALK_CODE_VERSION", "bench")
    seconds_build, (campaign, judge) = timed(build_database, N_DB)
    log(f"inserted {N_DB:,} comparisons with 3 judgments each in {seconds_build:.0f} s")
    seconds_table, table = timed(features.comparison_table, campaign, judge)
    log(f"comparison table {seconds_table:.1f} s")
    seconds_fit, judge_row = timed(fit, campaign, judge=judge)
    held = judge_row.document["heldout"]["judges"]
    log(f"fit end to end {seconds_fit:.1f} s")
    return [
        throughput_row(
            "calibration: comparison table from the database",
            len(table.frame),
            seconds_table,
            f"{len(table.judgments):,} judgments, {len(table.features)} features "
            "(7 metrics, length, 6 rubric dimensions)",
        ),
        throughput_row(
            "calibration fit end to end (manage page / job), 5-fold CV by scenario",
            len(table.frame),
            seconds_fit,
            "table + nested CV + final model + human agreement (1,000 bootstrap draws) + "
            f"store; held-out accuracy raw {held['raw']['accuracy_without_ties']:.3f}, "
            f"composite {held['composite']['accuracy_without_ties']:.3f}, calibrated "
            f"{held['calibrated']['accuracy_without_ties']:.3f}",
        ),
    ]


def run() -> list[dict]:
    rows = stats_only()
    if N_DB:
        rows += database()
    return rows
