"""The queue URL as SAQ's backends take it, and as messages name it."""

from __future__ import annotations

import pytest

from loopwright.store.saq_queue import saq_url, where


@pytest.mark.parametrize(
    ("given", "taken"),
    [
        ("postgresql+psycopg://lw:pw@db:5432/lw", "postgresql://lw:pw@db:5432/lw"),
        ("postgres://lw@db/lw", "postgres://lw@db/lw"),
        ("redis://:pw@redis:6379/0", "redis://:pw@redis:6379/0"),
        ("rediss://redis:6380/1", "rediss://redis:6380/1"),
    ],
    ids=["driver-suffix", "postgres", "redis", "rediss"],
)
def test_saq_gets_a_plain_libpq_or_redis_url(given: str, taken: str) -> None:
    assert saq_url(given) == taken


def test_messages_name_the_queue_without_its_password() -> None:
    named = where("postgresql+psycopg://lw:s3cret-pw@db:5432/lw")
    assert named == "postgresql://db:5432"
    assert "s3cret" not in where("redis://:s3cret-pw@redis:6379/0")
