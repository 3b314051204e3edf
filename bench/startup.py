"""Start-up: wall and CPU time of `python manage.py check` (every command, runserver reload and
gunicorn worker pays about the same: settings, apps, URL configuration).

Runs the command BENCH_STARTUP_RUNS times (default 7) in fresh interpreters and reports the
median wall time and the median CPU time (user + system, from the children's rusage), with
/proc/loadavg before and after. Then one `python -X importtime manage.py check`: its ten
costliest outermost imports (cumulative, as `-X importtime` counts them) are logged and put in
the notes.

With BENCH_STARTUP_AGAINST=<git revision> the same is measured on that revision's tree
(exported with `git archive` to a temporary folder), alternating runs, and the ratio is given:
e.g. BENCH_STARTUP_AGAINST=6f659d8 for the tree before imports were made lazy.

    .venv/bin/python -m bench startup --backend sqlite
    .venv/bin/python -m bench.startup            # alone, without the bench database
"""

import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._common import REPO, env_int, log, percentile

RUNS = env_int("BENCH_STARTUP_RUNS", 7)
COMMAND = ["manage.py", "check"]
IMPORT_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _env() -> dict:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "h2htalk.settings"}
    env.setdefault("SECRET_KEY", "bench-only-secret-key")
    env.pop("PYTHONPATH", None)  # manage.py puts its own folder first
    return env


def run_once(tree: Path, *flags: str) -> tuple[float, float, str]:
    """(wall s, CPU s, stderr) of one `python [flags] manage.py check` in `tree`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *flags, *COMMAND],
        cwd=tree,
        env=_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stderr


def top_imports(stderr: str, count: int = 10) -> list[tuple[str, float]]:
    """The `count` outermost imports with the largest cumulative time (seconds)."""
    outermost = []
    for line in stderr.splitlines():
        match = IMPORT_LINE.match(line)
        if match and len(match.group(3)) == 1:  # nested imports are indented further
            outermost.append((match.group(4), int(match.group(2)) / 1e6))
    return sorted(outermost, key=lambda item: -item[1])[:count]


def export_tree(revision: str, into: str) -> Path:
    archive = subprocess.run(
        ["git", "archive", revision], cwd=REPO, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    return Path(into)


def measure(trees: dict[str, Path]) -> dict[str, list[tuple[float, float]]]:
    """RUNS timings per tree, alternating between trees so load changes hit both alike."""
    for tree in trees.values():
        run_once(tree)  # warm the file cache and bytecode
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
    for _ in range(RUNS):
        for name, tree in trees.items():
            wall, cpu, _ = run_once(tree)
            samples[name].append((wall, cpu))
    return samples


def row(name: str, timings: list[tuple[float, float]], load: str, notes: str = "") -> dict:
    walls = [wall for wall, _ in timings]
    cpus = [cpu for _, cpu in timings]
    return {
        "benchmark": f"manage.py check ({name})",
        "rows": len(timings),
        "seconds": round(sum(walls), 3),
        "median_ms": round(statistics.median(walls) * 1000, 1),
        "p95_ms": round(percentile(walls, 95) * 1000, 1),
        "notes": (
            f"median CPU {statistics.median(cpus):.2f} s (user+sys), "
            f"wall min {min(walls):.2f} s; loadavg {load}" + (f"; {notes}" if notes else "")
        ),
        "cpu_s": round(statistics.median(cpus), 3),
    }


def run() -> list[dict]:
    against = os.environ.get("BENCH_STARTUP_AGAINST", "").strip()
    with tempfile.TemporaryDirectory(prefix="h2htalk-startup-") as tmp:
        trees = {"this tree": REPO}
        if against:
            trees[against] = export_tree(against, tmp)
        load_before = loadavg()
        log(f"{RUNS} runs of `python manage.py check` per tree; loadavg {load_before}")
        samples = measure(trees)
        load = f"{load_before} → {loadavg()}"
        _, _, stderr = run_once(REPO, "-X", "importtime")
    imports = top_imports(stderr)
    log("costliest outermost imports (cumulative, -X importtime, this tree):")
    for name, seconds in imports:
        log(f"  {seconds * 1000:8.1f} ms  {name}")
    rows = [row(name, timings, load) for name, timings in samples.items()]
    rows[0]["notes"] += "; top imports: " + ", ".join(
        f"{name} {seconds:.2f} s" for name, seconds in imports[:5]
    )
    if against:
        ours, theirs = (statistics.median(w for w, _ in samples[n]) for n in trees)
        ours_cpu, theirs_cpu = (statistics.median(c for _, c in samples[n]) for n in trees)
        rows.append(
            {
                "benchmark": f"ratio {against} / this tree",
                "notes": f"wall {theirs / ours:.2f}×, CPU {theirs_cpu / ours_cpu:.2f}×",
            }
        )
    return rows


if __name__ == "__main__":
    for result in run():
        median = f"median {result['median_ms']} ms, " if "median_ms" in result else ""
        print(f"{result['benchmark']}: {median}{result['notes']}")
