"""Settings for one Loopwright process, read once from the environment (and CLI flags).

Settings are built at the edge (`Settings.from_env`) and passed in; nothing reads
`os.environ` later. A missing or malformed value raises `ConfigError` whose message is one
line naming the variable to fix.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

DEFAULT_BASE_URL = "https://api.tokenfactory.nebius.com/v1/"
DEFAULT_TIERS = (
    ("nano", "nvidia/NVIDIA-Nemotron-Nano-9B-v2"),
    ("super", "nvidia/Llama-3_3-Nemotron-Super-49B-v1_5"),
    ("ultra", "nvidia/Llama-3_1-Nemotron-Ultra-253B-v1"),
)
# USD per million (input, output) tokens; overridable with LOOPWRIGHT_MODEL_PRICES.
DEFAULT_PRICES = {"nano": (0.07, 0.20), "super": (0.40, 1.20), "ultra": (0.60, 1.80)}

SandboxKind = Literal["docker", "local"]
ToolFormat = Literal["native", "json"]
TOOL_FORMATS: tuple[ToolFormat, ...] = ("native", "json")
NetworkMode = Literal["none", "setup", "always"]
NETWORK_ORDER: tuple[NetworkMode, ...] = ("none", "setup", "always")
"""Network modes from the narrowest to the widest."""


class ConfigError(Exception):
    """A setting is missing or malformed; the message says which one and how to fix it."""


@dataclass(frozen=True)
class Tier:
    """One model tier: a short name used in events and prices, and the endpoint's model id."""

    name: str
    model: str
    price_in: float = 0.0
    """USD per million prompt tokens."""
    price_out: float = 0.0
    """USD per million completion tokens."""
    price_cached: float | None = None
    """USD per million prompt tokens the endpoint served from its prompt cache; None: the
    same as `price_in`."""
    base_url: str | None = None
    """The tier's own endpoint (`name=model@URL`); None: the shared LOOPWRIGHT_MODEL_BASE_URL.
    The shared endpoint's API key is never sent to a tier's own endpoint."""
    tool_format: ToolFormat = "native"
    """`native`: tools go in the request's `tools` field; `json`: they are described in the
    system prompt and each reply is read as one JSON object (servers without tool support)."""

    def cost(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> float:
        cached = min(max(cached_tokens, 0), prompt_tokens)
        cached_price = self.price_in if self.price_cached is None else self.price_cached
        return (
            (prompt_tokens - cached) * self.price_in
            + cached * cached_price
            + completion_tokens * self.price_out
        ) / 1_000_000


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
class GitHubAppSettings:
    """How the server talks to GitHub as an App (all optional for the CLI)."""

    app_id: str | None = None
    private_key: str | None = None
    """The App's PEM private key (from LOOPWRIGHT_GITHUB_PRIVATE_KEY or ..._PATH)."""
    webhook_secret: str | None = None
    api_url: str = "https://api.github.com"
    """Set for GitHub Enterprise Server (https://HOST/api/v3) and for tests."""
    public_url: str | None = None
    """Where the server is reachable, for links to the live view and screenshots."""
    app_slug: str = "loopwright"
    allowed_bots: tuple[str, ...] = ()
    max_attempts: int = 3
    """Missions per head commit before Loopwright stops trying."""
    comment_interval_s: float = 3.0
    """The tracking comment is edited at most once in this many seconds (the last state is
    always written)."""
    client_id: str | None = None
    """The App's OAuth client ID; with `client_secret`, the live view offers GitHub sign-in."""
    client_secret: str | None = None
    web_url: str = "https://github.com"
    """GitHub's web address for the OAuth sign-in pages (https://HOST on GitHub Enterprise)."""
    private_key_source: str = "LOOPWRIGHT_GITHUB_PRIVATE_KEY"
    """The setting the key came from, as messages about a bad key name it (`..._PATH='...'`
    when it was read from a file)."""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> GitHubAppSettings:
        key = env.get("LOOPWRIGHT_GITHUB_PRIVATE_KEY") or None
        key_path = env.get("LOOPWRIGHT_GITHUB_PRIVATE_KEY_PATH")
        key_source = "LOOPWRIGHT_GITHUB_PRIVATE_KEY"
        if key is None and key_path:
            key_source = f"LOOPWRIGHT_GITHUB_PRIVATE_KEY_PATH={key_path!r}"
            try:
                key = Path(key_path).expanduser().read_text(encoding="utf-8")
            except UnicodeDecodeError:
                raise ConfigError(
                    f"{key_source} is not a PEM private key (the file is not text); point it "
                    "at the .pem file GitHub generated for the App"
                ) from None
            except OSError as exc:
                raise ConfigError(
                    f"{key_source} cannot be read ({exc.strerror}); point it at the .pem file "
                    "GitHub generated for the App"
                ) from None
        if key is not None and "PRIVATE KEY" not in key:
            hint = (
                "point it at the .pem file GitHub generated for the App"
                if key_source != "LOOPWRIGHT_GITHUB_PRIVATE_KEY"
                else "paste the whole .pem file GitHub generated"
            )
            raise ConfigError(
                f"{key_source} is not a PEM private key; {hint} "
                "(-----BEGIN RSA PRIVATE KEY----- ...)"
            )
        app_id = env.get("LOOPWRIGHT_GITHUB_APP_ID") or None
        if app_id is not None and not app_id.strip().isdigit():
            raise ConfigError(
                f"LOOPWRIGHT_GITHUB_APP_ID={app_id!r} is not a number; copy the App ID from "
                "the App's settings page (Settings → Developer settings → GitHub Apps)"
            )
        api_url = env.get("LOOPWRIGHT_GITHUB_API_URL") or cls.api_url
        if not api_url.startswith(("http://", "https://")):
            raise ConfigError(f"LOOPWRIGHT_GITHUB_API_URL={api_url!r} is not an http(s) URL")
        public_url = env.get("LOOPWRIGHT_PUBLIC_URL") or None
        if public_url is not None and not public_url.startswith(("http://", "https://")):
            raise ConfigError(f"LOOPWRIGHT_PUBLIC_URL={public_url!r} is not an http(s) URL")
        web_url = env.get("LOOPWRIGHT_GITHUB_WEB_URL") or cls.web_url
        if not web_url.startswith(("http://", "https://")):
            raise ConfigError(f"LOOPWRIGHT_GITHUB_WEB_URL={web_url!r} is not an http(s) URL")
        client_id = env.get("LOOPWRIGHT_GITHUB_CLIENT_ID") or None
        client_secret = env.get("LOOPWRIGHT_GITHUB_CLIENT_SECRET") or None
        if (client_id is None) != (client_secret is None):
            raise ConfigError(
                "GitHub sign-in needs both LOOPWRIGHT_GITHUB_CLIENT_ID and "
                "LOOPWRIGHT_GITHUB_CLIENT_SECRET; copy them from the App's settings page "
                "(Settings → Developer settings → GitHub Apps → Client secrets)"
            )
        bots = tuple(b.strip() for b in (env.get("LOOPWRIGHT_ALLOWED_BOTS") or "").split(","))
        return cls(
            app_id=app_id.strip() if app_id else None,
            private_key=key,
            private_key_source=key_source,
            webhook_secret=env.get("LOOPWRIGHT_WEBHOOK_SECRET") or None,
            api_url=api_url.rstrip("/"),
            public_url=public_url.rstrip("/") if public_url else None,
            app_slug=env.get("LOOPWRIGHT_GITHUB_APP_SLUG") or cls.app_slug,
            allowed_bots=tuple(b for b in bots if b),
            max_attempts=_int(env, "LOOPWRIGHT_MAX_ATTEMPTS", cls.max_attempts),
            comment_interval_s=_float(env, "LOOPWRIGHT_COMMENT_INTERVAL_S", cls.comment_interval_s),
            client_id=client_id,
            client_secret=client_secret,
            web_url=web_url.rstrip("/"),
        )

    @property
    def oauth_enabled(self) -> bool:
        """GitHub sign-in for the live view is on when the client ID and secret are set."""
        return bool(self.client_id and self.client_secret)

    def missing(self, *, webhooks: bool = True) -> list[str]:
        """The settings `loopwright serve` cannot work without, by variable name; a worker,
        which receives no webhooks, needs no webhook secret (`webhooks=False`)."""
        names = []
        if not self.app_id:
            names.append("LOOPWRIGHT_GITHUB_APP_ID")
        if not self.private_key:
            names.append("LOOPWRIGHT_GITHUB_PRIVATE_KEY (or LOOPWRIGHT_GITHUB_PRIVATE_KEY_PATH)")
        if webhooks and not self.webhook_secret:
            names.append("LOOPWRIGHT_WEBHOOK_SECRET")
        return names


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
    warm_pool: int = 0
    network: NetworkMode = "setup"
    data_dir: Path = field(default_factory=lambda: Path.home() / ".loopwright")
    database_url: str | None = None
    """SQLAlchemy URL of the missions store; None means SQLite at `data_dir/loopwright.db`."""
    max_concurrent_missions: int = 2
    """Missions the server runs at once; the rest wait in the queue."""
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
        prices = _parse_prices(get("LOOPWRIGHT_MODEL_PRICES"))
        base_url = _url(get("LOOPWRIGHT_MODEL_BASE_URL") or DEFAULT_BASE_URL)
        tiers = _parse_tiers(
            get("LOOPWRIGHT_MODEL_TIERS"),
            prices,
            priced=_priced_names(get("LOOPWRIGHT_MODEL_PRICES")),
        )
        defaults = cls()
        limits = SandboxLimits(
            memory_mb=_int(env, "LOOPWRIGHT_SANDBOX_MEMORY_MB", defaults.sandbox_limits.memory_mb),
            pids=_int(env, "LOOPWRIGHT_SANDBOX_PIDS", defaults.sandbox_limits.pids),
            cpus=_float(env, "LOOPWRIGHT_SANDBOX_CPUS", defaults.sandbox_limits.cpus),
            tmpfs_mb=_int(env, "LOOPWRIGHT_SANDBOX_TMPFS_MB", defaults.sandbox_limits.tmpfs_mb),
        )
        max_cost = get("LOOPWRIGHT_MAX_COST_USD")
        max_tokens = get("LOOPWRIGHT_MAX_TOKENS")
        return cls(
            model_base_url=base_url,
            model_api_key=get("LOOPWRIGHT_MODEL_API_KEY") or None,
            tiers=tiers,
            escalate_after=_int(env, "LOOPWRIGHT_ESCALATE_AFTER", defaults.escalate_after),
            plan_only_steps=_int(env, "LOOPWRIGHT_PLAN_ONLY_STEPS", defaults.plan_only_steps),
            attempts=_parse_attempts(get("LOOPWRIGHT_ATTEMPTS"), tiers),
            attempt_steps=_int(env, "LOOPWRIGHT_ATTEMPT_STEPS", defaults.attempt_steps),
            attempt_temperature=_float(
                env, "LOOPWRIGHT_ATTEMPT_TEMPERATURE", defaults.attempt_temperature
            ),
            max_steps=_int(env, "LOOPWRIGHT_MAX_STEPS", defaults.max_steps),
            max_cost_usd=None if not max_cost else _float(env, "LOOPWRIGHT_MAX_COST_USD", 0),
            max_prompt_tokens=None if not max_tokens else _int(env, "LOOPWRIGHT_MAX_TOKENS", 0),
            command_timeout_s=_float(
                env, "LOOPWRIGHT_COMMAND_TIMEOUT_S", defaults.command_timeout_s
            ),
            wall_clock_s=_float(env, "LOOPWRIGHT_WALL_CLOCK_S", defaults.wall_clock_s),
            context_tokens=_int(env, "LOOPWRIGHT_CONTEXT_TOKENS", defaults.context_tokens),
            model_timeout_s=_float(env, "LOOPWRIGHT_MODEL_TIMEOUT_S", defaults.model_timeout_s),
            stall_timeout_s=_float(env, "LOOPWRIGHT_STALL_TIMEOUT_S", defaults.stall_timeout_s),
            model_retries=_int(env, "LOOPWRIGHT_MODEL_RETRIES", defaults.model_retries, low=0),
            sandbox=_choice(env, "LOOPWRIGHT_SANDBOX", ("docker", "local"), defaults.sandbox),  # type: ignore[arg-type]
            sandbox_image=get("LOOPWRIGHT_SANDBOX_IMAGE") or defaults.sandbox_image,
            sandbox_limits=limits,
            warm_pool=_int(env, "LOOPWRIGHT_WARM_POOL", defaults.warm_pool, low=0),
            network=_choice(env, "LOOPWRIGHT_NETWORK", ("none", "setup", "always"), "setup"),  # type: ignore[arg-type]
            data_dir=Path(get("LOOPWRIGHT_DATA_DIR") or defaults.data_dir).expanduser(),
            database_url=get("LOOPWRIGHT_DATABASE_URL") or None,
            max_concurrent_missions=_int(
                env, "LOOPWRIGHT_MAX_CONCURRENT_MISSIONS", defaults.max_concurrent_missions
            ),
            github=GitHubAppSettings.from_env(env),
            dashboard_token=get("LOOPWRIGHT_DASHBOARD_TOKEN") or None,
            allow_dependency_changes=_bool(env, "LOOPWRIGHT_ALLOW_DEPENDENCY_CHANGES", False),
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
        values = (
            self.model_api_key,
            self.github.private_key,
            self.github.webhook_secret,
            self.github.client_secret,
            self.dashboard_token,
            db_password,
        )
        return [s for s in values if s]


def _url(value: str) -> str:
    if not value.startswith(("http://", "https://")):
        raise ConfigError(
            f"LOOPWRIGHT_MODEL_BASE_URL={value!r} is not an http(s) URL; "
            "set it to an OpenAI-compatible endpoint such as https://host/v1"
        )
    return value


def _int(env: Mapping[str, str], name: str, default: int, low: int = 1) -> int:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(
            f"{name}={raw!r} is not a whole number; set it to e.g. {default}"
        ) from None
    if value < low:
        raise ConfigError(f"{name}={raw!r} must be at least {low}")
    return value


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a number; set it to e.g. {default}") from None
    if value <= 0:
        raise ConfigError(f"{name}={raw!r} must be greater than 0")
    return value


def _bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = (env.get(name) or "").strip().lower()
    if not raw:
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name}={env.get(name)!r} is not a boolean; set it to 1 or 0")


def effective_network(operator: NetworkMode, repo: NetworkMode | None) -> NetworkMode:
    """The sandbox network for a mission: the repository's `network` can only narrow the
    operator's `LOOPWRIGHT_NETWORK` (none < setup < always), never widen it."""
    if repo is None:
        return operator
    return min(operator, repo, key=NETWORK_ORDER.index)


def _choice(env: Mapping[str, str], name: str, choices: tuple[str, ...], default: str) -> str:
    raw = env.get(name) or default
    if raw not in choices:
        raise ConfigError(f"{name}={raw!r} is not one of {', '.join(choices)}")
    return raw


def _pairs(raw: str, name: str, example: str) -> list[tuple[str, str]]:
    pairs = []
    for item in raw.split(","):
        item = item.strip()
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ConfigError(f"{name}: {item!r} is not name=value; write e.g. {name}={example}")
        pairs.append((key.strip(), value.strip()))
    if not pairs:
        raise ConfigError(f"{name} is empty; write e.g. {name}={example}")
    return pairs


Prices = dict[str, tuple[float, float, float | None]]


def _parse_prices(raw: str | None) -> Prices:
    """`name=INPUT/OUTPUT[/CACHED]` USD per million tokens; CACHED prices prompt tokens the
    endpoint served from its cache (default: INPUT)."""
    prices: Prices = {name: (i, o, None) for name, (i, o) in DEFAULT_PRICES.items()}
    if not raw:
        return prices
    example = "nano=0.07/0.20,super=0.40/1.20/0.10"
    for name, value in _pairs(raw, "LOOPWRIGHT_MODEL_PRICES", example):
        parts = value.split("/")
        try:
            if not 1 <= len(parts) <= 3:
                raise ValueError(value)
            numbers = [float(p) for p in parts]
            if any(n < 0 for n in numbers):
                raise ValueError(value)
        except ValueError:
            raise ConfigError(
                f"LOOPWRIGHT_MODEL_PRICES: {name}={value!r} is not INPUT/OUTPUT[/CACHED] USD "
                f"per million tokens; write e.g. LOOPWRIGHT_MODEL_PRICES={example}"
            ) from None
        out = numbers[1] if len(numbers) > 1 else numbers[0]
        prices[name] = (numbers[0], out, numbers[2] if len(numbers) == 3 else None)
    return prices


def _parse_attempts(raw: str | None, tiers: tuple[Tier, ...]) -> dict[str, int]:
    """`tier=K,...`: independent attempts per tier; every name must be a configured tier."""
    if not raw:
        return {}
    example = f"{tiers[0].name}=3" if tiers else "nano=3"
    names = [t.name for t in tiers]
    attempts: dict[str, int] = {}
    for name, value in _pairs(raw, "LOOPWRIGHT_ATTEMPTS", example):
        if name not in names:
            raise ConfigError(
                f"LOOPWRIGHT_ATTEMPTS names tier {name!r}, which is not in "
                f"LOOPWRIGHT_MODEL_TIERS ({', '.join(names)}); write e.g. "
                f"LOOPWRIGHT_ATTEMPTS={example}"
            )
        try:
            count = int(value)
        except ValueError:
            count = 0
        if not 1 <= count <= 20:
            raise ConfigError(
                f"LOOPWRIGHT_ATTEMPTS: {name}={value!r} must be a whole number from 1 to 20; "
                f"write e.g. LOOPWRIGHT_ATTEMPTS={example}"
            )
        attempts[name] = count
    return attempts


TIERS_EXAMPLE = "nano=model-a,super=model-b"
LOCAL_TIER_EXAMPLE = "local=qwen2.5-coder-1.5b@http://127.0.0.1:8080/v1;tool_format=json"


def _parse_tiers(
    raw: str | None,
    prices: Prices,
    *,
    priced: frozenset[str] = frozenset(),
) -> tuple[Tier, ...]:
    """`name=MODEL[@URL][;tool_format=native|json],…`, cheapest first.

    A tier with its own endpoint on loopback runs on this machine: it costs nothing unless
    LOOPWRIGHT_MODEL_PRICES names it (the names in `priced`). Tiers on the shared endpoint
    keep their prices wherever it is (a proxy or gateway on loopback still bills).
    """
    pairs = list(DEFAULT_TIERS) if not raw else _pairs(raw, "LOOPWRIGHT_MODEL_TIERS", TIERS_EXAMPLE)
    names = [n for n, _ in pairs]
    if len(set(names)) != len(names):
        raise ConfigError(f"LOOPWRIGHT_MODEL_TIERS names a tier twice: {names}")
    tiers = []
    for name, value in pairs:
        model, base_url, tool_format = _tier_value(name, value)
        price = prices.get(name, (0.0, 0.0, None))
        if name not in priced and base_url is not None and is_loopback(base_url):
            price = (0.0, 0.0, None)
        tiers.append(Tier(name, model, *price, base_url=base_url, tool_format=tool_format))
    return tuple(tiers)


def _tier_value(name: str, value: str) -> tuple[str, str | None, ToolFormat]:
    spec, *options = (part.strip() for part in value.split(";"))
    model, base_url = spec, None
    for scheme in ("@http://", "@https://"):
        if scheme in spec:
            at = spec.index(scheme)
            model, base_url = spec[:at].strip(), spec[at + 1 :].strip()
            break
    if not model:
        raise ConfigError(
            f"LOOPWRIGHT_MODEL_TIERS: tier {name!r} names no model; write e.g. "
            f"LOOPWRIGHT_MODEL_TIERS={LOCAL_TIER_EXAMPLE}"
        )
    if base_url is not None and not urlsplit(base_url).hostname:
        raise ConfigError(
            f"LOOPWRIGHT_MODEL_TIERS: tier {name!r} endpoint {base_url!r} names no host; "
            f"write e.g. {LOCAL_TIER_EXAMPLE}"
        )
    tool_format: ToolFormat = "native"
    for option in options:
        key, sep, setting = (p.strip() for p in option.partition("="))
        if not sep or key != "tool_format" or setting not in TOOL_FORMATS:
            raise ConfigError(
                f"LOOPWRIGHT_MODEL_TIERS: tier {name!r} option {option!r} is not "
                f"tool_format=native or tool_format=json; write e.g. {LOCAL_TIER_EXAMPLE}"
            )
        tool_format = "json" if setting == "json" else "native"
    return model, base_url, tool_format


def is_loopback(url: str) -> bool:
    """Whether `url` points at this machine (127.0.0.0/8, ::1 or localhost)."""
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _priced_names(raw: str | None) -> frozenset[str]:
    """The tier names LOOPWRIGHT_MODEL_PRICES sets explicitly."""
    if not raw:
        return frozenset()
    return frozenset(key.strip() for key, _, _ in (i.partition("=") for i in raw.split(",")))
