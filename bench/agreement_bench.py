"""Inter-annotator agreement: `python -m bench agreement_bench` (or `make bench`).

1. Statistics only: h2htalk.stats.agreement.alpha_with_ci on a raters × units matrix of
   100,002 judgments (33,334 comparisons × 3 annotators, built as in
   tests/test_agreement.py::test_bootstrap_handles_100k_judgments), ordinal 5-point and nominal
   A/tie/B, 1,000 bootstrap draws; the package's point estimate alone for scale.
2. The report on database data: a campaign of 4,650 approved scenarios over the 11 subtasks,
   8 companions with imported responses, 33,334 comparisons judged by 3 of 40 simulated
   annotators each (100,002 judgments). Annotators differ in accuracy (careful to noisy), two
   answer at random, one mostly clicks the left side, one is very fast; half of them also give
   1–5 ratings; 2% of the comparisons are gold. Then: loading the judgments into a DataFrame,
   scoring.agreement.services.compute_report (what the Celery job runs, 1,000 draws), store_report, and
   the researcher's report page and exports served from the stored report, with the Django test
   client: median / p95 ms over several requests and the query count. Then the campaign page's
   monitoring table (annotation.campaigns.annotator_monitoring: the same annotator_report on
   the same judgments, plus pace and skips), checked to flag exactly whom the report flags.

Wall time and peak memory per step. Peak memory is the process's resident high-water mark
(VmHWM) during the step, reset before it through /proc/self/clear_refs where Linux allows (else
the process's peak so far), and its growth over the resident size at the step's start; for the
pure statistics also the tracemalloc peak of a second, traced pass. Sizes:
BENCH_AGREEMENT_JUDGMENTS, BENCH_AGREEMENT_SCENARIOS, BENCH_AGREEMENT_COMPANIONS,
BENCH_AGREEMENT_ANNOTATORS, BENCH_AGREEMENT_DRAWS, BENCH_AGREEMENT_SAMPLES (page requests).
"""

import json
import math
import time
from contextlib import contextmanager

import numpy as np

from bench._common import (
    cpu_ms,
    env_int,
    latency_row,
    loadavg,
    log,
    measured,
    throughput_row,
    traced_peak_mib,
)
from bench._world import imported_companions, imported_responses

JUDGMENTS = env_int("BENCH_AGREEMENT_JUDGMENTS", 100_000)
SCENARIOS = env_int("BENCH_AGREEMENT_SCENARIOS", 4_650)
COMPANIONS = env_int("BENCH_AGREEMENT_COMPANIONS", 8)
ANNOTATORS = env_int("BENCH_AGREEMENT_ANNOTATORS", 40)
DRAWS = env_int("BENCH_AGREEMENT_DRAWS", 1_000)
SAMPLES = env_int("BENCH_AGREEMENT_SAMPLES", 20)
VOTES = 3
UNITS = math.ceil(JUDGMENTS / VOTES)  # 33,334 comparisons → 100,002 judgments
GOLD_SHARE = 0.02
CUTS = np.array([-1.2, -0.4, 0.4, 1.2])  # latent preference → −2..2 (negative = A better)


# ---------------------------------------------------------------- measuring


def _ci(row: dict) -> str:
    def f(value):
        return "—" if value is None else f"{value:.3f}"

    return f"α {f(row['alpha'])} [{f(row['low'])}, {f(row['high'])}]"


# ---------------------------------------------------------------- statistics only


