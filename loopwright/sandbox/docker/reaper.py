"""Removing sandboxes nobody will close: of missions no longer running, of processes gone.

Every container and workspace volume carries an owner label naming the Loopwright process
that made it (`host:pid:start`), so one process never removes what a live one still uses.
A warm-pool container's `loopwright.mission` label names the pool; the mission that claimed
it is read from the claim file inside it, else from the claim ledger.
"""

from __future__ import annotations

import os
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import docker
import docker.errors

from loopwright.sandbox.base import MISSION_LABEL, SandboxError
from loopwright.sandbox.claims import ClaimLedger, MissionRuns, SandboxClaim
from loopwright.sandbox.docker.claim_file import abandoned, read_claim
from loopwright.sandbox.docker.engine import (
    ENGINE_FAILURES,
    OWNER_LABEL,
    POOL_LABEL,
    PROVIDER_LABEL,
    VOLUME_LABEL,
    engine_error,
    remove_container,
)

STOPPED = frozenset({"exited", "dead"})
"""Container states (as the engine lists them) of a container that ran and stopped: not
`created`, which a pool member is between its creation and its start."""

STOPPED_GRACE_S = 60.0
"""How long a pool member of another host's process must have been stopped before it is
taken for dead: a `docker restart` (the last resort against a stuck command) stops it for
a moment, and empties its claim file with its /tmp, while its mission goes on."""


def reap_orphans(
    client: docker.DockerClient,
    active_mission_ids: set[str],
    *,
    instance: str,
    idle: set[str],
    claimed: dict[str, str],
    ledger: ClaimLedger | None = None,
) -> list[str]:
    """Remove labelled containers (and volumes) of missions not active; return their ids.

    `instance` names the provider asking: its idle pool members (`idle`) and the containers
    it has handed to missions (`claimed`, container id to mission id) are judged by what it
    knows. Another process's pool container is judged by the mission its claim names
    (`served_mission`); one never claimed serves none. Containers owned by another
    Loopwright process that is still running are left to it.
    """
    try:
        containers = client.api.containers(all=True, filters={"label": MISSION_LABEL})
    except ENGINE_FAILURES as exc:
        raise engine_error(exc) from exc
    removed = []
    for info in containers:
        cid = str(info["Id"])
        labels = info.get("Labels") or {}
        if cid in idle:
            continue
        if labels.get(PROVIDER_LABEL) == instance and cid not in claimed:
            continue  # a pool member still being started by this provider
        mission = claimed.get(cid) or served_mission(client, info, ledger)
        if mission is not None and mission in active_mission_ids:
            continue
        owner = labels.get(OWNER_LABEL, "")
        if owner and owner != owner_id() and owner_alive(owner):
            continue  # another live Loopwright process's sandbox, not ours to judge
        remove_container(client, cid, labels.get(VOLUME_LABEL))
        removed.append(cid)
    reap_volumes(client)
    return removed


def reap_abandoned(
    client: docker.DockerClient,
    ledger: ClaimLedger | None = None,
    *,
    stopped_for_s: float = STOPPED_GRACE_S,
) -> list[str]:
    """Remove sandboxes whose owning process has gone, and return their ids.

    On this host the process table says. A process on another host (a worker in another
    container on a shared engine) cannot be seen from here: where `ledger` is the store
    (`MissionRuns`) and knows the sandbox's mission, its sandbox goes once that process no
    longer runs the mission (it ended, or another worker took it over), so a worker whose
    container was replaced leaves nothing behind for good. Its idle pool members go once
    their claim writers saw its connection end (`abandoned`), or once they have been stopped
    for `stopped_for_s`, with or without a store.
    Safe while other Loopwright processes run missions on the same engine: live owners'
    sandboxes stay.
    """
    try:
        containers = client.api.containers(all=True, filters={"label": OWNER_LABEL})
    except ENGINE_FAILURES as exc:
        raise engine_error(exc) from exc
    removed = []
    for info in containers:
        labels = info.get("Labels") or {}
        owner = labels.get(OWNER_LABEL, "")
        if owner_alive(owner) and not _left_by_remote_owner(
            client, info, owner, ledger, stopped_for_s
        ):
            continue
        remove_container(client, str(info["Id"]), labels.get(VOLUME_LABEL))
        removed.append(str(info["Id"]))
    reap_volumes(client)
    return removed


