"""App hosts as network namespaces on this machine, with a PostgreSQL and a Redis of their own
on the host side (`Lab`): what bench/two_hosts.py and tests/test_two_hosts.py run on.

Each host is a namespace `h2hb<pid>h<i>` joined to this machine by a veth pair in a /24 of
10.<n>.<i>.0 (host side .1, namespace side .2); nothing is routed between the namespaces or
out of them. The machine's own PostgreSQL and Redis listen on 127.0.0.1 only, so the lab starts
its own: a cluster made with initdb in a temporary folder (run as the `postgres` user: initdb
refuses root), listening on 127.0.0.1 and on the host side of every veth, and a redis-server
listening on the same addresses. A host runs gunicorn (h2htalk.wsgi) and a Celery worker with
the settings a real host needs (`Lab.host_env`). Everything is undone on exit, on an error and on
Ctrl-C (`Lab.close`); namespaces that a killed run left behind are removed at the next start.

Needs root (namespaces, veth, running initdb as postgres), `ip` (iproute2), redis-server and
PostgreSQL's binaries under /usr/lib/postgresql/*/bin.
"""

import contextlib
import glob
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._common import REPO, free_port, log

PREFIX = "h2hb"  # namespace and veth names: h2hb<pid>h<i> (namespace), h2hb<pid>v<i> (veth)
HTTP_PORT = 8000
DATABASE = "h2htalk"


def missing_capability() -> str | None:
    """Why the lab cannot run here (None: it can)."""
    if os.geteuid() != 0:
        return "needs root (ip netns, veth pairs, initdb as the postgres user)"
    for tool in ("ip", "redis-server", "runuser"):
        if shutil.which(tool) is None:
            return f"needs {tool} on PATH"
    if not postgres_bin():
        return "needs PostgreSQL's binaries under /usr/lib/postgresql/*/bin"
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        return "needs a postgres user to run initdb as"
    return None


def postgres_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_version)
    return Path(found[-1]).parent if found else None


def _version(path: str) -> int:
    match = re.search(r"/postgresql/(\d+)/", path)
    return int(match.group(1)) if match else 0


def _run(*command: str, user: str | None = None, check: bool = True) -> str:
    if user:
        command = ("runuser", "-u", user, "--", *command)
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {done.stderr.strip() or done.stdout}")
    return done.stdout


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_leftovers() -> None:
    """Namespaces of earlier runs whose process is gone (a run killed with SIGKILL)."""
    for line in _run("ip", "netns", "list").splitlines():
        match = re.match(rf"{PREFIX}(\d+)h\d+\b", line)
        if match and not _alive(int(match.group(1))):
            _delete_namespace(match.group(0))


def _delete_namespace(name: str) -> None:
    pids = _run("ip", "netns", "pids", name, check=False).split()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
    _run("ip", "netns", "del", name, check=False)  # takes its end of the veth pair with it


def _free_subnet() -> int:
    """n of a 10.n.0.0/16 this machine neither has an address in nor routes."""
    used = _run("ip", "-4", "-o", "addr") + _run("ip", "-4", "route")
    for n in [200 + os.getpid() % 50, *range(200, 250)]:
        if not re.search(rf"\b10\.{n}\.", used):
            return n
    raise RuntimeError("no free 10.n.0.0/16 for the lab's veth pairs")


class Host:
    """One app host: its namespace, addresses and the processes it runs."""

    def __init__(self, index: int, namespace: str, veth: str, outer: str, inner: str):
        self.index, self.namespace, self.veth = index, namespace, veth
        self.outer, self.inner = outer, inner  # host-side and namespace-side addresses
        self.gunicorn: subprocess.Popen | None = None
        self.worker: subprocess.Popen | None = None

    @property
    def name(self) -> str:
        return "AB"[self.index] if self.index < 2 else str(self.index)

    @property
    def url(self) -> tuple[str, int]:
        return self.inner, HTTP_PORT

    def processes(self) -> list[subprocess.Popen]:
        return [p for p in (self.gunicorn, self.worker) if p is not None]


