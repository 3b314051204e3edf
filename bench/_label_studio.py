"""A live Label Studio beside our server, for benches that compare like with like.

BENCH_LS_VENV names a virtual environment with Label Studio installed (never the project's
.venv: `python3 -m venv /work/ls-venv && /work/ls-venv/bin/pip install label-studio==1.23.2
psycopg2-binary gunicorn`). Without it there is no live anchor and benches print no ratio.
Label Studio runs on PostgreSQL, on the bench database's server, in its own database
(BENCH_LS_DATABASE, default h2h_ls; migrated here), behind gunicorn with the worker
configuration given and its connections kept (both the same as ours), and is driven by `annotate`: ask the next task, submit
one real choice (a Choices result the project's labeling config accepts), check every status.
"""

import http.client
import json
import os
import random
import signal
import socket
import subprocess
import time
from pathlib import Path

from bench._common import REPO, log

SETUP_SCRIPT = REPO / "bench" / "_ls_setup.py"
CHOICES = ("A much better", "A better", "Tie", "B better", "B much better")


def venv() -> Path | None:
    path = os.environ.get("BENCH_LS_VENV", "").strip()
    return Path(path) if path and (Path(path) / "bin" / "python").exists() else None


def database() -> str:
    return os.environ.get("BENCH_LS_DATABASE", "h2h_ls")


def _python() -> str:
    return str(venv() / "bin" / "python")


