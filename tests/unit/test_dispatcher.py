"""The in-process mission queue against a real SQLite store: limits, shutdown, recovery,
the slots that hold the caps across processes."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from sqlalchemy import event

from loopwright.app.runtime import DeliveriesInFlight, Runtime, feed_from_store
from loopwright.missions.result import MissionResult
from loopwright.request import MissionRequest
from loopwright.sandbox.docker.reaper import owner_id
from loopwright.store import InProcessQueue, MissionQueue, Store, migrate
from tests.slot_race import start_racers
from tests.unit.test_slots import peak

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'loopwright.db'}"
    migrate(url)
    return url


@pytest.fixture
def store(url: str) -> Iterator[Store]:
    with Store(url) as store:
        yield store


def create(
    store: Store, n: int, *, installation: int | None = None, repo: str = "acme/app"
) -> list[str]:
    ids = []
    for i in range(n):
        request = MissionRequest(
            trigger="check_run",
            repo=repo,
            clone_url=f"https://github.com/{repo}.git",
            head_sha=f"{i:040x}",
            check_name="tests",
            installation_id=installation,
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


def test_missions_start_once_the_deliveries_being_answered_are_answered(store: Store):
    deliveries = DeliveriesInFlight()
    queue = InProcessQueue(
        store, finisher(store), concurrency=2, yield_to=deliveries.wait_answered, yield_s=30
    )
    queue.start()
    try:
        with deliveries.answering(), deliveries.answering():
            (mission_id,) = create(store, 1)
            queue.submit(mission_id)
            time.sleep(0.5)
            assert statuses(store)[mission_id] == "queued"  # not claimed, holds no slot
            assert store.slots_held() == 0
        answered = time.monotonic()
        wait_for(lambda: statuses(store)[mission_id] == "verified", timeout=5)
        assert time.monotonic() - answered < 3  # at once, not after the 30 s hold
    finally:
        assert queue.stop(timeout=10)


def test_deliveries_that_never_end_hold_missions_back_only_yield_s(store: Store):
    deliveries = DeliveriesInFlight()
    queue = InProcessQueue(
        store, finisher(store), concurrency=1, yield_to=deliveries.wait_answered, yield_s=0.4
    )
    queue.start()
    try:
        with deliveries.answering():
            (mission_id,) = create(store, 1)
            submitted = time.monotonic()
            queue.submit(mission_id)
            wait_for(lambda: statuses(store)[mission_id] == "verified", timeout=5)
            assert time.monotonic() - submitted >= 0.4
    finally:
        assert queue.stop(timeout=10)


def test_missions_wait_for_a_quiet_moment_after_a_burst():
    deliveries = DeliveriesInFlight(quiet_s=0.5)
    assert deliveries.wait_answered(0) is True  # nothing answered yet: nothing to wait for
    with deliveries.answering(), deliveries.answering(), deliveries.answering():  # a burst
        answered = time.monotonic()  # no later than the moment the burst counts as answered
    assert deliveries.wait_answered(0.1) is False
    assert deliveries.wait_answered(5) is True
    assert time.monotonic() - answered >= 0.5


def test_a_delivery_answered_during_the_quiet_moment_starts_it_again():
    deliveries = DeliveriesInFlight(quiet_s=1.0)
    with deliveries.answering(), deliveries.answering(), deliveries.answering():
        pass
    second_answered: list[float] = []

    def another_delivery() -> None:
        time.sleep(0.2)
        with deliveries.answering():  # alone, but within the burst's quiet moment
            time.sleep(0.1)
            second_answered.append(time.monotonic())

    thread = threading.Thread(target=another_delivery)
    thread.start()
    try:
        assert deliveries.wait_answered(10) is True
        returned = time.monotonic()
    finally:
        thread.join()
    # The wait ends a whole quiet moment after the second delivery, not after the first.
    assert returned - second_answered[0] >= 1.0


def test_two_deliveries_at_once_are_not_yet_a_burst():
    deliveries = DeliveriesInFlight(quiet_s=5.0)
    with deliveries.answering(), deliveries.answering():  # ordinary traffic does this by chance
        pass
    assert deliveries.wait_answered(0) is True
    with deliveries.answering(), deliveries.answering(), deliveries.answering():
        pass
    assert deliveries.wait_answered(0) is False


def test_a_lone_delivery_after_a_bursts_quiet_moment_has_none():
    deliveries = DeliveriesInFlight(quiet_s=0.2)
    with deliveries.answering(), deliveries.answering(), deliveries.answering():
        pass
    assert deliveries.wait_answered(5) is True
    time.sleep(0.05)
    for _ in range(3):
        with deliveries.answering():
            pass
        assert deliveries.wait_answered(0) is True


@contextmanager
def one_at_a_time(deliveries: DeliveriesInFlight, answer_s: float) -> Iterator[None]:
    """Deliveries answered one at a time, 50 ms apart, on a thread, while the block runs."""
    stop = threading.Event()

    def send() -> None:
        while not stop.is_set():
            with deliveries.answering():
                time.sleep(answer_s)
            stop.wait(0.05)

    sender = threading.Thread(target=send)
    sender.start()
    try:
        yield
    finally:
        stop.set()
        sender.join()


def test_stragglers_cannot_stretch_a_burst_for_ever():
    """Lone deliveries less than `quiet_s` apart after a burst: each extends the quiet
    moment only within `quiet_s` of the burst's last delivery, so missions start after
    twice `quiet_s` at most, not when the deliveries stop."""
    deliveries = DeliveriesInFlight(quiet_s=0.5)
    with deliveries.answering(), deliveries.answering(), deliveries.answering():
        burst_answered = time.monotonic()  # no later than the burst's own stamp
    with one_at_a_time(deliveries, answer_s=0.002):
        assert deliveries.wait_answered(20) is True
        waited = time.monotonic() - burst_answered
    # Twice quiet_s at most, and a little for the last straggler's own 2 ms; the
    # stragglers went on until the block ended, 20 s later at most.
    assert 0.5 <= waited < 1.3


def test_burst_in_flight_must_make_a_burst_of_two_or_more():
    with pytest.raises(ValueError, match="at least 2"):
        DeliveriesInFlight(burst_in_flight=1)


def test_deliveries_one_at_a_time_have_no_quiet_moment():
    deliveries = DeliveriesInFlight(quiet_s=5.0)
    for _ in range(3):
        with deliveries.answering():
            assert deliveries.wait_answered(0) is False  # one is being answered
        assert deliveries.wait_answered(0) is True  # and none is: no burst, no wait


def test_steady_traffic_does_not_hold_missions_back(store: Store):
    """A delivery every 50 ms, one at a time: a mission starts between two of them, not
    after the queue's whole `yield_s`."""
    deliveries = DeliveriesInFlight(quiet_s=0.2)
    queue = InProcessQueue(
        store, finisher(store), concurrency=1, yield_to=deliveries.wait_answered, yield_s=30
    )
    queue.start()
    try:
        with one_at_a_time(deliveries, answer_s=0.005):
            time.sleep(0.3)
            (mission_id,) = create(store, 1)
            submitted = time.monotonic()
            queue.submit(mission_id)
            wait_for(lambda: statuses(store)[mission_id] == "verified", timeout=20)
            assert time.monotonic() - submitted < 5  # not the 30 s hold
    finally:
        assert queue.stop(timeout=10)


