"""The blind pairwise rating cycle (API next + submit) under gunicorn on PostgreSQL, measured
like with like beside a live Label Studio 1.23.2 in the same run.

- Server configurations: every level runs under each of BENCH_CYCLE_SERVERS (default
  "sync,gthread": 4 sync workers, and 4 workers × 8 threads), ours and Label Studio's alike.
- CPU-ms per cycle: utime + stime from /proc/<pid>/stat of the gunicorn workers and of the
  PostgreSQL backends connected to the server's database (pg_stat_activity), before and after,
  with the load average (/proc/loadavg) beside every figure: the machine may be shared.
- Levels: 1, 10 and 50 annotators (BENCH_LOAD_LEVELS) in a fresh campaign (Label Studio: a
  fresh project with the same texts, overlap 3), all of them raters with history
  (BENCH_CYCLE_RATER_HISTORY earlier submitted assignments each, in closed campaigns; Label
  Studio's raters carry theirs from earlier levels). Before a level every annotator finishes
  one cycle (warm-up: connections and workers ready), then the level runs BENCH_CYCLE_SECONDS.
  Every status is checked: accepted = stored on both sides (Label Studio: annotations in its
  database), and no comparison or task over k.
- Label Studio: live when BENCH_LS_VENV names its virtual environment (bench._label_studio);
  otherwise there is no live anchor and no ratio is printed.
- Statements per cycle from PostgreSQL's own log (bench._pglog), health checks and BEGIN /
  COMMIT included, for both servers.
- Human pace: 50 annotators each submitting every 4–8 s, arriving over the first 8 s; p95 of
  next and of submit; the same 50 asking at once beforehand are a row of their own.
- Flat in the store: 10 annotators with the judgments stored so far, then with 1 million more
  (BENCH_CYCLE_FILLED) in other campaigns (INSERT … SELECT), in fresh campaigns of one size.
- Flat in the rater's history: raters with 0, 1k, 10k and 100k earlier assignments across 50
  closed campaigns (BENCH_CYCLE_HISTORY), each level BENCH_CYCLE_HISTORY_RATERS raters at once,
  the levels in turn for BENCH_CYCLE_HISTORY_ROUNDS rounds (median).
- Flat in the rater's history within the campaign: one rater alone in a campaign (k = 3), who
  already judged 0, 1k or 4k of its comparisons (BENCH_CYCLE_LONE), none of them at k: items
  their candidate lock passes, which no co-rater takes away.

BENCH_CYCLE_PARTS picks the parts (default "statements,levels,human,history,store").
"""

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

from bench import _cycle_sql as sql
from bench import _label_studio, _pglog
from bench._common import WORKER_CONFIGS, env_int, free_port, log, percentile, start_gunicorn
from bench._cycle_meters import (
    ARRIVAL_SECONDS,
    CpuMeter,
    _drive,
    _ours,
    _theirs,
    _warm_up,
)


def _env_list(name: str, default: str) -> list[str]:
    return [x.strip() for x in os.environ.get(name, default).split(",") if x.strip()]


LEVELS = [int(x) for x in _env_list("BENCH_LOAD_LEVELS", "1,10,50")]
SERVERS = _env_list("BENCH_CYCLE_SERVERS", "sync,gthread")
PARTS = set(_env_list("BENCH_CYCLE_PARTS", "statements,levels,human,history,lone,store"))
SECONDS = env_int("BENCH_CYCLE_SECONDS", 15)
HUMAN_SECONDS = env_int("BENCH_HUMAN_SECONDS", 45)
SCENARIOS = env_int("BENCH_CYCLE_SCENARIOS", 2000)  # × 3 companion pairs = comparisons
RATER_HISTORY = env_int("BENCH_CYCLE_RATER_HISTORY", 2000)
HISTORY = [int(x) for x in _env_list("BENCH_CYCLE_HISTORY", "0,1000,10000,100000")]
HISTORY_RATERS = env_int("BENCH_CYCLE_HISTORY_RATERS", 5)
LONE = [int(x) for x in _env_list("BENCH_CYCLE_LONE", "0,1000,4000")]
HISTORY_CAMPAIGNS = 50
HISTORY_ROUNDS = env_int("BENCH_CYCLE_HISTORY_ROUNDS", 3)
STATEMENT_CYCLES = 100
OVERLAP = 3
FILLER_USERS = 100
FILLED = env_int("BENCH_CYCLE_FILLED", 1_000_000)  # judgments added in other campaigns
# Database connections kept for the whole bench (Label Studio's too): a backend that exits
# within a measured window would take its CPU with it.
KEPT = {"DB_CONN_MAX_AGE": str(_label_studio.CONN_MAX_AGE)}