def stats_rows() -> list[dict]:
    import krippendorff

    from h2htalk.stats.agreement.krippendorff_alpha import alpha_with_ci, value_counts

    rng = np.random.default_rng(1)
    truth = rng.choice([-2, -1, 0, 1, 2], UNITS)
    matrix = np.clip(truth + rng.choice([-1, 0, 1], (VOTES, UNITS), p=[0.2, 0.6, 0.2]), -2, 2)
    n = int(matrix.size)
    rows = []
    for level, data in (("ordinal", matrix.astype(float)), ("nominal", np.sign(matrix) * 1.0)):
        scale = "5-point" if level == "ordinal" else "A/tie/B"
        row, result = measured(
            f"α + bootstrap CI (stats only): {level} {scale}, {n:,} judgments "
            f"({UNITS:,} units × {VOTES}), {DRAWS:,} draws",
            lambda data=data, level=level: alpha_with_ci(data, level, n_boot=DRAWS, seed=1),
            n,
        )
        assert result.n_pairable == n and result.low < result.alpha < result.high, result
        traced = traced_peak_mib(
            lambda data=data, level=level: alpha_with_ci(data, level, n_boot=DRAWS, seed=1)
        )
        row["tracemalloc_peak_mib"] = round(traced, 1)
        row["notes"] += (
            f"; tracemalloc peak {traced:,.1f} MiB; α {result.alpha:.3f} "
            f"[{result.low:.3f}, {result.high:.3f}]"
        )
        log(f"  tracemalloc peak {traced:,.1f} MiB; {result}")
        rows.append(row)
        counts, domain = value_counts(data)
        start = time.perf_counter()
        krippendorff.alpha(value_counts=counts, value_domain=domain, level_of_measurement=level)
        seconds = time.perf_counter() - start
        rows.append(
            throughput_row(
                f"α point estimate only (krippendorff package): {level}, {n:,} judgments",
                n,
                seconds,
                notes="value counts given; one α, no interval",
            )
        )
    return rows


# ---------------------------------------------------------------- a campaign in the database


def annotator_profiles(rng) -> list[dict]:
    """Noise of each annotator's reading of the latent preference, and their habits."""
    profiles = []
    for k in range(ANNOTATORS):
        profile = {
            "kind": "careful" if k % 4 == 0 else "average" if k % 4 in (1, 2) else "noisy",
            "sigma": float(rng.uniform(0.25, 1.6)),
            "median_ms": float(rng.uniform(15_000, 60_000)),
            "rates": k % 2 == 0,  # gives 1–5 ratings too
        }
        profiles.append(profile)
    if ANNOTATORS >= 8:
        profiles[-1].update(kind="spammer")
        profiles[-2].update(kind="spammer")
        profiles[-3].update(kind="left-clicker")
        profiles[-4].update(kind="fast", median_ms=2_500.0)
    return profiles


def simulate(rng, latent: np.ndarray) -> dict:
    """Three distinct annotators per comparison and their votes, keyed by the pair."""
    profiles = annotator_profiles(rng)
    units = len(latent)
    # 3 distinct annotators per comparison: the first three of a random order.
    order = np.argsort(rng.random((units, ANNOTATORS)), axis=1)[:, :VOTES]
    who = order.reshape(-1)
    unit = np.repeat(np.arange(units), VOTES)
    sigma = np.array([p["sigma"] for p in profiles])[who]
    seen = latent[unit] + rng.normal(0, 1, len(who)) * sigma
    preference = np.searchsorted(CUTS, seen) - 2
    kinds = np.array([p["kind"] for p in profiles])[who]
    spam = kinds == "spammer"
    preference[spam] = rng.integers(-2, 3, int(spam.sum()))
    fast = kinds == "fast"
    preference[fast] = np.where(
        rng.random(int(fast.sum())) < 0.5, preference[fast], rng.integers(-2, 3, int(fast.sum()))
    )
    left_is_a = rng.random(len(who)) < 0.5
    screen = np.where(left_is_a, preference, -preference)
    clicker = (kinds == "left-clicker") & (rng.random(len(who)) < 0.8)
    screen[clicker] = rng.choice([-2, -1], int(clicker.sum()))
    preference = np.where(left_is_a, screen, -screen)  # pair-keyed, from what was clicked
    median_ms = np.array([p["median_ms"] for p in profiles])[who]
    time_ms = np.maximum(800, median_ms * rng.lognormal(0, 0.35, len(who))).astype(np.int64)
    rates = np.array([p["rates"] for p in profiles])[who]
    # Ratings keyed by the pair: A's higher when the reading favours A (negative).
    noise = rng.normal(0, 0.6, (len(who), 4))
    a = np.clip(np.rint(3 - seen[:, None] / 1.5 + noise[:, :2]), 1, 5).astype(int)
    b = np.clip(np.rint(3 + seen[:, None] / 1.5 + noise[:, 2:]), 1, 5).astype(int)
    return {
        "profiles": profiles,
        "annotator": who,
        "unit": unit,
        "preference": preference.astype(int),
        "screen": screen.astype(int),
        "left_is_a": left_is_a,
        "time_ms": time_ms,
        "rates": rates,
        "a": a,
        "b": b,
    }


