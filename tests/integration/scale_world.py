"""Several `loopwright serve` and `loopwright worker` processes over one PostgreSQL store and
one Redis queue, against the loopback fakes of `app_harness` (git server, fake GitHub, a
scripted model that gives every conversation the whole script).

`ScaleWorld.red_pulls(n)` opens `n` pull requests, each on its own branch with its own head
commit, and `check_run(pull)` is the signed webhook GitHub sends when that commit's check
fails. Every process is the real CLI started with the environment an operator would give.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from loopwright.config import Settings
from loopwright.store.repository import Store, open_store
from tests.conftest import VENV_BIN
from tests.integration.app_harness import (
    FINAL,
    REPO,
    ServeProcess,
    World,
    _pythonpath,
    app_world,
    post_webhook,
)
from tests.scenarios import CORRECT


@dataclass(frozen=True)
class RedPull:
    number: int
    branch: str
    head_sha: str


class WorkerProcess:
    """`loopwright worker` as a separate process (no webhook secret: it receives none)."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.env = {k: v for k, v in env.items() if k != "LOOPWRIGHT_WEBHOOK_SECRET"}
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> WorkerProcess:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [f"{VENV_BIN}/loopwright", "worker", "--poll", "0.5"],
                env={**self.env, "HOME": os.environ.get("HOME", "/tmp"), **_pythonpath()},
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL to the worker and everything it started, as when its machine dies."""
        if self.alive():
            assert self.proc is not None
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)

    def stop(self, timeout: float = 90) -> int | None:
        if not self.alive():
            return None if self.proc is None else self.proc.returncode
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None


@dataclass
class ScaleWorld:
    world: World
    env: dict[str, str]
    store: Store
    servers: list[ServeProcess] = field(default_factory=list)
    workers: list[WorkerProcess] = field(default_factory=list)

    @property
    def tmp(self) -> Path:
        return self.world.tmp

    def start_server(self) -> ServeProcess:
        n = len(self.servers)
        server = ServeProcess(self.env, self.tmp / f"serve-{n}.log").start()
        self.servers.append(server)
        return server

    def start_worker(self) -> WorkerProcess:
        n = len(self.workers)
        worker = WorkerProcess(self.env, self.tmp / f"worker-{n}.log").start()
        self.workers.append(worker)
        return worker

    def red_pulls(self, count: int) -> list[RedPull]:
        """`count` pull requests, each with its own branch and head commit off `feature`."""
        pulls = []
        for n in range(count):
            branch = f"feature-{n}"
            sha = self.world.push_commit(
                branch, {f"notes/{n}.md": f"change {n}\n"}, parent=self.world.head_sha
            )
            number = self.world.github.add_pull(
                REPO, head_ref=branch, head_sha=sha, base_ref="main", title=f"Change {n}",
                body="", user="maintainer",
            )  # fmt: skip
            pulls.append(RedPull(number, branch, sha))
        return pulls

    def check_run(self, pull: RedPull) -> bytes:
        """The body of a failed `check_run` webhook on `pull`'s head commit."""
        payload: dict[str, Any] = self.world.check_run_payload()
        text = json.dumps(payload).replace(self.world.head_sha, pull.head_sha)
        payload = json.loads(text)
        run = payload["check_run"]
        run["id"] = int(uuid.uuid4().int % 10**9)
        for pr in [*run["pull_requests"], *run["check_suite"]["pull_requests"]]:
            pr["number"] = pull.number
            pr["url"] = f"https://api.github.com/repos/{REPO}/pulls/{pull.number}"
            pr["head"]["ref"] = pull.branch
            pr["head"]["sha"] = pull.head_sha
        run["check_suite"]["head_branch"] = pull.branch
        return json.dumps(payload).encode()

    def deliver(self, server: ServeProcess, body: bytes, *, delivery: str | None = None,
                client: httpx.Client | None = None) -> httpx.Response:  # fmt: skip
        with contextlib.ExitStack() as stack:
            http = client or stack.enter_context(httpx.Client(timeout=30))
            return post_webhook(http, server.url, "check_run", body, delivery=delivery)

    def missions(self) -> list[Any]:
        return self.store.list_missions(limit=1000)

    def wait_all_final(self, ids: set[str], timeout: float) -> dict[str, str]:
        """Waits until every mission in `ids` has a final status; returns id → status."""
        deadline = time.monotonic() + timeout
        statuses: dict[str, str] = {}
        while time.monotonic() < deadline:
            statuses = {}
            for mission_id in ids:
                mission = self.store.get_mission(mission_id)
                statuses[mission_id] = mission.status if mission else "missing"
            if all(s in FINAL for s in statuses.values()):
                return statuses
            time.sleep(0.5)
        raise AssertionError(f"missions not finished after {timeout} s: {statuses}\n{self.logs()}")

    def fix_pulls(self) -> list[dict[str, Any]]:
        """The pull requests Loopwright opened (their head branch is one of its own)."""
        return [
            p for p in self.world.github.pulls(REPO) if p["head"]["ref"].startswith("loopwright/")
        ]

    def logs(self, tail: int = 2500) -> str:
        parts = []
        for log in sorted(self.tmp.glob("*.log")):
            parts.append(f"--- {log.name}\n{log.read_text(errors='replace')[-tail:]}")
        return "\n".join(parts)


@contextlib.contextmanager
def scale_world(tmp: Path, *, redis_url: str, database_url: str,
                env: dict[str, str] | None = None) -> Iterator[ScaleWorld]:  # fmt: skip
    """The fakes, and the environment of servers and workers sharing `database_url` (the
    store) and `redis_url` (the queue and the live events); no process is started yet."""
    extra = {
        "LOOPWRIGHT_DATABASE_URL": database_url,
        "LOOPWRIGHT_QUEUE_URL": redis_url,
        **(env or {}),
    }
    with app_world(tmp, CORRECT, env=extra, serve=False, per_conversation=True) as world:
        store = open_store(Settings.from_env(world.env))
        scale = ScaleWorld(world, dict(world.env), store)
        try:
            yield scale
        finally:
            for proc in [*scale.workers, *scale.servers]:
                proc.kill()
            store.close()
