"""Builders for calibration tests (no tests in here): a rated campaign whose human votes follow
known weights on the judge features, LLM judge verdict rows, and a stored calibrated judge.

`stored_judge(campaign, user)` also serves tests elsewhere (e.g. the permission table's world)
that need a CalibratedJudge whose report page renders, without human judgments in the
database: it is fitted on simulated comparisons.
"""

import itertools
import math

import numpy as np
import pandas as pd
from django.utils import timezone
from scipy.special import expit

from annotation.models import Campaign, Comparison
from annotation.pairing import build_comparisons
from scenarios.models import GenerationRun, Response
from scoring.calibration.services import build_document
from scoring.calibration.versions import store_new_version
from scoring.metrics import composite as paper
from scoring.models import CalibratedJudge, JudgeConfig, JudgeRun, JudgeVerdict, MetricScore
from tests import simulators
from tests.annotation import factories as campaign_factories
from tests.scenarios import factories

DIMENSIONS = ("empathy", "fluency", "memory_use", "planning", "persona_consistency", "safety")
# Humans: utility = Σ w·f over these features of a response (known weights).
HUMAN_WEIGHTS = {"rouge1": 8.0, "judge_empathy": 0.6, "log_length": -1.5}


def metric_values(rng, quality: float, log_length: float) -> dict:
    """MetricScore.values of a simulated response (what scoring.metrics.jobs stores)."""
    base = float(np.clip(0.35 + 0.08 * quality + rng.normal(0, 0.05), 0.01, 0.99))
    values = {
        "rouge1": base,
        "rouge2": float(np.clip(base * 0.6 + rng.normal(0, 0.03), 0, 1)),
        "rougeL": float(np.clip(base * 0.9 + rng.normal(0, 0.03), 0, 1)),
        "bleu1": float(np.clip(base * 0.8 + rng.normal(0, 0.03), 0, 1)),
        "bleu2": float(np.clip(base * 0.5 + rng.normal(0, 0.03), 0, 1)),
        "bleu3": float(np.clip(base * 0.3 + rng.normal(0, 0.03), 0, 1)),
        "bleu4": float(np.clip(base * 0.2 + rng.normal(0, 0.03), 0, 1)),
        "length_tokens": int(math.exp(log_length) / 2),
        "length_chars": round(math.expm1(log_length)),
        "reference_tokens": 40,
        "reference_chars": 80,
        "length_ratio": 1.0,
    }
    values["composite"] = paper.composite(values).score
    return values


def rubric_scores(rng, quality: float, log_length: float) -> dict:
    """A length-biased single-answer judge: 1–10 per dimension."""
    return {
        d: int(
            np.clip(round(5.5 + 1.5 * quality + 2.0 * (log_length - 4.5) + rng.normal(0, 1)), 1, 10)
        )
        for d in DIMENSIONS
    }


def response_features(response: Response) -> dict:
    """Feature values of one stored response as scoring.metrics.features computes them."""
    values = response.metrics.values
    return {
        **{
            k: values.get(k)
            for k in ("rouge1", "rouge2", "rougeL", "bleu1", "bleu2", "bleu3", "bleu4")
        },
        "log_length": math.log1p(values["length_chars"]),
    }


def add_responses(run, scenarios, companions, rng, judge_run=None) -> list[Response]:
    """A response per (scenario, companion), with stored metrics and (single-mode judge run)
    rubric verdicts. The latent quality and log length are kept on the instances."""
    made = []
    for scenario in scenarios:
        for companion in companions:
            quality = rng.normal(0.15 * (companion.pk % 5), 1.0)
            log_length = rng.normal(4.5, 0.4)
            response = Response.objects.create(
                run=run,
                scenario=scenario,
                companion=companion,
                text=f"reply of {companion.name} to {scenario.pk} ({quality:.2f})",
            )
            MetricScore.objects.create(
                response=response, values=metric_values(rng, quality, log_length)
            )
            if judge_run is not None and judge_run.judge.mode == JudgeConfig.Mode.SINGLE:
                JudgeVerdict.objects.create(
                    run=judge_run,
                    response=response,
                    parse=JudgeVerdict.Parse.STRICT,
                    scores=rubric_scores(rng, quality, log_length),
                )
            response.quality, response.log_length = quality, log_length
            made.append(response)
    return made


def utility(response: Response, rubric: dict | None) -> float:
    values = response.metrics.values
    features = {
        "rouge1": values["rouge1"],
        "log_length": math.log1p(values["length_chars"]),
        "judge_empathy": (rubric or {}).get("empathy", 5.5),
    }
    return sum(w * features[name] for name, w in HUMAN_WEIGHTS.items())