def populate(rng) -> dict:
    """Users, scenarios, companions, responses, a campaign with its comparisons and votes."""
    from django.db import transaction

    pairs = np.array(list(zip(*np.triu_indices(COMPANIONS, 1), strict=True)))
    if SCENARIOS * len(pairs) < UNITS:
        raise SystemExit(
            f"{UNITS:,} comparisons need more than {SCENARIOS:,} scenarios × {len(pairs)} pairs"
        )
    with transaction.atomic():
        researcher, raters = _users()
        companions, run, scenarios, response_ids = _companions_and_responses()
        campaign = _campaign(researcher, raters, companions, run)
        comparisons, latent = _comparisons(rng, campaign, scenarios, response_ids, pairs)
        votes = simulate(rng, latent)
        judgments = _store_votes(votes, comparisons, raters)
    kinds = {}
    for profile in votes["profiles"]:
        kinds[profile["kind"]] = kinds.get(profile["kind"], 0) + 1
    return {
        "researcher": researcher,
        "campaign": campaign,
        "judgments": judgments,
        "responses": int(response_ids.size),
        "kinds": kinds,
    }


def _users():
    """The researcher who owns the campaign and ANNOTATORS annotators (bulk inserts)."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from h2htalk.roles import ANNOTATOR, RESEARCHER, ensure_role_groups

    ensure_role_groups()
    User = get_user_model()
    researcher = User.objects.create(username="bench-researcher")
    researcher.groups.add(Group.objects.get(name=RESEARCHER))
    raters = User.objects.bulk_create(
        [User(username=f"bench-annotator-{k:02d}") for k in range(ANNOTATORS)]
    )
    annotator_group = Group.objects.get(name=ANNOTATOR)
    User.groups.through.objects.bulk_create(
        [User.groups.through(user_id=u.pk, group_id=annotator_group.pk) for u in raters]
    )
    return researcher, raters


def _scenarios() -> list:
    """SCENARIOS approved scenarios over the subtasks, three personas, English and Chinese."""
    from scenarios.models import Persona, Scenario
    from scenarios.taxonomy import Subtask

    subtasks = Subtask.values  # the 11 subtasks in turn

    personas = Persona.objects.bulk_create(
        [
            Persona(name=f"bench persona {k}", summary="A busy nurse who loves hiking.")
            for k in range(3)
        ]
    )
    scenarios = []
    for k in range(SCENARIOS):
        scenario = Scenario(
            external_id=f"agree-{k:05d}",
            subtask=subtasks[k % len(subtasks)],
            persona=personas[k % len(personas)],
            user_message=f"Message {k}: a long week, and tomorrow looks no better.",
            reference_response=f"Reference {k}: that sounds exhausting, tell me more.",
            language="en" if k % 3 else "zh",
            state=Scenario.State.APPROVED,
        )
        scenario.refresh_derived()
        scenarios.append(scenario)
    return Scenario.objects.bulk_create(scenarios, batch_size=2_000)


def _companions_and_responses():
    """COMPANIONS companions and one imported response of each to every scenario; the
    response ids as a scenarios × companions array (A = the lower companion id)."""
    from scenarios.models import GenerationRun

    companions = imported_companions(COMPANIONS)
    scenarios = _scenarios()
    log(f"{len(scenarios):,} scenarios, {COMPANIONS} companions, {ANNOTATORS} annotators")
    run = GenerationRun.objects.create(
        name="bench agreement import", kind=GenerationRun.Kind.IMPORT
    )
    response_ids = imported_responses(run, scenarios, companions)
    log(f"{response_ids.size:,} responses")
    return companions, run, scenarios, response_ids


def _campaign(researcher, raters, companions, run):
    from annotation.models import Campaign

    campaign = Campaign.objects.create(
        name="bench agreement campaign",
        owner=researcher,
        overlap=VOTES,
        state=Campaign.State.OPEN,
        pairing=Campaign.Pairing.RANDOM_PAIRS,
        pairs_per_scenario=math.ceil(UNITS / SCENARIOS),
        gold_share=GOLD_SHARE,
    )
    campaign.companions.set(companions)
    campaign.runs.set([run])
    campaign.annotators.set(raters)
    return campaign


def _comparisons(rng, campaign, scenarios, response_ids, pairs):
    """UNITS distinct (scenario, pair) comparisons, a share GOLD_SHARE gold, and their latent
    preference (negative = A better): the companions' strengths plus a per-comparison effect."""
    from annotation.models import Comparison

    strength = rng.normal(0, 0.5, COMPANIONS)
    chosen = np.sort(rng.choice(SCENARIOS * len(pairs), UNITS, replace=False))
    scenario_of, pair_of = chosen // len(pairs), chosen % len(pairs)
    a_of, b_of = pairs[pair_of, 0], pairs[pair_of, 1]
    latent = strength[b_of] - strength[a_of] + rng.normal(0, 1.0, UNITS)
    gold = rng.random(UNITS) < GOLD_SHARE
    gold_answer = np.sign(np.searchsorted(CUTS, latent) - 2)
    comparisons = Comparison.objects.bulk_create(
        [
            Comparison(
                campaign=campaign,
                scenario=scenarios[int(s)],
                response_a_id=int(response_ids[s, a]),
                response_b_id=int(response_ids[s, b]),
                is_gold=bool(g),
                gold_preference=int(answer) if g else None,
                judgment_count=VOTES,
            )
            for s, a, b, g, answer in zip(scenario_of, a_of, b_of, gold, gold_answer, strict=True)
        ],
        batch_size=5_000,
    )
    log(f"{len(comparisons):,} comparisons ({int(gold.sum())} gold)")
    return comparisons, latent


