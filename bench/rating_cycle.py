"""The blind pairwise rating cycle (API next + submit) under gunicorn on PostgreSQL: what one
cycle costs, how many cycles a second 1, 10 and 50 annotators get through, how fast it answers
at a human pace, and whether the cost stays flat with a million judgments stored elsewhere.

- CPU-ms per cycle: utime + stime from /proc/<pid>/stat of the gunicorn workers and of the
  PostgreSQL backends connected to the bench database (pg_stat_activity), before and after;
  the load average (/proc/loadavg) is printed beside, since the machine may be shared.
- Queries per call: the API next and submit, the rating page and its htmx submit, counted
  in this process with Django's test client (statements sent; transaction control excluded).
- Throughput against Label Studio 1.23.2 (measured earlier on this machine: 4.7, 13.4 and 9.0
  cycles/s at 1, 10 and 50 annotators), or against a live Label Studio when BENCH_LS_URL,
  BENCH_LS_TOKEN (comma-separated, one per annotator) and BENCH_LS_PROJECT are set.
- Human pace: 50 annotators each submitting every 4–8 s, arriving over the first 8 s; p95 of
  next and of submit. The same 50 asking at once beforehand are a row of their own.
- Flatness: CPU-ms per cycle at 10 annotators with 10 thousand, then 1 million, judgments
  stored in other campaigns (INSERT … SELECT), in fresh campaigns of the same size.

Every level reports the integrity figures that must be 0: judgments accepted but not stored
("lost") and comparisons over k judgments. BENCH_CYCLE_SECONDS sets the time per level (15).
"""

import http.client
import json
import os
import random
import signal
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

from bench._common import env_int, free_port, log, percentile, start_gunicorn

LEVELS = [int(x) for x in os.environ.get("BENCH_LOAD_LEVELS", "1,10,50").split(",")]
SECONDS = env_int("BENCH_CYCLE_SECONDS", 15)
HUMAN_SECONDS = env_int("BENCH_HUMAN_SECONDS", 45)
ARRIVAL_SECONDS = 8  # at a human pace, annotators arrive over the first seconds
SCENARIOS = env_int("BENCH_CYCLE_SCENARIOS", 2000)  # × 3 companion pairs = comparisons
LABEL_STUDIO = {1: 4.7, 10: 13.4, 50: 9.0}  # cycles/s, Label Studio 1.23.2, measured earlier
FILLER_USERS = 100
FILLED = (10_000, env_int("BENCH_CYCLE_FILLED", 1_000_000))  # judgments stored, then
TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")


def _p95(values: list[float]) -> float:
    return percentile(values, 95) if values else float("nan")


def _loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


# ---------------------------------------------------------------- CPU from /proc


def _cpu_ms(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) * TICK_MS  # utime, stime (fields 14, 15)


def _children(parent: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == parent:
                    pids.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    return pids


def _backends() -> list[int]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
        )
        return [row[0] for row in cursor.fetchall()]


class CpuMeter:
    """CPU-ms spent by the gunicorn workers and by their PostgreSQL backends between start()
    and stop(); a backend that connects in between counts from 0."""

    def __init__(self, master: int):
        self.master = master

    def _snapshot(self) -> tuple[dict, dict]:
        workers = {pid: _cpu_ms(pid) for pid in _children(self.master)}
        backends = {pid: _cpu_ms(pid) for pid in _backends()}
        return workers, backends

    def start(self) -> None:
        self.before = self._snapshot()

    def stop(self) -> tuple[float, float]:
        after = self._snapshot()
        return tuple(
            sum((ms or 0) - (then.get(pid) or 0) for pid, ms in now.items())
            for then, now in zip(self.before, after, strict=True)
        )


# ---------------------------------------------------------------- annotators


def _post(connection, path: str, token: str, body: dict) -> tuple[int, bytes, float]:
    """POST; a connection the server closed while the annotator was reading (gunicorn keeps an
    idle one open 2 s) is opened again, as a browser would, within the time measured."""
    headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
    started = time.perf_counter()
    for attempt in range(2):
        try:
            connection.request("POST", path, body=json.dumps(body), headers=headers)
            response = connection.getresponse()
            break
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            connection.close()
            if attempt:
                raise
    return response.status, response.read(), (time.perf_counter() - started) * 1000


