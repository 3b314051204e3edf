"""Style control (h2htalk.stats.style_control): `python -m bench style_bench`.

1. The simulation with a known truth, large: four companions with true strengths θ = 1.0, 0.4,
   0.0, −0.6 ("Best", "Good", "Verbose", "Weak"); votes follow
   P(A beats B) = σ(θA − θB + γ·log(LA/LB)) with γ = 1; "Verbose" writes twice as long as the
   others (log-normal lengths, σ 0.35), the other five features are Poisson noise the votes
   ignore. 1,000 scenarios × 6 pairs × 3 votes, 1,000 draws. Printed: plain and controlled Elo
   and rank beside the true Elo, and the length coefficient per unit of the log ratio with its
   95% interval (the truth: 1).
2. The cost at release_bench's scale: 50 companions, 10,000 comparisons (random pairs on 4,650
   scenarios) × 3 votes, 1,000 draws: the plain scenario-bootstrap fit alone
   (leaderboard.cell_strengths) and the style-control section's work (both fits,
   style_strengths), each run on one BLAS thread as a release computes.

Sizes: BENCH_STYLE_SCENARIOS, BENCH_STYLE_COMPANIONS, BENCH_STYLE_COMPARISONS,
BENCH_STYLE_DRAWS.
"""

import numpy as np
from threadpoolctl import threadpool_limits

from bench._common import cpu_ms, env_int, loadavg, log, measured
from h2htalk.stats import style_control as sc
from h2htalk.stats.leaderboard import cell_strengths, scenario_cells
from h2htalk.stats.style_features import FEATURES

SCENARIOS = env_int("BENCH_STYLE_SCENARIOS", 4_650)
COMPANIONS = env_int("BENCH_STYLE_COMPANIONS", 50)
COMPARISONS = env_int("BENCH_STYLE_COMPARISONS", 10_000)
DRAWS = env_int("BENCH_STYLE_DRAWS", 1_000)
VOTES = 3
KINDS = [sc.LOG_RATIO] + [sc.SHARE] * (len(FEATURES) - 1)
NAMES = ["Best", "Good", "Verbose", "Weak"]
THETA = np.array([1.0, 0.4, 0.0, -0.6])


def votes(rng, theta, mean_length, scenario, a, b, gamma=1.0) -> tuple:
    """(a, b, outcome, keys, features of A, of B): VOTES votes per (scenario, a, b) row."""
    n = len(theta)
    n_scenarios = int(scenario.max()) + 1
    length = mean_length * np.exp(rng.normal(0, 0.35, (n_scenarios, n)))
    counts = rng.poisson(1.0, (n_scenarios, n, len(FEATURES) - 1))
    table = np.concatenate([np.round(length)[:, :, None], counts], axis=2)
    s, a, b = (np.repeat(x, VOTES) for x in (scenario, a, b))
    z = np.log1p(table[s, a, 0]) - np.log1p(table[s, b, 0])
    p = 1 / (1 + np.exp(-(theta[a] - theta[b] + gamma * z)))
    outcome = (rng.random(len(s)) < p).astype(float)
    keys = np.char.zfill(s.astype(str), 6)
    return a, b, outcome, keys, table[s, a], table[s, b]


def simulation(rng) -> None:
    i, j = np.triu_indices(4, 1)
    scenario = np.repeat(np.arange(1_000), len(i))
    a, b = np.tile(i, 1_000), np.tile(j, 1_000)
    data = votes(rng, THETA, np.array([150.0, 150.0, 300.0, 150.0]), scenario, a, b)
    with threadpool_limits(limits=1, user_api="blas"):
        fit = sc.style_strengths(*data, KINDS, NAMES, n_boot=DRAWS, seed=0)
    truth = 1000 + 400 / np.log(10) * (THETA - THETA.mean())
    log(f"simulation: {len(data[0]):,} votes on 1,000 scenarios, {DRAWS} draws")
    for k, name in enumerate(NAMES):
        log(
            f"  {name:8s} true Elo {truth[k]:6.0f} | plain {fit.plain.elo[k]:6.0f} "
            f"rank {fit.plain.rank[k]} | controlled {fit.controlled.elo[k]:6.0f} "
            f"[{fit.controlled.low[k]:.0f}, {fit.controlled.high[k]:.0f}] "
            f"rank {fit.controlled.rank[k]}"
        )
    scale = fit.scale[0]
    log(
        f"  length coefficient per unit of the log ratio {fit.coefficient[0] / scale:.3f} "
        f"[{fit.low[0] / scale:.3f}, {fit.high[0] / scale:.3f}] (truth 1); per standard "
        f"deviation {fit.coefficient[0]:.3f} [{fit.low[0]:.3f}, {fit.high[0]:.3f}]"
    )
    others = ", ".join(
        f"{FEATURES[k]} {fit.coefficient[k]:+.3f} [{fit.low[k]:+.3f}, {fit.high[k]:+.3f}]"
        for k in range(1, len(FEATURES))
    )
    log(f"  noise covariates (truth 0): {others}")


def with_cpu(benchmark: str, fn, rows: int, notes: str) -> tuple[dict, object]:
    """measured() plus this process's CPU seconds (the machine is shared: wall time is not)."""
    start = cpu_ms()
    row, value = measured(benchmark, fn, rows, notes)
    cpu = (cpu_ms() - start) / 1000
    row["rows_per_cpu_s"] = round(rows / cpu, 1) if cpu else None
    row["notes"] += f"; {cpu:.2f} CPU-s"
    log(f"  {benchmark}: {cpu:.2f} CPU-s")
    return row, value


def run() -> list[dict]:
    rng = np.random.default_rng(0)
    log(f"load {loadavg()}")
    simulation(rng)
    theta = rng.normal(0, 0.6, COMPANIONS)
    first = rng.integers(0, COMPANIONS, COMPARISONS)
    second = (first + rng.integers(1, COMPANIONS, COMPARISONS)) % COMPANIONS
    scenario = rng.integers(0, SCENARIOS, COMPARISONS)
    data = votes(rng, theta, rng.uniform(100, 300, COMPANIONS), scenario, first, second)
    names = [f"companion-{k:03d}" for k in range(COMPANIONS)]
    _, unit = np.unique(data[3], return_inverse=True)
    n_votes = len(data[0])
    notes = f"{COMPANIONS} companions, {n_votes:,} votes, {DRAWS} draws, one BLAS thread"
    with threadpool_limits(limits=1, user_api="blas"):
        plain_row, _ = with_cpu(
            "style: plain scenario-bootstrap fit alone",
            lambda: cell_strengths(
                scenario_cells(unit, data[0], data[1], data[2], COMPANIONS), DRAWS, seed=0
            ),
            n_votes,
            notes,
        )
        style_row, fit = with_cpu(
            "style: plain + style-controlled fits (the section)",
            lambda: sc.style_strengths(*data, KINDS, names, n_boot=DRAWS, seed=0),
            n_votes,
            notes + f", {len(FEATURES)} covariates",
        )
    log(f"  rows after summing votes: {fit.rows:,}; load {loadavg()}")
    return [plain_row, style_row]
