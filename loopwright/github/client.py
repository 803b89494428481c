"""A githubkit client with GitHub's rate-limit rules applied, and the error its callers raise.

Retries follow `ratelimit.wait_before_retry` (retry-after, x-ratelimit-reset, secondary
limits, 5xx), writes are spaced by `ratelimit.WriteSpacer`, and every request is logged
with the mission and delivery it serves.
"""

from __future__ import annotations

import functools
import ssl
import time
from collections.abc import Callable, Generator
from contextlib import asynccontextmanager, contextmanager
from datetime import timedelta
from typing import Any

import httpx
import structlog
from githubkit import GitHub
from githubkit.cache import MemCacheStrategy
from githubkit.exception import GitHubException, RequestFailed
from githubkit.retry import RetryOption
from githubkit.throttling import BaseThrottler

from loopwright.github.ratelimit import WriteSpacer, wait_before_retry


class GitHubError(Exception):
    """A GitHub call failed for good; the message names the setting or permission to fix."""


class _SpacedWrites(BaseThrottler):
    """githubkit throttler that keeps mutating requests about a second apart."""

    def __init__(self, spacer: WriteSpacer) -> None:
        self._spacer = spacer

    @contextmanager
    def acquire(self, request: httpx.Request) -> Generator[None, Any, Any]:
        self._spacer.wait(request.method)
        yield

    @asynccontextmanager
    async def async_acquire(self, request: httpx.Request):  # type: ignore[no-untyped-def]
        import anyio

        await anyio.sleep(self._spacer.delay(request.method))
        yield


def _retry_policy(clock: Callable[[], float]) -> Callable[[GitHubException, int], RetryOption]:
    def decide(exc: GitHubException, retry_count: int) -> RetryOption:
        if not isinstance(exc, RequestFailed):
            return RetryOption(False)
        response = exc.response
        wait = wait_before_retry(
            response.status_code,
            dict(response.headers),
            response.text,
            attempt=retry_count + 1,
            now=clock(),
        )
        if wait is None:
            return RetryOption(False)
        return RetryOption(True, timedelta(seconds=wait))

    return decide


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context for every client of this process. httpx builds one per client, and
    loading the CA bundle costs milliseconds of CPU on each GitHub call of each mission."""
    return httpx.create_ssl_context()


def github_client(
    auth: Any,
    api_url: str,
    *,
    log: structlog.stdlib.BoundLogger,
    clock: Callable[[], float] = time.time,
    spacer: WriteSpacer | None = None,
    cache: MemCacheStrategy | None = None,
) -> GitHub[Any]:
    """A githubkit client for `api_url` with GitHub's retry rules, spaced writes and every
    request logged. `cache` holds githubkit's tokens (App JWTs, installation tokens); its
    default is process-wide and keyed by app id, so an App passes its own."""

    def on_request(request: httpx.Request) -> None:
        log.info("github.request", method=request.method, path=request.url.path)

    def on_response(response: httpx.Response) -> None:
        log.info(
            "github.response",
            method=response.request.method,
            path=response.request.url.path,
            status=response.status_code,
            remaining=response.headers.get("x-ratelimit-remaining"),
        )

    return GitHub(
        auth,
        base_url=api_url.rstrip("/"),
        auto_retry=_retry_policy(clock),
        throttler=_SpacedWrites(spacer or WriteSpacer()),
        http_cache=False,
        cache_strategy=cache or MemCacheStrategy(),
        event_hooks={"request": [on_request], "response": [on_response]},
        user_agent="loopwright",
        ssl_verify=_tls(),
    )
