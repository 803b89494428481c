"""The configuration formats the classification looks into: INI sections, TOML tables and
JSON objects, read leniently (text that does not parse reads as empty, or None for JSON)."""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from loopwright.jsonshape import nests_within

Reader = Callable[[str], str | None]
"""Returns the text of a base file by relative path, or None when it does not exist."""

_INI_SECTION = re.compile(r"^\s*\[([^\]]+)\]\s*$")


def ini_sections(text: str) -> dict[str, list[str]]:
    """Section name → its non-blank, non-comment lines (lenient: duplicates merge)."""
    sections: dict[str, list[str]] = {"": []}
    current = ""
    for line in text.splitlines():
        match = _INI_SECTION.match(line)
        if match:
            current = match.group(1).strip()
            sections.setdefault(current, [])
            continue
        stripped = line.rstrip()
        if stripped.strip() and not stripped.lstrip().startswith(("#", ";")):
            sections[current].append(stripped)
    return sections


def package_scripts(package: Mapping[str, Any]) -> dict[str, Any]:
    """package.json's `scripts` table (empty when it is missing or not a table)."""
    scripts = package.get("scripts")
    return dict(scripts) if isinstance(scripts, dict) else {}


def package_test_script(read: Reader) -> str | None:
    """The base package.json's `scripts.test`, or None."""
    package = json_object(read("package.json"))
    script = package_scripts(package or {}).get("test")
    return script if isinstance(script, str) else None


MAX_NESTING = 64
"""The deepest nesting of tables and arrays read. Deeper documents read as unreadable: the
comparisons of their values (and the copies `strip_keys` makes) recurse once a level, and a
dotted TOML key builds any depth without the parser recursing."""


def toml_table(text: str | None) -> dict[str, Any]:
    """The TOML document `text` (empty when absent, not valid TOML, or nested deeper than
    `MAX_NESTING`)."""
    if not text:
        return {}
    try:
        value = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError):
        return {}
    return value if nests_within(value, MAX_NESTING) else {}


def json_object(text: str | None) -> dict[str, Any] | None:
    """The JSON object `text` (empty when absent; None when it is not a JSON object, or is
    nested deeper than `MAX_NESTING`)."""
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict) or not nests_within(value, MAX_NESTING):
        return None
    return value


def dig(data: Mapping[str, Any], key: tuple[str, ...]) -> Any:
    """The value at the key path `key` of nested tables, or None where the path ends."""
    value: Any = data
    for part in key:
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def strip_keys(data: Mapping[str, Any], keys: Iterable[tuple[str, ...]]) -> dict[str, Any]:
    """A deep copy of `data` without the given key paths (and the tables they emptied)."""
    copy: dict[str, Any] = json.loads(json.dumps(data, default=str))
    for key in keys:
        node: Any = copy
        for part in key[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(key[-1], None)
    return _prune(copy)


def _prune(data: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            value = _prune(value)
            if not value:
                continue
        out[key] = value
    return out