def _store_votes(votes: dict, comparisons, raters) -> int:
    """The simulated votes as submitted assignments and their judgments; how many."""
    from django.utils import timezone

    from tests.simulators import save_votes, submitted_vote

    now = timezone.now()
    dims = ("empathy", "fluency")
    stored = []
    for x, (u, k) in enumerate(zip(votes["unit"], votes["annotator"], strict=True)):
        ratings = {}
        if votes["rates"][x]:
            ratings = {
                "a": {d: int(votes["a"][x, i]) for i, d in enumerate(dims)},
                "b": {d: int(votes["b"][x, i]) for i, d in enumerate(dims)},
            }
        stored.append(
            submitted_vote(
                comparisons[int(u)],
                raters[int(k)],
                int(votes["preference"][x]),
                now,
                left_is_a=bool(votes["left_is_a"][x]),
                ratings=ratings,
                time_on_task_ms=int(votes["time_ms"][x]),
            )
        )
    save_votes(stored)
    log(f"{len(stored):,} assignments and judgments")
    return len(stored)


def _request(client, url: str, samples: int, check) -> tuple[list[float], int, dict, int]:
    """GET url `samples` times: durations, the queries of each (must be equal), the slowest
    query seen, and the response size."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    durations, counts, slowest, size = [], set(), {"time": "0", "sql": ""}, 0
    for _ in range(samples):
        with CaptureQueriesContext(connection) as captured:
            start = time.perf_counter()
            response = client.get(url)
            durations.append(time.perf_counter() - start)
        assert response.status_code == 200, (url, response.status_code)
        check(response)
        size = len(response.content)
        counts.add(len(captured.captured_queries))
        for query in captured.captured_queries:
            if float(query["time"]) > float(slowest["time"]):
                slowest = query
    assert len(counts) == 1, f"query count varies: {sorted(counts)}"
    return durations, counts.pop(), slowest, size


def report_rows() -> list[dict]:
    from h2htalk.models import Job
    from scoring.models import AgreementReport

    rng = np.random.default_rng(20250612)
    row, world = measured(
        f"agreement setup: {SCENARIOS:,} scenarios, {COMPANIONS} companions, "
        f"{UNITS:,} comparisons × {VOTES} of {ANNOTATORS} annotators (bulk inserts)",
        lambda: populate(rng),
        UNITS * VOTES,
    )
    kinds = ", ".join(f"{n} {kind}" for kind, n in world["kinds"].items())
    row["notes"] += f"; {world['responses']:,} responses; annotators: {kinds}"
    campaign, n = world["campaign"], world["judgments"]
    fingerprint_row, state = _fingerprint_row(campaign, n)
    rows = [row, fingerprint_row, _frame_row(campaign, n)]
    compute_row, data = _compute_row(campaign, n)
    rows += [compute_row, _store_row(campaign, data, state), _monitoring_row(campaign, n, data)]
    jobs_before = Job.objects.count()
    rows += _page_rows(world["researcher"], campaign, n)
    assert Job.objects.count() == jobs_before, "a request started a job: the cache missed"
    assert AgreementReport.objects.filter(campaign=campaign).count() == 1
    return rows


def _monitoring_row(campaign, n: int, report: dict) -> dict:
    """The campaign page's monitoring table: wall time, CPU-ms of this process, load; its flags
    must be the agreement report's."""
    from annotation import campaigns

    load = loadavg()
    cpu = cpu_ms()
    row, table = measured(
        f"campaign monitoring table ({n:,} judgments, agreement flags + pace + skips)",
        lambda: campaigns.annotator_monitoring(campaign),
        n,
    )
    spent = cpu_ms() - cpu
    shown = {r["annotator"]: r["flag"] for r in table["rows"] if r["judgments"]}
    expected = {r["annotator"]: r["flag"] for r in report["annotators"]}
    assert shown == expected, "the monitoring table flags differently from the agreement report"
    flagged = sum(bool(flag) for flag in shown.values())
    row["cpu_ms"] = round(spent, 1)
    row["notes"] += f"; CPU {spent:,.0f} ms; loadavg {load}; {flagged} flagged, as the report"
    log(f"  monitoring: CPU {spent:,.0f} ms, {flagged} flagged as in the report")
    return row