class Lab:
    """The namespaces, the database cluster and the broker (a context manager)."""

    def __init__(self, hosts: int = 2, gunicorn_workers: int = 3, secret_key: str = ""):
        self.n_hosts, self.gunicorn_workers = hosts, gunicorn_workers
        self.secret_key = secret_key or "two-hosts-bench-" + os.urandom(16).hex()
        self.hosts: list[Host] = []
        self.folder: Path | None = None
        self.redis: subprocess.Popen | None = None
        self.pg_data: Path | None = None
        self.pg_port = self.redis_port = 0
        self.redis_password = os.urandom(12).hex()  # protected mode stays on for other clients

    # ------------------------------------------------------------ up and down

    def __enter__(self) -> "Lab":
        problem = missing_capability()
        if problem:
            raise RuntimeError(f"the two-host lab {problem}")
        previous = signal.getsignal(signal.SIGTERM)
        self._previous_sigterm = previous
        signal.signal(signal.SIGTERM, _exit_on_sigterm)  # finally blocks run on SIGTERM too
        try:
            remove_leftovers()
            self.folder = Path(tempfile.mkdtemp(prefix="h2htalk-two-hosts-"))
            os.chmod(self.folder, 0o755)  # noqa: S103 - the postgres user reaches pgdata
            (self.folder / "media").mkdir()
            (self.folder / "staticfiles").mkdir()
            self._network()
            self._postgres()
            self._redis()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop every process, delete the namespaces and the folder; never raises."""
        for host in self.hosts:
            for process in host.processes():
                _kill_group(process)
        for host in self.hosts:
            _delete_namespace(host.namespace)
        if self.redis is not None:
            _kill_group(self.redis)
        if self.pg_data is not None and (self.pg_data / "postmaster.pid").exists():
            bin_dir = postgres_bin()
            _run(
                str(bin_dir / "pg_ctl"), "-D", str(self.pg_data), "-m", "immediate", "stop",
                user="postgres", check=False,
            )  # fmt: skip
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
        self.hosts, self.redis, self.pg_data, self.folder = [], None, None, None
        if hasattr(self, "_previous_sigterm"):
            signal.signal(signal.SIGTERM, self._previous_sigterm)

    def _network(self) -> None:
        n = _free_subnet()
        for i in range(self.n_hosts):
            namespace, veth = f"{PREFIX}{os.getpid()}h{i}", f"{PREFIX}{os.getpid()}v{i}"
            host = Host(i, namespace, veth, f"10.{n}.{i + 1}.1", f"10.{n}.{i + 1}.2")
            self.hosts.append(host)  # before it exists: close() deletes it on a failure below
            _run("ip", "netns", "add", namespace)
            _run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", namespace)  # fmt: skip
            _run("ip", "addr", "add", f"{host.outer}/24", "dev", veth)
            _run("ip", "link", "set", veth, "up")
            inside = ("ip", "netns", "exec", namespace)
            _run(*inside, "ip", "addr", "add", f"{host.inner}/24", "dev", "eth0")
            _run(*inside, "ip", "link", "set", "eth0", "up")
            _run(*inside, "ip", "link", "set", "lo", "up")
        log("namespaces " + ", ".join(f"{h.namespace} ({h.inner} ↔ {h.outer})" for h in self.hosts))

    def _postgres(self) -> None:
        bin_dir = postgres_bin()
        self.pg_data = self.folder / "pgdata"
        self.pg_data.mkdir()
        user = pwd.getpwnam("postgres")
        os.chown(self.pg_data, user.pw_uid, user.pw_gid)
        _run(
            str(bin_dir / "initdb"), "-D", str(self.pg_data), "-U", "postgres",
            "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8", user="postgres",
        )  # fmt: skip
        self.pg_port = free_port()
        addresses = ",".join(["127.0.0.1", *(h.outer for h in self.hosts)])
        with open(self.pg_data / "postgresql.conf", "a", encoding="utf-8") as conf:
            conf.write(
                f"\nlisten_addresses = '{addresses}'\nport = {self.pg_port}\n"
                f"unix_socket_directories = '{self.pg_data}'\nmax_connections = 200\n"
                "shared_buffers = 256MB\n"
            )
        with open(self.pg_data / "pg_hba.conf", "a", encoding="utf-8") as hba:
            for host in self.hosts:  # only the lab's own namespaces (and loopback, above)
                hba.write(f"host all all {host.inner}/32 trust\n")
        _run(
            str(bin_dir / "pg_ctl"), "-D", str(self.pg_data), "-l",
            str(self.pg_data / "server.log"), "-w", "-t", "60", "start", user="postgres",
        )  # fmt: skip
        _run(
            str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(self.pg_port),
            "-U", "postgres", DATABASE,
        )  # fmt: skip
        log(f"PostgreSQL {bin_dir.parent.name} on {addresses} port {self.pg_port}")

    def _redis(self) -> None:
        self.redis_port = free_port()
        addresses = ["127.0.0.1", *(h.outer for h in self.hosts)]
        self.redis = subprocess.Popen(
            [
                "redis-server",
                "--bind",
                *addresses,
                "--port",
                str(self.redis_port),
                "--requirepass",
                self.redis_password,
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.folder),
            ],
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
        _wait_port("127.0.0.1", self.redis_port, 20, self.redis)
        log(f"redis-server on {', '.join(addresses)} port {self.redis_port}")

    # ------------------------------------------------------------ settings

    def database_url(self, host: Host | None = None) -> str:
        """The database as a host reaches it (host None: from this machine, on loopback)."""
        address = host.outer if host else "127.0.0.1"
        return f"postgres://postgres@{address}:{self.pg_port}/{DATABASE}"

    def broker_url(self, host: Host | None = None) -> str:
        address = host.outer if host else "127.0.0.1"
        return f"redis://:{self.redis_password}@{address}:{self.redis_port}/0"

    def host_env(self, host: Host | None = None) -> dict:
        """The settings every host needs, the same everywhere but for the addresses: one
        SECRET_KEY (sessions, signed links), the one database and broker (cache, sessions,
        throttle, job progress live there too), the shared media folder (uploads a worker on
        another host reads), and the names the hosts answer to."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "BENCH_"))}
        for name in ("DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL", "ALLOWED_HOSTS"):
            env.pop(name, None)
        env.update(
            DJANGO_SETTINGS_MODULE="h2htalk.settings",
            DATABASE_URL=self.database_url(host),
            CELERY_BROKER_URL=self.broker_url(host),
            SECRET_KEY=self.secret_key,
            ALLOWED_HOSTS=",".join(["h2htalk.bench", *(h.inner for h in self.hosts)]),
            DB_CONN_MAX_AGE="60",
            MEDIA_ROOT=str(self.folder / "media"),
            STATIC_ROOT=str(self.folder / "staticfiles"),
            LOG_LEVEL="WARNING",
        )
        return env

    # ------------------------------------------------------------ hosts

    def start_host(self, host: Host) -> None:
        """gunicorn (sync workers) and a Celery worker in the host's namespace; returns once
        gunicorn answers on the host's address."""
        inside = ["ip", "netns", "exec", host.namespace]
        env = self.host_env(host)
        logs = self.folder / f"host-{host.name}"
        logs.mkdir(exist_ok=True)
        gunicorn = [sys.executable, "-m", "gunicorn", "h2htalk.wsgi"]
        gunicorn += ["-b", f"{host.inner}:{HTTP_PORT}", "-w", str(self.gunicorn_workers)]
        gunicorn += ["--preload", "--log-level", "warning", "--graceful-timeout", "5"]
        worker = [sys.executable, "-m", "celery", "-A", "h2htalk", "worker", "-l", "warning"]
        worker += ["--concurrency", "1", "-n", f"host-{host.name}@%h"]
        host.gunicorn = subprocess.Popen(
            inside + gunicorn,
            cwd=REPO,
            env=env,
            stdout=open(logs / "gunicorn.log", "ab"),  # noqa: SIM115 - the child keeps it
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        host.worker = subprocess.Popen(
            inside + worker,
            cwd=REPO,
            env=env,
            stdout=open(logs / "worker.log", "ab"),  # noqa: SIM115 - the child keeps it
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        _wait_port(host.inner, HTTP_PORT, 60, host.gunicorn)
        _warm_up(host, 4 * self.gunicorn_workers)

    def kill_host(self, host: Host) -> None:
        """SIGKILL its gunicorn (master and workers) and its Celery worker, as a crash would."""
        for process in host.processes():
            _kill_group(process)
        host.gunicorn = host.worker = None

    def gunicorn_workers_of(self, host: Host) -> list[int]:
        return children(host.gunicorn.pid) if host.gunicorn is not None else []

    def log_tail(self, host: Host, lines: int = 20) -> str:
        text = ""
        for name in ("gunicorn.log", "worker.log"):
            path = self.folder / f"host-{host.name}" / name
            if path.exists():
                text += f"--- {name}\n" + "\n".join(path.read_text().splitlines()[-lines:])
        return text


def children(parent: int) -> list[int]:
    """Direct children of a process, from /proc."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
                    pids.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    return pids


def _kill_group(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(10)


def _wait_port(address: str, port: int, seconds: float, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the process for {address}:{port} exited ({process.returncode})")
        try:
            with socket.create_connection((address, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"nothing answers on {address}:{port} after {seconds:.0f} s")


def _warm_up(host: Host, requests: int) -> None:
    """A few requests through the URLconf and the API's authentication, as a load balancer's
    health check would make before sending people to a new host (a worker's first request
    imports the views)."""
    import http.client

    for _ in range(requests):
        connection = http.client.HTTPConnection(host.inner, HTTP_PORT, timeout=30)
        try:
            connection.request("POST", "/api/rate/campaigns/0/next/", body=b"{}")
            connection.getresponse().read()
        finally:
            connection.close()


def _exit_on_sigterm(signum, frame):
    raise SystemExit(128 + signum)
