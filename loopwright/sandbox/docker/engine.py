"""The Docker engine client, the labels and user every sandbox carries, and removal."""

from __future__ import annotations

import time
from functools import cache
from importlib.resources import files

import docker
import docker.errors
import requests.exceptions

from loopwright.sandbox.base import SANDBOX_UID, SandboxError

POOL_LABEL = "loopwright.pool"
PROVIDER_LABEL = "loopwright.provider"
VOLUME_LABEL = "loopwright.volume"
OWNER_LABEL = "loopwright.owner"
NETWORK_NAME = "loopwright-sandbox"
HOME = "/home/sandbox"
USER = f"{SANDBOX_UID}:{SANDBOX_UID}"
SANDBOX_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": HOME,
    "LANG": "C.UTF-8",
    "CI": "true",
}
SERVICE_TOKEN_VAR = "LOOPWRIGHT_SERVICE_ID"  # noqa: S105 - a name, not a secret
# The wrapper travels in the environment (and is unset before the command runs) so that `ps`
# inside the sandbox shows the command, not a page of bash.
WRAPPER_VAR = "LOOPWRIGHT_WRAPPER"
LIMITS_VAR = "LOOPWRIGHT_LIMITS"
"""Where a wrapper started by a `docker exec` leaves the limit counts it starts from (it
unsets the variable before the command runs)."""
BUILD_HINT = "build it with `loopwright sandbox build`"


@cache
def script(name: str) -> str:
    """The text of `scripts/<name>`, the shell or Python that runs inside the container."""
    return files("loopwright.sandbox.docker").joinpath("scripts", name).read_text(encoding="utf-8")


ENGINE_FAILURES = (requests.exceptions.ConnectionError, requests.exceptions.Timeout)
"""What docker-py raises when the engine cannot be reached or does not answer in time."""


def engine_error(exc: BaseException) -> SandboxError:
    if isinstance(exc, requests.exceptions.Timeout) and not isinstance(
        exc, requests.exceptions.ConnectionError
    ):
        return SandboxError(
            f"the Docker engine did not answer in time ({exc}); it is overloaded or stuck: "
            "check `docker info` and the engine's log"
        )
    return SandboxError(
        f"the Docker engine is unreachable ({exc}); start it (`dockerd &` or "
        "`systemctl start docker`) and check DOCKER_HOST"
    )


def connect(client: docker.DockerClient | None = None) -> docker.DockerClient:
    """A client for the local engine with the API version negotiated, or `SandboxError`."""
    if client is not None:
        return client
    try:
        return docker.from_env(version="auto")
    except docker.errors.DockerException as exc:
        raise engine_error(exc) from exc


def remove_container(client: docker.DockerClient, container_id: str, volume: str | None) -> None:
    """Remove a sandbox container (and its workspace volume); one already gone is fine."""
    try:
        client.api.remove_container(container_id, force=True, v=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        if exc.status_code != 409:  # 409: removal already in progress
            raise SandboxError(
                f"could not remove sandbox container {container_id[:12]}: {exc}"
            ) from exc
    except ENGINE_FAILURES as exc:
        raise engine_error(exc) from exc
    if volume:
        remove_volume(client, volume)


def remove_volume(client: docker.DockerClient, name: str) -> None:
    """Remove a workspace volume, waiting for the container holding it to go."""
    for attempt in range(20):
        try:
            client.api.remove_volume(name, force=True)
            return
        except docker.errors.NotFound:
            return
        except docker.errors.APIError as exc:
            # 409: the container holding it is still being torn down.
            if exc.status_code != 409 or attempt == 19:
                raise SandboxError(f"could not remove sandbox volume {name}: {exc}") from exc
            time.sleep(0.05)
        except ENGINE_FAILURES as exc:
            raise engine_error(exc) from exc
