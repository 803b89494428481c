"""`loopwright serve` and `loopwright worker` on a real Redis queue, each the real CLI in its
own process: the server only enqueues (it has no Docker), workers run the missions, and a
worker killed with SIGKILL mid-mission costs one retry on another worker (no container
left, no second pull request) or, lost twice, an `interrupted` mission whose check run
and tracking comment say so."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import VENV_BIN, step, tool
from tests.integration.app_harness import REPO, ServeProcess, World, app_world, post_webhook
from tests.integration.test_app_restart import _containers_of, _labelled_containers, _wait_for
from tests.scenarios import CORRECT, PLAN

HEARTBEAT_S = "3"
HANG = step(tool("finish", summary="slow"), delay_s=300)
"""A model call that outlasts the test: the worker making it is killed while it waits."""


class WorkerProcess:
    """`loopwright worker` in its own process group, so SIGKILL takes all of it at once."""

    def __init__(self, world: World, log: Path, **env: str) -> None:
        # A worker receives no webhooks, so it runs without the webhook secret.
        self.env = {k: v for k, v in world.env.items() if k != "LOOPWRIGHT_WEBHOOK_SECRET"}
        self.env.update(env, HOME=os.environ.get("HOME", "/tmp"))
        if os.environ.get("PYTHONPATH"):
            self.env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        self.log = log
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                [f"{VENV_BIN}/loopwright", "worker", "--concurrency", "1"],
                env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip

    @property
    def pid(self) -> int:
        return self.proc.pid

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode


def _queue_env(queue_url: str, **more: str) -> dict[str, str]:
    return {"LOOPWRIGHT_QUEUE_URL": queue_url, "LOOPWRIGHT_QUEUE_HEARTBEAT_S": HEARTBEAT_S, **more}


def _backend_env(request: pytest.FixtureRequest, backend: str) -> dict[str, str]:
    """The queue on Redis beside the SQLite store, or on PostgreSQL in the store's own
    database (a deployment with no Redis at all)."""
    if backend == "redis":
        return _queue_env(request.getfixturevalue("redis_service").url)
    database = request.getfixturevalue("postgres_url")
    return _queue_env(database, LOOPWRIGHT_DATABASE_URL=database)


def _server_without_docker(world: World, log: Path, workers: int = 1) -> ServeProcess:
    """The server, with Docker configured but unreachable: it must never need it."""
    env = {**world.env, "LOOPWRIGHT_SANDBOX": "docker", "DOCKER_HOST": "unix:///nonexistent.sock"}
    return ServeProcess(env, log, workers=workers).start()


def _deliver(server: ServeProcess, world: World) -> str:
    body = json.dumps(world.check_run_payload()).encode()
    with httpx.Client(timeout=10) as client:
        answer = post_webhook(client, server.url, "check_run", body)
    assert answer.status_code == 202, answer.text
    return str(answer.json()["mission"])


def _fix_pulls(world: World) -> list[dict[str, Any]]:
    return [p for p in world.github.pulls(REPO) if p["head"]["ref"].startswith("loopwright/")]


def _logs(*paths: Path) -> str:
    return "\n".join(p.read_text()[-4000:] for p in paths if p.exists())


@pytest.mark.parametrize(
    ("backend", "serve_workers"),
    [("redis", 1), ("postgres", 1), ("redis", 2)],
    ids=["redis", "postgres", "redis-serve-workers-2"],
)
def test_serve_only_enqueues_and_a_worker_runs_the_mission(
    tmp_path, request, backend, serve_workers
):
    """`serve --workers 2` too: its processes enqueue, none polls the store for work."""
    env = _backend_env(request, backend)
    with app_world(tmp_path, CORRECT, serve=False, env=env) as world:
        server = _server_without_docker(world, tmp_path / "serve.log", serve_workers)
        worker: WorkerProcess | None = None
        try:
            mission_id = _deliver(server, world)
            time.sleep(3)
            waiting = server.mission(mission_id)
            # Nothing runs it in the server: it waits for a worker.
            assert (waiting["status"], waiting["attempts"]) == ("queued", 0), waiting
            assert world.model.requests == []
            worker = WorkerProcess(world, tmp_path / "worker.log")
            done = server.wait(mission_id, timeout=240)
            assert done["status"] == "verified", _logs(tmp_path / "worker.log")
            assert done["attempts"] == 1
            assert done["runner"].split(":")[1] == str(worker.pid)
            assert len(_fix_pulls(world)) == 1
            assert worker.stop() == 0
        finally:
            if worker is not None:
                worker.kill()
            server.stop()
        world.github.assert_no_rejections()


@pytest.mark.docker
@pytest.mark.slow
def test_a_worker_killed_mid_mission_leaves_no_container_and_is_retried(
    tmp_path, redis_service, docker_ready
):
    """The first worker dies in the model loop, its sandbox running; the second reaps
    that sandbox and runs the mission from the start to a verified fix."""
    env = _queue_env(redis_service.url, LOOPWRIGHT_SANDBOX="docker", LOOPWRIGHT_WARM_POOL="0")
    logs = [tmp_path / "serve.log", tmp_path / "worker-1.log", tmp_path / "worker-2.log"]
    with app_world(tmp_path, [HANG, *CORRECT], serve=False, env=env) as world:
        server = _server_without_docker(world, logs[0])
        first = WorkerProcess(world, logs[1])
        second: WorkerProcess | None = None
        try:
            mission_id = _deliver(server, world)
            _wait_for(lambda: len(world.model.requests) == 1, 240, "the model loop")
            assert _labelled_containers(mission_id), "the mission's sandbox is not running"
            first.kill()
            assert _containers_of(first.pid), "SIGKILL leaves the sandboxes behind"
            second = WorkerProcess(world, logs[2])
            done = server.wait(mission_id, timeout=300)
            assert done["status"] == "verified", _logs(*logs)
            assert done["attempts"] == 2
            assert done["runner"].split(":")[1] == str(second.pid)
            assert _containers_of(first.pid) == {}
            assert second.stop() == 0
        finally:
            first.kill()
            if second is not None:
                second.kill()
            server.stop()
        assert _labelled_containers(mission_id) == []
        assert len(_fix_pulls(world)) == 1
        (run,) = [r for r in world.github.check_runs(REPO) if r["external_id"] == mission_id]
        assert run["conclusion"] == "success"
        world.github.assert_no_rejections()


@pytest.mark.slow
def test_a_worker_killed_after_opening_the_pr_is_retried_without_a_second_pr(
    tmp_path, redis_service
):
    """The first worker dies after its pull request is open but before the mission is
    stored as finished; the second runs the mission from the start and updates that pull
    request, its check run and its tracking comment, continuing its event log."""
    env = _queue_env(redis_service.url)
    logs = [tmp_path / "serve.log", tmp_path / "worker-1.log", tmp_path / "worker-2.log"]
    with app_world(tmp_path, [*CORRECT, *CORRECT], serve=False, env=env) as world:
        server = _server_without_docker(world, logs[0])
        first = WorkerProcess(world, logs[1])
        second: WorkerProcess | None = None
        try:
            mission_id = _deliver(server, world)
            _wait_for(lambda: len(_fix_pulls(world)) == 1, 300, "the first pull request")
            first.kill()
            killed = server.mission(mission_id)
            assert (killed["status"], killed["attempts"]) == ("running", 1), (
                f"the worker finished before it was killed: {killed}"
            )
            second = WorkerProcess(world, logs[2])
            done = server.wait(mission_id, timeout=300)
            assert done["status"] == "verified", _logs(*logs)
            assert done["attempts"] == 2
            assert done["pr_url"] == killed["pr_url"] or killed["pr_url"] is None
            events = httpx.get(f"{server.url}/api/missions/{mission_id}/events", timeout=10)
            assert events.status_code == 200
            listed = events.json()
            seqs = [e["seq"] for e in listed]
            assert seqs == list(range(1, len(seqs) + 1))
            lost = [e for e in listed if e["type"] == "error" and e.get("kind") == "WorkerLost"]
            assert len(lost) == 1 and "start 2 of 2" in lost[0]["message"]
            # The first start may have reached its `done` before the kill; the second
            # start's log follows the loss and ends with its own.
            after = [e["type"] for e in listed[listed.index(lost[0]) :]]
            assert after.count("done") == 1 and after[-1] == "done"
        finally:
            first.kill()
            if second is not None:
                second.kill()
            server.stop()
        (pull,) = _fix_pulls(world)
        assert pull["state"] == "open"
        assert done["pr_url"] == pull["html_url"]
        assert len(world.model.requests) == 2 * len(CORRECT)
        (run,) = [r for r in world.github.check_runs(REPO) if r["external_id"] == mission_id]
        assert run["conclusion"] == "success"
        tracking = [
            c for c in world.github.comments(REPO, world.pr_number)
            if "loopwright:tracking" in c["body"]
        ]  # fmt: skip
        assert len(tracking) == 1
        world.github.assert_no_rejections()


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["redis", "postgres"])
def test_a_mission_lost_twice_ends_interrupted_and_says_so(tmp_path, request, backend):
    env = _backend_env(request, backend)
    logs = [tmp_path / f"worker-{n}.log" for n in (1, 2, 3)]
    with app_world(tmp_path, [HANG, HANG, *CORRECT], serve=False, env=env) as world:
        server = _server_without_docker(world, tmp_path / "serve.log")
        workers: list[WorkerProcess] = []
        try:
            mission_id = _deliver(server, world)
            for n in (1, 2):
                workers.append(WorkerProcess(world, logs[n - 1]))
                _wait_for(lambda n=n: len(world.model.requests) == n, 180, f"model call {n}")
                workers[-1].kill()
            workers.append(WorkerProcess(world, logs[2]))
            done = server.wait(mission_id, timeout=120)
            assert done["status"] == "interrupted", _logs(*logs)
            assert done["attempts"] == 2
            assert "lost, 2 times" in done["message"]
            _wait_for(
                lambda: any(
                    r["status"] == "completed"
                    for r in world.github.check_runs(REPO)
                    if r["external_id"] == mission_id
                ),
                30,
                "the check run to complete",
            )
            _wait_for(
                lambda: any(
                    "**Interrupted:** the worker running this mission was lost twice" in c["body"]
                    for c in world.github.comments(REPO, world.pr_number)
                ),
                30,
                "the tracking comment to tell",
            )
        finally:
            for worker in workers:
                worker.kill()
            server.stop()
        (run,) = [r for r in world.github.check_runs(REPO) if r["external_id"] == mission_id]
        assert run["conclusion"] == "neutral"
        assert _fix_pulls(world) == []
        # Only two starts ever reached the model: the third worker ran nothing.
        assert len(world.model.requests) == 2
        world.github.assert_no_rejections()


@pytest.mark.slow
def test_a_redis_restarted_empty_mid_run_loses_no_mission(tmp_path, redis_service):
    """One mission runs, one waits in Redis when it restarts with nothing in it, one
    arrives after: the server and the worker reconnect, and all three run once."""
    slow_first = [step(PLAN, delay_s=8), *CORRECT[1:]]
    env = _queue_env(redis_service.url)
    logs = [tmp_path / "serve.log", tmp_path / "worker.log"]
    with app_world(tmp_path, [*slow_first, *CORRECT, *CORRECT], serve=False, env=env) as world:
        server = _server_without_docker(world, logs[0])
        worker = WorkerProcess(world, logs[1])
        try:
            ids = [_deliver(server, world)]
            _wait_for(lambda: len(world.model.requests) == 1, 180, "the first mission's loop")
            ids.append(_comment(server, world, 777101))
            redis_service.restart(down_s=1.0)
            ids.append(_comment(server, world, 777102))
            done = [server.wait(mission_id, timeout=300) for mission_id in ids]
            assert [d["status"] for d in done] == ["verified"] * 3, _logs(*logs)
            assert [d["attempts"] for d in done] == [1, 1, 1]
            assert worker.stop() == 0
        finally:
            worker.kill()
            server.stop()
        assert len(world.model.requests) == 3 * len(CORRECT)
        assert len(_fix_pulls(world)) == 1
        world.github.assert_no_rejections()


def _comment(server: ServeProcess, world: World, comment_id: int) -> str:
    payload = world.comment_payload("/loopwright fix")
    payload["comment"]["id"] = comment_id
    with httpx.Client(timeout=10) as client:
        answer = post_webhook(client, server.url, "issue_comment", json.dumps(payload).encode())
    assert answer.status_code == 202, answer.text
    return str(answer.json()["mission"])


@pytest.mark.slow
def test_a_worker_stopped_mid_mission_runs_it_to_its_end_past_the_grace_period(
    tmp_path, redis_service
):
    """SIGTERM while a mission waits on a model call longer than the 30-second grace: the
    worker takes no new job, lets the mission finish (no retry, no second start) and exits
    0 once it has; the provider and the store are not closed under it."""
    slow = [step(PLAN, delay_s=45), *CORRECT[1:]]
    env = _queue_env(redis_service.url)
    logs = [tmp_path / "serve.log", tmp_path / "worker.log"]
    with app_world(tmp_path, slow, serve=False, env=env) as world:
        server = _server_without_docker(world, logs[0])
        worker = WorkerProcess(world, logs[1])
        try:
            mission_id = _deliver(server, world)
            _wait_for(lambda: len(world.model.requests) == 1, 180, "the first model call")
            worker.proc.send_signal(signal.SIGTERM)
            time.sleep(33)  # past the grace period, before the model answers
            assert worker.proc.poll() is None, _logs(*logs)
            assert server.mission(mission_id)["status"] == "running"
            assert worker.proc.wait(180) == 0, _logs(*logs)
            done = server.mission(mission_id)
            assert (done["status"], done["attempts"]) == ("verified", 1), _logs(*logs)
            assert "missions still running after the grace period" in logs[1].read_text()
        finally:
            worker.kill()
            server.stop()
        assert len(world.model.requests) == len(CORRECT)
        assert len(_fix_pulls(world)) == 1
