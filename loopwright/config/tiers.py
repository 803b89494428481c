"""The model tiers: their models, endpoints and prices, read from LOOPWRIGHT_MODEL_TIERS,
LOOPWRIGHT_MODEL_PRICES and LOOPWRIGHT_ATTEMPTS."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from loopwright.config.env import ConfigError, read_pairs

DEFAULT_BASE_URL = "https://api.tokenfactory.nebius.com/v1/"
DEFAULT_TIERS = (
    ("nano", "nvidia/NVIDIA-Nemotron-Nano-9B-v2"),
    ("super", "nvidia/Llama-3_3-Nemotron-Super-49B-v1_5"),
    ("ultra", "nvidia/Llama-3_1-Nemotron-Ultra-253B-v1"),
)
# USD per million (input, output) tokens; overridable with LOOPWRIGHT_MODEL_PRICES.
DEFAULT_PRICES = {"nano": (0.07, 0.20), "super": (0.40, 1.20), "ultra": (0.60, 1.80)}

ToolFormat = Literal["native", "json"]
TOOL_FORMATS: tuple[ToolFormat, ...] = ("native", "json")


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


def model_base_url(value: str) -> str:
    if not value.startswith(("http://", "https://")):
        raise ConfigError(
            f"LOOPWRIGHT_MODEL_BASE_URL={value!r} is not an http(s) URL; "
            "set it to an OpenAI-compatible endpoint such as https://host/v1"
        )
    return value


Prices = dict[str, tuple[float, float, float | None]]


def parse_prices(raw: str | None) -> Prices:
    """`name=INPUT/OUTPUT[/CACHED]` USD per million tokens; CACHED prices prompt tokens the
    endpoint served from its cache (default: INPUT)."""
    prices: Prices = {name: (i, o, None) for name, (i, o) in DEFAULT_PRICES.items()}
    if not raw:
        return prices
    example = "nano=0.07/0.20,super=0.40/1.20/0.10"
    for name, value in read_pairs(raw, "LOOPWRIGHT_MODEL_PRICES", example):
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


def parse_attempts(raw: str | None, tiers: tuple[Tier, ...]) -> dict[str, int]:
    """`tier=K,...`: independent attempts per tier; every name must be a configured tier."""
    if not raw:
        return {}
    example = f"{tiers[0].name}=3" if tiers else "nano=3"
    names = [t.name for t in tiers]
    attempts: dict[str, int] = {}
    for name, value in read_pairs(raw, "LOOPWRIGHT_ATTEMPTS", example):
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


def parse_tiers(
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
    pairs = (
        list(DEFAULT_TIERS) if not raw else read_pairs(raw, "LOOPWRIGHT_MODEL_TIERS", TIERS_EXAMPLE)
    )
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


def priced_names(raw: str | None) -> frozenset[str]:
    """The tier names LOOPWRIGHT_MODEL_PRICES sets explicitly."""
    if not raw:
        return frozenset()
    return frozenset(key.strip() for key, _, _ in (i.partition("=") for i in raw.split(",")))