def _p95(values: list[float]) -> float:
    return percentile(values, 95) if values else float("nan")


def _loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


# ---------------------------------------------------------------- campaigns and raters


def _stored(campaign) -> int:
    from annotation.models import Judgment

    return Judgment.objects.filter(comparison__campaign=campaign).count()


def _integrity(campaign, accepted: int, before: int = 0) -> str:
    stored = _stored(campaign) - before
    over_k = campaign.comparisons.filter(judgment_count__gt=campaign.overlap).count()
    return f"accepted {accepted}, stored {stored}, lost {accepted - stored}, over k {over_k}"


def _analyze() -> None:
    """Table statistics as autovacuum leaves them within a minute of a campaign's build."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def _raters(n: int, tag: str, history: int) -> list:
    """n annotators (with API tokens), each with `history` earlier submitted assignments."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from rest_framework.authtoken.models import Token

    from h2htalk.roles import ensure_role_groups

    ensure_role_groups()
    group = Group.objects.get(name="annotator")
    users = []
    for i in range(n):
        user, _ = get_user_model().objects.get_or_create(username=f"bench-rater-{tag}-{i}")
        user.groups.add(group)
        Token.objects.get_or_create(user=user)
        users.append(user)
    if history:
        log(f"{n} raters get {history:,} earlier assignments each")
        _give_history([u.pk for u in users], history)
    return users


def _campaign(users: list, tag: str):
    """A fresh open campaign (SCENARIOS scenarios × 3 companion pairs, overlap 3) that `users`
    rate in, and their tokens."""
    from rest_framework.authtoken.models import Token

    from bench.rating_load import _setup

    campaign, _ = _setup(0, n_scenarios=SCENARIOS, tag=tag)
    campaign.annotators.add(*users)
    return campaign, [Token.objects.get(user=u).key for u in users]


_HISTORY_CAMPAIGNS: list[int] = []


def _history_campaigns() -> list[int]:
    """HISTORY_CAMPAIGNS closed campaigns, each with enough comparisons for the largest
    history (copies of a campaign's, made once)."""
    from django.db import connection

    from annotation.models import Campaign

    if not _HISTORY_CAMPAIGNS:
        per = max(max(HISTORY), RATER_HISTORY) // HISTORY_CAMPAIGNS
        users = _raters(0, "none", 0)
        source, _ = _campaign(users, "history-source")
        source.state = Campaign.State.CLOSED
        source.save(update_fields=["state"])
        for i in range(HISTORY_CAMPAIGNS):
            copy = Campaign.objects.create(
                name=f"bench history {i}", owner=source.owner, state=Campaign.State.CLOSED
            )
            with connection.cursor() as cursor:
                cursor.execute(sql.COPY_COMPARISONS_SQL, [copy.pk, source.pk, per])
            _HISTORY_CAMPAIGNS.append(copy.pk)
    return _HISTORY_CAMPAIGNS


def _give_history(users: list[int], history: int) -> None:
    """`history` submitted assignments (with judgments and tallies) per user, spread evenly
    over the closed history campaigns."""
    from django.db import connection

    per = history // HISTORY_CAMPAIGNS
    for campaign in _history_campaigns():
        with connection.cursor() as cursor:
            cursor.execute(sql.HISTORY_SQL, [campaign, per, users])
            cursor.execute(sql.HISTORY_JUDGMENTS_SQL, [campaign, users])
            cursor.execute(sql.HISTORY_TALLIES_SQL, [campaign, per, users])
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE annotation_assignment")
        cursor.execute("VACUUM ANALYZE annotation_judgment")


# ---------------------------------------------------------------- one level


