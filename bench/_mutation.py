"""Mutation testing of the statistics and the queue: `python -m bench mutation` (`make mutation`).

Every single-point mutant (`bench._mutants`) of a module is run against the test files that
exercise it (MAP; other modules of h2htalk/stats/: the test files naming them), in a
throwaway copy of the repository under /tmp (one per parallel job), so the worktree itself is
never mutated. pytest stops at the first failure (-x); a mutant is caught when the tests fail,
error or time out. Mutants listed in bench/mutation_equivalent.txt (reviewed: they cannot
change any result) are counted as equivalent, not as survivors.

    python -m bench mutation                       # the five target modules, every mutant
    python -m bench mutation --stats-sample 30     # + the rest of h2htalk/stats/, 30 each
    python -m bench mutation --module h2htalk/stats/ppi.py --sample 40 --seed 1
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/h2h_m27 python -m bench mutation …

With DATABASE_URL on PostgreSQL the queue's concurrency tests run too (each job uses its own
test database, the URL's name plus _mut<job>); on SQLite they skip.
"""

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from queue import Queue
from urllib.parse import urlsplit

from bench._common import REPO
from bench._mutants import Mutant, mutants, mutated_source

EQUIVALENT_FILE = REPO / "bench" / "mutation_equivalent.txt"
OUT = REPO / "bench" / "out"
QUEUE_TESTS = [
    "tests/annotation/test_queue.py",
    "tests/annotation/test_queue_guarantees.py",
    "tests/annotation/test_submission_guards.py",
    "tests/annotation/test_handout_order.py",
    "tests/annotation/test_connected_design.py",
    "tests/annotation/test_rating_api.py",
    "tests/annotation/test_queue_concurrency.py",  # PostgreSQL only (skips on SQLite)
]
AGREEMENT_TESTS = ["tests/test_agreement_edges.py", "tests/test_agreement.py"]
# The five modules with a 90% target, and the test files run against their mutants.
MAP = {
    "h2htalk/stats/ppi.py": ["tests/test_ppi.py"],
    "h2htalk/stats/bradley_terry.py": ["tests/test_bradley_terry.py"],
    "h2htalk/stats/agreement/coefficients.py": AGREEMENT_TESTS,
    "h2htalk/stats/agreement/krippendorff_alpha.py": AGREEMENT_TESTS,
    "annotation/queue.py": QUEUE_TESTS,
}
IGNORED = shutil.ignore_patterns(
    ".git", ".venv", "__pycache__", "*.pyc", "out", "media", "staticfiles", "db.sqlite3*"
)


def stats_modules() -> list[str]:
    return sorted(
        str(path.relative_to(REPO))
        for path in (REPO / "h2htalk" / "stats").rglob("*.py")
        if path.name != "__init__.py"
    )


def tests_for(module: str) -> list[str]:
    """MAP's test files, or the test files naming the module (its dotted name or `import x`)."""
    if module in MAP:
        return MAP[module]
    dotted = module.removesuffix(".py").replace("/", ".")
    parent, name = dotted.rsplit(".", 1)
    pattern = re.compile(
        rf"{re.escape(dotted)}\b|from {re.escape(parent)} import [^\n]*\b{name}\b"
        rf"|from \.?{name} import"
    )
    found = []
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        if pattern.search(path.read_text(encoding="utf-8")):
            found.append(str(path.relative_to(REPO)))
    # A test file named after the module first: it usually catches a mutant soonest.
    return sorted(found, key=lambda p: (name.split("_")[0] not in Path(p).stem, p))


def load_equivalent() -> dict[str, str]:
    """key → reason, from the reviewed list (`key  ## reason`, # comments)."""
    reviewed = {}
    for line in EQUIVALENT_FILE.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            key, _, reason = line.partition("  ## ")
            reviewed[key.strip()] = reason.strip()
    return reviewed


# ---------------------------------------------------------------- running


def job_env(copy: Path, job: int) -> dict:
    env = os.environ.copy()
    env.update(
        PYTHONPATH=str(copy),
        SECRET_KEY=env.get("SECRET_KEY") or "mutation-only-secret-key",
        OPENBLAS_NUM_THREADS="1",
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        PYTHONDONTWRITEBYTECODE="1",
    )
    for name in ("CI", "CELERY_BROKER_URL", "REDIS_URL", "PYTEST_ADDOPTS"):
        env.pop(name, None)
    url = env.get("DATABASE_URL", "")
    if url.startswith(("postgres://", "postgresql://")):
        parts = urlsplit(url)
        env["DATABASE_URL"] = parts._replace(path=f"{parts.path}_mut{job}").geturl()
    else:
        env.pop("DATABASE_URL", None)
    return env