class Submitted:
    """A mission queue that only records what it is handed (`feed_from_store`'s view)."""

    def __init__(self) -> None:
        self.ids: list[str] = []

    def submit(self, mission_id: str) -> None:
        self.ids.append(mission_id)

    def running(self) -> list[str]:
        return []


def test_the_store_feed_hands_queued_missions_over_oldest_first_and_once(store: Store):
    first = create(store, 6)  # random ids: their sorted order is not their age
    queue = Submitted()
    runtime = cast(Runtime, SimpleNamespace(store=store, queue=queue))
    stop = threading.Event()
    feeder = threading.Thread(target=feed_from_store, args=(runtime, stop, 0.05))
    feeder.start()
    try:
        wait_for(lambda: len(queue.ids) == 6)
        later = create(store, 2, repo="acme/later")
        wait_for(lambda: len(queue.ids) == 8)
        time.sleep(0.2)  # a few more polls hand nothing over again
    finally:
        stop.set()
        feeder.join()
    assert queue.ids == first + later


def test_concurrency_must_be_positive(store: Store):
    with pytest.raises(ValueError, match="at least 1"):
        InProcessQueue(store, finisher(store), concurrency=0)


def test_an_installation_at_its_cap_does_not_hold_back_another_installations_mission(
    store: Store,
):
    backlog = create(store, 5, installation=11, repo="busy/app")
    (other,) = create(store, 1, installation=22, repo="quiet/app")
    started: list[str] = []
    release = threading.Event()

    def run(mission_id: str) -> None:
        started.append(mission_id)
        if mission_id != other:
            release.wait(20)
        store.mark_finished(MissionResult(mission_id, "verified"))

    queue = InProcessQueue(store, run, concurrency=3, installation_cap=1, retry_s=0.05)
    queue.start()
    for mission_id in [*backlog, other]:
        queue.submit(mission_id)
    # The quiet installation's mission runs to the end while the busy one's first mission
    # still holds its only slot and its other four wait, holding no thread.
    wait_for(lambda: statuses(store)[other] == "verified")
    wait_for(lambda: queue.running() == [backlog[0]])
    assert started == [backlog[0], other]
    assert [statuses(store)[m] for m in backlog[1:]] == ["queued"] * 4
    assert store.slots_held(11) == 1
    release.set()
    wait_for(lambda: set(statuses(store).values()) == {"verified"})
    assert queue.stop(timeout=10)
    assert started == [*backlog[:1], other, *backlog[1:]]
    assert store.slots_held() == 0


