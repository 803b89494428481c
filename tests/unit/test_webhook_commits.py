"""The webhook's wait for the store's commits: what the writer thread settled reaches each
request as `asyncio.wrap_future` would hand it over, with one wake-up of the loop for all
the deliveries settled together."""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import Future
from typing import Any

import pytest

from loopwright.app.webhooks import _committed


class CountingLoop(asyncio.SelectorEventLoop):
    """Counts the calls other threads hand to the loop (each wakes it through its pipe)."""

    def __init__(self) -> None:
        super().__init__()
        self.wakeups = 0

    def call_soon_threadsafe(self, *args: Any, **kwargs: Any) -> Any:
        self.wakeups += 1
        return super().call_soon_threadsafe(*args, **kwargs)


def run(coroutine: Any) -> tuple[Any, int]:
    loop = CountingLoop()
    try:
        return loop.run_until_complete(coroutine), loop.wakeups
    finally:
        loop.close()


def on_a_thread(work: Any) -> threading.Thread:
    thread = threading.Thread(target=work)
    thread.start()
    return thread


def test_a_batch_settled_together_wakes_the_loop_once() -> None:
    futures: list[Future[int]] = [Future() for _ in range(50)]

    async def main() -> list[int]:
        waiters = [_committed(f) for f in futures]
        settled = threading.Event()

        def writer() -> None:
            for i, future in enumerate(futures):
                future.set_running_or_notify_cancel()
                future.set_result(i)
            settled.set()

        thread = on_a_thread(writer)
        settled.wait(10)  # the loop is busy while the writer settles the batch
        thread.join()
        return list(await asyncio.gather(*waiters))

    results, wakeups = run(main())
    assert results == list(range(50))
    assert wakeups == 1  # asyncio.wrap_future: 50


def test_batches_settled_apart_each_wake_the_loop() -> None:
    async def main() -> list[int]:
        results = []
        for i in range(3):
            future: Future[int] = Future()
            waiter = _committed(future)
            on_a_thread(lambda f=future, i=i: f.set_result(i)).join()
            results.append(await waiter)
        return results

    results, wakeups = run(main())
    assert results == [0, 1, 2]
    assert wakeups == 3  # none is lost to the one before it


def test_an_error_reaches_its_request_and_only_its_own() -> None:
    good: Future[str] = Future()
    bad: Future[str] = Future()

    async def main() -> tuple[str, BaseException | None]:
        waiters = [_committed(good), _committed(bad)]

        def writer() -> None:
            good.set_result("stored")
            bad.set_exception(OSError("disk full"))

        on_a_thread(writer).join()
        stored = await waiters[0]
        try:
            await waiters[1]
        except OSError as exc:
            return stored, exc
        return stored, None

    (stored, error), _ = run(main())
    assert stored == "stored"
    assert isinstance(error, OSError) and str(error) == "disk full"


def test_a_future_settled_before_the_wait_is_handed_over() -> None:
    future: Future[int] = Future()
    future.set_result(7)

    async def main() -> int:
        return await _committed(future)

    assert run(main())[0] == 7


def test_a_cancelled_request_cancels_a_write_the_writer_has_not_taken() -> None:
    future: Future[int] = Future()

    async def main() -> None:
        task = asyncio.ensure_future(_committed(future))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(main())
    assert future.cancelled()
    assert future.set_running_or_notify_cancel() is False  # the writer skips it


def test_a_write_cancelled_by_the_writer_cancels_the_request() -> None:
    future: Future[int] = Future()

    async def main() -> bool:
        waiter = _committed(future)
        on_a_thread(future.cancel).join()
        try:
            await waiter
        except asyncio.CancelledError:
            return True
        return False

    assert run(main())[0] is True


def test_a_commit_settled_after_its_loop_closed_raises_nothing_on_the_writer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    future: Future[int] = Future()

    async def main() -> None:
        _committed(future)

    run(main())  # the loop is closed on return, its request never answered
    with caplog.at_level(logging.ERROR):
        on_a_thread(lambda: future.set_result(1)).join()
    # concurrent.futures logs "exception calling callback" for a callback that raises.
    assert [r for r in caplog.records if r.name == "concurrent.futures"] == []