RUNNING: set = set()  # the pytest processes running now


def stop(*_) -> None:
    """SIGTERM: end the running tests too, then clean up as after Ctrl-C."""
    for proc in list(RUNNING):
        os.killpg(proc.pid, signal.SIGKILL)
    raise KeyboardInterrupt


def run_tests(copy: Path, job: int, tests: list[str], timeout: float) -> tuple[str, float]:
    """'passed', 'failed' or 'timeout' for the tests in this copy, and the seconds taken."""
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-n", "0"]
    if job_env(copy, job).get("DATABASE_URL"):
        command.append("--reuse-db")
    start = time.perf_counter()
    proc = subprocess.Popen(  # its own process group: killed whole on a timeout or an interrupt
        [*command, *tests],
        cwd=copy,
        env=job_env(copy, job),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    RUNNING.add(proc)
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return "timeout", time.perf_counter() - start
    finally:
        RUNNING.discard(proc)
    return ("passed" if code == 0 else "failed"), time.perf_counter() - start


def make_copies(jobs: int) -> list[Path]:
    copies = []
    for job in range(jobs):
        target = Path(tempfile.mkdtemp(prefix=f"h2htalk-mutation-{job}-")) / "repo"
        shutil.copytree(REPO, target, ignore=IGNORED, symlinks=True)
        copies.append(target)
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import annotation, h2htalk; print(h2htalk.__file__, annotation.__file__)",
        ],
        cwd=copies[0],
        env=job_env(copies[0], 0),
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode or not probe.stdout.strip().startswith(str(copies[0])):
        for copy in copies:
            shutil.rmtree(copy.parent, ignore_errors=True)
        raise SystemExit(f"the copy's modules are not the ones imported: {probe}")
    return copies


def run_module(module: str, chosen: list[Mutant], copies: list[Path], equivalent: dict) -> dict:
    """Baseline (the tests must pass unmutated), then every chosen mutant; the results."""
    tests = tests_for(module)
    source = (REPO / module).read_text(encoding="utf-8")
    if not tests:
        return {"module": module, "tests": [], "error": "no test file names this module"}
    status, baseline = run_tests(copies[0], 0, tests, timeout=900)
    if status != "passed":
        return {"module": module, "tests": tests, "error": f"tests {status} unmutated"}
    timeout = 3 * baseline + 20
    free: Queue = Queue()
    for job, copy in enumerate(copies):
        free.put((job, copy))

    def one(mutant: Mutant) -> dict:
        if mutant.key in equivalent:
            return {"key": mutant.key, "status": "equivalent"}
        job, copy = free.get()
        try:
            (copy / module).write_text(mutated_source(source, mutant), encoding="utf-8")
            status, seconds = run_tests(copy, job, tests, timeout)
        finally:
            (copy / module).write_text(source, encoding="utf-8")
            free.put((job, copy))
        caught = "survived" if status == "passed" else "caught"
        return {"key": mutant.key, "status": caught, "how": status, "seconds": round(seconds, 1)}

    start = time.perf_counter()
    pool = ThreadPoolExecutor(len(copies))
    try:
        results = list(pool.map(one, chosen))
    finally:  # on an interrupt: start no further mutant
        pool.shutdown(wait=True, cancel_futures=True)
    return {
        "module": module,
        "tests": tests,
        "baseline_seconds": round(baseline, 1),
        "seconds": round(time.perf_counter() - start, 1),
        "results": results,
        "error": None,
    }


# ---------------------------------------------------------------- reporting


def summary_row(run: dict, total: int) -> dict:
    statuses = [r["status"] for r in run.get("results", [])]
    caught, survived = statuses.count("caught"), statuses.count("survived")
    judged = caught + survived
    return {
        "module": run["module"],
        "mutants": total,
        "tried": len(statuses),
        "caught": caught,
        "survived": survived,
        "equivalent": statuses.count("equivalent"),
        "score": round(100 * caught / judged, 1) if judged else None,
        "seconds": run.get("seconds"),
        "error": run.get("error"),
    }


