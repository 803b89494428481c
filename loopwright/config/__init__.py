"""Settings for one Loopwright process, read once from the environment (and CLI flags).

Settings are built at the edge (`Settings.from_env`) and passed in; nothing reads
`os.environ` later. A missing or malformed value raises `ConfigError` whose message is one
line naming the variable to fix.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from loopwright.config.env import ConfigError, read_bool, read_choice, read_float, read_int
from loopwright.config.github import GitHubAppSettings
from loopwright.config.tiers import (
    DEFAULT_BASE_URL,
    DEFAULT_PRICES,
    DEFAULT_TIERS,
    LOCAL_TIER_EXAMPLE,
    TIERS_EXAMPLE,
    TOOL_FORMATS,
    Prices,
    Tier,
    ToolFormat,
    is_loopback,
    model_base_url,
    parse_attempts,
    parse_prices,
    parse_tiers,
    priced_names,
)

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_PRICES",
    "DEFAULT_TIERS",
    "LOCAL_TIER_EXAMPLE",
    "NETWORK_ORDER",
    "SERVER_WARM_POOL",
    "TIERS_EXAMPLE",
    "TOOL_FORMATS",
    "ConfigError",
    "GitHubAppSettings",
    "NetworkMode",
    "Prices",
    "SandboxKind",
    "SandboxLimits",
    "Settings",
    "Tier",
    "ToolFormat",
    "effective_network",
    "is_loopback",
    "warm_pool_size",
]

SandboxKind = Literal["docker", "local"]
NetworkMode = Literal["none", "setup", "always"]
NETWORK_ORDER: tuple[NetworkMode, ...] = ("none", "setup", "always")
"""Network modes from the narrowest to the widest."""
SERVER_WARM_POOL = 2
"""Idle sandboxes `serve`, `worker` and the App keep when LOOPWRIGHT_WARM_POOL is unset."""


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits applied to every sandbox container."""

    memory_mb: int = 2048
    pids: int = 512
    cpus: float = 1.0
    tmpfs_mb: int = 1024
    """Size of the writable /tmp and /workspace tmpfs mounts."""
    output_cap_bytes: int = 1_000_000
    """Bytes of command output kept per command (head and tail survive)."""


