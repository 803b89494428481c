"""The Docker sandbox provider: starts hardened containers, keeps the warm pool, reaps."""

from __future__ import annotations

import datetime
import tarfile
import tempfile
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import docker
import docker.errors
import docker.types

from loopwright.config import Settings, warm_pool_size
from loopwright.sandbox.base import MISSION_LABEL, SANDBOX_UID, WORKSPACE, SandboxError
from loopwright.sandbox.claims import ClaimLedger, SandboxClaim
from loopwright.sandbox.docker import reaper
from loopwright.sandbox.docker.channel import boot_resident
from loopwright.sandbox.docker.claim_file import ClaimWriter
from loopwright.sandbox.docker.container import DockerSandbox
from loopwright.sandbox.docker.engine import (
    BUILD_HINT,
    ENGINE_FAILURES,
    HOME,
    OWNER_LABEL,
    POOL_LABEL,
    PROVIDER_LABEL,
    SANDBOX_ENV,
    USER,
    VOLUME_LABEL,
    connect,
    engine_error,
    remove_container,
    remove_volume,
)
from loopwright.sandbox.docker.network import sandbox_network
from loopwright.sandbox.docker.pool import Member, WarmPool
from loopwright.sandbox.docker.scripts.resident import BOOT

RESIDENT_COMMAND = 'command -v python3 >/dev/null && exec python3 -I -c "$0"; exec sleep infinity'


