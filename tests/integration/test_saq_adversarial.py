"""`SaqQueue` under the failures a deployment meets: a job SAQ finished while its mission
still runs elsewhere, a worker stopped or aborted mid-mission, a stale worker's late result.
Each test states the invariant it holds the queue to."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import gc
import socket
import sys
import threading
import time
from collections.abc import Collection, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from saq.queue import Queue
from sqlalchemy.exc import OperationalError
from structlog.testing import capture_logs

from loopwright.config import ConfigError
from loopwright.missions.result import MissionResult
from loopwright.redaction import Redactor
from loopwright.request import MissionRequest
from loopwright.sandbox.docker.reaper import owner_id
from loopwright.store.engine import migrate
from loopwright.store.missions import MissionClaim, MissionTakenOver, claimed
from loopwright.store.models import utcnow
from loopwright.store.queue import run_claimed
from loopwright.store.repository import Store
from loopwright.store.saq_queue import QUEUE_NAME, SaqQueue, saq_url

OTHER_HOST = "another-host.invalid:4242:1"
"""A runner on another host: only its heartbeat in the store says whether it lives."""


@pytest.fixture
def redis_backend(tmp_path: Path, redis_service) -> Iterator[tuple[str, Store]]:  # type: ignore[no-untyped-def]
    store_url = f"sqlite:///{tmp_path / 'loopwright.db'}"
    migrate(store_url)
    store = Store(store_url)
    try:
        yield redis_service.url, store
    finally:
        store.close()


def _mission(store: Store) -> str:
    request = MissionRequest(
        trigger="check_run", repo="acme/invoice", clone_url="", head_sha="a" * 40
    )
    mission, created = store.create_mission(request)
    assert created
    return mission.id


def _saq(url: str, work):  # type: ignore[no-untyped-def]
    async def call():  # type: ignore[no-untyped-def]
        queue = Queue.from_url(saq_url(url), name=QUEUE_NAME)
        await queue.connect()
        try:
            return await work(queue)
        finally:
            await queue.disconnect()

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, call()).result(30)


def _wait(predicate, timeout: float) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_a_mission_whose_job_finished_is_taken_over_once_its_worker_dies(
    saq_backend: tuple[str, Store],
) -> None:
    """A job delivered while another host runs the mission ends `running elsewhere`; when
    that host then dies, the re-enqueue loop must get the mission a job again. On SAQ's
    PostgreSQL queue the finished job's row blocks a job under the same key (the upsert
    only replaces a finished row whose `scheduled` is older), so the mission would stay
    `running` behind a dead worker until SAQ deletes the row."""
    url, store = saq_backend
    mission_id = _mission(store)
    assert store.mark_running(mission_id, runner=OTHER_HOST)
    ran = threading.Event()

    def run(mid: str) -> None:
        ran.set()
        assert store.set_status(mid, "verified", expect="running")

    consumer = SaqQueue(store, run, 1, url=url, heartbeat_s=3, requeue_s=0.5)
    try:
        consumer.start()
        consumer.submit(mission_id)  # delivered at once: the other host's heartbeat is fresh
        assert _wait(lambda: _saq(url, lambda q: q.count("incomplete")) == 0, 10)
        assert not ran.is_set()
        # The other host dies now: its heartbeat is older than heartbeat_s within 3 s.
        assert _wait(ran.is_set, 20), "the dead worker's mission never got a job again"
    finally:
        consumer.stop(timeout=10)
    mission = store.get_mission(mission_id)
    assert mission is not None
    assert (mission.status, mission.attempts) == ("verified", 2)


def _blocking_run(store: Store, release: threading.Event, started: threading.Event):  # type: ignore[no-untyped-def]
    def run(mission_id: str) -> None:
        started.set()
        release.wait(30)
        store.set_status(mission_id, "verified", expect="running")

    return run


def _stale(store: Store, mission_id: str, seconds: float) -> bool:
    mission = store.get_mission(mission_id)
    assert mission is not None and mission.runner_seen_at is not None
    return (utcnow() - mission.runner_seen_at) > datetime.timedelta(seconds=seconds)


def test_a_worker_stopped_mid_mission_does_not_leave_it_running_without_a_heartbeat(
    redis_backend: tuple[str, Store],
) -> None:
    """`stop(timeout)` cancels a job whose mission outlives the grace period and SAQ puts
    the job back, but the mission's thread cannot be cancelled: it keeps running (the
    interpreter even waits for it at exit) while its store heartbeat has stopped. A worker
    on another host that gets the job back sees the heartbeat stale, takes the mission over
    and runs it a second time, concurrently."""
    url, store = redis_backend
    mission_id = _mission(store)
    release, started = threading.Event(), threading.Event()
    worker = SaqQueue(store, _blocking_run(store, release, started), 1, url=url, heartbeat_s=3)
    try:
        worker.start()
        worker.submit(mission_id)
        assert started.wait(20)
        worker.stop(timeout=1)
        put_back = _saq(url, lambda q: q.count("queued"))
        time.sleep(4.5)  # longer than heartbeat_s: another host would now take it over
        still_running = not release.is_set()
        assert not (put_back and still_running and _stale(store, mission_id, 3)), (
            "the job is back in the queue and the store heartbeat is stale, yet this "
            "process still runs the mission: another worker would run it concurrently"
        )
    finally:
        release.set()


def test_a_job_aborted_by_a_sweep_does_not_leave_its_mission_running_unseen(
    redis_backend: tuple[str, Store],
) -> None:
    """SAQ's sweep aborts a job whose SAQ heartbeat looks late (an event loop stalled by a
    pause, a Redis partition, or clocks apart by more than heartbeat_s, since SAQ compares
    the job's `touched` with the sweeper's clock). The worker then cancels the job's task;
    the mission thread runs on without a store heartbeat, so a worker elsewhere takes it
    over while it still runs."""
    url, store = redis_backend
    mission_id = _mission(store)
    release, started = threading.Event(), threading.Event()
    worker = SaqQueue(store, _blocking_run(store, release, started), 1, url=url, heartbeat_s=3)
    try:
        worker.start()
        worker.submit(mission_id)
        assert started.wait(20)

        async def abort(queue: Queue) -> None:
            job = await queue.job(mission_id)
            assert job is not None
            await queue.abort(job, error="swept")

        _saq(url, abort)
        time.sleep(4.5)
        assert not (not release.is_set() and _stale(store, mission_id, 3)), (
            "the job was aborted and the store heartbeat is stale, yet the mission still "
            "runs here: another worker would run it concurrently"
        )
    finally:
        release.set()
        worker.stop(timeout=10)


def _took_over(store: Store, mission_id: str) -> MissionClaim:
    """A claims the mission, is taken as lost (its heartbeat lagged) and B runs it again:
    A's claim, which A still runs under."""
    claim_a = store.claim(mission_id, runner="host-a:1:1")
    assert claim_a is not None and claim_a.attempts == 1
    assert store.take_over_lost(mission_id, "host-a:1:1", "queued", "lost")
    claim_b = store.claim(mission_id, runner="host-b:2:2")
    assert claim_b is not None and claim_b.attempts == 2
    return claim_a