@dataclass(frozen=True)
class Settings:
    """Everything a mission needs to know about its environment."""

    model_base_url: str = DEFAULT_BASE_URL
    model_api_key: str | None = None
    tiers: tuple[Tier, ...] = tuple(Tier(n, m, *DEFAULT_PRICES[n]) for n, m in DEFAULT_TIERS)
    escalate_after: int = 3
    attempts: dict[str, int] = field(default_factory=dict)
    """Independent attempts per tier (tier name → K, default 1): a tier with K > 1 makes up
    to K short sampled attempts, keeping the first whose patch passes the tests in the
    loop's sandbox, before the mission moves on to the next tier."""
    attempt_steps: int = 10
    """Model steps one independent attempt may take."""
    attempt_temperature: float = 0.7
    """Sampling temperature of independent attempts (each has its own seed)."""
    plan_only_steps: int = 3
    """Consecutive steps that only update the plan before each further one counts as a
    failure for escalation (a model that plans without acting is stuck)."""
    max_steps: int = 40
    pair_expiry_s: float = 900.0
    """Pair mode: seconds a request for approval waits before it counts as rejected."""
    max_cost_usd: float | None = None
    max_prompt_tokens: int | None = None
    """Cap on prompt + completion tokens over the whole mission (None: no cap)."""
    command_timeout_s: float = 300.0
    wall_clock_s: float = 3600.0
    context_tokens: int = 64_000
    """Approximate context window the conversation is trimmed to fit."""
    model_timeout_s: float = 120.0
    stall_timeout_s: float = 60.0
    """A streaming response that sends nothing for this long is abandoned and retried."""
    model_retries: int = 4
    sandbox: SandboxKind = "docker"
    sandbox_image: str = "loopwright-sandbox:latest"
    sandbox_limits: SandboxLimits = field(default_factory=SandboxLimits)
    warm_pool: int | None = None
    """Idle Docker sandboxes kept started; None: the face's default (`warm_pool_size`)."""
    network: NetworkMode = "setup"
    data_dir: Path = field(default_factory=lambda: Path.home() / ".loopwright")
    database_url: str | None = None
    """SQLAlchemy URL of the missions store; None means SQLite at `data_dir/loopwright.db`."""
    max_concurrent_missions: int = 2
    """Missions run at once; the rest wait in the queue. With `queue_url` the cap holds
    across every worker on the queue (a semaphore in the store), not per process."""
    max_missions_per_installation: int | None = None
    """At most this many missions of one App installation run at once, so one busy
    organisation cannot take every slot; None: only `max_concurrent_missions` applies."""
    queue_url: str | None = None
    """Where missions queue between processes: `redis://…` (SAQ on Redis; live events fan
    out through Redis too) or `postgresql://…` (SAQ on PostgreSQL). None: the embedded
    in-process queue over the store."""
    queue_heartbeat_s: int = 30
    """With `queue_url`: a mission's job whose worker sent no heartbeat for this long is
    taken as lost (the worker died) and run again once by another worker."""
    sandbox_reap_every_s: int = 300
    """How often a process that runs missions (`serve`, `worker`) removes the sandboxes of
    gone processes on its engine, besides at its start and when a worker is lost; each wait
    is drawn within 10% of it, so processes started together spread their rounds. 0: never
    on a timer."""
    github: GitHubAppSettings = field(default_factory=lambda: GitHubAppSettings())
    dashboard_token: str | None = None
    """Bearer token required by the web views and API when set."""
    allow_dependency_changes: bool = False
    """Whether a patch that changes dependency or setup inputs (requirements, lock files,
    package.json dependencies, the files the setup command runs) can be verified; those
    inputs then run in the setup phase, with the setup network, before the rest of the patch."""

    def with_overrides(self, **changes: Any) -> Settings:
        """A copy with the given fields replaced (CLI flags win over the environment)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = dict(os.environ if environ is None else environ)
        get = env.get
        prices = parse_prices(get("LOOPWRIGHT_MODEL_PRICES"))
        base_url = model_base_url(get("LOOPWRIGHT_MODEL_BASE_URL") or DEFAULT_BASE_URL)
        tiers = parse_tiers(
            get("LOOPWRIGHT_MODEL_TIERS"),
            prices,
            priced=priced_names(get("LOOPWRIGHT_MODEL_PRICES")),
        )
        defaults = cls()
        limits = SandboxLimits(
            memory_mb=read_int(
                env, "LOOPWRIGHT_SANDBOX_MEMORY_MB", defaults.sandbox_limits.memory_mb
            ),
            pids=read_int(env, "LOOPWRIGHT_SANDBOX_PIDS", defaults.sandbox_limits.pids),
            cpus=read_float(env, "LOOPWRIGHT_SANDBOX_CPUS", defaults.sandbox_limits.cpus),
            tmpfs_mb=read_int(env, "LOOPWRIGHT_SANDBOX_TMPFS_MB", defaults.sandbox_limits.tmpfs_mb),
        )
        max_cost = get("LOOPWRIGHT_MAX_COST_USD")
        max_tokens = get("LOOPWRIGHT_MAX_TOKENS")
        return cls(
            model_base_url=base_url,
            model_api_key=get("LOOPWRIGHT_MODEL_API_KEY") or None,
            tiers=tiers,
            escalate_after=read_int(env, "LOOPWRIGHT_ESCALATE_AFTER", defaults.escalate_after),
            plan_only_steps=read_int(env, "LOOPWRIGHT_PLAN_ONLY_STEPS", defaults.plan_only_steps),
            attempts=parse_attempts(get("LOOPWRIGHT_ATTEMPTS"), tiers),
            attempt_steps=read_int(env, "LOOPWRIGHT_ATTEMPT_STEPS", defaults.attempt_steps),
            attempt_temperature=read_float(
                env, "LOOPWRIGHT_ATTEMPT_TEMPERATURE", defaults.attempt_temperature
            ),
            max_steps=read_int(env, "LOOPWRIGHT_MAX_STEPS", defaults.max_steps),
            pair_expiry_s=read_float(env, "LOOPWRIGHT_PAIR_EXPIRY_S", defaults.pair_expiry_s),
            max_cost_usd=None if not max_cost else read_float(env, "LOOPWRIGHT_MAX_COST_USD", 0),
            max_prompt_tokens=None if not max_tokens else read_int(env, "LOOPWRIGHT_MAX_TOKENS", 0),
            command_timeout_s=read_float(
                env, "LOOPWRIGHT_COMMAND_TIMEOUT_S", defaults.command_timeout_s
            ),
            wall_clock_s=read_float(env, "LOOPWRIGHT_WALL_CLOCK_S", defaults.wall_clock_s),
            context_tokens=read_int(env, "LOOPWRIGHT_CONTEXT_TOKENS", defaults.context_tokens),
            model_timeout_s=read_float(env, "LOOPWRIGHT_MODEL_TIMEOUT_S", defaults.model_timeout_s),
            stall_timeout_s=read_float(env, "LOOPWRIGHT_STALL_TIMEOUT_S", defaults.stall_timeout_s),
            model_retries=read_int(env, "LOOPWRIGHT_MODEL_RETRIES", defaults.model_retries, low=0),
            sandbox=read_choice(env, "LOOPWRIGHT_SANDBOX", ("docker", "local"), defaults.sandbox),  # type: ignore[arg-type]
            sandbox_image=get("LOOPWRIGHT_SANDBOX_IMAGE") or defaults.sandbox_image,
            sandbox_limits=limits,
            warm_pool=_read_warm_pool(env),
            network=read_choice(env, "LOOPWRIGHT_NETWORK", ("none", "setup", "always"), "setup"),  # type: ignore[arg-type]
            data_dir=Path(get("LOOPWRIGHT_DATA_DIR") or defaults.data_dir).expanduser(),
            database_url=get("LOOPWRIGHT_DATABASE_URL") or None,
            max_concurrent_missions=read_int(
                env, "LOOPWRIGHT_MAX_CONCURRENT_MISSIONS", defaults.max_concurrent_missions
            ),
            max_missions_per_installation=(
                read_int(env, "LOOPWRIGHT_MAX_MISSIONS_PER_INSTALLATION", 1)
                if (get("LOOPWRIGHT_MAX_MISSIONS_PER_INSTALLATION") or "").strip()
                else None
            ),
            queue_url=_read_queue_url(get("LOOPWRIGHT_QUEUE_URL")),
            queue_heartbeat_s=read_int(
                env, "LOOPWRIGHT_QUEUE_HEARTBEAT_S", defaults.queue_heartbeat_s, low=3
            ),
            sandbox_reap_every_s=read_int(
                env, "LOOPWRIGHT_SANDBOX_REAP_EVERY_S", defaults.sandbox_reap_every_s, low=0
            ),
            github=GitHubAppSettings.from_env(env),
            dashboard_token=get("LOOPWRIGHT_DASHBOARD_TOKEN") or None,
            allow_dependency_changes=read_bool(env, "LOOPWRIGHT_ALLOW_DEPENDENCY_CHANGES", False),
        )

    def tier(self, name: str) -> Tier:
        for t in self.tiers:
            if t.name == name:
                return t
        raise ConfigError(
            f"unknown tier {name!r}; LOOPWRIGHT_MODEL_TIERS defines {self.tier_names}"
        )

    @property
    def tier_names(self) -> list[str]:
        return [t.name for t in self.tiers]

    def endpoint(self, tier: Tier) -> str:
        """The base URL a tier's requests go to."""
        return tier.base_url or self.model_base_url

    @property
    def uses_shared_endpoint(self) -> bool:
        """Whether any tier talks to LOOPWRIGHT_MODEL_BASE_URL (and so may need its key)."""
        return any(t.base_url is None for t in self.tiers)

    def with_shared_endpoint(self, base_url: str, api_key: str | None) -> Settings:
        """Every tier pointed at one endpoint (a replay server, for instance)."""
        tiers = tuple(replace(t, base_url=None) for t in self.tiers)
        return replace(self, model_base_url=base_url, model_api_key=api_key, tiers=tiers)

    def secrets(self) -> list[str]:
        """Values that must never appear in a sandbox, log, event or pull request."""
        db_password = urlsplit(self.database_url).password if self.database_url else None
        queue_password = urlsplit(self.queue_url).password if self.queue_url else None
        values = (
            self.model_api_key,
            self.github.private_key,
            self.github.webhook_secret,
            self.github.client_secret,
            self.dashboard_token,
            db_password,
            queue_password,
        )
        return [s for s in values if s]


