"""Simulated data with a known truth, for the tests and the benchmarks (not used by the platform).

Kept out of `h2htalk.stats` so that the statistics modules hold only what the platform runs.
"""

import numpy as np
import pandas as pd
from scipy.special import expit

from h2htalk.stats import active_sampling as active
from h2htalk.stats import bradley_terry as bt


def simulate_votes(strengths, n: int, rng: np.random.Generator, tie_rate: float = 0.1):
    """n votes between random pairs: P(a beats b) = σ(s_a − s_b), a share `tie_rate` ties
    (drawn independently of the pair, so E[outcome] is not exactly σ; use tie_rate=0 for an
    exact BT truth)."""
    strengths = np.asarray(strengths, dtype=float)
    m = len(strengths)
    a = rng.integers(0, m, n)
    b = (a + rng.integers(1, m, n)) % m
    p = 1 / (1 + np.exp(-(strengths[a] - strengths[b])))
    outcome = (rng.random(n) < p).astype(float)
    outcome[rng.random(n) < tie_rate] = 0.5
    return a, b, outcome


def simulate_ties_exact(strengths, n: int, rng: np.random.Generator, tie_share: float = 0.2):
    """Votes with ties whose expectation is exactly σ(s_a − s_b): P(tie) = tie_share·4p(1 − p),
    P(a) = p − P(tie)/2."""
    strengths = np.asarray(strengths, dtype=float)
    m = len(strengths)
    a = rng.integers(0, m, n)
    b = (a + rng.integers(1, m, n)) % m
    p = 1 / (1 + np.exp(-(strengths[a] - strengths[b])))
    p_tie = tie_share * 4 * p * (1 - p)
    u = rng.random(n)
    outcome = np.where(u < p - p_tie / 2, 1.0, np.where(u < p + p_tie / 2, 0.5, 0.0))
    return a, b, outcome


def simulate_design(design: str, truth, seed: int, batch: int = 20, limit: int = 50_000):
    """Votes a design needs until every pair is separated, with votes drawn from known
    Bradley–Terry strengths `truth`; returns (votes, fitted order correct?). For benchmarks and
    tests: `design` is "random" (uniform over pairs, like a fixed random campaign) or
    "adaptive"."""
    rng = np.random.default_rng(seed)
    truth = np.asarray(truth, float)
    n = len(truth)
    wins = np.zeros((n, n))
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    votes = 0
    while votes < limit and not active.all_separated(wins):
        if design == "adaptive":
            chosen = active.allocate(wins, batch, rng)
        else:
            chosen = [pairs[k] for k in rng.integers(0, len(pairs), batch)]
        for i, j in chosen:
            if rng.random() < 1 / (1 + np.exp(-(truth[i] - truth[j]))):
                wins[i, j] += 1
            else:
                wins[j, i] += 1
        votes += len(chosen)
    fitted = bt.fit(wins)
    return votes, bool((np.argsort(fitted) == np.argsort(truth)).all())