def print_table(rows: list[dict]) -> None:
    header = f"{'module':48} {'mutants':>7} {'tried':>6} {'caught':>6} {'survived':>8}"
    print(f"\n{header} {'equiv.':>6} {'score':>7} {'seconds':>8}")
    for row in rows:
        score = "—" if row["score"] is None else f"{row['score']:.1f}%"
        print(
            f"{row['module']:48} {row['mutants']:>7} {row['tried']:>6} {row['caught']:>6} "
            f"{row['survived']:>8} {row['equivalent']:>6} {score:>7} {row['seconds'] or 0:>8}"
            + (f"  ERROR: {row['error']}" if row["error"] else "")
        )


def choose(module: str, sample: int, seed: int) -> tuple[list[Mutant], int]:
    found = mutants(module, (REPO / module).read_text(encoding="utf-8"))
    found.sort(key=lambda m: (m.line, m.key))
    if 0 < sample < len(found):
        picked = random.Random(f"{seed}:{module}").sample(found, sample)
        return sorted(picked, key=lambda m: (m.line, m.key)), len(found)
    return found, len(found)


def wanted(mutant: Mutant, only: list[str] | None) -> bool:
    return only is None or any(text in mutant.key for text in only)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench mutation", description=__doc__)
    parser.add_argument("--module", action="append", help="a module path (repeatable)")
    parser.add_argument("--sample", type=int, default=0, help="mutants per module (0: all)")
    parser.add_argument("--stats-sample", type=int, default=0, help="add the other stats modules")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--list", action="store_true", help="print the mutants, run nothing")
    parser.add_argument(
        "--only", action="append", help="only mutants whose name contains this (repeatable)"
    )
    parser.add_argument("--report", type=Path, help="reprint a saved run (JSON) with today's list")
    args = parser.parse_args(argv)
    plan = [(m, args.sample) for m in (args.module or MAP)]
    if args.stats_sample and not args.module:
        plan += [(m, args.stats_sample) for m in stats_modules() if m not in MAP]
    if args.report:
        return report(args.report)
    if args.list:
        for module, sample in plan:
            for mutant in choose(module, sample, args.seed)[0]:
                if wanted(mutant, args.only):
                    print(mutant.key)
        return 0
    equivalent = load_equivalent()
    signal.signal(signal.SIGTERM, stop)
    started = time.perf_counter()
    copies = make_copies(args.jobs)
    rows, runs = [], []
    try:
        for module, sample in plan:
            chosen, total = choose(module, sample, args.seed)
            chosen = [m for m in chosen if wanted(m, args.only)]
            print(f"▶ {module}: {len(chosen)} of {total} mutants", file=sys.stderr, flush=True)
            run = run_module(module, chosen, copies, equivalent)
            runs.append(run)
            rows.append(summary_row(run, total))
            for result in run.get("results", []):
                if result["status"] == "survived":
                    print(f"  survived: {result['key']}", file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        for proc in list(RUNNING):
            os.killpg(proc.pid, signal.SIGKILL)
        print("interrupted: the results so far", file=sys.stderr)
    finally:
        for copy in copies:
            shutil.rmtree(copy.parent, ignore_errors=True)
    print_table(rows)
    minutes = (time.perf_counter() - started) / 60
    print(f"\n{minutes:.1f} min with {args.jobs} jobs; seed {args.seed}; load {load()}")
    OUT.mkdir(exist_ok=True)
    document = {"rows": rows, "runs": runs, "argv": argv, "minutes": round(minutes, 1)}
    text = json.dumps(document, indent=1)
    (OUT / f"mutation-{datetime.now(UTC):%Y%m%d-%H%M%S}.json").write_text(text, encoding="utf-8")
    (OUT / "mutation-latest.json").write_text(text, encoding="utf-8")
    return 1 if any(row["error"] for row in rows) else 0


def load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def report(path: Path) -> int:
    """The table of a saved run, mutants on the reviewed list counted as equivalent."""
    equivalent = load_equivalent()
    document = json.loads(path.read_text(encoding="utf-8"))
    rows = []
    for run, row in zip(document["runs"], document["rows"], strict=True):
        for result in run.get("results", []):
            if result["key"] in equivalent:
                result["status"] = "equivalent"
        rows.append(summary_row(run, row["mutants"]))
    print_table(rows)
    for run in document["runs"]:
        for result in run.get("results", []):
            if result["status"] == "survived":
                print(f"  survived: {result['key']}")
    return 0
