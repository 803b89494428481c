"""Real Redis and PostgreSQL servers for the tests, started on loopback by the tests.

`scripts/test.sh` installs Debian's `redis-server` and `postgresql`; each test that needs one
gets its own Redis (a fresh process on a free port, which the test may stop and start again
on the same port) or its own database in a PostgreSQL cluster that this pytest process
initialised in a temporary directory. With CI=true a missing binary fails the test instead of
skipping it.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

PG_BIN_ROOT = Path("/usr/lib/postgresql")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _missing(what: str, install: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"CI=true but {what} is not installed; scripts/test.sh installs {install}")
    pytest.skip(f"{what} is not installed (apt-get install {install}, or run scripts/test.sh)")


def _wait_port(port: int, timeout: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server on port {port} exited with {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


@dataclass
class RedisServer:
    """One `redis-server` on 127.0.0.1 with no persistence; `restart()` keeps the port."""

    port: int = field(default_factory=free_port)
    _proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            _missing("redis-server", "redis-server")
        assert binary is not None
        self._proc = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--protected-mode",
                "yes",
                "--daemonize",
                "no",
                "--loglevel",
                "warning",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _wait_port(self.port, 10, self._proc)

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(10)
        self._proc = None

    def restart(self, down_s: float = 0.0) -> None:
        self.stop()
        time.sleep(down_s)
        self.start()


@contextlib.contextmanager
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _pg_bin() -> Path | None:
    for version in sorted(PG_BIN_ROOT.glob("*/bin"), reverse=True):
        if (version / "initdb").exists():
            return version
    return None


@dataclass
class PostgresCluster:
    """A PostgreSQL cluster in a temporary directory, listening on 127.0.0.1 only.

    As root (CI), the cluster runs as Debian's `postgres` system user, because PostgreSQL
    refuses to run as root. Connections are trusted from loopback only.
    """

    root: Path
    port: int
    bin: Path
    user: str | None
    _proc: subprocess.Popen[bytes] | None = None

    def _as_owner(self, argv: list[str]) -> list[str]:
        return ["runuser", "-u", self.user, "--", *argv] if self.user else argv

    def start(self) -> None:
        data = self.root / "data"
        subprocess.run(
            self._as_owner(
                [
                    str(self.bin / "initdb"),
                    "-D",
                    str(data),
                    "-U",
                    "postgres",
                    "-A",
                    "trust",
                    "-E",
                    "UTF8",
                    "--no-sync",
                ]
            ),
            check=True,
            capture_output=True,
        )
        self._proc = subprocess.Popen(
            self._as_owner(
                [
                    str(self.bin / "postgres"),
                    "-D",
                    str(data),
                    "-p",
                    str(self.port),
                    "-c",
                    "listen_addresses=127.0.0.1",
                    "-c",
                    f"unix_socket_directories={self.root}",
                    "-c",
                    "fsync=off",
                    "-c",
                    "synchronous_commit=off",
                    "-c",
                    "full_page_writes=off",
                    "-c",
                    "max_connections=300",
                ]
            ),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _wait_port(self.port, 30, self._proc)
        # Accepting TCP is not yet accepting logins: wait for a real query.
        deadline = time.monotonic() + 30
        while True:
            try:
                self.sql("SELECT 1")
                return
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def sql(self, statement: str, database: str = "postgres") -> str:
        done = subprocess.run(
            [
                str(self.bin / "psql"),
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-U",
                "postgres",
                "-d",
                database,
                "-v",
                "ON_ERROR_STOP=1",
                "-At",
                "-c",
                statement,
            ],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise RuntimeError(f"psql {statement!r}: {done.stderr.strip()}")
        return done.stdout

    def new_database(self) -> str:
        """A fresh empty database; returns its SQLAlchemy URL (psycopg 3 driver)."""
        name = f"lw_{uuid.uuid4().hex[:12]}"
        self.sql(f'CREATE DATABASE "{name}"')
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()  # smart shutdown; then fast
            try:
                self._proc.wait(15)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(10)
        self._proc = None


@contextlib.contextmanager
def postgres_cluster() -> Iterator[PostgresCluster]:
    bin_dir = _pg_bin()
    if bin_dir is None:
        _missing("PostgreSQL", "postgresql")
    assert bin_dir is not None
    user: str | None = None
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            pytest.fail(
                "running as root needs Debian's `postgres` user (apt-get install postgresql)"
            )
        user = "postgres"
    root = Path(tempfile.mkdtemp(prefix="loopwright-pg-"))
    if user:
        shutil.chown(root, user=user)
    cluster = PostgresCluster(root=root, port=free_port(), bin=bin_dir, user=user)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