class DockerProvider:
    """Creates Docker sandboxes, keeps an optional warm pool, and reaps orphaned containers.

    Warm-pool containers carry `loopwright.pool=1` and a `loopwright.mission` value naming
    the pool; labels cannot change after creation, so when a mission claims one the claim
    is written into the container as a root-owned file and into `ledger` (when given), and
    every reaper reads it from there. `settings.warm_pool` unset means no pool (the one-shot
    default; servers resolve theirs with `warm_pool_size`).
    """

    kind = "docker"

    def __init__(
        self,
        settings: Settings,
        *,
        client: docker.DockerClient | None = None,
        ledger: ClaimLedger | None = None,
    ) -> None:
        self._settings = settings
        self._client = connect(client)
        self._owns_client = client is None
        self._instance = uuid.uuid4().hex[:12]
        self._lock = threading.Lock()
        self._claimed: dict[str, str] = {}
        """Container id to the mission it serves (a pool container's labels name the pool)."""
        self._ledger = ledger
        self._claims = 0
        self._writers: dict[str, ClaimWriter] = {}
        """Idle pool containers' claim writers, by container id."""
        self._closed = False
        size = warm_pool_size(settings, server=False)
        self._pool = WarmPool(size, self._start_pool_member, self._remove)
        self._pool.refill_later()

    @property
    def client(self) -> docker.DockerClient:
        return self._client

    # -- creating -------------------------------------------------------------------------

    def create(self, mission_id: str, tree: Path, *, network: bool) -> DockerSandbox:
        """A started sandbox whose /workspace holds a copy of `tree`, from the pool if possible."""
        if not tree.is_dir():
            raise SandboxError(f"{tree} is not a directory; nothing to copy into the sandbox")
        with self._lock:
            if self._closed:
                raise SandboxError("the Docker sandbox provider is closed")
            pooled = self._pool.take()
        if pooled is not None:
            container_id, volume, pool_network = pooled
            sandbox = DockerSandbox(
                self._client, self._settings, container_id, volume, mission_id,
                network=pool_network,
            )  # fmt: skip
            with self._lock:
                self._claimed[container_id] = mission_id
            try:
                # The claim is written while the workspace is copied (two engine calls that
                # do not wait on each other), and is in place before any command can run.
                recording = _in_background(lambda: self._record_claim(container_id, mission_id))
                try:
                    self._fill(sandbox, tree)
                finally:
                    failed = recording()  # a failed copy's own exception wins
                if failed is not None:
                    raise failed
                sandbox.set_network(network)
            except SandboxError:
                # A pool container that died while idle, or whose claim could not be
                # written: fall back to a cold start, then replace the lost member.
                self._discard(sandbox)
                try:
                    return self._cold(mission_id, tree, network=network)
                finally:
                    self._pool.refill_later()
            except BaseException:
                self._discard(sandbox)
                raise
            else:
                # Refill only now: a container starting alongside slows the copy above.
                self._pool.refill_later()
                return sandbox
        return self._cold(mission_id, tree, network=network)

    def _cold(self, mission_id: str, tree: Path, *, network: bool) -> DockerSandbox:
        container_id, volume = self._start_container({MISSION_LABEL: mission_id}, network=network)
        sandbox = DockerSandbox(
            self._client, self._settings, container_id, volume, mission_id, network=network
        )
        with self._lock:
            self._claimed[container_id] = mission_id
        try:
            self._fill(sandbox, tree)
        except BaseException:
            self._discard(sandbox)
            raise
        return sandbox

    def _discard(self, sandbox: DockerSandbox) -> None:
        with self._lock:
            self._claimed.pop(sandbox.container_id, None)
        sandbox.close()

    def _fill(self, sandbox: DockerSandbox, tree: Path) -> None:
        archive: IO[bytes] | None = None
        try:
            if not sandbox.copy_tree(tree):
                archive = workspace_tar(tree)
                sandbox.put_archive(WORKSPACE, archive)
        except SandboxError as exc:
            if "no space left" in str(exc).lower():
                raise SandboxError(
                    f"{tree} does not fit in the sandbox workspace "
                    f"({self._settings.sandbox_limits.tmpfs_mb} MB); raise "
                    "LOOPWRIGHT_SANDBOX_TMPFS_MB"
                ) from exc
            raise
        finally:
            if archive is not None:
                archive.close()

    def _start_container(self, labels: dict[str, str], *, network: bool) -> tuple[str, str]:
        """Create and start one hardened container with its own workspace volume."""
        limits = self._settings.sandbox_limits
        suffix = uuid.uuid4().hex[:12]
        volume = f"loopwright-ws-{suffix}"
        labels = {
            **labels,
            PROVIDER_LABEL: self._instance,
            VOLUME_LABEL: volume,
            OWNER_LABEL: reaper.owner_id(),
        }
        api = self._client.api
        # The workspace is a tmpfs *volume*, not a plain tmpfs mount: Docker's archive
        # endpoints (used to copy the repository in and files out) only reach volumes, and a
        # volume outlives a container restart, the last resort against an unkillable command.
        # The engine makes it with the container, from the mount's options: a volume made
        # first would sit unused until then, and a reaper's round (`reap_volumes`) could
        # remove it in between, after which the engine would quietly make a plain one on
        # the host's disk, with no size limit.
        workspace = docker.types.Mount(
            WORKSPACE,
            volume,
            type="volume",
            labels=labels,
            driver_config=docker.types.DriverConfig(
                "local",
                {
                    "type": "tmpfs",
                    "device": "tmpfs",
                    "o": f"size={limits.tmpfs_mb}m,uid={SANDBOX_UID},gid={SANDBOX_UID},mode=0755",
                },
            ),
        )
        # By id: a name the engine holds twice would make the container's start fail.
        network_mode = str(sandbox_network(self._client).id) if network else "none"
        host_config = api.create_host_config(
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            read_only=True,
            privileged=False,
            init=True,
            pids_limit=limits.pids,
            mem_limit=f"{limits.memory_mb}m",
            memswap_limit=f"{limits.memory_mb}m",
            nano_cpus=int(limits.cpus * 1e9),
            tmpfs={
                "/tmp": f"rw,exec,nosuid,nodev,size={limits.tmpfs_mb}m",
                HOME: (
                    f"rw,exec,nosuid,nodev,size={limits.tmpfs_mb}m,"
                    f"uid={SANDBOX_UID},gid={SANDBOX_UID},mode=0700"
                ),
            },
            mounts=[workspace],
            network_mode=network_mode,
            # The resident server's stdout is the exec channel, not a log worth keeping.
            log_config=docker.types.LogConfig(type=docker.types.LogConfig.types.NONE),
        )
        try:
            created = self._engine(
                lambda: api.create_container(
                    self._settings.sandbox_image,
                    # The resident exec server, or the plain keeper where python3 is missing.
                    command=["/bin/sh", "-c", RESIDENT_COMMAND, BOOT],
                    user=USER,
                    working_dir=WORKSPACE,
                    environment=SANDBOX_ENV,
                    # Open stdin that stays open between attaches (docker-py ties "once" to
                    # attached creation).
                    stdin_open=True,
                    detach=True,
                    hostname="sandbox",
                    labels=labels,
                    host_config=host_config,
                )
            )
        except BaseException:
            remove_volume(self._client, volume)
            raise
        container_id = str(created["Id"])
        try:
            self._engine(lambda: api.start(container_id))
            # Its program starts loading now, while the container waits to be used.
            boot_resident(self._client, container_id)
        except BaseException:
            remove_container(self._client, container_id, volume)
            raise
        return container_id, volume

    def _engine(self, call: Any) -> Any:
        try:
            return call()
        except docker.errors.ImageNotFound as exc:
            raise SandboxError(
                f"the sandbox image {self._settings.sandbox_image} is missing; {BUILD_HINT}"
            ) from exc
        except docker.errors.APIError as exc:
            if exc.status_code == 404 and "image" in str(exc).lower():
                raise SandboxError(
                    f"the sandbox image {self._settings.sandbox_image} is missing; {BUILD_HINT}"
                ) from exc
            raise SandboxError(f"Docker could not start a sandbox: {exc}") from exc
        except ENGINE_FAILURES as exc:
            raise engine_error(exc) from exc

    # -- warm pool ------------------------------------------------------------------------

    @property
    def pool_size(self) -> int:
        """Idle containers ready to be claimed."""
        return len(self._pool)

    @property
    def pool_claims(self) -> int:
        """Pool containers this provider has handed to missions."""
        with self._lock:
            return self._claims

    def record_claims_in(self, ledger: ClaimLedger) -> None:
        """Record every later pool claim in `ledger` too (the App passes its store)."""
        with self._lock:
            self._ledger = ledger

    def _record_claim(self, container_id: str, mission_id: str) -> None:
        """Write which mission now holds a pool container where any process can read it:
        into the container (root-owned; the sandbox user can neither change nor remove it)
        and into the ledger."""
        claim = SandboxClaim(
            container_id, mission_id, reaper.owner_id(), datetime.datetime.now(datetime.UTC)
        )
        with self._lock:
            writer = self._writers.pop(container_id, None)
        if writer is None:
            raise SandboxError(f"pool sandbox {container_id[:12]} has no claim writer")
        writer.write(claim)
        with self._lock:
            ledger = self._ledger
            self._claims += 1
        if ledger is not None:
            ledger.record_claim(claim)

    def fill_pool(self) -> None:
        """Start pool containers until `settings.warm_pool` are idle (blocking)."""
        self._pool.fill()

    def _start_pool_member(self) -> Member:
        network = self._settings.network != "none"
        labels = {MISSION_LABEL: f"pool-{self._instance}", POOL_LABEL: "1"}
        container_id, volume = self._start_container(labels, network=network)
        try:
            # Root makes the claim's directory now, before anything can run in the container,
            # and waits to write the claim of the mission that takes it.
            writer = ClaimWriter.start(self._client, container_id)
        except BaseException:
            remove_container(self._client, container_id, volume)
            raise
        with self._lock:
            self._writers[container_id] = writer
        return container_id, volume, network

    def _remove(self, container_id: str, volume: str) -> None:
        with self._lock:
            writer = self._writers.pop(container_id, None)
        if writer is not None:
            writer.close()
        remove_container(self._client, container_id, volume)

    # -- cleanup --------------------------------------------------------------------------

    def reap_orphans(self, active_mission_ids: set[str]) -> list[str]:
        """Remove labelled containers (and volumes) of missions not active; return their ids.

        Containers owned by another Loopwright process that is still running are left to it.
        """
        with self._lock:
            claimed = dict(self._claimed)
        removed = reaper.reap_orphans(
            self._client,
            active_mission_ids,
            instance=self._instance,
            idle=self._pool.idle_ids(),
            claimed=claimed,
            ledger=self._ledger,
        )
        with self._lock:
            for cid in removed:
                self._claimed.pop(cid, None)
        return removed

    def reap_abandoned(self) -> list[str]:
        """Remove sandboxes whose owning process has gone (`reaper.reap_abandoned`: on this
        host by the process table, elsewhere by the store when claims are recorded in it).

        Safe while other Loopwright processes run missions on the same engine: only
        containers of dead owners go. Returns the removed container ids.
        """
        return reaper.reap_abandoned(self._client, self._ledger)

    def close(self) -> None:
        """Remove idle pool containers, stop refilling; claimed sandboxes stay with their owners."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._pool.close()
        if self._owns_client:
            self._client.close()


def _in_background(call: Callable[[], None]) -> Callable[[], BaseException | None]:
    """Start `call` on a thread; the function returned waits for it and returns what it
    raised (None when it returned)."""
    failed: list[BaseException] = []

    def target() -> None:
        try:
            call()
        except BaseException as exc:  # noqa: BLE001 - raised again by the waiting thread
            failed.append(exc)

    thread = threading.Thread(target=target, name="sandbox-claim", daemon=True)
    thread.start()

    def wait() -> BaseException | None:
        thread.join()
        return failed[0] if failed else None

    return wait


def workspace_tar(tree: Path) -> IO[bytes]:
    """The tree as a tar owned by the sandbox user; special files and set-id bits dropped."""

    def owned(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        if not (info.isreg() or info.isdir() or info.issym() or info.islnk()):
            return None
        info.uid = info.gid = SANDBOX_UID
        info.uname = info.gname = "sandbox"
        info.mode &= 0o1777
        return info

    spool = tempfile.SpooledTemporaryFile(max_size=64 * 1024 * 1024)  # noqa: SIM115 - returned
    with tarfile.open(fileobj=spool, mode="w") as tar:
        for child in sorted(tree.iterdir()):
            tar.add(child, arcname=child.name, filter=owned)
    spool.seek(0)
    return spool
