"""A Redis server of the test's own, on a free loopback port, that the test stops and starts
again (the fault tests of issue 25): never the machine's shared Redis.

`redis-server` must be installed (.ci/run installs it); without it the tests fail under CI and
skip elsewhere.
"""

import os
import shutil
import socket
import subprocess
import tempfile
import time
from contextlib import contextmanager

import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def require_redis_server() -> str:
    path = shutil.which("redis-server")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("redis-server is not installed (.ci/run installs it)")
        pytest.skip("needs redis-server (apt-get install redis-server)")
    return path


class RedisServer:
    """One redis-server process, no persistence: a restart starts it empty."""

    def __init__(self, port: int | None = None):
        self.binary = require_redis_server()
        self.port = port or free_port()
        self.folder = tempfile.mkdtemp(prefix="h2h-redis-")
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> "RedisServer":
        self.process = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self.folder,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server on port {self.port} exited at start")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(64).startswith(b"+PONG"):
                        return self
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"redis-server on port {self.port} did not answer within 20 s")

    def stop(self) -> None:
        """Kill it (SIGKILL: an outage, not a shutdown) and wait until the port is closed."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self.process = None

    def restart_empty(self) -> None:
        self.stop()
        self.start()


@contextmanager
def redis_server():
    server = RedisServer().start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.folder, ignore_errors=True)
