"""The in-process mission queue against a real SQLite store: limits, shutdown, recovery."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from loopwright.missions.result import MissionResult
from loopwright.request import MissionRequest
from loopwright.store import InProcessQueue, MissionQueue, Store, migrate


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'loopwright.db'}"
    migrate(url)
    return url


@pytest.fixture
def store(url: str) -> Iterator[Store]:
    with Store(url) as store:
        yield store


def create(store: Store, n: int) -> list[str]:
    ids = []
    for i in range(n):
        request = MissionRequest(
            trigger="check_run",
            repo="acme/app",
            clone_url="https://github.com/acme/app.git",
            head_sha=f"{i:040x}",
            check_name="tests",
        )
        mission, created = store.create_mission(request)
        assert created
        ids.append(mission.id)
    return ids


def statuses(store: Store) -> dict[str, str]:
    return {m.id: m.status for m in store.list_missions(limit=1000)}


def wait_for(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.01)


def finisher(store: Store) -> Callable[[str], None]:
    def run(mission_id: str) -> None:
        store.mark_finished(MissionResult(mission_id, "verified"))

    return run


def test_twenty_missions_with_concurrency_two_never_run_more_than_two(store: Store):
    lock = threading.Lock()
    now = 0
    peak = 0

    def run(mission_id: str) -> None:
        nonlocal now, peak
        with lock:
            now += 1
            peak = max(peak, now)
        time.sleep(0.02)
        with lock:
            now -= 1
        store.mark_finished(MissionResult(mission_id, "verified"))

    queue: MissionQueue = InProcessQueue(store, run, concurrency=2)
    ids = create(store, 20)
    queue.start()
    for mission_id in ids:
        queue.submit(mission_id)
    wait_for(lambda: set(statuses(store).values()) == {"verified"})
    assert queue.stop(timeout=10)
    assert peak == 2
    assert queue.running() == []
    assert all(m.attempts == 1 for m in store.list_missions())


def test_stop_leaves_unstarted_missions_queued_and_recover_runs_them(url: str, store: Store):
    started = threading.Event()
    release = threading.Event()
    seen: list[str] = []

    def slow(mission_id: str) -> None:
        seen.append(mission_id)
        started.set()
        release.wait(10)
        store.mark_finished(MissionResult(mission_id, "verified"))

    ids = create(store, 5)
    queue = InProcessQueue(store, slow, concurrency=1)
    queue.start()
    for mission_id in ids:
        queue.submit(mission_id)
    assert started.wait(10)
    assert queue.running() == [ids[0]]

    stopped: list[bool] = []
    stopper = threading.Thread(target=lambda: stopped.append(queue.stop(timeout=10)))
    stopper.start()
    time.sleep(0.05)  # stop() is now waiting for the running mission
    release.set()
    stopper.join(10)
    assert stopped == [True]
    assert seen == [ids[0]]
    queue.submit("after-stop")  # ignored: the queue takes no more work
    assert statuses(store) == {ids[0]: "verified", **{i: "queued" for i in ids[1:]}}

    with Store(url) as second_store:
        second = InProcessQueue(second_store, finisher(second_store), concurrency=2)
        assert second.recover() == []
        second.start()
        wait_for(lambda: set(statuses(second_store).values()) == {"verified"})
        assert second.stop(timeout=10)


def test_recover_marks_missions_left_running_as_interrupted(store: Store):
    crashed, waiting = create(store, 2)
    assert store.mark_running(crashed)  # a worker of a process that died
    queue = InProcessQueue(store, finisher(store), concurrency=1)
    interrupted = queue.recover()
    assert [m.id for m in interrupted] == [crashed]
    queue.start()
    wait_for(lambda: statuses(store)[waiting] == "verified")
    assert queue.stop(timeout=10)
    assert statuses(store)[crashed] == "interrupted"


def test_a_work_function_that_raises_marks_error_and_the_worker_carries_on(store: Store):
    bad, good, forgetful = create(store, 3)

    def run(mission_id: str) -> None:
        if mission_id == bad:
            raise RuntimeError("the sandbox image is missing; token ghs_" + "A" * 36)
        if mission_id == good:
            store.mark_finished(MissionResult(mission_id, "verified"))

    queue = InProcessQueue(store, run, concurrency=1)
    queue.start()
    for mission_id in (bad, good, forgetful):
        queue.submit(mission_id)
    wait_for(lambda: len(finished(store)) == 3)
    assert queue.stop(timeout=10)
    failed = store.get_mission(bad)
    assert failed is not None
    assert failed.status == "error"
    assert failed.message is not None
    assert failed.message.startswith("RuntimeError: the sandbox image is missing; token ")
    assert "ghs_" not in failed.message
    assert failed.finished_at is not None
    assert statuses(store)[good] == "verified"
    left = store.get_mission(forgetful)
    assert left is not None
    assert (left.status, left.message) == (
        "error",
        "the runner returned without recording a result",
    )


def finished(store: Store) -> list[str]:
    return [i for i, s in statuses(store).items() if s not in ("queued", "running")]


def test_a_mission_submitted_twice_runs_once(store: Store):
    (mission_id,) = create(store, 1)
    calls: list[str] = []

    def run(mid: str) -> None:
        calls.append(mid)
        store.mark_finished(MissionResult(mid, "verified"))

    queue = InProcessQueue(store, run, concurrency=2)
    for _ in range(5):
        queue.submit(mission_id)
    queue.start()
    wait_for(lambda: statuses(store)[mission_id] == "verified")
    time.sleep(0.05)
    assert queue.stop(timeout=10)
    assert calls == [mission_id]


def test_stop_times_out_on_a_mission_that_will_not_end(store: Store):
    (mission_id,) = create(store, 1)
    release = threading.Event()

    def stuck(_: str) -> None:
        release.wait(10)

    queue = InProcessQueue(store, stuck, concurrency=1)
    queue.start()
    queue.submit(mission_id)
    wait_for(lambda: queue.running() == [mission_id])
    assert queue.stop(timeout=0.1) is False
    release.set()
    wait_for(lambda: queue.running() == [])


def test_concurrency_must_be_positive(store: Store):
    with pytest.raises(ValueError, match="at least 1"):
        InProcessQueue(store, finisher(store), concurrency=0)