def _still_bs_run(store: Store, mission_id: str) -> None:
    mission = store.get_mission(mission_id)
    assert mission is not None
    assert (mission.status, mission.runner, mission.attempts) == ("running", "host-b:2:2", 2), (
        f"A's late end replaced B's run: {mission.status} {mission.message!r}"
    )
    assert mission.result is None and mission.pr_url is None


@pytest.mark.parametrize("late_end", ["result", "crash", "no result", "links"])
def test_a_stale_worker_cannot_end_a_mission_another_worker_took_over(
    tmp_path: Path, late_end: str
) -> None:
    """Worker A is taken as lost (its heartbeat lagged) and B runs the mission again. A's
    late end (its result, `run_claimed`'s `error` after a crash or a run without a result,
    its pull request's link) must not overwrite B's run: each write checks the run's claim,
    not only the status, and A's run stops, saying why."""
    store_url = f"sqlite:///{tmp_path / 'loopwright.db'}"
    migrate(store_url)
    store = Store(store_url)
    try:
        mission_id = _mission(store)
        claim_a = _took_over(store, mission_id)

        def run(mid: str) -> None:
            if late_end == "result":
                store.mark_finished(MissionResult(mid, "verified", message="A's late end"))
            elif late_end == "crash":
                raise RuntimeError("A's late crash")
            elif late_end == "links":
                store.set_links(mid, pr_url="https://github.com/acme/invoice/pull/9")

        with capture_logs() as logs:
            run_claimed(store, run, mission_id, Redactor(), claim_a)
        _still_bs_run(store, mission_id)
        refused = [e for e in logs if "no longer owns" in e["event"]]
        assert refused and refused[0]["mission"] == mission_id, logs
    finally:
        store.close()


