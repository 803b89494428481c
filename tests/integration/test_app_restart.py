"""`loopwright serve` killed with SIGKILL and started again on the same data directory.

SECURITY 5 (a stored mission survives a kill right after the answer) and 28 (a mission
killed mid-run leaves no container, ends `interrupted` with its check run completed, and
no duplicate pull request appears). The server is the real CLI in its own process.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
import uuid

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from loopwright.sandbox.claims import CLAIM_FILE
from tests.conftest import step, tool
from tests.integration.app_harness import REPO, ServeProcess, World, app_world, post_webhook
from tests.scenarios import CORRECT

SLOW_FIRST = [step(tool("finish", summary="slow"), delay_s=120), *CORRECT]
"""The first mission's first model call hangs, holding the only worker."""


def _wait_for(condition, timeout: float = 90, what: str = "condition") -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _deliver(server: ServeProcess, event: str, payload: dict[str, object]) -> httpx.Response:
    with httpx.Client(timeout=10) as client:
        return post_webhook(client, server.url, event, json.dumps(payload).encode())


def _comment(world: World) -> dict[str, object]:
    payload = world.comment_payload("/loopwright fix")
    payload["comment"]["id"] = 777001
    return payload


@pytest.mark.slow
def test_queued_mission_survives_sigkill_right_after_the_answer(tmp_path):
    with app_world(
        tmp_path, SLOW_FIRST, serve=False, env={"LOOPWRIGHT_MAX_CONCURRENT_MISSIONS": "1"}
    ) as world:
        server = ServeProcess(world.env, tmp_path / "serve.log").start()
        try:
            # Mission A takes the only worker and hangs in its first model call.
            busy = _deliver(server, "check_run", world.check_run_payload())
            assert busy.status_code == 202, busy.text
            _wait_for(lambda: len(world.model.requests) == 1, what="the first model call")
            # Mission B is answered, stored as queued, and the server dies at once.
            answer = _deliver(server, "issue_comment", _comment(world))
            server.kill()
        finally:
            server.kill()
        assert answer.status_code == 202, answer.text
        queued = answer.json()["mission"]
        assert world.db("SELECT status FROM missions WHERE id = ?", queued) == [("queued",)]

        again = ServeProcess(world.env, tmp_path / "serve.log").start()
        try:
            mission = again.wait(queued)
            interrupted = again.mission(busy.json()["mission"])
        finally:
            again.stop()
        assert mission["status"] == "verified", mission
        assert interrupted["status"] == "interrupted", interrupted
        pulls = [p for p in world.github.pulls(REPO) if p["head"]["ref"].startswith("loopwright/")]
        assert len(pulls) == 1
        runs = {r["external_id"]: r for r in world.github.check_runs(REPO)}
        assert runs[queued]["conclusion"] == "success"
        assert runs[interrupted["id"]]["status"] == "completed"
        assert runs[interrupted["id"]]["conclusion"] == "neutral"
        # The interrupted mission's tracking comment says so, instead of staying in progress.
        (tracked,) = [
            c
            for c in world.github.comments(REPO, world.pr_number)
            if c["id"] == interrupted["tracking_comment_id"]
        ]
        assert "**Interrupted:** the server restarted" in tracked["body"]
        world.github.assert_no_rejections()