def effective_network(operator: NetworkMode, repo: NetworkMode | None) -> NetworkMode:
    """The sandbox network for a mission: the repository's `network` can only narrow the
    operator's `LOOPWRIGHT_NETWORK` (none < setup < always), never widen it."""
    if repo is None:
        return operator
    return min(operator, repo, key=NETWORK_ORDER.index)


def warm_pool_size(settings: Settings, *, server: bool) -> int:
    """How many idle Docker sandboxes to keep started.

    An explicit LOOPWRIGHT_WARM_POOL always wins (0 turns the pool off). Unset, a long-lived
    server or worker keeps `SERVER_WARM_POOL`, whose start cost is paid once and saved on
    every mission; a one-shot `fix`, `build` or Action run keeps none, since a pool member
    started for it would only be removed again at exit.
    """
    if settings.warm_pool is not None:
        return settings.warm_pool
    return SERVER_WARM_POOL if server else 0


QUEUE_SCHEMES = ("redis", "rediss", "postgresql", "postgres")


def _read_queue_url(value: str | None) -> str | None:
    """LOOPWRIGHT_QUEUE_URL: empty is the embedded queue; otherwise a Redis or PostgreSQL
    URL (a SQLAlchemy driver suffix such as `postgresql+psycopg://` is accepted)."""
    if not (value or "").strip():
        return None
    assert value is not None
    url = value.strip()
    scheme = urlsplit(url).scheme.split("+", 1)[0]
    if scheme not in QUEUE_SCHEMES or not urlsplit(url).hostname:
        raise ConfigError(
            "LOOPWRIGHT_QUEUE_URL must be a Redis or PostgreSQL URL with a host, such as "
            "redis://redis:6379/0 or postgresql://loopwright@db/loopwright; leave it unset "
            "for the embedded queue"
        )
    # Neither message quotes the URL: its password is in it.
    try:
        _ = urlsplit(url).port  # raises ValueError when it is not a number in range
    except ValueError:
        raise ConfigError(
            "LOOPWRIGHT_QUEUE_URL has a port that is not a number from 0 to 65535; give "
            "host:port, such as redis://redis:6379/0"
        ) from None
    if re.search(r"%(?![0-9A-Fa-f]{2})", url):
        raise ConfigError(
            "LOOPWRIGHT_QUEUE_URL has a % that is not followed by two hex digits; "
            "percent-encode special characters in the user and password (% is %25)"
        )
    return url


def _read_warm_pool(env: Mapping[str, str]) -> int | None:
    if (env.get("LOOPWRIGHT_WARM_POOL") or "").strip() == "":
        return None
    return read_int(env, "LOOPWRIGHT_WARM_POOL", SERVER_WARM_POOL, low=0)