def _annotator(port, token, campaign_id, deadline, pace, results, lock):
    """Next, submit, until the deadline; `pace` (seconds) between submissions, or none. At a
    pace, the annotator arrives within the first ARRIVAL_SECONDS, as people do."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    rng = random.Random(token)
    mine = {"next": [], "submit": [], "accepted": 0, "refused": 0, "errors": 0}
    if pace:
        time.sleep(rng.uniform(0, ARRIVAL_SECONDS))
    try:
        while time.monotonic() < deadline:
            status, payload, ms = _post(
                connection, f"/api/rate/campaigns/{campaign_id}/next/", token, {}
            )
            mine["next"].append(ms)
            if status == 204:
                break
            if status != 200:
                mine["errors"] += 1
                continue
            if pace:
                time.sleep(rng.uniform(*pace))
            key = json.loads(payload)["key"]
            body = {"preference": rng.choice([-2, -1, 0, 1, 2])}
            status, _, ms = _post(connection, f"/api/rate/assignments/{key}/submit/", token, body)
            mine["submit"].append(ms)
            outcome = {200: "accepted", 409: "refused"}.get(status, "errors")
            mine[outcome] += 1
    finally:
        connection.close()
        with lock:
            results.append(mine)


def _drive(port: int, campaign, tokens: list[str], seconds: float, pace=None) -> dict:
    from django.db import connections

    connections.close_all()
    results, lock = [], threading.Lock()
    deadline = time.monotonic() + seconds
    started = time.perf_counter()
    threads = [
        threading.Thread(
            target=_annotator, args=(port, t, campaign.pk, deadline, pace, results, lock)
        )
        for t in tokens
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + 60)
    return {
        "seconds": time.perf_counter() - started,
        "next": [ms for r in results for ms in r["next"]],
        "submit": [ms for r in results for ms in r["submit"]],
        **{k: sum(r[k] for r in results) for k in ("accepted", "refused", "errors")},
    }


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


def _measured_level(port: int, meter: CpuMeter, n: int, tag: str) -> dict:
    """n annotators in a fresh campaign for SECONDS (after one warm-up cycle each)."""
    from bench.rating_load import _setup

    campaign, tokens = _setup(n, n_scenarios=SCENARIOS, tag=tag)
    _analyze()
    _drive(port, campaign, tokens, 0.01)  # every annotator: one cycle, connections opened
    before = _stored(campaign)
    load_before = _loadavg()
    meter.start()
    run = _drive(port, campaign, tokens, SECONDS)
    server_ms, pg_ms = meter.stop()
    cycles = len(run["submit"])
    return {
        "n": n,
        "cycles": cycles,
        "per_s": cycles / run["seconds"],
        "server_ms": server_ms / max(cycles, 1),
        "pg_ms": pg_ms / max(cycles, 1),
        "next_p95": _p95(run["next"]),
        "submit_p95": _p95(run["submit"]),
        "integrity": _integrity(campaign, run["accepted"], before)
        + f", refused {run['refused']}, errors {run['errors']}",
        "load": f"{load_before} → {_loadavg()}",
    }


def _cycle_row(name: str, level: dict, extra: str = "") -> dict:
    total = level["server_ms"] + level["pg_ms"]
    return {
        "benchmark": name,
        "rows": level["cycles"],
        "rows_per_s": round(level["per_s"], 1),
        "p95_ms": round(max(level["next_p95"], level["submit_p95"]), 1),
        "notes": f"CPU-ms/cycle server {level['server_ms']:.1f} + PG {level['pg_ms']:.1f} = "
        f"{total:.1f}; p95 next {level['next_p95']:.0f} submit {level['submit_p95']:.0f} ms; "
        f"{level['integrity']}; {extra}loadavg {level['load']}",
    }


# ---------------------------------------------------------------- queries per call


def _queries_per_call() -> dict[str, int]:
    """Statements each call sends, counted in this process (the views run as under gunicorn:
    one transaction per request, whose BEGIN and COMMIT are not statements of Django's)."""
    import re

    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.urls import reverse

    from bench.rating_load import _setup

    campaign, tokens = _setup(2, n_scenarios=50, tag="queries")
    api = Client(headers={"Authorization": f"Token {tokens[0]}"})
    counts, cycle = {}, {}

    def count(name, call):
        """The most statements `call` sent after the first cycle (which counts the new
        comparisons, and whose first judgment makes the annotator's tally row)."""
        with CaptureQueriesContext(connection) as captured:
            response = call()
        assert response.status_code == 200, (name, response.status_code)
        if cycle["first"]:
            name += " (first cycle)"
        counts[name] = max(counts.get(name, 0), len(captured.captured_queries))
        return response

    for n in range(3):
        cycle["first"] = n == 0
        key = count(
            "API next", lambda: api.post(f"/api/rate/campaigns/{campaign.pk}/next/")
        ).json()["key"]
        count("API next, item held", lambda: api.post(f"/api/rate/campaigns/{campaign.pk}/next/"))
        count(
            "API submit",
            lambda key=key: api.post(
                f"/api/rate/assignments/{key}/submit/", {"preference": 1}, "application/json"
            ),
        )
    page = Client()
    page.force_login(campaign.annotators.order_by("pk").last())
    for n in range(3):
        cycle["first"] = n == 0
        html = count("page", lambda: page.get(reverse("annotation:rate", args=[campaign.pk])))
        key = re.search(r"/a/([0-9a-f-]{36})/submit/", html.content.decode()).group(1)
        count(
            "htmx submit (+ next item)",
            lambda key=key: page.post(
                reverse("annotation:submit", args=[key]),
                {"preference": "1"},
                headers={"HX-Request": "true", "HX-Target": "item"},
            ),
        )
    return counts


# ---------------------------------------------------------------- judgments elsewhere


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
            cursor.execute(_FILL_SQL, [copy.pk, len(users), source.pk, users, limit])
            cursor.execute(_JUDGE_SQL, [copy.pk])
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    return Judgment.objects.count()


_FILL_SQL = """
WITH comparisons AS (
    INSERT INTO annotation_comparison (campaign_id, scenario_id, response_a_id, response_b_id,
        is_gold, gold_note, judgment_count, shuffle_key, created_at)
    SELECT %s, scenario_id, response_a_id, response_b_id, false, '', %s,
        (random() * 2147483647)::int, now()
    FROM annotation_comparison WHERE campaign_id = %s
    RETURNING id
)
INSERT INTO annotation_assignment (key, comparison_id, annotator_id, left_is_a, state,
    issued_at, lease_expires_at, finished_at, skip_reason)
SELECT gen_random_uuid(), c.id, u, random() < 0.5, 'submitted', now(), now(), now(), ''
FROM comparisons c CROSS JOIN unnest(%s::bigint[]) AS u
LIMIT %s
"""
_JUDGE_SQL = """
INSERT INTO annotation_judgment (assignment_id, comparison_id, annotator_id, screen_preference,
    preference, both_unacceptable, ratings, rationale, time_on_task_ms, scenario_hash,
    reasons, created_at)
SELECT a.id, a.comparison_id, a.annotator_id, 1, 1, false, '{}', '', 20000, '', '[]', now()
FROM annotation_assignment a JOIN annotation_comparison c ON c.id = a.comparison_id
WHERE c.campaign_id = %s
"""


# ---------------------------------------------------------------- Label Studio


def _label_studio(n: int) -> float | None:
    """Cycles/s of a live Label Studio (BENCH_LS_URL, BENCH_LS_TOKEN, BENCH_LS_PROJECT): n
    threads each asking the project's next task and annotating it, for SECONDS; None without
    the variables."""
    url, tokens = os.environ.get("BENCH_LS_URL"), os.environ.get("BENCH_LS_TOKEN", "")
    project = os.environ.get("BENCH_LS_PROJECT")
    if not (url and tokens and project):
        return None
    tokens = tokens.split(",")
    parts = urlsplit(url)
    done, lock = [], threading.Lock()
    deadline = time.monotonic() + SECONDS

    def annotate(token):
        connection = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=30)
        headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
        while time.monotonic() < deadline:
            connection.request("GET", f"/api/projects/{project}/next", headers=headers)
            response = connection.getresponse()
            task = json.loads(response.read() or b"{}")
            if response.status != 200 or "id" not in task:
                break
            body = json.dumps({"result": [], "lead_time": 1.0})
            connection.request("POST", f"/api/tasks/{task['id']}/annotations/", body, headers)
            connection.getresponse().read()
            with lock:
                done.append(1)

    started = time.perf_counter()
    threads = [threading.Thread(target=annotate, args=(tokens[i % len(tokens)],)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(SECONDS + 60)
    return len(done) / (time.perf_counter() - started)


def _versus(n: int, ours: float) -> str:
    live = _label_studio(n)
    theirs, where = (
        (live, "live") if live is not None else (LABEL_STUDIO.get(n), "measured earlier")
    )
    if not theirs:
        return ""
    return f"{ours / theirs:.1f}× Label Studio ({theirs:.1f} cycles/s, {where}); "


# ---------------------------------------------------------------- run


def _warm_up(port: int) -> None:
    """Until every worker answers (each loads the URLs and views on its first request)."""
    for _ in range(40):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        connection.request("GET", "/")
        connection.getresponse().read()
        connection.close()


def _human_pace(port: int) -> list[dict]:
    """50 annotators at a human pace, arriving over the first ARRIVAL_SECONDS; before it, the
    same 50 all asking at once (one cycle each, as at a warm-up), reported as its own row."""
    from bench.rating_load import _setup

    campaign, tokens = _setup(50, n_scenarios=SCENARIOS, tag="human")
    _analyze()
    load_before = _loadavg()
    burst = _drive(port, campaign, tokens, 0.01)
    burst_row = {
        "benchmark": "rating cycle: 50 annotators asking at once (one cycle each)",
        "rows": len(burst["submit"]),
        "p95_ms": round(max(_p95(burst["next"]), _p95(burst["submit"])), 1),
        "notes": f"p95 next {_p95(burst['next']):.0f} ms, submit {_p95(burst['submit']):.0f} ms "
        f"(a burst, not a human pace); loadavg {load_before} → {_loadavg()}",
    }
    before = _stored(campaign)
    load_before = _loadavg()
    run = _drive(port, campaign, tokens, HUMAN_SECONDS, pace=(4.0, 8.0))
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


def _flatness(port: int, meter: CpuMeter) -> list[dict]:
    from annotation.models import Campaign

    source = Campaign.objects.filter(name__startswith="bench load").order_by("pk").first()
    rows, levels = [], {}
    for target in FILLED:
        from annotation.models import Judgment

        log(f"filling other campaigns up to {target:,} judgments")
        stored = _fill(target - Judgment.objects.count(), source, f"{target}")
        levels[target] = _measured_level(port, meter, 10, f"flat{target}")
        rows.append(
            _cycle_row(f"rating cycle: 10 annotators, {stored:,} judgments stored", levels[target])
        )
    small, large = (levels[t]["server_ms"] + levels[t]["pg_ms"] for t in FILLED)
    rows[-1]["notes"] = (
        f"CPU-ms/cycle ×{large / small:.2f} of the 10k run (target ≤ 1.20); " + rows[-1]["notes"]
    )
    return rows


def run() -> list[dict]:
    from django.db import connection

    if connection.vendor != "postgresql":
        return [{"benchmark": "rating cycle", "notes": "skipped: needs PostgreSQL"}]
    rows = [
        {
            "benchmark": f"rating cycle queries: {name}",
            "queries": n,
            "notes": "statements incl. BEGIN and COMMIT; target ≤ 8",
        }
        for name, n in _queries_per_call().items()
    ]
    port = free_port()
    server = start_gunicorn(port, log_level="warning")
    meter = CpuMeter(server.pid)
    try:
        _warm_up(port)
        for n in LEVELS:
            log(f"{n} annotators for {SECONDS} s")
            level = _measured_level(port, meter, n, f"c{n}")
            rows.append(
                _cycle_row(f"rating cycle: {n} annotators", level, _versus(n, level["per_s"]))
            )
        log(f"50 annotators at a human pace for {HUMAN_SECONDS} s")
        rows += _human_pace(port)
        rows += _flatness(port, meter)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(20)
    for row in rows:
        log(f"{row['benchmark']}: {row.get('rows_per_s') or row.get('queries')} {row['notes']}")
    return rows
