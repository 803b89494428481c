"""The mission queue on SAQ, over Redis or PostgreSQL: one queue for every server and worker.

A process without a `run` function (a web server) only submits: `submit` enqueues the job
`run_mission(mission_id)` with `key=mission_id`, so a mission submitted twice (a replayed
webhook, two servers, the periodic re-enqueue) is one job while it waits. A process with
one (`loopwright worker`) also consumes: a SAQ `Worker` runs up to `concurrency` jobs at a
time on an event loop of its own, in a thread of this process; each job claims its mission
with `Store.mark_running` and runs it on a thread (the runner blocks), sending the job's
heartbeat meanwhile, and the store's for as long as the thread runs it.

A worker killed mid-mission sends no more heartbeats, to SAQ or to the store
(`Mission.runner_seen_at`). After `heartbeat_s` SAQ's sweep, run by every live worker,
puts the job back; the worker that gets it finds the mission still `running` under a
process that is gone (this host's process table says so, or its heartbeat in the store
stopped), reaps that process's sandboxes (`on_lost`) and runs the mission again from the
start, once: a mission lost a second time ends `interrupted`. The store stays the source
of truth: every `requeue_s` each queue enqueues the `queued` missions again (a Redis
restarted empty lost their jobs; the key makes it idempotent), and a worker also the
`running` ones whose process is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import socket
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import psycopg
import psycopg.errors
import psycopg_pool
import redis.exceptions
import structlog
from redis import asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from saq.job import Job
from saq.queue import Queue
from saq.queue.postgres import PostgresQueue
from saq.queue.redis import RedisQueue
from saq.types import PartialTimersDict
from saq.utils import now_seconds
from saq.worker import Worker
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from loopwright.config import ConfigError
from loopwright.events import EventBus
from loopwright.redaction import Redactor
from loopwright.sandbox.docker.reaper import owner_alive, owner_id
from loopwright.store.clocks import (
    CHECK_EVERY_S,
    CLOCK_QUERY,
    ClockReading,
    ClockSkewed,
    check_clocks,
    read_clock,
    read_database_clock,
)
from loopwright.store.models import RUNNING_STATUSES, Mission, MissionStatus
from loopwright.store.queue import LostMission, run_claimed
from loopwright.store.repository import Store
from loopwright.store.slots import SlotGrant

log = structlog.get_logger(__name__)

QUEUE_NAME = "loopwright-missions"
JOB_FUNCTION = "run_mission"
MAX_STARTS = 2
"""A mission whose worker is lost runs once more from the start; lost again, it ends."""
REQUEUE_S = 5.0
"""How often a queue enqueues the store's `queued` missions again."""
DEFER_S = 2
"""How long a job that found no free mission slot waits before it is tried again."""
DEFERRED = "deferred"
"""What a job returns when it did not take its mission now; it is enqueued again."""
SLOT_STALE_S = 60.0
"""A slot whose holder has not renewed it for this long (nor for two heartbeats) is freed;
a holder on this host whose process is gone loses its slots at once."""
CALL_TIMEOUT_S = 5.0
"""How long a submit waits for the queue's backend before leaving the mission to the
re-enqueue (a webhook is answered after its submit, and GitHub waits 10 seconds)."""
QUEUE_ERRORS: tuple[type[Exception], ...] = (
    redis.exceptions.RedisError,
    psycopg.Error,
    psycopg_pool.PoolTimeout,
    OSError,
    TimeoutError,
)
"""The backend is unreachable or restarting: logged, and the next round tries again."""

T = TypeVar("T")


def saq_url(url: str) -> str:
    """The URL SAQ's backends take: libpq wants `postgresql://`, so a SQLAlchemy driver
    suffix (`postgresql+psycopg://`) is dropped."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(scheme=parts.scheme.split("+", 1)[0]))


def where(url: str) -> str:
    """The queue's host and port, for messages: never the password in the URL."""
    parts = urlsplit(url)
    return f"{parts.scheme.split('+', 1)[0]}://{parts.hostname}:{parts.port or ''}"


class QueueUnavailable(ConfigError):
    """The queue's backend could not be reached at start (the message says where)."""


