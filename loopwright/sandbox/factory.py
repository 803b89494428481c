"""The one way to get a sandbox provider: a discriminated config and `get_provider`.

The CLI, the App and the Action all call `get_provider`, so they start the same backend
the same way: a Docker provider always removes, at start, the sandboxes that Loopwright
processes which have exited left behind (another live process's sandboxes stay).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from loopwright.config import Settings, warm_pool_size
from loopwright.sandbox.base import SandboxProvider
from loopwright.sandbox.claims import ClaimLedger


class DockerSandboxConfig(BaseModel):
    """A hardened container per mission (the default)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["docker"] = "docker"
    """Selects the Docker backend."""
    image: str
    """The sandbox image every container runs (`loopwright sandbox build` makes it)."""
    warm_pool: int = Field(default=0, ge=0)
    """Idle containers kept started, so a mission's sandbox is ready at once (`sandbox_config`
    resolves it: 2 for a server or worker, 0 for one-shot runs, LOOPWRIGHT_WARM_POOL wins)."""
    reap_abandoned: bool = True
    """Remove, at start, the sandboxes of Loopwright processes on this host that have exited."""


class LocalSandboxConfig(BaseModel):
    """A throwaway copy on the host: no isolation, for trusted repositories and tests."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["local"] = "local"
    """Selects the local backend."""
    base_dir: Path | None = None
    """Where the sandbox directories are made; the system's temporary directory when unset."""
    extra_env: dict[str, str] = Field(default_factory=dict)
    """Toolchain variables added to the allow-listed environment of local commands."""


SandboxConfig = Annotated[DockerSandboxConfig | LocalSandboxConfig, Field(discriminator="type")]
"""Which backend runs the sandboxes, and how; `type` picks the model."""


def sandbox_config(
    settings: Settings,
    *,
    server: bool = False,
    base_dir: Path | None = None,
    extra_env: dict[str, str] | None = None,
) -> DockerSandboxConfig | LocalSandboxConfig:
    """The sandbox config `settings` describe for a server (`serve`, `worker`, the App) or a
    one-shot run (`fix`, `build`, the Action); `base_dir` and `extra_env` apply to `local`."""
    if settings.sandbox == "local":
        return LocalSandboxConfig(base_dir=base_dir, extra_env=extra_env or {})
    return DockerSandboxConfig(
        image=settings.sandbox_image, warm_pool=warm_pool_size(settings, server=server)
    )


def get_provider(
    settings: Settings,
    config: DockerSandboxConfig | LocalSandboxConfig | None = None,
    *,
    ledger: ClaimLedger | None = None,
) -> SandboxProvider:
    """The provider for `config` (by default the one `settings` describe for a one-shot run).

    Limits and the network mode come from `settings`; `ledger` records warm-pool claims
    (the App passes its store). Raises `SandboxError` when Docker is not usable.
    """
    if config is None:
        config = sandbox_config(settings)
    if isinstance(config, LocalSandboxConfig):
        from loopwright.sandbox.local import LocalProvider

        return LocalProvider(
            settings.sandbox_limits,
            base_dir=config.base_dir,
            extra_env=config.extra_env or None,
        )
    from loopwright.sandbox.docker.provider import DockerProvider

    provider = DockerProvider(
        settings.with_overrides(sandbox_image=config.image, warm_pool=config.warm_pool),
        ledger=ledger,
    )
    if config.reap_abandoned:
        try:
            provider.reap_abandoned()
        except BaseException:
            # The provider has started its warm-pool filler: close it rather than leak it.
            provider.close()
            raise
    return provider