def _fingerprint_row(campaign, n: int) -> tuple[dict, object]:
    from scoring.agreement import services as agreement

    seconds, state = _best_of(3, lambda: agreement.fingerprint(campaign))
    log(f"fingerprint {state}: {seconds * 1000:.1f} ms")
    row = {
        "benchmark": "agreement fingerprint (count + max over the campaign's judgments)",
        "rows": n,
        "seconds": round(seconds, 4),
        "median_ms": round(seconds * 1000, 2),
        "queries": 1,
        "notes": f"best of 3; {state}; runs on every page view and export",
    }
    return row, state


def _frame_row(campaign, n: int) -> dict:
    """Loading the judgments into a DataFrame, the ratings' expansion timed apart."""
    from h2htalk.stats.agreement import labels
    from scoring.agreement import services as agreement

    spent = {}
    with _timing(labels, "expand_ratings", spent):  # (imported by judgments_frame when called)
        row, frame = measured(
            f"agreement judgments → DataFrame ({n:,} rows, ratings expanded)",
            lambda: agreement.judgments_frame(campaign),
            n,
        )
    query = row["seconds"] - sum(spent.values())
    parts = f"query + DataFrame {query:.2f} s, expand_ratings {spent['expand_ratings']:.2f} s"
    row["notes"] += f"; {parts}"
    log(f"  {parts}")
    assert len(frame) == n, len(frame)
    return row