def _labelled_containers(mission_id: str) -> list[str]:
    """This mission's cold-started sandboxes (other Loopwright processes may share the engine)."""
    out = subprocess.run(
        ["docker", "ps", "-a", "-q", "--filter", f"label=loopwright.mission={mission_id}"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return out.split()


def _containers_of(pid: int) -> dict[str, dict[str, str]]:
    """Every container labelled `loopwright.mission` that the process `pid` made (its pool
    members included), with its labels."""
    ids = subprocess.run(
        ["docker", "ps", "-a", "-q", "--no-trunc", "--filter", "label=loopwright.mission"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    if not ids:
        return {}
    inspected = json.loads(
        subprocess.run(["docker", "inspect", *ids], capture_output=True, text=True).stdout or "[]"
    )
    owner = f"{socket.gethostname()}:{pid}:"
    return {
        c["Id"]: c["Config"]["Labels"]
        for c in inspected
        if c["Config"]["Labels"].get("loopwright.owner", "").startswith(owner)
    }


def _docker_exec(
    container_id: str, *argv: str, user: str = "0"
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", "exec", "-u", user, container_id, *argv], capture_output=True, text=True
    )


def _pool_idle(server: ServeProcess) -> float:
    text = httpx.get(f"{server.url}/metrics", timeout=5).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "loopwright_sandbox_pool_idle":
                return sample.value
    return -1


@pytest.mark.docker
def test_a_running_server_reaps_the_idle_pool_member_a_gone_worker_elsewhere_left(
    tmp_path, docker_ready
):
    """A worker on another host that stopped for good (scaled down, not replaced) is seen
    by no start-up and loses no mission: the server's own rounds (here every second) remove
    its idle pool member once the member's claim writer marked it abandoned, and keep one
    whose owner still holds it (no marker). (Another test's process on the engine may reap
    the marked one first; run alone, only the server's rounds can.)"""
    env = {"LOOPWRIGHT_SANDBOX": "docker", "LOOPWRIGHT_WARM_POOL": "0",
           "LOOPWRIGHT_SANDBOX_REAP_EVERY_S": "1"}  # fmt: skip
    gone_host = f"lw-gone-{uuid.uuid4().hex[:8]}"
    assert gone_host != socket.gethostname()
    planted: dict[str, str] = {}
    with app_world(tmp_path, CORRECT, serve=False, env=env) as world:
        server = ServeProcess(world.env, tmp_path / "serve.log").start()
        try:
            # After the server's start-up reap: only its rounds can find these.
            for name in ("abandoned", "held"):
                planted[name] = subprocess.run(
                    ["docker", "run", "-d", "--init", "--user", "10001:10001",
                     "--label", f"loopwright.mission=pool-{gone_host}",
                     "--label", "loopwright.pool=1",
                     "--label", f"loopwright.owner={gone_host}:7:1",
                     world.settings.sandbox_image, "sleep", "infinity"],
                    capture_output=True, text=True, check=True,
                ).stdout.strip()  # fmt: skip
                made = _docker_exec(planted[name], "sh", "-c", "mkdir -m 0755 /tmp/.loopwright")
                assert made.returncode == 0, made.stderr
            marked = _docker_exec(
                planted["abandoned"], "sh", "-c", "printf abandoned > /tmp/.loopwright/abandoned"
            )
            assert marked.returncode == 0, marked.stderr
            _wait_for(
                lambda: not _exists(planted["abandoned"]), 30, "the abandoned member to be reaped"
            )
            time.sleep(2)  # two more rounds
            assert _exists(planted["held"])
        finally:
            server.stop()
            for container in planted.values():
                subprocess.run(["docker", "rm", "-f", "-v", container], capture_output=True)


def _exists(container_id: str) -> bool:
    return subprocess.run(["docker", "inspect", container_id], capture_output=True).returncode == 0


@pytest.mark.docker
@pytest.mark.parametrize("pool", ["default", "0"], ids=["warm-pool", "cold-start"])
def test_sigkill_mid_mission_leaves_no_container_and_no_duplicate_pr(tmp_path, docker_ready, pool):
    """With the warm pool on (the server's default) the mission's sandbox is a pool member,
    labelled with the pool: the claim in the container and in the store name the mission."""
    env = {"LOOPWRIGHT_SANDBOX": "docker"}
    if pool != "default":
        env["LOOPWRIGHT_WARM_POOL"] = pool
    with app_world(tmp_path, SLOW_FIRST, serve=False, env=env) as world:
        server = ServeProcess(world.env, tmp_path / "serve.log").start()
        try:
            assert server.proc is not None
            killed_pid = server.proc.pid
            if pool == "default":
                _wait_for(lambda: _pool_idle(server) == 2, 60, "the warm pool to fill")
            answer = _deliver(server, "check_run", world.check_run_payload())
            assert answer.status_code == 202, answer.text
            mission_id = answer.json()["mission"]
            _wait_for(lambda: len(world.model.requests) == 1, 180, "the model loop")
            if pool == "default":
                claims = world.db(
                    "SELECT container_id, owner FROM sandbox_claims WHERE mission_id = ?",
                    mission_id,
                )
                # The loop's sandbox, and the verification sandbox started during the loop
                # once it has been claimed too.
                assert 1 <= len(claims) <= 2, claims
                labelled = _containers_of(killed_pid)
                for serving, owner in claims:
                    labels = labelled[serving]
                    assert labels["loopwright.pool"] == "1"
                    assert labels["loopwright.mission"].startswith("pool-")
                    assert owner == labels["loopwright.owner"]
                    claim = json.loads(_docker_exec(serving, "cat", CLAIM_FILE).stdout)
                    assert (claim["container"], claim["mission"]) == (serving, mission_id)
                    assert claim["owner"] == owner
                    forged = _docker_exec(
                        serving, "sh", "-c", f"echo forged > {CLAIM_FILE}", user="10001"
                    )
                    assert forged.returncode != 0 and "Permission denied" in forged.stderr
                    assert json.loads(_docker_exec(serving, "cat", CLAIM_FILE).stdout) == claim
                assert _labelled_containers(mission_id) == []
            else:
                assert _labelled_containers(mission_id), "the mission's sandbox is not running"
                assert world.db("SELECT * FROM sandbox_claims") == []
        finally:
            server.kill()
        left = _containers_of(killed_pid)
        assert left, "SIGKILL leaves the containers behind"
        if pool == "default":
            # The claimed one and the idle members refilled next to it.
            assert {serving for serving, _ in claims} <= set(left)
            assert sum(1 for labels in left.values() if labels.get("loopwright.pool")) >= 2

        again = ServeProcess(world.env, tmp_path / "serve.log").start()
        try:
            mission = again.mission(mission_id)
            _wait_for(
                lambda: any(
                    r["status"] == "completed"
                    for r in world.github.check_runs(REPO)
                    if r["external_id"] == mission_id
                ),
                30,
                "the interrupted check run to complete",
            )
            # Gone at the restarted server's start, pool members included.
            assert _containers_of(killed_pid) == {}
        finally:
            again.stop()
        assert mission["status"] == "interrupted", mission
        assert _labelled_containers(mission_id) == []
        if pool == "default":
            # The ledger keeps the record of which container served the mission.
            kept = world.db(
                "SELECT container_id FROM sandbox_claims WHERE mission_id = ?", mission_id
            )
            assert {(serving,) for serving, _ in claims} <= set(kept) and len(kept) <= 2
        (run,) = [r for r in world.github.check_runs(REPO) if r["external_id"] == mission_id]
        assert run["conclusion"] == "neutral"
        assert [
            p for p in world.github.pulls(REPO) if p["head"]["ref"].startswith("loopwright/")
        ] == []
        world.github.assert_no_rejections()