def simulate_comparisons(
    n_comparisons: int = 4000,
    n_scenarios: int | None = None,
    n_companions: int = 6,
    votes_per_comparison: int = 3,
    weights: dict[str, float] | None = None,
    tie_rate: float = 0.3,
    judge: str = "single",
    position_bias: float = 1.0,
    length_bias: float = 1.2,
    seed: int = 0,
    strength_by_id: bool = False,
    quality_spread: float = 0.7,
) -> tuple[pd.DataFrame, dict[str, float]]:
    """Simulated comparisons whose human votes follow known weights on the features.

    Per response: metric_1, metric_2 (reference metrics), rubric (an LLM judge's 1–10 score
    that rewards length: `length_bias` points per unit of log length), log_length, and a
    companion quality. Humans: P(A) = σ(Σ w·Δf) over the features in `weights` (default
    metric_1 1.0, metric_2 0.5, rubric 0.8, log_length −0.6: they like what the rubric sees but
    not the length it rewards); each vote is A / tie / B with P(tie) = tie_rate·4p(1 − p) and
    E[outcome] = p exactly, so the known weights stay the truth.

    The raw judge: `judge="single"`: σ(Δrubric) (length-biased, overconfident);
    `judge="pairwise"`: two verdicts (both orders), P(first wins) = σ(1.5·Δrubric +
    `position_bias`), the first shown gets a bonus; raw = share for A, ties half, and the
    feature ``judge_win_share`` is that share (for B: 1 − share). `strength_by_id`: companion
    quality falls with the id (companion 0 the best), so A (the lower id) is mostly the
    better side, the case where a fixed orientation makes κ and α collapse; `quality_spread`
    is the standard deviation of companion quality. Returns (frame, weights).
    """
    rng = np.random.default_rng(seed)
    weights = dict(weights or {"metric_1": 1.0, "metric_2": 0.5, "rubric": 0.8, "log_length": -0.6})
    n_scenarios = n_scenarios or max(2, n_comparisons // 4)
    companion_quality = rng.normal(0, quality_spread, n_companions)
    if strength_by_id:
        companion_quality = np.sort(companion_quality)[::-1]
    scenario = rng.integers(0, n_scenarios, n_comparisons)
    first = rng.integers(0, n_companions, n_comparisons)
    second = (first + rng.integers(1, n_companions, n_comparisons)) % n_companions
    low, high = np.minimum(first, second), np.maximum(first, second)

    def side(companion):
        quality = companion_quality[companion] + rng.normal(0, 1, len(companion))
        length = rng.normal(5.0, 0.5, len(companion))
        return {
            "metric_1": 0.4 * quality + rng.normal(0, 0.5, len(companion)),
            "metric_2": 0.3 * quality + rng.normal(0, 0.5, len(companion)),
            "rubric": np.clip(
                5.5
                + 1.3 * quality
                + length_bias * (length - 5.0)
                + rng.normal(0, 0.6, len(companion)),
                1,
                10,
            ),
            "log_length": length,
        }

    a, b = side(low), side(high)
    frame = pd.DataFrame({"scenario": scenario, "companion_a": low, "companion_b": high})
    for name in a:
        frame[f"a_{name}"] = a[name]
        frame[f"b_{name}"] = b[name]
        frame[f"d_{name}"] = a[name] - b[name]
    z = sum(w * frame[f"d_{name}"].to_numpy() for name, w in weights.items())
    p = expit(z)
    p_tie = tie_rate * 4 * p * (1 - p)
    probabilities = np.stack([p - p_tie / 2, p_tie, 1 - p - p_tie / 2], axis=1)
    counts = np.array([rng.multinomial(votes_per_comparison, row) for row in probabilities])
    frame["votes_a"], frame["votes_tie"], frame["votes_b"] = counts.T
    frame["n_votes"] = counts.sum(axis=1)
    # The majority as agreement.majority_labels counts it (tied top → sign of summed votes).
    top = counts.max(axis=1)
    tied = (counts == top[:, None]).sum(axis=1) > 1
    strength = np.sign(counts[:, 2] - counts[:, 0])
    frame["majority"] = np.where(tied, strength, counts.argmax(axis=1) - 1)
    d_rubric = frame["d_rubric"].to_numpy()
    if judge == "single":
        frame["raw"] = expit(d_rubric)
    elif judge == "pairwise":
        p_ab = expit(1.5 * d_rubric + position_bias)  # A shown first
        p_ba = expit(-1.5 * d_rubric + position_bias)  # B shown first: P(B wins)
        wins = rng.random(n_comparisons) < p_ab
        wins_b = rng.random(n_comparisons) < p_ba
        share = (wins.astype(float) + (1 - wins_b.astype(float))) / 2
        frame["raw"] = share
        frame["a_judge_win_share"] = share
        frame["b_judge_win_share"] = 1 - share
        frame["d_judge_win_share"] = 2 * share - 1
    else:
        raise ValueError("judge is 'single' or 'pairwise'")
    composite_a = 0.6 * a["metric_1"] + 0.4 * a["metric_2"]
    composite_b = 0.6 * b["metric_1"] + 0.4 * b["metric_2"]
    frame["composite_a"], frame["composite_b"] = composite_a, composite_b
    frame["composite_diff"] = composite_a - composite_b
    return frame, weights


# ---------------------------------------------------------------- rows in the database
# Bulk inserts shared by the database tests and the benchmarks (Django is imported only here).


def bulk_scenarios(n: int, prefix: str, source: str | None = None) -> list:
    """n approved one-turn scenarios `{prefix}-00000`… (source `prefix` unless given), bulk-inserted."""
    from scenarios.models import Scenario

    scenarios = []
    for i in range(n):
        scenario = Scenario(
            external_id=f"{prefix}-{i:05d}",
            subtask="dialogue_emotion",
            user_message=f"I had a long day ({i}). Can we talk?",
            reference_response="Of course. Tell me what happened.",
            language="en",
            state="approved",
            source=prefix if source is None else source,
        )
        scenario.refresh_derived()
        scenarios.append(scenario)
    return Scenario.objects.bulk_create(scenarios, batch_size=2000)


def submitted_vote(comparison, rater, preference: int, now, *, left_is_a=True, **judgment):
    """The unsaved assignment and judgment of one finished vote; `preference` is keyed by the
    pair (negative = A better), the screen preference follows from `left_is_a`."""
    from annotation.models import Assignment, Judgment

    assignment = Assignment(
        comparison=comparison,
        campaign_id=comparison.campaign_id,
        annotator=rater,
        left_is_a=left_is_a,
        state=Assignment.State.SUBMITTED,
        lease_expires_at=now,
        finished_at=now,
    )
    judgment = Judgment(
        assignment=assignment,
        comparison=comparison,
        annotator=rater,
        preference=preference,
        screen_preference=preference if left_is_a else -preference,
        **{"time_on_task_ms": 20_000, **judgment},
    )
    return assignment, judgment


def save_votes(votes: list[tuple], batch_size: int = 5_000) -> None:
    """Bulk-insert (assignment, judgment) pairs from `submitted_vote`, assignments first."""
    from annotation.models import Assignment, Judgment

    Assignment.objects.bulk_create([assignment for assignment, _ in votes], batch_size=batch_size)
    judgments = []
    for assignment, judgment in votes:
        judgment.assignment = assignment  # now saved: its primary key is known
        judgments.append(judgment)
    Judgment.objects.bulk_create(judgments, batch_size=batch_size)