def _package_dir() -> Path:
    found = subprocess.run(
        [_python(), "-c", "import label_studio, os; print(os.path.dirname(label_studio.__file__))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(found.stdout.strip())


# A gunicorn configuration for Label Studio: its database connections kept as long as ours are
# (DB_CONN_MAX_AGE in bench.rating_cycle); Label Studio's own default opens one per request,
# and has no setting for it.
CONN_MAX_AGE = 3600
GUNICORN_CONFIG = f"""def post_worker_init(worker):
    from django.db import connections

    connections.settings["default"]["CONN_MAX_AGE"] = {CONN_MAX_AGE}
"""


def _gunicorn_config() -> Path:
    path = Path(os.environ.get("BENCH_TMPDIR", ".")) / "label_studio_gunicorn.py"
    path.write_text(GUNICORN_CONFIG)
    return path


def _environment() -> dict:
    from django.conf import settings

    db = settings.DATABASES["default"]
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_", "DATABASE_", "VIRTUAL_ENV"))
    }
    environment.update(
        DJANGO_SETTINGS_MODULE="core.settings.label_studio",
        SENTRY_DSN="",  # Label Studio reports errors to its Sentry unless told not to
        FRONTEND_SENTRY_DSN="",
        COLLECT_ANALYTICS="false",  # nor its usage analytics, nor a version check
        LATEST_VERSION_CHECK="false",
        DJANGO_DB="default",
        POSTGRE_NAME=database(),
        POSTGRE_USER=db["USER"],
        POSTGRE_PASSWORD=db.get("PASSWORD") or "",
        POSTGRE_HOST=db["HOST"],
        POSTGRE_PORT=str(db["PORT"]),
        LABEL_STUDIO_BASE_DATA_DIR=str(Path(os.environ.get("BENCH_TMPDIR", ".")) / "label-studio"),
        SECRET_KEY="bench-only-label-studio",
        DEBUG="false",
        LOG_LEVEL="ERROR",
        PYTHONWARNINGS="ignore",
    )
    return environment


def prepare() -> None:
    """Label Studio's database exists and is migrated."""
    import psycopg
    from django.conf import settings

    db = settings.DATABASES["default"]
    url = f"postgresql://{db['USER']}@{db['HOST']}:{db['PORT']}/postgres"
    with psycopg.connect(url, autocommit=True, password=db.get("PASSWORD") or None) as conn:
        if not conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [database()]
        ).fetchone():
            conn.execute(f'CREATE DATABASE "{database()}"')
    log(f"Label Studio: migrating its database {database()}")
    subprocess.run(
        [_python(), "manage.py", "migrate", "--noinput"],
        cwd=_package_dir(),
        env=_environment(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=True,
    )


def make_project(title: str, tasks: list[dict], annotators: int, overlap: int) -> dict:
    """A project with these tasks ({"scenario", "a", "b"}) and the annotators' tokens."""
    spec = {"title": title, "tasks": tasks, "annotators": annotators, "overlap": overlap}
    made = subprocess.run(
        [_python(), str(SETUP_SCRIPT)],
        cwd=_package_dir(),
        env=_environment(),
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        check=False,
    )
    if made.returncode != 0:
        raise RuntimeError(f"Label Studio project setup failed: {made.stderr[-2000:]}")
    return json.loads(made.stdout.strip().splitlines()[-1])


def start(port: int, worker_args: list[str]) -> subprocess.Popen:
    """Label Studio's WSGI application behind gunicorn (`worker_args`: as ours) on 127.0.0.1."""
    command = [_python(), "-m", "gunicorn", "core.wsgi:application", "-b", f"127.0.0.1:{port}"]
    command += [*worker_args, "-c", str(_gunicorn_config()), "--log-level", "error"]
    process = subprocess.Popen(
        command,
        cwd=_package_dir(),
        env=_environment(),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return process
        except OSError:
            time.sleep(0.3)
    os.killpg(process.pid, signal.SIGKILL)
    raise RuntimeError("Label Studio's gunicorn did not start")


def stop(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGTERM)
    process.wait(30)


def _call(connection, method: str, path: str, token: str, body=None):
    headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
    started = time.perf_counter()
    for attempt in range(2):
        try:
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            payload = response.read()
            break
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            connection.close()
            if attempt:
                raise
    return response.status, payload, (time.perf_counter() - started) * 1000


def annotate(port: int, project: int, token: str, deadline: float, max_cycles: int | None):
    """One annotator: ask the next task, submit one choice, until the deadline or max_cycles;
    every status is checked (200 for next, 201 for the annotation)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    rng = random.Random(token)
    mine = {"next": [], "submit": [], "accepted": 0, "refused": 0, "errors": 0}
    try:
        while time.monotonic() < deadline and (
            max_cycles is None or len(mine["submit"]) < max_cycles
        ):
            status, payload, ms = _call(connection, "GET", f"/api/projects/{project}/next", token)
            mine["next"].append(ms)
            task = json.loads(payload or b"{}") if status == 200 else {}
            if "id" not in task:
                mine["errors"] += 1
                break
            result = [
                {
                    "from_name": "preference",
                    "to_name": "scenario",
                    "type": "choices",
                    "value": {"choices": [rng.choice(CHOICES)]},
                }
            ]
            body = json.dumps({"result": result, "lead_time": 1.0})
            status, _, ms = _call(
                connection, "POST", f"/api/tasks/{task['id']}/annotations/", token, body
            )
            mine["submit"].append(ms)
            if status == 201:
                mine["accepted"] += 1
            else:
                mine["errors"] += 1
    finally:
        connection.close()
    return mine


def stored(project: int) -> tuple[int, int]:
    """Annotations stored in the project, and its tasks with more than their overlap."""
    import psycopg
    from django.conf import settings

    db = settings.DATABASES["default"]
    url = f"postgresql://{db['USER']}@{db['HOST']}:{db['PORT']}/{database()}"
    with psycopg.connect(url, password=db.get("PASSWORD") or None) as conn:
        (count,) = conn.execute(
            "SELECT COUNT(*) FROM task_completion WHERE project_id = %s", [project]
        ).fetchone()
        (over,) = conn.execute(
            "SELECT COUNT(*) FROM (SELECT t.id FROM task t JOIN task_completion a ON a.task_id = t.id"
            " WHERE t.project_id = %s GROUP BY t.id, t.overlap HAVING COUNT(*) > t.overlap) x",
            [project],
        ).fetchone()
    return count, over
