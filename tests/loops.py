"""Coroutines run from a synchronous test, each on a fresh event loop in a thread of its own.

The pytest thread cannot be trusted to have no running loop: once a browser test on the same
xdist worker has started the session's Playwright (its sync API keeps a loop running on the
thread for the whole session), `asyncio.run` there raises "cannot be called from a running
event loop". Every coroutine a test runs goes through `run_async`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_async(coro: Coroutine[Any, Any, T], timeout: float = 30) -> T:
    """`asyncio.run(coro)` on a new daemon thread; the coroutine's exception is raised here,
    and a scenario still running after `timeout` seconds fails the test instead of hanging
    it (or the interpreter's exit)."""
    outcome: list[Any] = []
    failure: list[BaseException] = []

    def target() -> None:
        try:
            outcome.append(asyncio.run(coro))
        except BaseException as exc:  # handed to the test's thread below
            failure.append(exc)

    thread = threading.Thread(target=target, name="test-loop", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise AssertionError(f"the scenario did not finish within {timeout:g} s")
    if failure:
        raise failure[0]
    result: T = outcome[0]
    return result