def test_a_stale_worker_is_refused_before_b_claims_it_too(tmp_path: Path) -> None:
    """Between the take-over and B's claim the mission is `queued` again: A's late result
    must not end it there either (B would then find it finished and never run it)."""
    store_url = f"sqlite:///{tmp_path / 'loopwright.db'}"
    migrate(store_url)
    store = Store(store_url)
    try:
        mission_id = _mission(store)
        claim_a = store.claim(mission_id, runner="host-a:1:1")
        assert claim_a is not None
        assert store.take_over_lost(mission_id, "host-a:1:1", "queued", "lost")
        with claimed(claim_a), pytest.raises(MissionTakenOver, match="no longer owns"):
            store.mark_finished(MissionResult(mission_id, "verified"))
        assert not store.owns(claim_a)
        mission = store.get_mission(mission_id)
        assert mission is not None and (mission.status, mission.result) == ("queued", None)
    finally:
        store.close()


def test_a_worker_that_still_owns_its_run_ends_it(tmp_path: Path) -> None:
    """The claim's check refuses only a run that is no longer this worker's: the owner's
    result is stored, and a run that recorded one is not turned into an error after."""
    store_url = f"sqlite:///{tmp_path / 'loopwright.db'}"
    migrate(store_url)
    store = Store(store_url)
    try:
        mission_id = _mission(store)
        claim = store.claim(mission_id, runner="host-a:1:1")
        assert claim is not None

        def run(mid: str) -> None:
            store.mark_finished(MissionResult(mid, "verified"))
            assert not store.set_status(mid, "error", expect="running")

        run_claimed(store, run, mission_id, Redactor(), claim)
        mission = store.get_mission(mission_id)
        assert mission is not None and mission.status == "verified"
    finally:
        store.close()


