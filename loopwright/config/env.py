"""Reading one environment variable as a number, flag, choice or `name=value` list; a bad
value raises `ConfigError` naming the variable and what to write instead."""

from __future__ import annotations

import math
from collections.abc import Mapping


class ConfigError(Exception):
    """A setting is missing or malformed; the message says which one and how to fix it."""


def read_int(env: Mapping[str, str], name: str, default: int, low: int = 1) -> int:
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


def read_float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a number; set it to e.g. {default}") from None
    if not math.isfinite(value):  # `nan` would pass every comparison below
        raise ConfigError(f"{name}={raw!r} is not a finite number; set it to e.g. {default}")
    if value <= 0:
        raise ConfigError(f"{name}={raw!r} must be greater than 0")
    return value


def read_bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = (env.get(name) or "").strip().lower()
    if not raw:
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name}={env.get(name)!r} is not a boolean; set it to 1 or 0")


def read_choice(env: Mapping[str, str], name: str, choices: tuple[str, ...], default: str) -> str:
    raw = env.get(name) or default
    if raw not in choices:
        raise ConfigError(f"{name}={raw!r} is not one of {', '.join(choices)}")
    return raw


def read_pairs(raw: str, name: str, example: str) -> list[tuple[str, str]]:
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
