"""The claim file inside a pool container: written by root when a mission claims it, read
by any reaper (and operators: `docker exec CONTAINER cat /tmp/.loopwright/claim.json`)."""

from __future__ import annotations

import docker
import docker.errors
import requests.exceptions

from loopwright.sandbox.base import SandboxError
from loopwright.sandbox.claims import CLAIM_DIR, CLAIM_FILE, SandboxClaim
from loopwright.sandbox.docker.engine import engine_error, script

ROOT = "0:0"
"""Root in the container, still without capabilities and with no-new-privileges."""


def write_claim(client: docker.DockerClient, claim: SandboxClaim) -> None:
    """Write `claim` into its container as root; `SandboxError` when that fails."""
    argv = ["/bin/bash", "-c", script("write_claim.sh"), "loopwright-claim", CLAIM_DIR]
    output = _exec(client, claim.container_id, [*argv, claim.to_json()])
    # The script's last word, instead of asking the engine for the exit code: one round trip
    # less on the warm acquire's path.
    if output != b"claimed":
        detail = output.decode("utf-8", "replace").strip()
        raise SandboxError(
            f"could not record the claim in sandbox {claim.container_id[:12]}: {detail}"
        )


def read_claim(client: docker.DockerClient, container_id: str) -> SandboxClaim | None:
    """The claim written into a container, or None: none written, the container not running,
    or a file that is not a claim of this container."""
    try:
        output = _exec(client, container_id, ["cat", "--", CLAIM_FILE])
    except SandboxError:
        return None
    claim = SandboxClaim.from_json(output)  # cat's complaint about a missing file is not one
    if claim is None or claim.container_id != container_id:
        return None
    return claim


def _exec(client: docker.DockerClient, container_id: str, argv: list[str]) -> bytes:
    """Run `argv` as root in the container; its stdout and stderr together."""
    api = client.api
    try:
        exec_id = api.exec_create(container_id, argv, user=ROOT, stdout=True, stderr=True)["Id"]
        output = api.exec_start(exec_id)
    except docker.errors.APIError as exc:
        # 404: gone; 409: not running (a stopped container cannot exec).
        raise SandboxError(f"sandbox {container_id[:12]} cannot run commands: {exc}") from exc
    except requests.exceptions.ConnectionError as exc:
        raise engine_error(exc) from exc
    return bytes(output or b"")