def _measure(make: Callable, tokens: list[str], meter: CpuMeter) -> dict:
    """Warm-up (a cycle each), then SECONDS of cycles, with the CPU it cost; `make(max_cycles)`
    makes the annotators' work."""
    warm = _warm_up(make, tokens)
    load_before = _loadavg()
    meter.start()
    run = _drive(make(None), tokens, SECONDS)
    server_ms, pg_ms = meter.stop()
    cycles = len(run["submit"])
    return {
        **run,
        "n": len(tokens),
        "cycles": cycles,
        "per_s": cycles / run["seconds"],
        "server_ms": server_ms / max(cycles, 1),
        "pg_ms": pg_ms / max(cycles, 1),
        "next_p95": _p95(run["next"]),
        "submit_p95": _p95(run["submit"]),
        "load": f"{load_before} → {_loadavg()}",
        "accepted_all": warm["accepted"] + run["accepted"],
        "errors": warm["errors"] + run["errors"],
    }


def _our_level(port: int, meter: CpuMeter, users: list, tag: str) -> dict:
    campaign, tokens = _campaign(users, tag)
    _analyze()
    level = _measure(lambda cycles: _ours(port, campaign.pk, max_cycles=cycles), tokens, meter)
    level["campaign"] = campaign
    level["integrity"] = (
        _integrity(campaign, level["accepted_all"])  # the warm-up's judgments included
        + f", refused {level['refused']}, errors {level['errors']}"
    )
    return level


def _their_level(port: int, meter: CpuMeter, campaign, n: int, tag: str) -> dict:
    """Label Studio on the same texts as `campaign`'s comparisons, n annotators, overlap 3."""
    tasks = [
        {"scenario": c.scenario.user_message, "a": c.response_a.text, "b": c.response_b.text}
        for c in campaign.comparisons.select_related("scenario", "response_a", "response_b")
    ]
    made = _label_studio.make_project(f"bench {tag}", tasks, n, OVERLAP)
    project, tokens = made["project"], made["tokens"]
    level = _measure(lambda cycles: _theirs(port, project, max_cycles=cycles), tokens, meter)
    stored, over = _label_studio.stored(project)
    accepted = level["accepted_all"]
    level["integrity"] = (
        f"accepted {accepted}, stored {stored}, lost {accepted - stored}, over k {over}, "
        f"errors {level['errors']}"
    )
    return level


def _cycle_row(name: str, level: dict, extra: str = "") -> dict:
    total = level["server_ms"] + level["pg_ms"]
    return {
        "benchmark": name,
        "rows": level["cycles"],
        "rows_per_s": round(level["per_s"], 1),
        "p95_ms": round(max(level["next_p95"], level["submit_p95"]), 1),
        "cpu_ms_per_cycle": round(total, 2),
        "notes": f"CPU-ms/cycle server {level['server_ms']:.1f} + PG {level['pg_ms']:.1f} = "
        f"{total:.1f}; p95 next {level['next_p95']:.0f} submit {level['submit_p95']:.0f} ms; "
        f"{level['integrity']}; {extra}loadavg {level['load']}",
    }


# ---------------------------------------------------------------- statements from the log