class _Worker(Worker[Any]):
    """SAQ's worker, whose upkeep waits for its stop. SAQ's upkeep loops (abort, schedule,
    sweep, worker info) sleep out their interval before they look at the stop event, and
    its stop waits for them: an idle worker took up to the sweep's interval (`heartbeat_s`,
    30 s) to stop, longer than a container's stop waits before its SIGKILL. Here each loop
    waits on the stop event for its interval instead, so a stop ends the wait at once. A
    call under way (a sweep that aborts and retries a stuck job, about 5 s a job) runs to
    its end within the stop's grace period: cancelling one half way could leave a job out
    of every list SAQ keeps (past the grace period SAQ cancels it all the same).

    The same four loops, intervals and arguments as SAQ 0.26's `Worker.upkeep` (pinned
    in pyproject.toml: a newer SAQ's upkeep must be compared with this one)."""

    async def upkeep(self) -> list[asyncio.Task[None]]:
        timers = self.timers
        return [
            asyncio.create_task(self._every(self.abort, timers["abort"])),
            asyncio.create_task(self._every(self.schedule, timers["schedule"])),
            asyncio.create_task(self._every(self.queue.sweep, timers["sweep"])),
            asyncio.create_task(
                self._every(self.worker_info, timers["worker_info"], timers["worker_info"] + 1)
            ),
        ]

    async def _every(
        self, work: Callable[[int], Coroutine[Any, Any, Any]], interval: int, arg: int = 0
    ) -> None:
        while not self.event.is_set():
            try:
                await work(arg or interval)
            except (Exception, asyncio.CancelledError):  # as SAQ's loop: the next round
                if self.event.is_set():  # tries again, and a stopping worker's ends
                    return
                log.exception("queue upkeep failed", upkeep=getattr(work, "__name__", "?"))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.event.wait(), interval)


