"""Settings for one environment: the defaults with that environment's overrides."""

from __future__ import annotations

from typing import Any

from settings.merge import merge

DEFAULTS: dict[str, Any] = {
    "debug": False,
    "database": {"host": "localhost", "port": 5432, "pool": {"min": 1, "max": 10}},
    "cache": {"backend": "memory", "ttl": 300},
}

ENVIRONMENTS: dict[str, dict[str, Any]] = {
    "development": {"debug": True},
    "test": {"database": {"host": "db-test", "pool": {"max": 2}}, "cache": {"ttl": 0}},
    "production": {"database": {"host": "db.internal", "pool": {"min": 5, "max": 50}}},
}


def load(environment: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    if environment not in ENVIRONMENTS:
        known = ", ".join(sorted(ENVIRONMENTS))
        raise KeyError(f"unknown environment {environment!r}; known: {known}")
    settings = merge(DEFAULTS, ENVIRONMENTS[environment])
    return merge(settings, extra or {})