class ClaimedMeanwhile(Store):
    """A store on which another job of this same process claims the mission between this
    job's read of it (still `queued`) and its own claim: the race of two deliveries of
    one mission's job (a sweep put it back, a re-enqueue) to one worker."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.raced: list[str] = []

    def claim(self, mission_id: str, *, runner: str | None = None) -> MissionClaim | None:
        if not self.raced:
            self.raced.append(mission_id)
            # The other job took the slot and claims the mission first, as this process.
            assert super().claim(mission_id, runner=runner) is not None
        return super().claim(mission_id, runner=runner)


def test_the_loser_of_a_claim_race_in_one_process_keeps_the_winners_slot(
    tmp_path: Path, redis_service
) -> None:  # type: ignore[no-untyped-def]
    """Both jobs of one process hold the mission's slot under the same holder; the one
    that loses the claim must not give back the slot the winner runs under, or the caps
    would let one more mission in than they allow."""
    store_url = f"sqlite:///{tmp_path / 'loopwright.db'}"
    migrate(store_url)
    store = ClaimedMeanwhile(store_url)
    ran: list[str] = []
    worker = SaqQueue(store, ran.append, 1, url=redis_service.url, heartbeat_s=3)
    try:
        mission_id = _mission(store)
        # The winner's slot, taken under this process's holder before the loser's job.
        assert store.acquire_slot(mission_id, None, owner_id(), 1, None) == "taken"
        worker.start()
        worker.submit(mission_id)
        assert _wait(lambda: bool(store.raced), 20)
        assert _wait(lambda: _saq(redis_service.url, lambda q: q.count("incomplete")) == 0, 10)
        assert ran == []  # the loser did not run it
        mission = store.get_mission(mission_id)
        assert mission is not None and mission.status == "running"
        assert store.slots_held() == 1, "the loser freed the slot the winner runs under"
    finally:
        worker.stop(timeout=10)
        store.close()


@pytest.mark.parametrize("queue", ["redis", "postgres"])
def test_a_worker_starts_only_with_its_clock_near_the_databases_and_the_queues(
    queue: str, postgres_url: str, request: pytest.FixtureRequest
) -> None:
    """`_lost` and the slots compare this host's clock with timestamps other hosts wrote:
    a worker measures its clock against PostgreSQL's and the queue's (Redis `TIME`) at
    start. In step it starts; an hour off (the injected clock) it refuses, saying what to
    fix, and runs nothing."""
    url = request.getfixturevalue("redis_service").url if queue == "redis" else postgres_url
    migrate(postgres_url)
    store = Store(postgres_url)
    ran: list[str] = []
    try:
        in_step = SaqQueue(store, ran.append, 1, url=url, heartbeat_s=6)
        with capture_logs() as logs:
            in_step.start()
        in_step.stop(timeout=5)
        assert not [e for e in logs if e["event"] in ("clock skew", "clocks not compared")], logs

        skewed = SaqQueue(
            store, ran.append, 1, url=url, heartbeat_s=6, clock=lambda: time.time() - 3600
        )
        with pytest.raises(ConfigError) as refused:
            skewed.start()
        message = str(refused.value)
        assert "s ahead of this host's" in message and "NTP" in message, message
        assert "LOOPWRIGHT_QUEUE_HEARTBEAT_S" in message
        assert "postgres@" not in message
        mission_id = _mission(store)
        skewed.submit(mission_id)  # a refused worker is not consuming
        time.sleep(1.5)
        assert ran == []
        skewed.stop(timeout=5)
    finally:
        store.close()


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
def test_a_postgresql_queue_user_without_create_rights_is_told_what_to_grant(
    tmp_path: Path, postgres, postgres_url: str
) -> None:  # type: ignore[no-untyped-def]
    """SAQ creates its tables on connect; a user that may not is a permission to grant,
    not a queue that "could not be reached". The failed start closes the connection pool
    it opened: its tasks would otherwise outlive the closed event loop (an error when
    they are collected)."""
    name = postgres_url.rsplit("/", 1)[1]
    role = f"lw_limited_{name[-6:]}"
    postgres.sql(f"CREATE ROLE {role} LOGIN")
    postgres.sql("REVOKE CREATE ON SCHEMA public FROM PUBLIC", database=name)
    url = postgres_url.replace("postgres@", f"{role}:hunter2@", 1)
    store_url = f"sqlite:///{tmp_path / 'loopwright.db'}"
    migrate(store_url)
    store = Store(store_url)
    try:
        with pytest.raises(ConfigError) as caught:
            SaqQueue(store, None, 1, url=url).start()
    finally:
        store.close()
    message = str(caught.value)
    del caught  # its traceback holds the queue: what the start left behind is collected now
    gc.collect()
    assert "hunter2" not in message
    assert "could not reach" not in message, message
    assert "CREATE" in message and "LOOPWRIGHT_QUEUE_URL" in message, message


@pytest.mark.parametrize("server", ["nothing", "not-redis"])
def test_a_redis_url_with_no_redis_behind_it_fails_the_start_and_says_where(
    tmp_path: Path, server: str
) -> None:
    """A worker pointed at a closed port or at a server that is not Redis must not start
    as if all were well and then fail every call: the start says what to fix."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    if server == "nothing":
        listener.close()
    else:
        listener.listen()

        def answer_http() -> None:
            with contextlib.suppress(OSError):
                while True:
                    conn, _ = listener.accept()
                    conn.recv(1024)
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
                    conn.close()

        threading.Thread(target=answer_http, daemon=True).start()
    store_url = f"sqlite:///{tmp_path / 'loopwright.db'}"
    migrate(store_url)
    store = Store(store_url)
    try:
        with pytest.raises(ConfigError, match=f"127.0.0.1:{port}") as caught:
            SaqQueue(store, None, 1, url=f"redis://:hunter2@127.0.0.1:{port}/0").start()
        assert "hunter2" not in str(caught.value)
        assert "LOOPWRIGHT_QUEUE_URL" in str(caught.value)
    finally:
        store.close()
        listener.close()


