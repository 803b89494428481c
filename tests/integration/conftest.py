"""Fixtures of the integration tests of the mission queue on SAQ."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from loopwright.store.engine import migrate
from loopwright.store.repository import Store

BACKENDS = ["redis", "postgres"]


@pytest.fixture(params=BACKENDS)
def saq_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Store]]:
    """The queue URL and a store: SQLite beside Redis; PostgreSQL for both (one database
    holds the store's tables and SAQ's, as in a deployment without Redis)."""
    if request.param == "redis":
        url = request.getfixturevalue("redis_service").url
        store_url = f"sqlite:///{tmp_path / 'loopwright.db'}"
    else:
        url = store_url = request.getfixturevalue("postgres_url")
    migrate(store_url)
    store = Store(store_url)
    try:
        yield url, store
    finally:
        store.close()