def _statements(worker_args: list[str], users: list, ls: bool) -> list[dict]:
    """Statements per cycle as PostgreSQL logs them, for one annotator with history on a fresh
    campaign (and on Label Studio, on the same texts), after a few cycles' warm-up."""
    from django.conf import settings

    db = settings.DATABASES["default"]
    server_url = f"postgresql://{db['USER']}@{db['HOST']}:{db['PORT']}/postgres"
    if _pglog.log_file() is None:
        return [{"benchmark": "rating cycle statements", "notes": "not counted: no PostgreSQL log"}]
    rows = []
    campaign, tokens = _campaign(users[:1], "statements")
    sides = [("ours", db["NAME"])] + ([("Label Studio", _label_studio.database())] if ls else [])
    for side, database in sides:
        with _pglog.statements_logged(database, server_url) as counted:
            port = free_port()
            if side == "ours":
                server = start_gunicorn(port, "warning", env=KEPT, worker_args=worker_args)
                work = _ours(port, campaign.pk, max_cycles=STATEMENT_CYCLES)
                warm = _ours(port, campaign.pk, max_cycles=3)
            else:
                tasks = [
                    {
                        "scenario": c.scenario.user_message,
                        "a": c.response_a.text,
                        "b": c.response_b.text,
                    }
                    for c in campaign.comparisons.select_related(
                        "scenario", "response_a", "response_b"
                    )[:500]
                ]
                project = _label_studio.make_project("bench statements", tasks, 1, OVERLAP)
                tokens = project["tokens"]
                server = _label_studio.start(port, worker_args)
                work = _theirs(port, project["project"], max_cycles=STATEMENT_CYCLES)
                warm = _theirs(port, project["project"], max_cycles=3)
            try:
                _drive(warm, tokens[:1], 600)
                time.sleep(0.5)
                before = counted()
                run = _drive(work, tokens[:1], 600)
                time.sleep(1.0)  # the log is written as the statements run
                after = counted()
            finally:
                os.killpg(server.pid, signal.SIGTERM)
                server.wait(30)
        cycles = len(run["submit"])
        kinds = {k: (after[k] - before[k]) / max(cycles, 1) for k in after}
        total = sum(kinds.values())
        rows.append(
            {
                "benchmark": f"rating cycle statements per cycle, {side} (PostgreSQL's log)",
                "rows": cycles,
                "queries": round(total, 1),
                "notes": f"{total:.1f} per next + submit: "
                + ", ".join(f"{kind} {n:.1f}" for kind, n in sorted(kinds.items()))
                + f"; errors {run['errors']}; loadavg {_loadavg()}",
            }
        )
    return rows


# ---------------------------------------------------------------- human pace


def _human_pace(port: int, users: list) -> list[dict]:
    """50 annotators at a human pace, arriving over the first ARRIVAL_SECONDS; before it, the
    same 50 all asking at once (one cycle each, as at a warm-up), reported as its own row."""
    campaign, tokens = _campaign(users, "human")
    _analyze()
    load_before = _loadavg()
    burst = _warm_up(lambda cycles: _ours(port, campaign.pk, max_cycles=cycles), tokens)
    burst_row = {
        "benchmark": "rating cycle: 50 annotators asking at once (one cycle each)",
        "rows": len(burst["submit"]),
        "p95_ms": round(max(_p95(burst["next"]), _p95(burst["submit"])), 1),
        "notes": f"p95 next {_p95(burst['next']):.0f} ms, submit {_p95(burst['submit']):.0f} ms "
        f"(a burst, not a human pace); loadavg {load_before} → {_loadavg()}",
    }
    before = _stored(campaign)
    load_before = _loadavg()
    run = _drive(_ours(port, campaign.pk, pace=(4.0, 8.0)), tokens, HUMAN_SECONDS)
    return [
        burst_row,
        {
            "benchmark": "rating cycle: 50 annotators at a human pace (4–8 s per item)",
            "rows": len(run["submit"]),
            "rows_per_s": round(len(run["submit"]) / run["seconds"], 1),
            "p95_ms": round(max(_p95(run["next"]), _p95(run["submit"])), 1),
            "notes": f"arriving over {ARRIVAL_SECONDS} s; p95 next {_p95(run['next']):.0f} ms, "
            f"submit {_p95(run['submit']):.0f} ms (target ≤ 50); "
            f"{_integrity(campaign, run['accepted'], before)}; "
            f"loadavg {load_before} → {_loadavg()}",
        },
    ]


# ---------------------------------------------------------------- flat in the history


