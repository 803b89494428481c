"""`SaqQueue` on a real Redis and a real PostgreSQL: every stored mission runs exactly once
however many processes submit it and however many consume, and a Redis restarted empty
loses none."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection

from redis import asyncio as aioredis
from saq.job import Status
from saq.queue import Queue
from saq.queue.redis import RedisQueue
from saq.utils import now

from loopwright.request import MissionRequest
from loopwright.sandbox.docker.reaper import owner_id
from loopwright.store.engine import migrate
from loopwright.store.repository import Store
from loopwright.store.saq_queue import JOB_FUNCTION, QUEUE_NAME, SaqQueue, saq_url
from loopwright.store.slots import SlotGrant
from tests.loops import run_async


def _missions(store: Store, count: int) -> list[str]:
    ids = []
    for n in range(count):
        request = MissionRequest(
            trigger="check_run", repo="acme/invoice", clone_url="", head_sha=f"{n:040x}"
        )
        mission, created = store.create_mission(request)
        assert created
        ids.append(mission.id)
    return ids


class Runs:
    """The run function of each consumer: which consumer ran which mission, how often."""

    def __init__(self, store: Store, seconds: float) -> None:
        self.store = store
        self.seconds = seconds
        self.by: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def runner(self, name: str) -> Callable[[str], None]:
        def run(mission_id: str) -> None:
            with self.lock:
                self.by.append((name, mission_id))
            time.sleep(self.seconds)
            assert self.store.set_status(mission_id, "verified", expect="running")

        return run

    def counts(self) -> Counter[str]:
        with self.lock:
            return Counter(mission for _, mission in self.by)


def _wait_final(store: Store, ids: list[str], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        statuses = {m: store.get_mission(m).status for m in ids}  # type: ignore[union-attr]
        if all(s not in ("queued", "running") for s in statuses.values()):
            return
        time.sleep(0.1)
    raise AssertionError(f"missions did not finish: {statuses}")


def _saq_count(url: str, kind: str) -> int:
    async def count() -> int:
        queue = Queue.from_url(saq_url(url), name=QUEUE_NAME)
        await queue.connect()
        try:
            return await queue.count(kind)  # type: ignore[arg-type]
        finally:
            await queue.disconnect()

    return run_async(count())


def test_two_consumers_run_every_mission_exactly_once(saq_backend: tuple[str, Store]) -> None:
    url, store = saq_backend
    ids = _missions(store, 8)
    # Long enough that one consumer cannot run all eight before the other has started
    # taking jobs, on a loaded machine too. The global cap leaves room for both consumers'
    # jobs at once: under a cap of two, the consumer holding both slots takes its next job
    # the moment it frees one, while the other's refused jobs wait out their deferral, so
    # one consumer may run every mission.
    runs = Runs(store, seconds=1.5)
    queues = [
        SaqQueue(store, runs.runner(name), 2, url=url, heartbeat_s=6, requeue_s=0.5, global_cap=4)
        for name in ("a", "b")
    ]
    try:
        for queue in queues:
            queue.start()
        for mission_id in ids:
            for queue in queues:  # each mission submitted by both processes
                queue.submit(mission_id)
        _wait_final(store, ids)
    finally:
        stopped = [queue.stop(timeout=30) for queue in queues]
    assert stopped == [True, True]
    assert runs.counts() == Counter({m: 1 for m in ids})
    assert {name for name, _ in runs.by} == {"a", "b"}, runs.by
    for mission_id in ids:
        mission = store.get_mission(mission_id)
        assert mission is not None
        assert (mission.status, mission.attempts) == ("verified", 1)
        assert mission.runner is not None


def test_a_mission_submitted_three_times_is_one_job(saq_backend: tuple[str, Store]) -> None:
    url, store = saq_backend
    (mission_id,) = _missions(store, 1)
    submitter = SaqQueue(store, None, 1, url=url)
    try:
        for _ in range(3):
            submitter.submit(mission_id)
        assert _saq_count(url, "queued") == 1
        assert submitter.running() == []
    finally:
        assert submitter.stop(timeout=5)
    runs = Runs(store, seconds=0)
    consumer = SaqQueue(store, runs.runner("worker"), 2, url=url, requeue_s=0.5)
    try:
        consumer.start()
        _wait_final(store, [mission_id])
    finally:
        consumer.stop(timeout=30)
    assert runs.counts() == Counter({mission_id: 1})


def test_an_idle_worker_stops_within_seconds_not_a_sweep_interval(
    saq_backend: tuple[str, Store],
) -> None:
    """SAQ's upkeep sleeps out its interval (the sweep's is `heartbeat_s`, 30 s) before it
    sees the stop: an idle worker must not wait for it. Stopped while its upkeep sleeps, and
    stopped at once after its start."""
    url, store = saq_backend
    for settle_s in (1.5, 0.0):
        runs = Runs(store, seconds=0)
        consumer = SaqQueue(store, runs.runner("worker"), 1, url=url)
        consumer.start()
        time.sleep(settle_s)
        started = time.monotonic()
        assert consumer.stop(timeout=30)
        took = time.monotonic() - started
        assert took < 8, f"an idle worker took {took:.1f} s to stop (settled {settle_s} s)"
    # And a worker with this upkeep still takes and runs a mission.
    (mission_id,) = _missions(store, 1)
    runs = Runs(store, seconds=0)
    consumer = SaqQueue(store, runs.runner("worker"), 1, url=url, requeue_s=0.5)
    try:
        consumer.start()
        consumer.submit(mission_id)
        _wait_final(store, [mission_id])
    finally:
        assert consumer.stop(timeout=30)
    assert runs.counts() == Counter({mission_id: 1})


def test_a_stop_during_a_sweep_lets_the_sweep_put_the_stuck_job_back(
    tmp_path, redis_service
) -> None:
    """A worker's first sweep finds the job of a worker that died mid-run, aborts it and
    waits (up to 5 s) before it retries it. A stop in that wait must neither cut the sweep
    short (the job would be left out of every list SAQ keeps, aborting) nor wait out the
    sweep's interval after it."""
    store_url = f"sqlite:///{tmp_path / 'loopwright.db'}"
    migrate(store_url)
    store = Store(store_url)
    (mission_id,) = _missions(store, 1)

    async def plant() -> str:
        queue = RedisQueue(aioredis.from_url(saq_url(redis_service.url)), name=QUEUE_NAME)
        await queue.connect()
        try:
            job = await queue.enqueue(JOB_FUNCTION, key=mission_id, mission_id=mission_id,
                                      timeout=10, retries=3)  # fmt: skip
            assert job is not None
            taken = await queue.dequeue(timeout=1)  # by a worker that then died
            assert taken is not None and taken.key == mission_id
            taken.started = now() - 60_000  # a minute ago: past its timeout, so stuck
            await taken.update(status=Status.ACTIVE)
            return job.id
        finally:
            await queue.disconnect()

    job_id = run_async(plant())
    consumer = SaqQueue(store, Runs(store, seconds=0).runner("worker"), 1, url=redis_service.url)
    try:
        consumer.start()
        time.sleep(1.5)  # the sweep has aborted the job and waits to retry it
        started = time.monotonic()
        assert consumer.stop(timeout=30)
        took = time.monotonic() - started
    finally:
        store.close()
    assert took < 15, f"the stop took {took:.1f} s"

    async def state() -> tuple[Status, bool]:
        queue = RedisQueue(aioredis.from_url(saq_url(redis_service.url)), name=QUEUE_NAME)
        await queue.connect()
        try:
            job = await queue.job(mission_id)
            assert job is not None
            queued = await queue.redis.lrange(queue._queued, 0, -1)  # type: ignore[misc]
            return job.status, job_id.encode() in queued
        finally:
            await queue.disconnect()

    assert run_async(state()) == (Status.QUEUED, True)


