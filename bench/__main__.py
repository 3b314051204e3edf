"""Run the benchmarks and print a table: `python -m bench [MODULE…] [--backend …] [--keep]`.

Backends: SQLite always (a file in a fresh temporary folder); PostgreSQL too when
BENCH_DATABASE_URL (or else DATABASE_URL) is a postgres:// URL. The PostgreSQL run uses a
dedicated database on that server, created here and dropped afterwards: the URL's database if
its name contains "bench" (e.g. postgres://postgres@127.0.0.1:5432/h2htalk_bench), otherwise
that name plus "_bench", so the application's own database is never touched. db.sqlite3 and
the test database are never opened.

Results are also written as JSON to bench/out/ (gitignored).

`python -m bench two_hosts` runs only when named: it makes its own hosts, database and broker
(bench/two_hosts.py; needs root). `python -m bench mutation …` is not a benchmark: it
mutation-tests the statistics and the queue (bench/_mutation.py; README, "Mutation testing").
"""

import argparse
import json
import os
import pkgutil
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import unicodedata
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from bench._common import REPO
from bench._worker import RESULT_PREFIX

BENCH_DIR = Path(__file__).resolve().parent
OUT_DIR = BENCH_DIR / "out"
RUN_TIMEOUT_S = int(os.environ.get("BENCH_TIMEOUT_S", "900"))  # per module and backend


# Benchmarks that make their own world and run on their own (not once per backend through
# bench._worker), only when named: `python -m bench two_hosts`.
STANDALONE = {"two_hosts": "bench.two_hosts"}


def discover() -> list[str]:
    return sorted(
        info.name
        for info in pkgutil.iter_modules([str(BENCH_DIR)])
        if info.name[0] != "_" and info.name not in STANDALONE
    )


# ---------------------------------------------------------------- databases


def postgres_url() -> str | None:
    for name in ("BENCH_DATABASE_URL", "DATABASE_URL"):
        url = os.environ.get(name, "")
        if url.startswith(("postgres://", "postgresql://", "pgsql://")):
            parts = urlsplit(url)
            database = parts.path.lstrip("/") or "h2htalk"
            if "bench" not in database:
                database += "_bench"
            return urlunsplit(parts._replace(scheme="postgres", path="/" + database))
    return None


def _admin(url: str, *statements: str) -> None:
    """Run statements on the server's maintenance database, {} being the bench database."""
    import psycopg
    from psycopg import sql

    parts = urlsplit(url)
    name = sql.Identifier(parts.path.lstrip("/"))
    admin_url = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin_url, autocommit=True) as conn:
        for statement in statements:
            conn.execute(sql.SQL(statement).format(name))


def postgres_recreate(url: str) -> None:
    _admin(
        url,
        "DROP DATABASE IF EXISTS {} WITH (FORCE)",
        "CREATE DATABASE {} ENCODING 'UTF8' TEMPLATE template0",
    )


def postgres_drop(url: str) -> None:
    _admin(url, "DROP DATABASE IF EXISTS {} WITH (FORCE)")


def redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))
    return url


# ---------------------------------------------------------------- running


def worker_env(database_url: str, tmpdir: str) -> dict:
    env = os.environ.copy()
    env.update(
        DATABASE_URL=database_url,
        DJANGO_SETTINGS_MODULE="h2htalk.settings",
        DJANGO_DEBUG="0",
        DJANGO_SECURE="0",
        BENCH_TMPDIR=tmpdir,
        MEDIA_ROOT=str(Path(tmpdir) / "media"),
        STATIC_ROOT=str(Path(tmpdir) / "staticfiles"),
    )
    env.setdefault("SECRET_KEY", "bench-only-secret-key")
    hosts = [h.strip() for h in env.get("ALLOWED_HOSTS", "").split(",") if h.strip()]
    if hosts and "testserver" not in hosts:
        env["ALLOWED_HOSTS"] = ",".join([*hosts, "testserver"])
    # Self-contained: Celery eager, local-memory cache, whatever the shell has configured.
    for name in ("CELERY_BROKER_URL", "REDIS_URL"):
        env.pop(name, None)
    return env


def run_one(module: str, backend: str, pg_url: str | None, keep: bool) -> dict:
    tmpdir = tempfile.mkdtemp(prefix=f"h2htalk-bench-{backend}-")
    (Path(tmpdir) / "staticfiles").mkdir()  # WhiteNoise warns when STATIC_ROOT is missing
    if backend == "sqlite":
        url = f"sqlite:///{Path(tmpdir) / 'bench.sqlite3'}"
        where = url
    else:
        url = pg_url
        where = redact(url)
    print(f"▶ {module} on {backend} ({where})", file=sys.stderr, flush=True)
    start = time.perf_counter()
    try:
        if backend == "postgres":
            postgres_recreate(url)
        proc = subprocess.run(
            [sys.executable, "-m", "bench._worker", module],
            cwd=REPO,
            env=worker_env(url, tmpdir),
            stdout=subprocess.PIPE,
            text=True,
            timeout=RUN_TIMEOUT_S,
            check=False,
        )
        payload = None
        for line in proc.stdout.splitlines():
            if line.startswith(RESULT_PREFIX):
                payload = json.loads(line[len(RESULT_PREFIX) :])
            elif line.strip():
                print(line, file=sys.stderr)
        if proc.returncode != 0 or payload is None:
            raise RuntimeError(f"worker exited with {proc.returncode}")
        error = None
    except Exception as exc:
        payload, error = {"rows": []}, f"{type(exc).__name__}: {exc}"
        print(f"✗ {module} on {backend}: {error}", file=sys.stderr, flush=True)
    finally:
        if backend == "postgres" and not keep:
            try:
                postgres_drop(url)
            except Exception as exc:
                print(f"  (could not drop the bench database: {exc})", file=sys.stderr)
        if keep:
            print(f"  kept {where} ({tmpdir})", file=sys.stderr)
        else:
            shutil.rmtree(tmpdir, ignore_errors=True)
    elapsed = time.perf_counter() - start
    print(f"  done in {elapsed:.1f} s", file=sys.stderr, flush=True)
    return {
        "module": module,
        "backend": backend,
        "error": error,
        "wall_seconds": round(elapsed, 1),
        "rows": payload["rows"],
    }