def _left_by_remote_owner(
    client: docker.DockerClient,
    info: dict[str, Any],
    owner: str,
    ledger: ClaimLedger | None,
    stopped_for_s: float,
) -> bool:
    """Whether the process on another host that made this sandbox is known to be done with
    it: a pool member that serves no mission the store knows, once its claim writer saw
    that process's connection end (`abandoned`) or once it has been stopped for
    `stopped_for_s` (an engine restart stops every container, and one stopped that long runs
    nothing more: its owner, if alive, starts a sandbox of its own instead), or a sandbox
    whose mission the store says that process no longer runs.
    Unknown is never gone: an idle pool member still held or not yet started, a mission
    another store holds, or an active mission with no runner recorded."""
    if owner.partition(":")[0] == socket.gethostname():
        return False
    mission = served_mission(client, info, ledger)
    if mission is None:
        cid = str(info["Id"])
        if info.get("State") in STOPPED:  # as listed: the inspection below says if still so
            return _stopped_since(client, cid, stopped_for_s)
        return abandoned(client, cid)
    if not isinstance(ledger, MissionRuns):
        return False
    run = ledger.mission_run(mission)
    if run is None:
        return False
    return not run.active or (run.runner is not None and run.runner != owner)


def _stopped_since(client: docker.DockerClient, container_id: str, seconds: float) -> bool:
    """Whether the engine says, now, that the container is stopped and has been for at
    least `seconds` (a restart in progress has just stopped it)."""
    try:
        state = client.api.inspect_container(container_id).get("State") or {}
    except docker.errors.APIError:
        return False  # gone already, or not known: unknown is never gone
    except ENGINE_FAILURES as exc:
        raise engine_error(exc) from exc
    if state.get("Status") not in STOPPED:
        return False
    try:
        finished = datetime.fromisoformat(str(state.get("FinishedAt")))
    except ValueError:
        return False
    if finished.tzinfo is None:
        return False
    return (datetime.now(UTC) - finished).total_seconds() >= seconds


def served_mission(
    client: docker.DockerClient, info: dict[str, Any], ledger: ClaimLedger | None
) -> str | None:
    """The mission a listed container serves: its label, or for a pool container the claim
    (None while it waits unclaimed in a pool)."""
    labels: dict[str, str] = info.get("Labels") or {}
    if labels.get(POOL_LABEL) != "1":
        return str(labels.get(MISSION_LABEL, "")) or None
    claim = pool_claim(client, str(info["Id"]), ledger)
    return claim.mission_id if claim is not None else None


def pool_claim(
    client: docker.DockerClient, container_id: str, ledger: ClaimLedger | None
) -> SandboxClaim | None:
    """A pool container's claim: the file in it while it runs, else the ledger's record."""
    claim = read_claim(client, container_id)
    if claim is None and ledger is not None:
        claim = ledger.claim_of(container_id)
    return claim


def reap_volumes(client: docker.DockerClient) -> None:
    """Remove the mission volumes no container uses (those in use are refused and kept)."""
    try:
        volumes = client.api.volumes(filters={"label": MISSION_LABEL}).get("Volumes")
    except ENGINE_FAILURES as exc:
        raise engine_error(exc) from exc
    for vol in volumes or []:
        try:
            client.api.remove_volume(vol["Name"])
        except docker.errors.NotFound:
            continue
        except docker.errors.APIError as exc:
            if exc.status_code != 409:  # 409: in use by a live sandbox
                raise SandboxError(f"could not remove sandbox volume {vol['Name']}: {exc}") from exc
        except ENGINE_FAILURES as exc:
            raise engine_error(exc) from exc


def _process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def owner_id(pid: int | None = None) -> str:
    """`host:pid:start` naming this process; the start time guards against pid reuse."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{_process_start(pid) or '?'}"


def owner_alive(owner: str) -> bool:
    """Whether the process named by an owner label still runs (other hosts count as alive)."""
    host, _, rest = owner.partition(":")
    pid_text, _, start = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return True
    return _process_start(int(pid_text)) == start