def rated_campaign(
    owner,
    raters,
    *,
    n_scenarios: int = 30,
    judge_mode: str | None = JudgeConfig.Mode.SINGLE,
    seed: int = 0,
    name: str | None = None,
    votes: int = 3,
    judged_share: float = 1.0,
):
    """A campaign of all pairs of 3 companions over `n_scenarios` scenarios; human votes
    (`votes` per comparison, on the first `judged_share` of comparisons) follow
    HUMAN_WEIGHTS; an LLM judge (single: length-biased rubric; pairwise: both orders with a
    first-position bias) when `judge_mode` is given. Returns (campaign, judge or None)."""
    rng = np.random.default_rng(seed)
    companions = campaign_factories.companions(
        names=(f"Comp-A-{seed}", f"Comp-B-{seed}", f"Comp-C-{seed}"), start_id=700_000 + 10 * seed
    )
    judge = run = None
    if judge_mode:
        judge = JudgeConfig.objects.create(
            name=f"judge {judge_mode} {seed}", mode=judge_mode, rubric="Grade it."
        )
        run = JudgeRun.objects.create(name=f"judge run {judge_mode} {seed}", judge=judge)
    generation = GenerationRun.objects.create(name=f"sim run {seed}", kind="import")
    tag = f"sim{seed}"
    scenarios = [
        factories.scenario(owner, state="approved", tags=[tag]) for _ in range(n_scenarios)
    ]
    add_responses(generation, scenarios, companions, rng, run)
    campaign = Campaign.objects.create(
        name=name or f"simulated {seed}",
        owner=owner,
        overlap=votes,
        scenario_query=f"tags={tag}",
        state=Campaign.State.OPEN,
    )
    campaign.companions.set(companions)
    campaign.runs.set([generation])
    campaign.annotators.set(raters)
    build_comparisons(campaign)
    vote(campaign, raters, rng, judge, run, votes=votes, judged_share=judged_share)
    return campaign, judge


def vote(campaign, raters, rng, judge=None, run=None, votes=3, judged_share=1.0):
    comparisons = list(
        campaign.comparisons.select_related("response_a__metrics", "response_b__metrics").order_by(
            "pk"
        )
    )
    rubric = {}
    if judge is not None and judge.mode == JudgeConfig.Mode.SINGLE:
        rubric = dict(JudgeVerdict.objects.filter(run=run).values_list("response_id", "scores"))
    now = timezone.now()
    votes_cast = []
    n_judged = round(judged_share * len(comparisons))
    for index, comparison in enumerate(comparisons):
        a, b = comparison.response_a, comparison.response_b
        z = utility(a, rubric.get(a.pk)) - utility(b, rubric.get(b.pk))
        p = expit(z)
        if judge is not None and judge.mode == JudgeConfig.Mode.PAIRWISE:
            for first, second, sign in ((a, b, 1), (b, a, -1)):
                p_first = expit(sign * 1.5 * z + 1.0)  # a first-position bias of +1 logit
                winner = "first" if rng.random() < p_first else "second"
                JudgeVerdict.objects.create(
                    run=run,
                    first=first,
                    second=second,
                    winner=winner,
                    parse=JudgeVerdict.Parse.STRICT,
                )
        if index >= n_judged:
            continue
        for rater in raters[:votes]:
            outcome = rng.random()
            preference = -1 if outcome < p - 0.05 else (0 if outcome < p + 0.05 else 1)
            left_is_a = bool(rng.random() < 0.5)
            votes_cast.append(
                simulators.submitted_vote(comparison, rater, preference, now, left_is_a=left_is_a)
            )
    simulators.save_votes(votes_cast)
    for comparison in comparisons[:n_judged]:
        Comparison.objects.filter(pk=comparison.pk).update(judgment_count=votes)


def stored_judge(campaign=None, user=None, name="simulated judge") -> CalibratedJudge:
    """A CalibratedJudge fitted on simulated comparisons (features rouge1, rouge2,
    log_length; raw judge and composite present), stored as the next version of `name`."""
    frame, _ = simulators.simulate_comparisons(
        n_comparisons=300,
        n_companions=3,
        seed=3,
        weights={"metric_1": 1.0, "metric_2": 0.5, "log_length": -0.6},
    )
    renamed = {"metric_1": "rouge1", "metric_2": "rouge2"}
    frame = frame.rename(
        columns={
            f"{side}_{old}": f"{side}_{new}"
            for old, new in renamed.items()
            for side in ("a", "b", "d")
        }
    )
    rows = []
    for i, (n_a, n_t, n_b) in enumerate(frame[["votes_a", "votes_tie", "votes_b"]].to_numpy()):
        values = [-1] * n_a + [0] * n_t + [1] * n_b
        rows.extend((i, annotator, value) for annotator, value in enumerate(values))
    judgments = pd.DataFrame(rows, columns=["comparison", "annotator", "preference"])
    judge = JudgeConfig.objects.get_or_create(
        name="simulated single judge", defaults={"mode": "single", "rubric": "Grade it."}
    )[0]
    document = build_document(
        frame,
        ["rouge1", "rouge2", "log_length"],
        judgments,
        campaign={"id": getattr(campaign, "pk", None), "name": getattr(campaign, "name", "sim")},
        judge=judge,
        composite_note="simulated composite",
        name=name,
        folds=3,
    )
    return store_new_version(document, campaign, user)


def all_pairs(responses):
    return list(itertools.combinations(responses, 2))
