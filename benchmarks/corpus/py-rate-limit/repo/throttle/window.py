"""A sliding-window rate limiter keyed by client, with an injectable clock."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Decision:
    allowed: bool
    remaining: int
    retry_after: float
    """Seconds until the next request would be allowed; 0 when allowed."""


class SlidingWindowLimiter:
    def __init__(
        self, limit: int, window: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if limit < 1 or window <= 0:
            raise ValueError("limit must be >= 1 and window > 0")
        self.limit = limit
        self.window = window
        self._clock = clock
        self._hits: dict[str, deque[float]] = {}

    def _recent(self, key: str, now: float) -> deque[float]:
        hits = self._hits.setdefault(key, deque())
        while hits and hits[0] <= now - self.window:
            hits.popleft()
        return hits

    def check(self, key: str) -> Decision:
        """Record a request from `key` if it is allowed, and say whether it was."""
        now = self._clock()
        hits = self._recent(key, now)
        if len(hits) <= self.limit:
            hits.append(now)
            return Decision(True, max(0, self.limit - len(hits)), 0.0)
        retry = hits[0] + self.window - now
        return Decision(False, 0, retry)

    def reset(self, key: str) -> None:
        self._hits.pop(key, None)