def test_a_redis_restarted_empty_mid_run_loses_no_mission(tmp_path, redis_service) -> None:
    store_url = f"sqlite:///{tmp_path / 'loopwright.db'}"
    migrate(store_url)
    store = Store(store_url)
    ids = _missions(store, 5)
    runs = Runs(store, seconds=1.0)
    server = SaqQueue(store, None, 1, url=redis_service.url, requeue_s=0.5)
    worker = SaqQueue(store, runs.runner("worker"), 1, url=redis_service.url, requeue_s=0.5)
    try:
        server.start()
        worker.start()
        for mission_id in ids:
            server.submit(mission_id)
        deadline = time.monotonic() + 30
        while not runs.by and time.monotonic() < deadline:
            time.sleep(0.05)
        assert runs.by, "no mission started"
        # Every job still waiting is gone with the restart; the store still has them.
        redis_service.restart(down_s=1.0)
        _wait_final(store, ids, timeout=120)
    finally:
        assert worker.stop(timeout=30)
        server.stop(timeout=5)
        store.close()
    assert runs.counts() == Counter({m: 1 for m in ids})


class SlotStore(Store):
    """A store with mission slots as the `MissionSlots` contract describes them (the
    store's semaphore): at most `global_cap` missions hold a slot at once."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.slots: dict[str, str] = {}
        self.refused = 0
        self.heartbeats: set[str] = set()
        self._slot_lock = threading.Lock()

    def acquire_slot(
        self,
        mission_id: str,
        installation_id: int | None,
        holder: str,
        global_cap: int,
        installation_cap: int | None,
    ) -> SlotGrant | None:
        with self._slot_lock:
            if mission_id in self.slots:
                return "held" if self.slots[mission_id] == holder else None
            if len(self.slots) >= global_cap:
                self.refused += 1
                return None
            self.slots[mission_id] = holder
            return "taken"

    def heartbeat_slots(self, holder: str, mission_ids: Collection[str]) -> None:
        with self._slot_lock:
            self.heartbeats.add(holder)

    def release_slot(self, mission_id: str, holder: str) -> None:
        with self._slot_lock:
            if self.slots.get(mission_id) == holder:
                del self.slots[mission_id]


def test_a_mission_refused_a_slot_waits_and_runs_later(saq_backend: tuple[str, Store]) -> None:
    url, plain = saq_backend
    store = SlotStore(str(plain.engine.url.render_as_string(hide_password=False)))
    ids = _missions(store, 4)
    running: set[str] = set()
    most = 0
    lock = threading.Lock()
    runs = Runs(store, seconds=0)

    def run(mission_id: str) -> None:
        nonlocal most
        with lock:
            running.add(mission_id)
            most = max(most, len(running))
        time.sleep(1.2)
        with lock:
            running.discard(mission_id)
        runs.runner("capped")(mission_id)

    queues = [
        SaqQueue(store, run, 2, url=url, heartbeat_s=3, requeue_s=30, global_cap=1)
        for _ in range(2)
    ]
    try:
        for queue in queues:
            queue.start()
        for mission_id in ids:
            queues[0].submit(mission_id)
        _wait_final(store, ids, timeout=120)
    finally:
        for queue in queues:
            queue.stop(timeout=30)
        store.close()
    assert most == 1
    assert store.refused >= 1  # four job slots, one mission slot: some were deferred
    assert store.slots == {}
    assert runs.counts() == Counter({m: 1 for m in ids})
    assert store.heartbeats  # a running mission's holder kept its slots alive


def _dead_runner() -> str:
    """The owner id of a process of this host that has exited."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5)"])
    runner = owner_id(child.pid)
    child.wait(10)
    return runner


