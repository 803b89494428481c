"""Typed reads of a webhook payload: each field checked where it is read.

A field that is missing or holds the wrong type raises `Malformed` with its dotted path, so
a trigger can ignore the delivery and say which field was wrong instead of raising.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class Malformed(Exception):
    """A payload field is missing or has the wrong type; the message is its path."""


def get_map(data: Mapping[str, Any], key: str, where: str = "") -> Mapping[str, Any]:
    value = data.get(key)
    if not isinstance(value, Mapping):
        raise Malformed(f"{_path(where, key)} is missing or not an object")
    return value


def get_list(data: Mapping[str, Any], key: str, where: str = "") -> list[Any]:
    value = data.get(key, [])
    if value is None:
        return []
    if not isinstance(value, list):
        raise Malformed(f"{_path(where, key)} is not a list")
    return value


def get_str(data: Mapping[str, Any], key: str, where: str = "") -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise Malformed(f"{_path(where, key)} is missing or not a string")
    return value


def get_opt_str(data: Mapping[str, Any], key: str, where: str = "") -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise Malformed(f"{_path(where, key)} is not a string")
    return value or None


def get_int(data: Mapping[str, Any], key: str, where: str = "") -> int:
    value = data.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise Malformed(f"{_path(where, key)} is missing or not a number")
    return value


def get_opt_int(data: Mapping[str, Any], key: str, where: str = "") -> int | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise Malformed(f"{_path(where, key)} is not a number")
    return value


def installation_id(payload: Mapping[str, Any]) -> int | None:
    """The App installation a delivery came through, or None (the Action's events)."""
    installation = payload.get("installation")
    if installation is None:
        return None
    if not isinstance(installation, Mapping):
        raise Malformed("installation is not an object")
    return get_int(installation, "id", "installation")


def _path(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key
