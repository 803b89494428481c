"""The claim file inside a pool container: written by root when a mission claims it, read
by any reaper (and operators: `docker exec CONTAINER cat /tmp/.loopwright/claim.json`)."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable
from typing import Any

import docker
import docker.errors

from loopwright.sandbox.base import SandboxError
from loopwright.sandbox.claims import (
    ABANDONED,
    ABANDONED_FILE,
    CLAIM_DIR,
    CLAIM_FILE,
    SandboxClaim,
)
from loopwright.sandbox.docker.engine import ENGINE_FAILURES, engine_error, script

ROOT = "0:0"
"""Root in the container, still without capabilities and with no-new-privileges."""


WRITER_TIMEOUT_S = 10.0
"""How long the claim writer may take to start or to write."""
_READY, _CLAIMED = b"ready", b"claimed"


class ClaimWriter:
    """A root shell started with a pool container, waiting for the claim of the mission that
    will take it: the claim then costs one line on an open connection instead of a
    `docker exec` on the warm acquire's path. It exits once the claim is written, so no root
    process is left when the mission's first command (and its sweep) runs."""

    def __init__(self, response: Any, container_id: str) -> None:
        self._response = response
        self._sock: socket.socket = getattr(response, "_sock", response)
        self._sock.settimeout(WRITER_TIMEOUT_S)
        self._container_id = container_id
        self._stdout = b""
        self._stderr = b""
        self._buffer = b""

    @classmethod
    def start(cls, client: docker.DockerClient, container_id: str) -> ClaimWriter:
        """Start the writer in a just-started container; `SandboxError` if it does not say
        it is ready (its directory existed already, or the container cannot run it)."""
        argv = ["/bin/bash", "-c", script("write_claim.sh"), "loopwright-claim", CLAIM_DIR]
        api = client.api
        try:
            exec_id = api.exec_create(
                container_id, argv, user=ROOT, stdin=True, stdout=True, stderr=True
            )["Id"]
            response = api.exec_start(exec_id, socket=True)
        except docker.errors.APIError as exc:
            raise SandboxError(f"sandbox {container_id[:12]} cannot run commands: {exc}") from exc
        except ENGINE_FAILURES as exc:
            raise engine_error(exc) from exc
        writer = cls(response, container_id)
        try:
            writer._read_until(lambda: writer._stdout.startswith(_READY))
            if writer._stdout != _READY:
                raise writer._failed("the claim writer did not start")
        except BaseException:
            writer.close()
            raise
        return writer

    def write(self, claim: SandboxClaim) -> None:
        """Hand over `claim` and wait until the writer has written it and exited."""
        if claim.container_id != self._container_id:
            raise ValueError("a claim goes to the writer of its own container")
        try:
            try:
                self._sock.sendall(claim.to_json().encode("utf-8") + b"\n")
            except OSError as exc:
                raise self._failed(f"the claim writer is gone ({exc})") from exc
            self._read_until(lambda: False)  # to its end: the shell has exited
            if self._stdout != _READY + _CLAIMED:
                raise self._failed("the claim writer did not write the claim")
        finally:
            self.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.close()
        with contextlib.suppress(Exception):
            self._response.close()

    def _read_until(self, done: Callable[[], bool]) -> None:
        """Read the exec's multiplexed stream (8-byte frame headers) until `done()` or EOF."""
        while not done():
            try:
                chunk = self._sock.recv(4096)
            except OSError as exc:  # a timeout included
                raise self._failed(f"the claim writer did not answer ({exc})") from exc
            if not chunk:
                return
            self._buffer += chunk
            while len(self._buffer) >= 8:
                kind, size = self._buffer[0], int.from_bytes(self._buffer[4:8], "big")
                if len(self._buffer) < 8 + size:
                    break
                if kind == 1:
                    self._stdout += self._buffer[8 : 8 + size]
                elif kind == 2:
                    self._stderr = (self._stderr + self._buffer[8 : 8 + size])[-2000:]
                self._buffer = self._buffer[8 + size :]

    def _failed(self, reason: str) -> SandboxError:
        said = (self._stdout + self._stderr).decode("utf-8", "replace").strip()
        return SandboxError(
            f"could not record the claim in sandbox {self._container_id[:12]}: {reason}"
            + (f" (it said {said!r})" if said else "")
        )


def read_claim(client: docker.DockerClient, container_id: str) -> SandboxClaim | None:
    """The claim written into a container, or None: none written, the container not running,
    or a file that is not a claim of this container."""
    try:
        output = _read_root_file(client, container_id, CLAIM_FILE)
    except SandboxError:
        return None
    claim = SandboxClaim.from_json(output)
    if claim is None or claim.container_id != container_id:
        return None
    return claim


def abandoned(client: docker.DockerClient, container_id: str) -> bool:
    """Whether an unclaimed pool container's claim writer saw its owner's connection end
    (`ABANDONED_FILE`): the process that started it is gone."""
    try:
        return _read_root_file(client, container_id, ABANDONED_FILE) == ABANDONED.encode()
    except SandboxError:
        return False


def _read_root_file(client: docker.DockerClient, container_id: str, path: str) -> bytes:
    """At most 4 KiB of a file root wrote in the claim directory, or nothing: a directory
    or file the sandbox user could have made (after a restart emptied /tmp) is not read,
    nor is a link or anything but a regular file (`read_claim_file.sh`)."""
    directory, _, name = path.rpartition("/")
    argv = ["/bin/bash", "-c", script("read_claim_file.sh"), "loopwright-claim", directory, name]
    return _exec(client, container_id, argv)


def _exec(client: docker.DockerClient, container_id: str, argv: list[str]) -> bytes:
    """Run `argv` as root in the container; its stdout and stderr together."""
    api = client.api
    try:
        exec_id = api.exec_create(container_id, argv, user=ROOT, stdout=True, stderr=True)["Id"]
        output = api.exec_start(exec_id)
    except docker.errors.APIError as exc:
        # 404: gone; 409: not running (a stopped container cannot exec).
        raise SandboxError(f"sandbox {container_id[:12]} cannot run commands: {exc}") from exc
    except ENGINE_FAILURES as exc:
        raise engine_error(exc) from exc
    return bytes(output or b"")