def test_a_mission_lost_holding_its_slot_runs_again_and_frees_a_dead_holders_slots(
    saq_backend: tuple[str, Store],
) -> None:
    """A worker killed mid-mission leaves its mission `running` and its slot held; another
    killed between taking a slot and claiming leaves a slot only. The next worker, under a
    global cap of one, takes the first over and runs both."""
    url, store = saq_backend
    lost, waiting = _missions(store, 2)
    dead = _dead_runner()
    assert store.acquire_slot(lost, None, dead, 2, None)
    assert store.mark_running(lost, runner=dead)
    assert store.acquire_slot("gone-before-claiming", None, dead, 2, None)
    runs = Runs(store, seconds=0)
    consumer = SaqQueue(
        store, runs.runner("worker"), 1, url=url, heartbeat_s=3, requeue_s=0.5, global_cap=1
    )
    try:
        consumer.start()
        consumer.submit(lost)
        consumer.submit(waiting)
        _wait_final(store, [lost, waiting], timeout=60)
    finally:
        assert consumer.stop(timeout=30)
    assert runs.counts() == Counter({lost: 1, waiting: 1})
    mission = store.get_mission(lost)
    assert mission is not None
    assert (mission.status, mission.attempts) == ("verified", 2)
    assert store.slots_held() == 0
