"""Small helpers shared by benchmark modules (Django only imported inside start_gunicorn)."""

import math
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data" / "h2htalk"


def log(message: str) -> None:
    """Progress for the person watching; stdout is reserved for the result line."""
    print(f"  · {message}", file=sys.stderr, flush=True)


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    return int(value) if value.isdigit() else default


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def timed(fn: Callable, *args, **kwargs) -> tuple[float, object]:
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return time.perf_counter() - start, result


def throughput_row(benchmark: str, rows: int, seconds: float, notes: str = "") -> dict:
    return {
        "benchmark": benchmark,
        "rows": rows,
        "seconds": round(seconds, 3),
        "rows_per_s": round(rows / seconds, 1) if seconds > 0 else None,
        "notes": notes,
    }


def latency_row(
    benchmark: str, samples_s: list[float], queries: int, rows: int | None, notes: str = ""
) -> dict:
    ms = [s * 1000 for s in samples_s]
    return {
        "benchmark": benchmark,
        "rows": rows,
        "seconds": round(sum(samples_s), 3),
        "median_ms": round(statistics.median(ms), 2),
        "p95_ms": round(percentile(ms, 95), 2),
        "queries": queries,
        "samples": len(ms),
        "notes": notes,
    }


# ---------------------------------------------------------------- load and CPU


def loadavg() -> str:
    """/proc/loadavg's three load averages (the machine is shared: print them beside figures)."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def backend_pid() -> int | None:
    """The PostgreSQL server process of this Django connection (None on SQLite)."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def cpu_ms(pid: int | None = None) -> float:
    """CPU time (user + system, ms) of a process from /proc (this one when pid is None); a
    server process on another machine reads as 0."""
    if pid is None:
        return time.process_time() * 1000
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------- memory


def _status_mib(key: str) -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _reset_peak() -> bool:
    """Reset the resident high-water mark where Linux allows, so a step's peak is its own."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _peak_mib() -> float:
    peak = _status_mib("VmHWM")
    return peak if peak is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measured(benchmark: str, fn: Callable, rows: int, notes: str = "") -> tuple[dict, object]:
    """Run fn once: a throughput row with the wall time and the resident peak during it (and
    its growth over the resident size at the start), and fn's value."""
    before = _status_mib("VmRSS")
    reset = _reset_peak()
    start = time.perf_counter()
    value = fn()
    seconds = time.perf_counter() - start
    peak = _peak_mib()
    if reset and before is not None:
        scope = f"+{peak - before:,.0f} MiB over the {before:,.0f} MiB at its start"
    elif reset:
        scope = "during the step"
    else:
        scope = "process peak so far"
    log(f"{benchmark}: {seconds:.2f} s, peak RSS {peak:,.0f} MiB ({scope})")
    row = throughput_row(benchmark, rows, seconds)
    row["peak_mib"] = round(peak, 1)
    row["peak_growth_mib"] = round(peak - before, 1) if reset and before is not None else None
    row["notes"] = f"peak RSS {peak:,.0f} MiB ({scope})" + (f"; {notes}" if notes else "")
    return row, value


class Step:
    """Times one step (a context manager): wall time, CPU of this process and of the server
    process `server` (backend_pid) with the rows per CPU-second of both (what one idle core
    would do: the wall time on a loaded machine says little), the resident peak (and its growth over the start: Linux
    resets the mark through /proc/self/clear_refs) and the load average; row() is the result."""

    def __init__(self, label: str, rows: int, server: int | None):
        self.label, self.rows, self.server = label, rows, server

    def __enter__(self):
        self.rss_before = _status_mib("VmRSS") if _reset_peak() else None
        self.cpu = cpu_ms(), cpu_ms(self.server)
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.start
        self.client_ms = cpu_ms() - self.cpu[0]
        self.server_ms = cpu_ms(self.server) - self.cpu[1]
        peak = _peak_mib()
        self.peak = peak
        self.growth = None if self.rss_before is None or peak is None else peak - self.rss_before
        self.load = loadavg()

    def row(self, notes: str = "") -> dict:
        rate = round(self.rows / self.seconds)
        memory = (
            f"peak RSS {self.peak:,.0f} MB (+{self.growth:,.1f})" if self.growth is not None else ""
        )
        cpu = f"CPU {self.client_ms:,.0f} ms here"
        if self.server is not None:
            cpu += f" + {self.server_ms:,.0f} ms server"
        cpu_total = self.client_ms + (self.server_ms if self.server is not None else 0)
        cpu_rate = round(self.rows * 1000 / cpu_total) if cpu_total > 0 else None
        if cpu_rate:
            cpu += f" = {cpu_rate:,} rows per CPU-second"
        parts = [p for p in (notes, cpu, memory, f"load {self.load}") if p]
        log(
            f"{self.label}: {self.rows:,} rows in {self.seconds:.2f} s ({rate:,}/s); "
            + "; ".join(parts)
        )
        return {
            "benchmark": self.label,
            "rows": self.rows,
            "seconds": round(self.seconds, 3),
            "rows_per_s": rate,
            "cpu_ms": round(self.client_ms),
            "server_cpu_ms": round(self.server_ms) if self.server is not None else None,
            "rows_per_cpu_s": cpu_rate,
            "peak_rss_mb": round(self.peak, 1) if self.peak is not None else None,
            "peak_rss_growth_mb": round(self.growth, 1) if self.growth is not None else None,
            "loadavg": self.load,
            "notes": "; ".join(parts),
        }


def traced_peak_mib(fn: Callable) -> float:
    """tracemalloc's peak of Python and numpy allocations while fn runs (a second pass)."""
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


# ---------------------------------------------------------------- gunicorn on 127.0.0.1


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# gunicorn's worker configurations the benches compare servers under (ours and Label Studio's
# alike): 4 sync workers (one request at a time each, no keep-alive) and 4 × 8 threads.
WORKER_CONFIGS = {
    "sync": ["-w", "4", "-k", "sync"],
    "gthread": ["-w", "4", "-k", "gthread", "--threads", "8"],
}


def start_gunicorn(
    port: int,
    log_level: str,
    env: dict | None = None,
    worker_args: list[str] | None = None,
    **popen,
) -> subprocess.Popen:
    """gunicorn (4 workers × 8 threads unless `worker_args` say otherwise, see WORKER_CONFIGS)
    on 127.0.0.1:port against this process's PostgreSQL database, once it accepts
    connections; `env` adds to the environment."""
    from django.conf import settings

    db = settings.DATABASES["default"]
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    environment = {
        **os.environ,
        "DATABASE_URL": f"postgres://{auth}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "SECRET_KEY": settings.SECRET_KEY,
        "ALLOWED_HOSTS": "127.0.0.1",
        "DB_CONN_MAX_AGE": "60",
        **(env or {}),
    }
    environment.pop("DJANGO_DEBUG", None)
    command = [sys.executable, "-m", "gunicorn", "h2htalk.wsgi", "-b", f"127.0.0.1:{port}"]
    command += [*(worker_args or WORKER_CONFIGS["gthread"]), "--log-level", log_level]
    process = subprocess.Popen(command, cwd=REPO, env=environment, start_new_session=True, **popen)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return process
        except OSError:
            time.sleep(0.2)
    os.killpg(process.pid, signal.SIGKILL)
    raise RuntimeError("gunicorn did not start")
