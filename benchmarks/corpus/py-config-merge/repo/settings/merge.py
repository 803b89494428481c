"""Merge nested settings dictionaries: the override wins, key by key, at every depth."""

from __future__ import annotations

from typing import Any


def merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """A new dictionary with `override` laid over `base`; neither argument is changed."""
    result = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            merge_into(result[key], value)
        else:
            result[key] = value
    return result


def merge_into(target: dict[str, Any], override: dict[str, Any]) -> None:
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            merge_into(target[key], value)
        else:
            target[key] = value


def flatten(settings: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """`{"db": {"port": 1}}` → `{"db.port": 1}`, for printing."""
    flat: dict[str, Any] = {}
    for key, value in settings.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, name + "."))
        else:
            flat[name] = value
    return flat
