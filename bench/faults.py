"""Faults: PostgreSQL restarted while annotators rate over the REST API (gunicorn, 127.0.0.1).

N annotator threads (BENCH_FAULTS_ANNOTATORS, default 10) ask for the next comparison and
submit, as bench/rating_load.py does, for BENCH_FAULTS_SECONDS (default 30); a third of the
way in, the whole PostgreSQL server is restarted (`pg_ctlcluster … restart`, or the command in
BENCH_PG_RESTART_CMD) and the annotators keep going. A failed request is retried the way a
client would: `next` again, `submit` again with the same item key (submit is idempotent by
key), for up to 20 s. Two rounds, each on its own campaign and gunicorn:

- "as configured": DB_CONN_MAX_AGE=60 (persistent connections) and the settings as they are;
- "health checks": the same plus DATABASES["default"]["CONN_HEALTH_CHECKS"] = True (a settings
  module written into the bench's temporary folder); settings.py now turns it on too, so
  both rounds run with it (kept to show it stays so).

Counted afterwards, from the database: judgments acknowledged with 200 (distinct item keys)
against judgments stored (must be equal: none lost, none stored unacknowledged), comparisons
over k, comparisons whose judgment_count disagrees with their judgments, submitted
assignments without a judgment (a half-stored judgment would show in one of these). Reported:
the failed requests by kind and status (with a sample body) while the server was restarting
and after it was back, the time from "back" to the first success, and whether the last
seconds ran without a failure ("recovered").

DANGER: this restarts the whole PostgreSQL server, every database on it. It therefore runs
only when asked (BENCH_FAULTS_RESTART_PG=1), only on PostgreSQL on this machine, as root (or
with BENCH_PG_RESTART_CMD), and it refuses when any other database on the server has a client
session (a test suite, CI, an application) or a pytest process runs on this machine, unless
BENCH_FAULTS_FORCE=1. Never run it while the test suite (or anything else) may use the server.
Example:

    BENCH_FAULTS_RESTART_PG=1 DATABASE_URL=postgres://postgres@127.0.0.1:5432/h2htalk \\
        .venv/bin/python -m bench faults --backend postgres
"""

import http.client
import json
import os
import random
import shlex
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

from bench._common import REPO, env_int, free_port, log, start_gunicorn
from bench.rating_load import OVERLAP, _setup

ANNOTATORS = env_int("BENCH_FAULTS_ANNOTATORS", 10)
SECONDS = env_int("BENCH_FAULTS_SECONDS", 30)
RETRY_SECONDS = 20.0
NAME = "faults: PostgreSQL restart during rating"

HEALTH_SETTINGS = """from h2htalk.settings import *  # noqa: F403

DATABASES["default"]["CONN_HEALTH_CHECKS"] = True  # noqa: F405
"""


# ---------------------------------------------------------------- guards


def _skip(reason: str) -> list[dict]:
    return [{"benchmark": NAME, "notes": f"skipped: {reason}"}]


