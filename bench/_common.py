"""Small helpers shared by benchmark modules (no Django imports here)."""

import math
import os
import statistics
import sys
import time
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