def _history(port: int, meter: CpuMeter, config: str) -> list[dict]:
    """Raters with each history in a campaign of their own, measured in HISTORY_ROUNDS rounds
    that take the levels in turn (the machine's load drifts), each SECONDS long; the median
    CPU-ms per cycle of each level is compared with the first level's."""
    from statistics import median

    levels = {}
    for history in HISTORY:
        users = _raters(HISTORY_RATERS, f"h{history}", history)
        campaign, tokens = _campaign(users, f"h{history}")
        levels[history] = (campaign, tokens, [])
    _analyze()
    for _ in range(HISTORY_ROUNDS):
        for campaign, tokens, runs in levels.values():
            make = lambda cycles, c=campaign: _ours(port, c.pk, max_cycles=cycles)  # noqa: E731
            runs.append(_measure(make, tokens, meter))
    rows, first = [], None
    for history, (campaign, _, runs) in levels.items():
        totals = [run["server_ms"] + run["pg_ms"] for run in runs]
        middle = sorted(runs, key=lambda run: run["server_ms"] + run["pg_ms"])[len(runs) // 2]
        level = {
            **middle,
            "cycles": sum(run["cycles"] for run in runs),
            "per_s": median(run["per_s"] for run in runs),
            "next_p95": max(run["next_p95"] for run in runs),
            "submit_p95": max(run["submit_p95"] for run in runs),
            "integrity": _integrity(campaign, sum(run["accepted_all"] for run in runs))
            + f", errors {sum(run['errors'] for run in runs)}",
            "load": "; ".join(run["load"] for run in runs),
        }
        first = first or median(totals)
        rounds = " / ".join(f"{total:.1f}" for total in totals)
        rows.append(
            _cycle_row(
                f"rating cycle ({config}): {HISTORY_RATERS} raters with {history:,} earlier "
                f"assignments each ({HISTORY_CAMPAIGNS} closed campaigns)",
                level,
                f"median of {HISTORY_ROUNDS} rounds ({rounds} CPU-ms/cycle) "
                f"×{median(totals) / first:.2f} of {HISTORY[0]:,} (target ≤ 1.20); ",
            )
        )
    return rows


def _lone(port: int, meter: CpuMeter, config: str) -> list[dict]:
    """One rater alone in a fresh campaign who already judged `n` of its comparisons (each
    then one judgment short of two more), for each n of LONE."""
    from django.db import connection

    rows, first = [], None
    log("warm-up: a rater alone, not reported (a server's first seconds cost more)")
    for i, n in [(-1, 0), *enumerate(LONE)]:
        users = _raters(1, f"lone{i}-{n}", 0)
        campaign, tokens = _campaign(users, f"lone{i}-{n}")
        with connection.cursor() as cursor:
            values = {"campaign": campaign.pk, "user": users[0].pk, "n": n}
            if n:
                cursor.execute(sql.LONE_SQL, values)
            cursor.execute(sql.LONE_TALLIES_SQL, values)
            cursor.execute(sql.LONE_HANDED_SQL, values)
        _analyze()
        make = lambda cycles, c=campaign: _ours(port, c.pk, max_cycles=cycles)  # noqa: E731
        level = _measure(make, tokens, meter)
        level["integrity"] = _integrity(campaign, level["accepted_all"], n)
        level["integrity"] += f", errors {level['errors']}"
        if i < 0:
            continue
        total = level["server_ms"] + level["pg_ms"]
        first = first or total
        rows.append(
            _cycle_row(
                f"rating cycle ({config}): a rater alone in the campaign, {n:,} judged there",
                level,
                f"×{total / first:.2f} of {LONE[0]:,} (target ≤ 1.20); ",
            )
        )
    return rows


# ---------------------------------------------------------------- flat in the store


def _filler_users() -> list[int]:
    from django.contrib.auth import get_user_model

    User = get_user_model()
    User.objects.bulk_create(
        [User(username=f"bench-filler-{i}") for i in range(FILLER_USERS)], ignore_conflicts=True
    )
    return list(
        User.objects.filter(username__startswith="bench-filler-").values_list("pk", flat=True)
    )


def _fill(n: int, source, tag: str) -> int:
    """n judgments (FILLER_USERS per comparison) in new campaigns copying `source`'s
    comparisons, inserted with INSERT … SELECT; returns the judgments now stored."""
    from django.db import connection

    from annotation.models import Campaign, Judgment

    users = _filler_users()
    per_campaign = source.comparisons.count() * len(users)
    for i in range((n + per_campaign - 1) // per_campaign):
        copy = Campaign.objects.create(
            name=f"bench filler {tag} {i}", owner=source.owner, state=Campaign.State.CLOSED
        )
        limit = min(per_campaign, n - i * per_campaign)
        with connection.cursor() as cursor:
            cursor.execute(sql.FILL_SQL, [copy.pk, len(users), source.pk, users, limit])
            cursor.execute(sql.JUDGE_SQL, [copy.pk])
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    return Judgment.objects.count()


def _store(port: int, meter: CpuMeter, users: list, config: str) -> list[dict]:
    """10 annotators with the judgments stored so far, then with FILLED more in other
    campaigns, each level in a fresh campaign of the same size."""
    from annotation.models import Campaign, Judgment

    rows, totals = [], []
    for added in (0, FILLED):
        if added:  # copies of the first bench campaign (the one of the level before, at least)
            log(f"adding {added:,} judgments in other campaigns")
            source = Campaign.objects.filter(name__startswith="bench load").order_by("pk").first()
        stored = _fill(added, source, f"{added}") if added else Judgment.objects.count()
        level = _our_level(port, meter, users, f"flat{added}")
        totals.append(level["server_ms"] + level["pg_ms"])
        versus = (
            f"CPU-ms/cycle ×{totals[1] / totals[0]:.2f} of the run before the {added:,} were "
            "added (target ≤ 1.20); "
            if added
            else ""
        )
        rows.append(
            _cycle_row(
                f"rating cycle ({config}): 10 annotators, {stored:,} judgments stored",
                level,
                versus,
            )
        )
    return rows


# ---------------------------------------------------------------- run


def _levels(config: str, users: list, ls: bool) -> list[dict]:
    """Each level on our server, then on Label Studio's (same worker configuration, same
    texts), started side by side for this configuration."""
    worker_args = WORKER_CONFIGS[config]
    port, their_port = free_port(), free_port()
    ours = start_gunicorn(port, "warning", env=KEPT, worker_args=worker_args)
    theirs = _label_studio.start(their_port, worker_args) if ls else None
    rows = []
    try:
        meter = CpuMeter(ours.pid)
        their_meter = CpuMeter(theirs.pid, _label_studio.database()) if ls else None
        for n in LEVELS:
            log(f"{config}: {n} annotators for {SECONDS} s")
            level = _our_level(port, meter, users[:n], f"{config}{n}")
            them = None
            if ls:
                log(f"{config}: Label Studio, {n} annotators for {SECONDS} s")
                them = _their_level(their_port, their_meter, level["campaign"], n, f"{config}{n}")
            ratio = (
                f"{level['per_s'] / them['per_s']:.1f}× Label Studio's cycles/s (live, this run); "
                if them and them["per_s"]
                else "no live Label Studio (BENCH_LS_VENV): no ratio; "
            )
            rows.append(_cycle_row(f"rating cycle ({config}): {n} annotators", level, ratio))
            if them:
                rows.append(_cycle_row(f"Label Studio 1.23.2 ({config}): {n} annotators", them))
    finally:
        for server in (ours, theirs):
            if server is not None:
                os.killpg(server.pid, signal.SIGTERM)
                server.wait(30)
    return rows


def run() -> list[dict]:
    from django.db import connection

    if connection.vendor != "postgresql":
        return [{"benchmark": "rating cycle", "notes": "skipped: needs PostgreSQL"}]
    ls = _label_studio.venv() is not None
    if ls:
        _label_studio.prepare()
    rows = []
    users = _raters(max([*LEVELS, 50]), "pool", RATER_HISTORY)
    if "statements" in PARTS:
        rows += _statements(WORKER_CONFIGS[SERVERS[0]], users, ls)
    if "levels" in PARTS:
        for config in SERVERS:
            rows += _levels(config, users, ls)
    config = SERVERS[0]
    port = free_port()
    server = start_gunicorn(port, "warning", env=KEPT, worker_args=WORKER_CONFIGS[config])
    meter = CpuMeter(server.pid)
    try:
        if "human" in PARTS:
            log(f"50 annotators at a human pace for {HUMAN_SECONDS} s")
            rows += _human_pace(port, users[:50])
        if "store" in PARTS:
            rows += _store(port, meter, users[:10], config)
        if "history" in PARTS:
            rows += _history(port, meter, config)
        if "lone" in PARTS:
            rows += _lone(port, meter, config)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(20)
    for row in rows:
        log(f"{row['benchmark']}: {row.get('rows_per_s') or row.get('queries')} {row['notes']}")
    return rows
