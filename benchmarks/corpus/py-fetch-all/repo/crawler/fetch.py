"""Fetch several URLs at once with a concurrency cap; the transport is injected."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

Transport = Callable[[str], Awaitable[tuple[int, str]]]
"""Given a URL, returns (HTTP status, body)."""


@dataclass(frozen=True)
class Result:
    url: str
    status: int
    body: str
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and 200 <= self.status < 300


async def fetch_one(transport: Transport, url: str, timeout: float) -> Result:
    try:
        status, body = await asyncio.wait_for(transport(url), timeout)
    except asyncio.TimeoutError:
        return Result(url, 0, "", f"timed out after {timeout}s")
    except OSError as exc:
        return Result(url, 0, "", str(exc))
    return Result(url, status, body)


async def fetch_all(
    transport: Transport, urls: list[str], limit: int = 4, timeout: float = 10.0
) -> list[Result]:
    """One Result per URL, in the order of `urls`, with at most `limit` requests in flight."""
    gate = asyncio.Semaphore(limit)

    async def guarded(url: str) -> Result:
        async with gate:
            return await fetch_one(transport, url, timeout)

    results = []
    for next_done in asyncio.as_completed([guarded(u) for u in urls]):
        results.append(await next_done)
    return results


def broken_links(results: list[Result]) -> list[str]:
    return [r.url for r in results if not r.ok]
