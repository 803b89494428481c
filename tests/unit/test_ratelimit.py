"""GitHub rate-limit policy and write spacing, driven by an injected clock."""

from __future__ import annotations

import threading

import pytest

from loopwright.github.ratelimit import MAX_ATTEMPTS, WriteSpacer, wait_before_retry
from loopwright.retry_after import parse_retry_after

NOW = 1_700_000_000.0
SECONDARY = (
    '{"message": "You have exceeded a secondary rate limit. Please wait a few minutes '
    'before you try again.", "documentation_url": "https://docs.github.com/rest"}'
)
PRIMARY = '{"message": "API rate limit exceeded for installation ID 1."}'
FORBIDDEN = '{"message": "Resource not accessible by integration"}'

CASES = [
    # (id, status, headers, body, attempt, expected)
    ("retry-after-403", 403, {"retry-after": "30"}, SECONDARY, 1, 30.0),
    ("retry-after-429", 429, {"Retry-After": "5"}, "", 1, 5.0),
    (
        "retry-after-wins-over-reset",
        429,
        {
            "retry-after": "7",
            "x-ratelimit-remaining": "0",
            "x-ratelimit-reset": str(int(NOW + 600)),
        },
        "",
        1,
        7.0,
    ),
    (
        "retry-after-http-date-past",
        503,
        {"retry-after": "Tue, 14 Nov 2023 22:00:00 GMT"},
        "",
        1,
        0.0,
    ),
    ("retry-after-503", 503, {"retry-after": "12"}, "", 1, 12.0),
    ("retry-after-negative", 429, {"retry-after": "-5"}, "", 1, 0.0),
    (
        "primary-exhausted",
        403,
        {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW + 120))},
        PRIMARY,
        1,
        120.0,
    ),
    (
        "primary-exhausted-429",
        429,
        {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(NOW + 42))},
        "",
        2,
        42.0,
    ),
    (
        "primary-reset-already-passed",
        403,
        {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW - 10))},
        PRIMARY,
        1,
        1.0,
    ),
    (
        "primary-reset-too-far",
        403,
        {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW + 7200))},
        PRIMARY,
        1,
        None,
    ),
    (
        "primary-reset-garbage",
        403,
        {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "soon"},
        PRIMARY,
        1,
        60.0,
    ),
    ("secondary-first", 403, {"x-ratelimit-remaining": "4000"}, SECONDARY, 1, 60.0),
    ("secondary-second", 403, {}, SECONDARY, 2, 120.0),
    ("secondary-third", 403, {}, SECONDARY, 3, 240.0),
    ("secondary-capped", 429, {}, "", 4, 480.0),
    ("secondary-429-without-headers", 429, {}, "", 1, 60.0),
    ("server-error-first", 502, {}, "", 1, 1.0),
    ("server-error-third", 500, {}, "", 3, 4.0),
    ("server-error-504", 504, {}, "", 2, 2.0),
    ("not-implemented", 501, {}, "", 1, None),
    ("forbidden-permission", 403, {"x-ratelimit-remaining": "4999"}, FORBIDDEN, 1, None),
    ("not-found", 404, {}, "", 1, None),
    ("unprocessable", 422, {}, '{"message": "Validation Failed"}', 1, None),
    ("unauthorized", 401, {}, "", 1, None),
    ("success", 200, {"retry-after": "5"}, "", 1, None),
    ("redirect", 304, {}, "", 1, None),
    ("last-attempt-secondary", 429, {"retry-after": "1"}, "", MAX_ATTEMPTS, None),
    ("last-attempt-server-error", 500, {}, "", MAX_ATTEMPTS, None),
]


@pytest.mark.parametrize(
    ("status", "headers", "body", "attempt", "expected"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_wait_before_retry(
    status: int, headers: dict[str, str], body: str, attempt: int, expected: float | None
) -> None:
    assert wait_before_retry(status, headers, body, attempt, NOW) == expected


def test_retry_after_http_date_in_the_future() -> None:
    # 1_700_000_060 is Tue, 14 Nov 2023 22:14:20 GMT.
    wait = wait_before_retry(
        503, {"retry-after": "Tue, 14 Nov 2023 22:14:20 GMT"}, "", 1, 1_700_000_000.0
    )
    assert wait == pytest.approx(60.0)


def test_secondary_backoff_never_exceeds_the_cap() -> None:
    waits = [wait_before_retry(429, {}, "", n, NOW, max_attempts=20) for n in range(1, 20)]
    assert waits[:5] == [60.0, 120.0, 240.0, 480.0, 900.0]
    assert max(w for w in waits if w is not None) == 900.0


def test_server_errors_back_off_briefly() -> None:
    waits = [wait_before_retry(503, {}, "", n, NOW, max_attempts=20) for n in range(1, 10)]
    assert waits == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0, 30.0]


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_write_spacer_spaces_writes_and_lets_reads_through() -> None:
    clock = FakeClock()
    spacer = WriteSpacer(1.0, clock=clock, sleep=clock.sleep)
    assert spacer.wait("POST") == 0.0
    assert spacer.wait("GET") == 0.0
    assert spacer.wait("patch") == 1.0
    clock.now += 0.25
    assert spacer.wait("PUT") == 0.75
    clock.now += 5
    assert spacer.wait("DELETE") == 0.0
    assert spacer.wait("HEAD") == 0.0
    assert clock.slept == [1.0, 0.75]


@pytest.mark.parametrize(
    ("gaps", "expected"),
    [
        pytest.param([0, 0, 0], [0.0, 1.0, 2.0], id="burst-queues"),
        pytest.param([0, 2, 0.5], [0.0, 0.0, 0.5], id="spread-out"),
        pytest.param([0, 0.999, 0.001], [0.0, 0.001, 1.0], id="queued-behind-reserved-slot"),
    ],
)
def test_write_spacer_reservations(gaps: list[float], expected: list[float]) -> None:
    clock = FakeClock()
    spacer = WriteSpacer(1.0, clock=clock, sleep=clock.sleep)
    delays = []
    for gap in gaps:
        clock.now += gap
        delays.append(spacer.delay("POST"))
    assert delays == pytest.approx(expected)


def test_write_spacer_gives_concurrent_writers_distinct_slots() -> None:
    clock = FakeClock()
    spacer = WriteSpacer(1.0, clock=clock, sleep=lambda s: None)
    delays: list[float] = []
    lock = threading.Lock()

    def write() -> None:
        delay = spacer.delay("POST")
        with lock:
            delays.append(delay)

    threads = [threading.Thread(target=write) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(delays) == [float(n) for n in range(20)]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("7", 7.0),
        (" 2.5 ", 2.5),
        ("-3", 0.0),
        ("nan", None),
        ("inf", None),
        ("soon", None),
        ("Thu, 01 Jan 1970 00:01:40 GMT", 60.0),
        ("Thu, 01 Jan 1970 00:00:10 GMT", 0.0),
    ],
)
def test_parse_retry_after(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value, now=40.0) == expected