def _compute_row(campaign, n: int) -> tuple[dict, dict]:
    """compute_report as the Celery job runs it, with the time of each of its steps."""
    from scoring.agreement import services as agreement

    marks = []

    def progress(done, total, step):
        marks.append((step, time.perf_counter()))
        log(f"  step {done}/{total} {step} at {marks[-1][1] - started:.1f} s")

    spent = {}
    started = time.perf_counter()
    with _timing(agreement, "judgments_frame", spent):
        row, data = measured(
            f"agreement compute_report: {n:,} judgments, {DRAWS:,} draws (the Celery job)",
            lambda: agreement.compute_report(campaign, n_boot=DRAWS, progress=progress),
            n,
        )
    steps = [f"loading {spent['judgments_frame']:.1f} s"]
    previous = started + spent["judgments_frame"]
    for step, at in marks:
        steps.append(f"{step} {at - previous:.1f} s")
        previous = at
    overall = {r["label"]: r for r in data["overall"]}
    flagged = [a["annotator"] for a in data["annotators"] if a["flagged"]]
    row["notes"] += (
        f"; steps: {', '.join(steps)}; "
        + "; ".join(f"{label} {_ci(r)}" for label, r in overall.items())
        + f"; {len(data['by_subtask'])} subtask rows, {len(flagged)} of "
        f"{len(data['annotators'])} annotators flagged"
    )
    for label, r in overall.items():
        log(f"  overall {label} ({r['level']}): {_ci(r)}, {r['n_units']:,} units")
    log(f"  flagged: {', '.join(flagged) or 'none'}")
    log(f"  aggregation: {data['aggregation']}")
    assert overall["winner3"]["n_units"] > 0.9 * UNITS * (1 - GOLD_SHARE)
    return row, data


def _store_row(campaign, data: dict, state) -> dict:
    from scoring.agreement import services as agreement
    from scoring.models import AgreementReport

    seconds, report = _best_of(1, lambda: agreement.store_report(campaign, data, state))
    size_kib = len(json.dumps(AgreementReport.objects.get(pk=report.pk).data)) / 1024
    assert agreement.cached_report(campaign) is not None, "stored report is not current"
    return {
        "benchmark": "agreement store_report",
        "rows": 1,
        "seconds": round(seconds, 4),
        "notes": f"~{size_kib:,.0f} KiB JSON",
    }


def _is_report(response):
    assert response.context is None or response.context.get("job") is None
    assert b"bootstrap draws" in response.content and b"<svg" in response.content


def _is_csv(response):
    assert response.content.count(b"\n") > 1


def _page_rows(researcher, campaign, n: int) -> list[dict]:
    """The report page and its exports, served from the stored report: latency rows."""
    from django.test import Client
    from django.urls import reverse

    def is_json(response):
        assert response.json()["judgments"] == n

    client = Client()
    client.force_login(researcher)
    page = reverse("scoring:agreement", args=[campaign.pk])
    start = time.perf_counter()
    client.get(page)  # template compilation, session, first-use imports
    log(f"first page view {1000 * (time.perf_counter() - start):.0f} ms")
    export = reverse("scoring:agreement_export", args=[campaign.pk, "csv"])
    few = max(3, SAMPLES // 4)
    targets = [
        ("agreement page (stored report)", page, SAMPLES, _is_report),
        (
            "agreement export JSON",
            reverse("scoring:agreement_export", args=[campaign.pk, "json"]),
            few,
            is_json,
        ),
        ("agreement export CSV (α)", export, few, _is_csv),
        ("agreement export CSV (annotators)", export + "?table=annotators", few, _is_csv),
    ]
    rows = []
    for label, url, samples, check in targets:
        durations, queries, slowest, size = _request(client, url, samples, check)
        sql = " ".join(slowest["sql"].split())
        note = (
            f"{samples} requests, {size / 1024:,.0f} KiB; slowest query "
            f"{float(slowest['time']) * 1000:.1f} ms: {sql[:160]}"
        )
        rows.append(latency_row(f"{label}, {n:,} judgments", durations, queries, n, note))
        log(
            f"{label}: median {1000 * sorted(durations)[len(durations) // 2]:.1f} ms, "
            f"{queries} queries, {size / 1024:,.0f} KiB; slowest query "
            f"{float(slowest['time']) * 1000:.1f} ms"
        )
    return rows


@contextmanager
def _timing(module, name: str, spent: dict):
    """Add the time spent in module.name to spent[name] while the block runs."""
    original = getattr(module, name)

    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spent[name] = spent.get(name, 0.0) + time.perf_counter() - start

    setattr(module, name, wrapper)
    try:
        yield
    finally:
        setattr(module, name, original)


def _best_of(times: int, fn):
    best, value = float("inf"), None
    for _ in range(times):
        start = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - start)
    return best, value


def run() -> list[dict]:
    return stats_rows() + report_rows()