class StalledHeartbeat(Store):
    """The store as a paused or partitioned worker sees it: its heartbeats never land."""

    def touch_runner(self, mission_id: str, runner: str) -> None:
        pass

    def heartbeat_slots(self, holder: str, mission_ids: Collection[str]) -> None:
        pass


def test_a_stale_workers_run_end_does_not_free_the_slot_of_the_worker_that_took_over(
    redis_service, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """Worker A (another host) stalls mid-mission; B takes the mission over, frees A's slot,
    takes its own and runs it again. A's run then ends (refused: taken over) and gives
    back its slot: only its own may go, or under a global cap of one a second mission
    would start beside B's."""
    store_url = f"sqlite:///{tmp_path / 'loopwright.db'}"
    migrate(store_url)
    store, stalled = Store(store_url), StalledHeartbeat(store_url)
    a_started, a_end = threading.Event(), threading.Event()
    b_started, b_end = threading.Event(), threading.Event()

    def run(started: threading.Event, end: threading.Event):  # type: ignore[no-untyped-def]
        def mission(mid: str) -> None:
            started.set()
            end.wait(30)
            store.set_status(mid, "verified", expect="running")

        return mission

    # A is a worker of another host.
    worker_a = SaqQueue(stalled, run(a_started, a_end), 1, url=redis_service.url,
                        heartbeat_s=3, global_cap=1, runner=OTHER_HOST)  # fmt: skip
    worker_b = SaqQueue(store, run(b_started, b_end), 1, url=redis_service.url,
                        heartbeat_s=3, requeue_s=0.5, global_cap=1)  # fmt: skip
    a_result: list[str] = []
    a_thread = threading.Thread(target=lambda: a_result.append(worker_a._take(mission_id)))
    try:
        mission_id = _mission(store)
        a_thread.start()
        assert a_started.wait(20)
        worker_b.start()
        assert b_started.wait(30), "B never took over the stalled worker's mission"
        a_end.set()  # A's run ends while B's runs on
        a_thread.join(30)
        assert a_result == ["ran"]
        assert store.slots_held() == 1, "A's run end freed the slot B runs under"
        assert store.acquire_slot("another", None, "host-c.invalid:3:3", 1, None) is None
        b_end.set()
        assert _wait(lambda: store.get_mission(mission_id).status == "verified", 20)  # type: ignore[union-attr]
        assert store.get_mission(mission_id).attempts == 2  # type: ignore[union-attr]
    finally:
        a_end.set()
        b_end.set()
        worker_b.stop(timeout=10)
        if a_thread.is_alive():
            a_thread.join(10)
        stalled.close()
        store.close()


class FirstReleaseFails(Store):
    """A store whose database is unreachable for the first slot release only."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.failed: list[str] = []

    def release_slot(self, mission_id: str, holder: str) -> None:
        if not self.failed:
            self.failed.append(mission_id)
            raise OperationalError("DELETE FROM mission_slots", {}, OSError("unreachable"))
        super().release_slot(mission_id, holder)


def test_a_slot_whose_release_failed_is_given_back_while_the_worker_stays_busy(
    saq_backend: tuple[str, Store],
) -> None:
    """A mission ends while the database is briefly unreachable, so its slot is not given
    back; the worker runs on with another mission, whose heartbeat must not keep that slot
    alive, and the release is tried again: under a global cap of two, a third mission
    starts beside the long one instead of waiting for it."""
    url, plain = saq_backend
    store = FirstReleaseFails(plain.engine.url.render_as_string(hide_password=False))
    quick, long, third = _mission_of(store, "1"), _mission_of(store, "2"), _mission_of(store, "3")
    started: set[str] = set()
    end_long = threading.Event()

    def run(mission_id: str) -> None:
        started.add(mission_id)
        if mission_id == long:
            end_long.wait(60)
        store.set_status(mission_id, "verified", expect="running")

    worker = SaqQueue(store, run, 2, url=url, heartbeat_s=3, requeue_s=0.5, global_cap=2)
    try:
        worker.start()
        worker.submit(long)
        assert _wait(lambda: long in started, 20)
        worker.submit(quick)
        assert _wait(lambda: store.get_mission(quick).status == "verified", 20)  # type: ignore[union-attr]
        assert _wait(lambda: store.failed == [quick], 10)
        worker.submit(third)
        assert _wait(lambda: third in started, 15), "the unreleased slot held the third back"
        end_long.set()
        assert worker.stop(timeout=10)
        assert store.slots_held() == 0
    finally:
        end_long.set()
        worker.stop(timeout=10)
        store.close()


def _mission_of(store: Store, digit: str) -> str:
    request = MissionRequest(
        trigger="check_run", repo="acme/invoice", clone_url="", head_sha=digit * 40
    )
    mission, created = store.create_mission(request)
    assert created
    return mission.id


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_hosts_whose_clocks_pass_the_start_check_do_not_take_each_others_live_work_for_lost(
    database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """Host A's clock runs 1.4 s behind, B's 1.4 s ahead: each passes the start-up check
    (under half of a 3 s heartbeat), yet by host clocks A's fresh heartbeat (of its
    mission and of its slot) looks 2.8 s old to B at once. Heartbeats are stamped and
    judged by the database's clock, so half a second later B still sees A alive."""
    if database == "sqlite":
        store_url = f"sqlite:///{tmp_path / 'loopwright.db'}"
    else:
        store_url = request.getfixturevalue("postgres_url")
    migrate(store_url)
    store = Store(store_url)
    modules = ("loopwright.store.missions", "loopwright.store.slots", "loopwright.store.saq_queue")

    def host_clock(skew_s: float) -> None:
        for module in modules:
            monkeypatch.setattr(
                f"{module}.utcnow", lambda: utcnow() + datetime.timedelta(seconds=skew_s),
                raising=False,
            )  # fmt: skip

    try:
        mission_id = _mission(store)
        host_clock(-1.4)  # host A claims, takes its slot and beats
        assert store.acquire_slot(mission_id, None, OTHER_HOST, 1, None) == "taken"
        assert store.claim(mission_id, runner=OTHER_HOST) is not None
        store.touch_runner(mission_id, OTHER_HOST)
        store.heartbeat_slots(OTHER_HOST, [mission_id])
        time.sleep(0.5)
        host_clock(+1.4)  # host B judges
        judge = SaqQueue(store, lambda m: None, 1, url="redis://unused.invalid:1/0",
                         heartbeat_s=3)  # fmt: skip
        mission = store.get_mission(mission_id)
        assert mission is not None
        assert not judge._lost(mission), "B took A's live mission for lost"
        assert store.expire_slots(3) == [], "B freed A's live slot"
        time.sleep(3)  # A really stops beating
        assert judge._lost(mission)
        assert store.expire_slots(3) == [mission_id]
    finally:
        store.close()


def test_a_worker_stopped_right_after_its_start_stops_at_once(
    redis_backend: tuple[str, Store],
) -> None:
    """SAQ's worker makes the event its stop sets when its start first runs on the queue's
    loop: a stop that came first set the worker's previous event, and the worker then
    waited for good (the process's shutdown hung, and the coroutine was left to the
    collector). A busy thread beside it holds the loop back, as a loaded process does."""
    url, store = redis_backend
    busy = threading.Event()

    def spin() -> None:
        while not busy.is_set():
            sum(range(1000))

    spinner = threading.Thread(target=spin, daemon=True)
    spinner.start()
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # the threads take turns often: more orders of events
    try:
        for attempt in range(20):
            queue = SaqQueue(store, lambda _mission: None, 1, url=url, heartbeat_s=6)
            queue.start()
            started = time.monotonic()
            with capture_logs() as logs:
                assert queue.stop(timeout=1)
            took = time.monotonic() - started
            assert not [e for e in logs if "did not stop" in e["event"]], (attempt, logs)
            assert took < 10, (attempt, took)
    finally:
        sys.setswitchinterval(switch)
        busy.set()
        spinner.join()