def test_missions_refused_a_slot_wait_without_busy_looping(store: Store):
    (held, waiting) = create(store, 2, installation=11)
    assert store.acquire_slot(held, 11, "elsewhere.example:1:1", 5, 1)
    statements: list[str] = []

    def count(*args: Any) -> None:
        statements.append(str(args[2]))

    queue = InProcessQueue(store, finisher(store), concurrency=2, installation_cap=1, retry_s=0.2)
    queue.start()
    queue.submit(waiting)
    time.sleep(0.3)
    event.listen(store.engine, "before_cursor_execute", count)
    try:
        time.sleep(1.0)
    finally:
        event.remove(store.engine, "before_cursor_execute", count)
    # About five tries a second, each a handful of statements; a busy loop makes thousands.
    assert 0 < len(statements) < 60, statements
    assert statuses(store)[waiting] == "queued"
    store.release_slot(held, "elsewhere.example:1:1")  # the other process finished
    wait_for(lambda: statuses(store)[waiting] == "verified")
    assert queue.stop(timeout=10)


def test_every_way_a_mission_ends_gives_its_slot_back(store: Store):
    bad, good, cancelled = create(store, 3)

    def run(mission_id: str) -> None:
        if mission_id == bad:
            raise RuntimeError("the sandbox died")
        store.mark_finished(MissionResult(mission_id, "verified"))

    assert store.request_cancel(cancelled, "not needed") == "cancelled"
    queue = InProcessQueue(store, run, concurrency=1, global_cap=1, retry_s=0.05)
    queue.start()
    for mission_id in (bad, cancelled, good):
        queue.submit(mission_id)
    wait_for(lambda: statuses(store)[good] == "verified")
    assert queue.stop(timeout=10)
    assert statuses(store) == {bad: "error", good: "verified", cancelled: "cancelled"}
    assert store.slots_held() == 0


def test_the_slots_of_a_dead_process_are_freed_and_its_queued_missions_run(store: Store):
    (mission_id,) = create(store, 1)
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert store.acquire_slot("of-the-dead", None, owner_id(child.pid), 1, None)
    queue = InProcessQueue(
        store, finisher(store), concurrency=1, global_cap=1, retry_s=0.05, heartbeat_s=0.1
    )
    queue.start()
    queue.submit(mission_id)
    wait_for(lambda: statuses(store)[mission_id] == "verified")
    assert queue.stop(timeout=10)
    assert store.slots_held() == 0


def test_recover_frees_the_slots_of_the_missions_it_marks_interrupted(store: Store):
    (crashed,) = create(store, 1)
    assert store.acquire_slot(crashed, None, "elsewhere.example:1:1", 1, None)
    assert store.mark_running(crashed)
    queue = InProcessQueue(store, finisher(store), concurrency=1)
    assert [m.id for m in queue.recover()] == [crashed]
    assert store.slots_held() == 0


def test_the_global_cap_holds_across_two_processes_on_one_sqlite_file(url: str, store: Store):
    # Two threads each: three at once means both processes ran missions together, and
    # more than three (four threads) is what only the slots prevent.
    global_cap, threads = 3, 2
    create(store, 14)
    processes = start_racers([["queue", url, str(global_cap), str(threads)]] * 2)
    ran: list[list[Any]] = []
    for process in processes:
        out, _ = process.communicate(timeout=120)
        assert process.returncode == 0
        ran.append([json.loads(line) for line in out.splitlines()])
    assert len(ran[0]) + len(ran[1]) == 14
    assert peak([tuple(i) for r in ran for i in r]) == global_cap
    assert set(statuses(store).values()) == {"verified"}
    assert all(m.attempts == 1 for m in store.list_missions())
    assert store.slots_held() == 0


def test_a_live_workers_mission_survives_a_restarted_servers_recover(store: Store):
    """Store-only mode: a `loopwright worker` runs a mission past the stale limit; its
    queue renews the mission's heartbeat, so a server's `recover` leaves it running."""
    (mission_id,) = create(store, 1)
    release = threading.Event()

    def run(mid: str) -> None:
        release.wait(20)
        store.set_status(mid, "verified", expect="running")

    worker = InProcessQueue(
        store, run, concurrency=1, heartbeat_s=0.1, stale_after_s=0.5,
        runner="workerhost.invalid:42:9",  # a worker of another host
    )  # fmt: skip
    try:
        worker.start()
        worker.submit(mission_id)
        wait_for(lambda: statuses(store)[mission_id] == "running")
        time.sleep(1.0)
        server = InProcessQueue(
            store, finisher(store), concurrency=1, heartbeat_s=0.1, stale_after_s=0.5
        )
        assert server.recover() == []
        release.set()
        wait_for(lambda: statuses(store)[mission_id] == "verified")
    finally:
        release.set()
        assert worker.stop(timeout=10)
