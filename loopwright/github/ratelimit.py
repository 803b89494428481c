"""GitHub's rate-limit guidance as pure policy: how long to wait before retrying a request.

Follows "Best practices for using the REST API" and "Rate limits for the REST API": honour
`retry-after`; when `x-ratelimit-remaining` is 0 wait until `x-ratelimit-reset`; for other
rate-limit errors (secondary limits) wait at least a minute and back off exponentially; keep
mutating requests about a second apart. The HTTP edge supplies the clock and the sleep.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping

from loopwright.retry_after import finite_number, parse_retry_after

MAX_ATTEMPTS = 5
"""Attempts per request, the first one included."""
MAX_WAIT_S = 3600.0
"""Longer waits are not worth holding a mission for: give up and report the limit."""
SECONDARY_BASE_S = 60.0
SECONDARY_CAP_S = 900.0
SERVER_ERROR_BASE_S = 1.0
SERVER_ERROR_CAP_S = 30.0
RETRYABLE_SERVER_ERRORS = frozenset({500, 502, 503, 504})
WRITE_METHODS = frozenset({"POST", "PATCH", "PUT", "DELETE"})


def wait_before_retry(
    status: int,
    headers: Mapping[str, str],
    body: str,
    attempt: int,
    now: float,
    *,
    max_attempts: int = MAX_ATTEMPTS,
) -> float | None:
    """Seconds to wait before retrying, or None when the request must not be retried.

    `attempt` is the number of the attempt that just got this response (1 for the first);
    `now` is the current time in epoch seconds, compared with `x-ratelimit-reset`.
    """
    if attempt >= max_attempts or status < 400:
        return None
    lower = {k.lower(): v for k, v in headers.items()}
    rate_limited = _is_rate_limited(status, lower, body)
    if not rate_limited and status not in RETRYABLE_SERVER_ERRORS:
        return None

    retry_after = parse_retry_after(lower.get("retry-after"), now)
    if retry_after is not None:
        return _bounded(retry_after)
    if lower.get("x-ratelimit-remaining", "").strip() == "0":
        reset = finite_number(lower.get("x-ratelimit-reset"))
        if reset is not None:
            return _bounded(max(reset - now, 1.0))
    if rate_limited:
        return min(SECONDARY_BASE_S * 2.0 ** (attempt - 1), SECONDARY_CAP_S)
    return min(SERVER_ERROR_BASE_S * 2.0 ** (attempt - 1), SERVER_ERROR_CAP_S)


def _is_rate_limited(status: int, headers: Mapping[str, str], body: str) -> bool:
    if status == 429:
        return True
    if status != 403:
        return False
    if "retry-after" in headers or headers.get("x-ratelimit-remaining", "").strip() == "0":
        return True
    return "rate limit" in body.lower()


def _bounded(wait: float) -> float | None:
    return wait if wait <= MAX_WAIT_S else None


class WriteSpacer:
    """Keeps mutating requests (POST, PATCH, PUT, DELETE) at least `interval_s` apart.

    Each write reserves the next free slot, so concurrent callers queue up one interval
    apart instead of all waking at once. `delay` only reserves and returns the wait (for an
    async caller to sleep on); `wait` also sleeps with the injected `sleep`.
    """

    def __init__(
        self,
        interval_s: float = 1.0,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.interval_s = interval_s
        self._clock = clock
        self._sleep = sleep
        self._next_slot: float | None = None
        self._lock = threading.Lock()

    def delay(self, method: str) -> float:
        """Reserve a slot for a request with this method; the seconds to wait before it."""
        if method.upper() not in WRITE_METHODS:
            return 0.0
        with self._lock:
            now = self._clock()
            slot = now if self._next_slot is None else max(now, self._next_slot)
            self._next_slot = slot + self.interval_s
            return slot - now

    def wait(self, method: str) -> float:
        """Sleep until a request with this method may be sent; the seconds slept."""
        seconds = self.delay(method)
        if seconds > 0:
            self._sleep(seconds)
        return seconds
