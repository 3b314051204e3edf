"""The rating-cycle bench's meters and clients (bench.rating_cycle): CPU from /proc of the server
processes and PostgreSQL backends, and the annotators that drive our API and Label Studio's."""

import http.client
import json
import os
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path

from bench import _label_studio

ARRIVAL_SECONDS = 8  # at a human pace, annotators arrive over the first seconds
TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")

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


def _backends(database: str | None = None) -> list[int]:
    """The client backends of `database` (this one's by default), but this process's own."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = COALESCE(%s, current_database()) "
            "AND pid <> pg_backend_pid() AND backend_type = 'client backend'",
            [database],
        )
        return [row[0] for row in cursor.fetchall()]


class CpuMeter:
    """CPU-ms spent by a gunicorn's workers and by their PostgreSQL backends (of `database`)
    between start() and stop(); a backend that connects in between counts from 0."""

    def __init__(self, master: int, database: str | None = None):
        self.master, self.database = master, database

    def _snapshot(self) -> tuple[dict, dict]:
        workers = {pid: _cpu_ms(pid) for pid in _children(self.master)}
        backends = {pid: _cpu_ms(pid) for pid in _backends(self.database)}
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
    """POST; a connection the server closed (keep-alive ended, or a sync worker's answer) is
    opened again, as a browser would, within the time measured."""
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


def _annotator(port, campaign_id, pace, max_cycles, token, deadline) -> dict:
    """Next, submit, until the deadline or max_cycles; `pace` (seconds) between submissions,
    or none. At a pace, the annotator arrives within the first ARRIVAL_SECONDS, as people do."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    rng = random.Random(token)
    mine = {"next": [], "submit": [], "accepted": 0, "refused": 0, "errors": 0}
    if pace:
        time.sleep(rng.uniform(0, ARRIVAL_SECONDS))
    try:
        while time.monotonic() < deadline and (
            max_cycles is None or len(mine["submit"]) < max_cycles
        ):
            status, payload, ms = _post(
                connection, f"/api/rate/campaigns/{campaign_id}/next/", token, {}
            )
            mine["next"].append(ms)
            if status != 200:
                mine["errors"] += status != 204
                break
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
    return mine


def _ours(port: int, campaign_id: int, pace=None, max_cycles=None) -> Callable:
    return lambda token, deadline: _annotator(port, campaign_id, pace, max_cycles, token, deadline)


def _theirs(port: int, project: int, max_cycles=None) -> Callable:
    return lambda token, deadline: _label_studio.annotate(
        port, project, token, deadline, max_cycles
    )


def _drive(work: Callable, tokens: list[str], seconds: float) -> dict:
    """`work(token, deadline)` in a thread per token until the deadline (or its own end)."""
    from django.db import connections

    connections.close_all()
    results, lock = [], threading.Lock()
    deadline = time.monotonic() + seconds

    def one(token):
        mine = work(token, deadline)
        with lock:
            results.append(mine)

    started = time.perf_counter()
    threads = [threading.Thread(target=one, args=(t,)) for t in tokens]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + 120)
    return {
        "seconds": time.perf_counter() - started,
        "next": [ms for r in results for ms in r["next"]],
        "submit": [ms for r in results for ms in r["submit"]],
        **{k: sum(r[k] for r in results) for k in ("accepted", "refused", "errors")},
    }


def _warm_up(make: Callable, tokens: list[str]) -> dict:
    """Every annotator finishes one cycle (or is told nothing is left), however long it takes;
    `make(max_cycles)` makes the annotators' work."""
    return _drive(make(1), tokens, 600)