class SaqQueue:
    """`MissionQueue` on SAQ. `run=None`: this process only submits."""

    submit_blocks = True

    def __init__(
        self,
        store: Store,
        run: Callable[[str], None] | None,
        concurrency: int,
        *,
        url: str,
        redactor: Redactor | None = None,
        on_lost: LostMission | None = None,
        heartbeat_s: int = 30,
        requeue_s: float = REQUEUE_S,
        global_cap: int | None = None,
        installation_cap: int | None = None,
        clock: Callable[[], float] = time.time,
        runner: str | None = None,
    ) -> None:
        """`global_cap` and `installation_cap`: missions at once across every worker, and
        of one installation, held by the store's mission slots where the store has them
        (`global_cap` defaults to `concurrency`). `clock`: this host's time, which a worker
        compares with the database's and the queue's. `runner`: the identity its claims,
        slots and heartbeats are under: this process's owner id unless given, which the
        sandboxes' owner labels must match (see `InProcessQueue`)."""
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {concurrency}")
        if heartbeat_s < 3:
            raise ValueError(f"heartbeat_s must be at least 3 seconds, not {heartbeat_s}")
        self._store = store
        self._run = run
        self._concurrency = concurrency
        self._url = saq_url(url)
        self._redactor = redactor or Redactor()
        self._on_lost = on_lost
        self._heartbeat_s = heartbeat_s
        self._requeue_s = requeue_s
        self._caps = (global_cap or concurrency, installation_cap)
        self._clock = clock
        self._runner = runner or owner_id()
        self._lock = threading.Lock()
        self._connecting = threading.Lock()
        self._running: set[str] = set()
        self._unreleased: set[str] = set()
        """Slots whose release failed (the database was unreachable); retried by the
        re-enqueue loop, and renewed by no heartbeat meanwhile."""
        self._stopping = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self._queue: Queue | None = None
        self._worker: _Worker | None = None
        self._worker_done: Any = None
        self._requeuer: threading.Thread | None = None
        # Missions block for minutes: they get threads of their own, as many as may run,
        # rather than the event loop's small default pool.
        self._missions = ThreadPoolExecutor(concurrency, thread_name_prefix="loopwright-mission")

    # -- MissionQueue --------------------------------------------------------------------

    def submit(self, mission_id: str) -> None:
        if self._stopping.is_set():
            return
        try:
            self._call(lambda: self._enqueue(mission_id))
        except QUEUE_ERRORS as exc:
            log.warning(
                "mission not enqueued; it stays queued in the store and is enqueued again "
                f"within {self._requeue_s:g}s",
                mission=mission_id,
                queue=where(self._url),
                error=f"{type(exc).__name__}: {exc}",
            )

    def start(self) -> None:
        """Connect and start; a worker first checks that its clock is near enough to the
        database's and the queue's (`ClockSkewed`, a `ConfigError`, when it is not)."""
        self._connect()
        if self._run is not None:
            self._check_clocks(at_start=True)
        with self._lock:
            if self._requeuer is not None or self._stopping.is_set():
                return
            if self._run is not None:
                self._worker = self._make_worker()
                assert self._loop is not None
                self._worker_done = asyncio.run_coroutine_threadsafe(
                    self._worker.start(), self._loop
                )
            self._requeuer = threading.Thread(
                target=self._requeue_loop, name="loopwright-requeue", daemon=True
            )
            self._requeuer.start()

    def stop(self, timeout: float | None = None) -> bool:
        self._stopping.set()
        if self._requeuer is not None:
            self._requeuer.join(timeout=10)
        if self._worker is not None and self._loop is not None:
            # The worker takes no new job once its event is set; running missions get
            # `timeout` seconds, then their jobs are cancelled (SAQ puts them back). A
            # mission's thread cannot be cancelled: it runs on, beating in the store, so
            # the job's next worker leaves it alone until it ends or this process dies.
            self._worker._shutdown_grace_period_s = (
                24 * 3600 if timeout is None else max(1, math.ceil(timeout))
            )
            self._loop.call_soon_threadsafe(self._worker.event.set)
            try:
                self._worker_done.result(None if timeout is None else timeout + 15)
            except (TimeoutError, asyncio.CancelledError) as exc:
                log.warning("the queue's worker did not stop", error=repr(exc))
        finished = not self.running()
        self._close_loop()
        self._missions.shutdown(wait=False)
        return finished

    def running(self) -> list[str]:
        with self._lock:
            return sorted(self._running)

    def recover(self) -> list[Mission]:
        """Enqueue the `queued` missions again; mark nothing interrupted, since other
        workers may be running missions now (a lost one comes back through its job)."""
        self._connect()
        self._requeue_once()
        return []

    # -- the event loop ------------------------------------------------------------------

    def _connect(self) -> None:
        with self._connecting:
            if self._queue is not None:
                return
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="loopwright-saq", daemon=True)
            thread.start()
            self._loop, self._loop_thread = loop, thread
            try:
                self._queue = asyncio.run_coroutine_threadsafe(self._open_queue(), loop).result(60)
            except psycopg.errors.InsufficientPrivilege as exc:
                self._close_loop()
                raise QueueUnavailable(
                    f"LOOPWRIGHT_QUEUE_URL: the queue's user at {where(self._url)} may not "
                    f"create SAQ's tables ({exc.diag.message_primary}); grant it CREATE on "
                    "the database's schema, or connect once as a user that may"
                ) from exc
            except QUEUE_ERRORS as exc:
                self._close_loop()
                raise QueueUnavailable(
                    f"LOOPWRIGHT_QUEUE_URL: could not reach the queue at {where(self._url)} "
                    f"({type(exc).__name__}: {exc}); check that it runs and the URL is right"
                ) from exc

    async def _open_queue(self) -> Queue:
        queue: Queue
        if self._url.startswith(("redis://", "rediss://")):
            # Retries with backoff (about 1.5 s in all), so a worker waits out a Redis
            # restart instead of spinning on refused connections, and a submit gives up
            # well within a webhook's time.
            client = aioredis.from_url(
                self._url,
                retry=Retry(ExponentialBackoff(cap=1.0, base=0.2), 3),
                retry_on_error=[redis.exceptions.ConnectionError, redis.exceptions.TimeoutError],
                health_check_interval=10,
            )
            # SAQ's Redis queue connects lazily: without a ping a wrong URL (nothing there,
            # or a server that is not Redis) would pass the start and fail every call after.
            try:
                await client.ping()  # type: ignore[misc]  # redis types it for both clients
            except BaseException:
                await client.aclose()
                raise
            queue = RedisQueue(client, name=QUEUE_NAME)
        else:
            queue = Queue.from_url(self._url, name=QUEUE_NAME, min_size=1, max_size=10)
        try:
            await queue.connect()
        except BaseException:
            # A connect that failed half way (PostgreSQL refused SAQ's tables) leaves its
            # pool open, and SAQ's disconnect does nothing for a queue never connected:
            # the pool's tasks would outlive the loop this start closes.
            if isinstance(queue, PostgresQueue):
                await queue.pool.close()
            raise
        return queue

    def _close_loop(self) -> None:
        loop, thread, queue = self._loop, self._loop_thread, self._queue
        if loop is None:
            return
        if queue is not None:
            try:
                asyncio.run_coroutine_threadsafe(queue.disconnect(), loop).result(10)
            except QUEUE_ERRORS as exc:
                log.warning("queue not disconnected cleanly", error=f"{type(exc).__name__}: {exc}")
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(timeout=10)
        if not loop.is_running():
            loop.close()
        with self._lock:
            self._loop = self._loop_thread = None
            self._queue = None

    def _call(
        self, work: Callable[[], Coroutine[Any, Any, T]], timeout: float = CALL_TIMEOUT_S
    ) -> T:
        """Run `work()` on the queue's event loop (connecting first) and wait for it."""
        self._connect()
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(work(), self._loop).result(timeout)

    async def _enqueue(self, mission_id: str, scheduled: int = 0) -> Job | None:
        assert self._queue is not None
        return await self._queue.enqueue(
            JOB_FUNCTION,
            key=mission_id,
            mission_id=mission_id,
            timeout=0,  # a mission's own limits end it, not the queue
            heartbeat=self._heartbeat_s,
            retries=MAX_STARTS + 1,  # the last delivery only records the second loss
            scheduled=scheduled,
        )

    def _make_worker(self) -> _Worker:
        assert self._queue is not None
        worker = _Worker(
            self._queue,
            functions=[(JOB_FUNCTION, self._job)],
            concurrency=self._concurrency,
            timers=PartialTimersDict(sweep=self._heartbeat_s, abort=1, schedule=1, worker_info=10),
            startup=self._worker_up,
            after_process=self._after_job,
            dequeue_timeout=1.0,
            metadata={"runner": self._runner},
        )
        # The worker's loop is not the main thread's: the process's signals stay with it.
        worker.SIGNALS = []
        return worker

    async def _worker_up(self, ctx: dict[str, Any]) -> None:
        """SAQ's start hook, run once the worker's start has made the event its stop sets.
        A stop that came before (it set the event the worker had until then) is carried out
        now, or the worker would wait for that event for good."""
        if self._stopping.is_set():
            ctx["worker"].event.set()

    # -- one job -------------------------------------------------------------------------

    async def _job(self, ctx: dict[str, Any], *, mission_id: str) -> str:
        job: Job = ctx["job"]
        if self._stopping.is_set():
            return DEFERRED
        beat = asyncio.create_task(self._beat(job))
        try:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._missions, self._take, mission_id)
        finally:
            beat.cancel()

    async def _beat(self, job: Job) -> None:
        failing = False
        while True:
            await asyncio.sleep(max(1.0, self._heartbeat_s / 3))
            try:
                await job.update()
            except QUEUE_ERRORS as exc:
                if not failing:
                    log.warning("job heartbeat failed", job=job.key, error=f"{exc}")
                failing = True
                continue
            failing = False

    @contextlib.contextmanager
    def _store_heartbeat(self, mission_id: str) -> Iterator[None]:
        """The mission's heartbeat in the store (and its slot's) for as long as its thread
        runs it. Not a task of the job: a job SAQ cancels (a sweep's abort, `stop` past its
        grace period) ends its task, never the thread, and a mission still running here
        without a heartbeat would be taken over and run twice at once."""
        done = threading.Event()
        heartbeat_slots = getattr(self._store, "heartbeat_slots", None)

        def beat() -> None:
            while not done.wait(max(1.0, self._heartbeat_s / 3)):
                try:
                    self._store.touch_runner(mission_id, self._runner)
                    if callable(heartbeat_slots):
                        heartbeat_slots(self._runner, [mission_id])
                except SQLAlchemyError as exc:
                    log.warning("mission heartbeat not stored", mission=mission_id, error=f"{exc}")

        thread = threading.Thread(target=beat, name=f"loopwright-beat-{mission_id}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join(timeout=10)

    async def _after_job(self, ctx: dict[str, Any]) -> None:
        job: Job | None = ctx.get("job")
        if job is None or job.result != DEFERRED or not job.kwargs:
            return
        await self._enqueue(str(job.kwargs["mission_id"]), int(now_seconds()) + DEFER_S)

    def _take(self, mission_id: str) -> str:
        """Claim and run one mission (on a mission thread); what happened, for the job."""
        mission = self._store.get_mission(mission_id)
        if mission is None:
            return "no such mission"
        if mission.status in RUNNING_STATUSES:
            if not self._lost(mission):
                return "running elsewhere"
            if not self._take_over(mission):
                return "not run again"
        elif mission.status != "queued":
            return f"already {mission.status}"
        if self._stopping.is_set():
            return DEFERRED
        slot = self._acquire_slot(mission)
        if slot is None:
            return DEFERRED
        # This call gives the slot back when it took it, or once it claims the mission: a
        # slot already `held` by this process is another job's (of this same mission,
        # which raced this one to the claim) until this job wins the claim.
        mine = slot == "taken"
        try:
            claim = self._store.claim(mission_id, runner=self._runner)
            if claim is None:
                return "claimed elsewhere"
            mine = True
            assert self._run is not None
            with self._lock:
                self._running.add(mission_id)
            try:
                with self._store_heartbeat(mission_id):
                    run_claimed(self._store, self._run, mission_id, self._redactor, claim)
            finally:
                with self._lock:
                    self._running.discard(mission_id)
        finally:
            if mine:
                self._release_slot(mission_id, self._runner)
        return "ran"

    def _lost(self, mission: Mission) -> bool:
        """Whether the process running `mission` is gone: on this host the process table
        says; elsewhere, its heartbeat in the store stopped for `heartbeat_s` by the
        database's clock, which also stamped it, so no two hosts' clocks are compared.
        (Not SAQ's own view alone: its sweep can put back the job of a live worker.)"""
        runner = mission.runner
        if runner == self._runner:
            return False
        if runner is not None and runner.split(":", 1)[0] == socket.gethostname():
            return not owner_alive(runner)
        return self._store.runner_silent(mission.id, runner, self._heartbeat_s)

    def _take_over(self, mission: Mission) -> bool:
        """Move a lost mission back to `queued` (True: run it now) or, lost before, to
        `interrupted`; tell its log, and let `on_lost` reap and report."""
        again = mission.attempts < MAX_STARTS
        if again:
            message = (
                "the worker running this mission was lost; it runs again from the start "
                f"(start {mission.attempts + 1} of {MAX_STARTS})"
            )
        else:
            message = (
                f"the worker running this mission was lost, {mission.attempts} times; "
                "comment `/loopwright fix` to try again"
            )
        status: MissionStatus = "queued" if again else "interrupted"
        if not self._store.take_over_lost(mission.id, mission.runner, status, message):
            return False
        # The lost process cannot give its slot back; left held, it would refuse this
        # mission's next start (a slot is not shared between holders). Only its own: should
        # it still run, its run's end gives back nothing that is not its own either.
        if mission.runner is not None:
            self._release_slot(mission.id, mission.runner)
        log.warning("mission's worker lost", mission=mission.id, runner=mission.runner, now=status)
        bus = EventBus(
            mission.id,
            [self._store.event_sink(mission.id)],
            self._redactor,
            seq_after=self._store.last_event_seq(mission.id),
        )
        bus.emit("error", message=message, kind="WorkerLost")
        if self._on_lost is not None:
            self._on_lost(mission, not again)
        return again

    # -- the global cap: the store's mission slots, where the store has them ------------

    def _acquire_slot(self, mission: Mission) -> SlotGrant | None:
        acquire = getattr(self._store, "acquire_slot", None)
        if not callable(acquire):
            return "taken"
        installation = (mission.request or {}).get("installation_id")
        global_cap, installation_cap = self._caps
        grant: SlotGrant | None = acquire(
            mission.id,
            int(installation) if isinstance(installation, int) else None,
            self._runner,
            global_cap,
            installation_cap,
        )
        return grant

    def _expire_slots(self) -> None:
        """Free the slots of dead holders: a worker killed between taking a slot and
        claiming its mission, or one whose mission is not seen as lost yet, would
        otherwise hold a place under the caps for good."""
        expire = getattr(self._store, "expire_slots", None)
        if not callable(expire):
            return
        for mission_id in expire(max(SLOT_STALE_S, 2 * self._heartbeat_s)):
            log.warning("slot of a lost worker freed", mission=mission_id)

    def _release_slot(self, mission_id: str, holder: str) -> None:
        """Give a slot back; one that cannot be (the database is unreachable) is retried by
        the re-enqueue loop: left held, it would keep a place under the caps until it
        expired."""
        release = getattr(self._store, "release_slot", None)
        if not callable(release):
            return
        try:
            release(mission_id, holder)
        except SQLAlchemyError as exc:
            log.error("could not give a mission slot back", mission=mission_id, error=f"{exc}")
            if holder == self._runner:
                with self._lock:
                    self._unreleased.add(mission_id)

    def _retry_releases(self) -> None:
        with self._lock:
            unreleased = sorted(self._unreleased)
        for mission_id in unreleased:
            self._store.release_slot(mission_id, self._runner)
            with self._lock:
                self._unreleased.discard(mission_id)

    # -- the store is the source of truth ------------------------------------------------

    def _requeue_loop(self) -> None:
        checked = time.monotonic()
        while not self._stopping.wait(self._requeue_s):
            self._requeue_once()
            if self._run is not None and time.monotonic() - checked >= CHECK_EVERY_S:
                checked = time.monotonic()
                self._check_clocks(at_start=False)

    # -- clocks: SAQ's sweep compares this host's clock with other hosts' ---------------

    def _check_clocks(self, *, at_start: bool) -> None:
        """Measure the skew against the database and the queue: too large refuses the
        start (raises) or, on a running worker, is logged as an error; a skew worth
        watching is a warning. A clock that cannot be read is the queue's or the
        database's outage, which their own calls report."""
        try:
            readings = self._clock_readings()
        except (SQLAlchemyError, *QUEUE_ERRORS) as exc:  # type: ignore[misc]
            log.warning("clocks not compared", error=f"{type(exc).__name__}: {exc}")
            return
        try:
            verdict = check_clocks(readings, self._heartbeat_s)
        except ClockSkewed as exc:
            if at_start:
                self._close_loop()
                raise
            log.error("clock skew", error=str(exc))
            return
        if verdict.level == "warn":
            log.warning("clock skew", error=verdict.message)

    def _clock_readings(self) -> list[ClockReading]:
        readings: list[ClockReading] = []
        engine = getattr(self._store, "engine", None)
        if isinstance(engine, Engine):
            database = read_database_clock(engine, self._clock)
            if database is not None:
                readings.append(database)
        source = "the queue's Redis" if isinstance(self._queue, RedisQueue) else "the queue"
        readings.append(read_clock(source, lambda: self._call(self._queue_time), self._clock))
        return readings

    async def _queue_time(self) -> float:
        """The queue's server's clock: Redis `TIME`, PostgreSQL's `clock_timestamp()`."""
        queue = self._queue
        if isinstance(queue, RedisQueue):
            seconds, micros = await queue.redis.time()
            return float(seconds) + float(micros) / 1e6
        assert isinstance(queue, PostgresQueue)
        async with queue.pool.connection() as connection:
            cursor = await connection.execute(CLOCK_QUERY)
            row = await cursor.fetchone()
            assert row is not None
            return float(row[0])

    def _requeue_once(self) -> None:
        try:
            mission_ids = self._store.queued_mission_ids()
            if self._run is not None:
                self._retry_releases()
                self._expire_slots()
                mission_ids += [m.id for m in self._store.running_missions() if self._lost(m)]
            for mission_id in mission_ids:
                self._call(functools.partial(self._enqueue, mission_id))
        except (SQLAlchemyError, *QUEUE_ERRORS) as exc:  # type: ignore[misc]
            log.warning(
                "re-enqueue of stored missions failed", error=f"{type(exc).__name__}: {exc}"
            )