# ---------------------------------------------------------------- printing


def width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def pad(text: str, size: int, right: bool = False) -> str:
    fill = " " * max(0, size - width(text))
    return fill + text if right else text + fill


def fmt(value, digits: int = 1) -> str:
    if value is None or value == "":
        return ""
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


COLUMNS = [
    # header, key, digits, right-aligned
    ("benchmark", "benchmark", 0, False),
    ("backend", "backend", 0, False),
    ("rows", "rows", 0, True),
    ("seconds", "seconds", 3, True),
    ("rows/s", "rows_per_s", 0, True),
    ("rows/CPU-s", "rows_per_cpu_s", 0, True),
    ("median ms", "median_ms", 1, True),
    ("p95 ms", "p95_ms", 1, True),
    ("queries", "queries", 0, True),
    ("notes", "notes", 0, False),
]


def table(runs: list[dict]) -> str:
    # Same benchmark on each backend side by side: order by (module, row position, backend).
    records = []
    for run in runs:
        for position, row in enumerate(run["rows"]):
            records.append(((run["module"], position), {**row, "backend": run["backend"]}))
        if run["error"]:
            failed = {"benchmark": f"{run['module']}: FAILED", "notes": run["error"]}
            records.append(((run["module"], 10_000), {**failed, "backend": run["backend"]}))
    backends = {run["backend"]: i for i, run in enumerate(runs)}
    records.sort(key=lambda item: (item[0], backends[item[1]["backend"]]))
    cells = [[h for h, *_ in COLUMNS]]
    for _, row in records:
        cells.append([fmt(row.get(key), digits) for _, key, digits, _ in COLUMNS])
    sizes = [max(width(line[i]) for line in cells) for i in range(len(COLUMNS))]
    lines = []
    for n, line in enumerate(cells):
        text = "  ".join(
            pad(cell, sizes[i], right=COLUMNS[i][3] and n > 0) for i, cell in enumerate(line)
        )
        lines.append(text.rstrip())
        if n == 0:
            lines.append("  ".join("-" * size for size in sizes))
    return "\n".join(lines)


def write_json(runs: list[dict], started: datetime) -> Path:
    OUT_DIR.mkdir(exist_ok=True)
    import django

    document = {
        "started": started.isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "django": django.get_version(),
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs",
        "runs": runs,
    }
    path = OUT_DIR / f"bench-{started:%Y%m%d-%H%M%S}.json"
    text = json.dumps(document, ensure_ascii=False, indent=1)
    path.write_text(text, encoding="utf-8")
    (OUT_DIR / "latest.json").write_text(text, encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["mutation"]:  # not a benchmark: mutation testing (bench/_mutation.py)
        from bench._mutation import main as mutation

        return mutation(argv[1:])
    if argv[:1] and argv[0] in STANDALONE:
        import importlib

        return importlib.import_module(STANDALONE[argv[0]]).main(argv[1:])
    available = discover()
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("modules", nargs="*", metavar="MODULE", help=f"one of {available}")
    parser.add_argument(
        "--backend",
        choices=["auto", "sqlite", "postgres", "all"],
        default="auto",
        help="auto (default): SQLite, plus PostgreSQL when (BENCH_)DATABASE_URL is postgres",
    )
    parser.add_argument("--keep", action="store_true", help="keep the throwaway databases")
    args = parser.parse_args(argv)
    unknown = [m for m in args.modules if m not in available]
    if unknown:
        parser.error(f"unknown benchmark {unknown[0]!r}; available: {', '.join(available)}")
    pg_url = postgres_url()
    backends = {
        "auto": ["sqlite", "postgres"] if pg_url else ["sqlite"],
        "all": ["sqlite", "postgres"],
        "sqlite": ["sqlite"],
        "postgres": ["postgres"],
    }[args.backend]
    if "postgres" in backends and not pg_url:
        parser.error("PostgreSQL needs BENCH_DATABASE_URL or DATABASE_URL = postgres://…")

    started = datetime.now(UTC)
    runs = [
        run_one(module, backend, pg_url, args.keep)
        for module in args.modules or available
        for backend in backends
    ]
    print()
    print(table(runs))
    path = write_json(runs, started)
    print(f"\n(results in {path.relative_to(REPO)})")
    return 1 if any(run["error"] for run in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