def restart_command(port: int) -> list[str] | None:
    """The command that restarts the local cluster listening on `port`."""
    custom = os.environ.get("BENCH_PG_RESTART_CMD", "").strip()
    if custom:
        return shlex.split(custom)
    try:
        listing = subprocess.run(
            ["pg_lsclusters", "-h"], capture_output=True, text=True, check=True, timeout=10
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in listing.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[2] == str(port):
            version, cluster = fields[0], fields[1]
            return [
                "pg_ctlcluster",
                "--skip-systemctl-redirect",
                version,
                cluster,
                "restart",
            ]
    return None


def other_sessions() -> dict[str, int]:
    """Client sessions on other databases of this server: someone else is using it."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(datname, '?'), count(*) FROM pg_stat_activity "
            "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() "
            "AND datname IS DISTINCT FROM current_database() GROUP BY 1"
        )
        return dict(cursor.fetchall())


def local_test_runs() -> list[str]:
    """pytest processes on this machine (a test suite may be using the server)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [Path(a.decode(errors="replace")).name for a in argv[:3]]
        if "pytest" in words or any(w.startswith("pytest") for w in words):
            found.append(entry.name)
    return found


# ---------------------------------------------------------------- gunicorn


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


# ---------------------------------------------------------------- annotators


class Log:
    """Every request's outcome: (time, kind, status or error name, sample body)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.events: list[tuple[float, str, str, str]] = []
        self.accepted: set[str] = set()
        self.refused = 0

    def add(self, kind: str, outcome: str, body: bytes = b"") -> None:
        sample = body[:160].decode("utf-8", "replace").strip() if body else ""
        with self.lock:
            self.events.append((time.monotonic(), kind, outcome, sample))


def _annotator(port: int, token: str, campaign_id: int, deadline: float, out: Log) -> None:
    headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
    rng = random.Random(token)
    connection = None

    def post(kind: str, path: str, body: dict):
        """(status, payload) or (None, b"") after a connection-level error (logged)."""
        nonlocal connection
        try:
            if connection is None:
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            connection.request("POST", path, body=json.dumps(body), headers=headers)
            response = connection.getresponse()
            payload = response.read()
        except (OSError, http.client.HTTPException) as error:
            out.add(kind, f"connection error ({type(error).__name__})")
            if connection is not None:
                connection.close()
            connection = None
            return None, b""
        out.add(kind, str(response.status), payload if response.status >= 500 else b"")
        return response.status, payload

    try:
        while time.monotonic() < deadline:
            status, payload = post("next", f"/api/rate/campaigns/{campaign_id}/next/", {})
            if status == 204:
                break
            if status != 200:
                time.sleep(0.1)  # the client's pause before it asks again
                continue
            key = json.loads(payload)["key"]
            body = {"preference": rng.choice([-2, -1, 0, 1, 2])}
            give_up = time.monotonic() + RETRY_SECONDS
            while True:  # the same key again until the server answers: submit is idempotent
                status, _ = post("submit", f"/api/rate/assignments/{key}/submit/", body)
                if status == 200:
                    with out.lock:
                        out.accepted.add(key)
                    break
                if status == 409:
                    with out.lock:
                        out.refused += 1
                    break
                if (status is not None and status < 500) or time.monotonic() > give_up:
                    break
                time.sleep(0.1)
    finally:
        if connection is not None:
            connection.close()


# ---------------------------------------------------------------- one round


def _integrity(campaign) -> dict:
    from django.db.models import Count, F

    from annotation.models import Assignment, Judgment

    judgments = Judgment.objects.filter(comparison__campaign=campaign)
    stored_keys = {str(k) for k in judgments.values_list("assignment__key", flat=True)}
    comparisons = campaign.comparisons.annotate(n=Count("judgments"))
    submitted = Assignment.objects.filter(
        comparison__campaign=campaign, state=Assignment.State.SUBMITTED
    )
    return {
        "stored_keys": stored_keys,
        "over_k": campaign.comparisons.filter(judgment_count__gt=OVERLAP).count(),
        "counter_mismatch": comparisons.exclude(n=F("judgment_count")).count(),
        "submitted_without_judgment": submitted.filter(judgment__isnull=True).count(),
        "judgment_not_submitted": judgments.exclude(
            assignment__state=Assignment.State.SUBMITTED
        ).count(),
    }


def _round(label: str, tag: str, settings_module: str, tmpdir: str, command: list[str]) -> dict:
    """One campaign rated through its own gunicorn while PostgreSQL restarts; the figures."""
    from django.db import connections

    campaign, tokens = _setup(ANNOTATORS, n_scenarios=max(300, ANNOTATORS * 200), tag=tag)
    connections.close_all()
    port = free_port()
    server = start_gunicorn(
        port,
        log_level="error",
        env={
            "DJANGO_SETTINGS_MODULE": settings_module,
            "PYTHONPATH": os.pathsep.join([tmpdir, str(REPO)]),
        },
        stderr=subprocess.DEVNULL,  # the tracebacks of the failed requests: counted, not shown
    )
    out = Log()
    started = time.monotonic()
    try:
        down, back = _rate_through_restart(label, port, campaign, tokens, out, command)
    finally:
        _stop(server)
    connections.close_all()  # this process's connection died with the restart too
    ended = time.monotonic()
    return {
        "label": label,
        "requests": len(out.events),
        "seconds": ended - started,
        "restart_seconds": back - down,
        **_integrity_figures(campaign, out),
        **_failure_figures(out.events, back, ended),
    }


def _rate_through_restart(label, port, campaign, tokens, out: Log, command) -> tuple[float, float]:
    """The annotator threads for SECONDS, the server restarted a third of the way in: the
    times it went down and came back."""
    deadline = time.monotonic() + SECONDS
    threads = [
        threading.Thread(target=_annotator, args=(port, t, campaign.pk, deadline, out))
        for t in tokens
    ]
    for thread in threads:
        thread.start()
    time.sleep(SECONDS / 3)
    log(f"{label}: restarting PostgreSQL ({' '.join(command)})")
    down = time.monotonic()
    restart = subprocess.run(command, capture_output=True, text=True, timeout=120)
    back = time.monotonic()
    if restart.returncode:
        raise RuntimeError(f"restart failed: {restart.stderr.strip() or restart.stdout}")
    log(f"{label}: PostgreSQL back after {back - down:.1f} s; annotators keep going")
    for thread in threads:
        thread.join(SECONDS + RETRY_SECONDS + 60)
    return down, back


def _integrity_figures(campaign, out: Log) -> dict:
    facts = _integrity(campaign)
    accepted, stored = out.accepted, facts["stored_keys"]
    return {
        "accepted": len(accepted),
        "stored": len(stored),
        "lost": len(accepted - stored),
        "unacknowledged": len(stored - accepted),
        "refused": out.refused,
        "over_k": facts["over_k"],
        "counter_mismatch": facts["counter_mismatch"],
        "half_stored": facts["submitted_without_judgment"] + facts["judgment_not_submitted"],
    }


def _failure_figures(events: list, back: float, ended: float) -> dict:
    """Failed requests while restarting and after the server was back, the first success
    after it, and whether the last 5 s ran clean."""
    failures = [e for e in events if not e[2].startswith(("2", "409"))]
    during = [e for e in failures if e[0] <= back]
    after = [e for e in failures if e[0] > back]
    first_ok_after = min(
        (e[0] for e in events if e[0] > back and e[2].startswith("2")), default=None
    )
    tail = [e for e in events if e[0] > ended - 5]
    samples = {}
    for _, kind, outcome, sample in failures:
        samples.setdefault(f"{kind} {outcome}", sample)
    return {
        "failed_during": dict(Counter(f"{kind} {outcome}" for _, kind, outcome, _ in during)),
        "failed_after": dict(Counter(f"{kind} {outcome}" for _, kind, outcome, _ in after)),
        "first_ok_after_ms": None if first_ok_after is None else (first_ok_after - back) * 1000,
        "recovered": bool(tail) and all(e[2].startswith(("2", "409")) for e in tail),
        "samples": samples,
    }


def _row(result: dict) -> dict:
    integrity_ok = (
        result["lost"] == 0
        and result["unacknowledged"] == 0
        and result["over_k"] == 0
        and result["counter_mismatch"] == 0
        and result["half_stored"] == 0
    )
    notes = (
        f"{'OK' if integrity_ok and result['recovered'] else 'PROBLEM'}: "
        f"accepted {result['accepted']} = stored {result['stored']} "
        f"(lost {result['lost']}, stored unacknowledged {result['unacknowledged']}), "
        f"over k {result['over_k']}, counter mismatches {result['counter_mismatch']}, "
        f"half-stored {result['half_stored']}, refused (full) {result['refused']}; "
        f"restart took {result['restart_seconds']:.1f} s; failed while restarting: "
        f"{result['failed_during'] or 0}; failed after it was back: "
        f"{result['failed_after'] or 0}; first success "
        f"{result['first_ok_after_ms'] or 0:.0f} ms after; "
        f"recovered (last 5 s clean): {'yes' if result['recovered'] else 'NO'}; "
        f"5xx samples: {json.dumps(result['samples'], ensure_ascii=False)[:400]}"
    )
    return {
        "benchmark": f"{NAME} ({result['label']})",
        "rows": result["requests"],
        "seconds": round(result["seconds"], 1),
        "rows_per_s": round(result["requests"] / result["seconds"], 1),
        "notes": notes,
    }


def run() -> list[dict]:
    from django.conf import settings
    from django.db import connection

    if connection.vendor != "postgresql":
        return _skip("needs PostgreSQL (it restarts the server)")
    if os.environ.get("BENCH_FAULTS_RESTART_PG") != "1":
        return _skip(
            "restarts the whole PostgreSQL server; set BENCH_FAULTS_RESTART_PG=1 when nothing "
            "else (no test suite) uses it"
        )
    db = settings.DATABASES["default"]
    if str(db.get("HOST") or "localhost") not in ("127.0.0.1", "localhost", "::1"):
        return _skip(f"PostgreSQL at {db.get('HOST')} is not on this machine")
    command = restart_command(int(db.get("PORT") or 5432))
    if command is None:
        return _skip("no local cluster found to restart (set BENCH_PG_RESTART_CMD)")
    if not os.environ.get("BENCH_PG_RESTART_CMD") and os.geteuid() != 0:
        return _skip("pg_ctlcluster needs root (or set BENCH_PG_RESTART_CMD)")
    if os.environ.get("BENCH_FAULTS_FORCE") != "1":
        others = other_sessions()
        if others:
            return _skip(f"other sessions use this server, not restarting it: {others}")
        tests = local_test_runs()
        if tests:
            return _skip(f"pytest is running here (pids {', '.join(tests)}): not restarting")

    tmpdir = os.environ.get("BENCH_TMPDIR") or str(REPO / "bench" / "out")
    (Path(tmpdir) / "faults_health_settings.py").write_text(HEALTH_SETTINGS)
    rows = []
    for label, tag, module in (
        ("as configured", "cfg", "h2htalk.settings"),
        ("health checks", "hc", "faults_health_settings"),
    ):
        log(f"{label}: {ANNOTATORS} annotators for {SECONDS} s, PostgreSQL restarted at 1/3")
        result = _round(label, tag, module, tmpdir, command)
        rows.append(_row(result))
        log(json.dumps(result, default=str, ensure_ascii=False))
    return rows
