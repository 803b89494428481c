"""The mission queue: runs stored missions with a concurrency limit.

The database is the source of truth. A worker claims a mission with `Store.mark_running`
(a conditional UPDATE from `queued`), so a mission submitted twice runs once, and anything
not yet claimed when the process stops is still `queued` in the database for `recover()`.
Before the claim a mission takes a slot in the store (`Store.acquire_slot`), which is what
holds `max_concurrent_missions` and the per-installation cap across every process on the
store; the slot is given back however the mission ends.

Two implementations of `MissionQueue`: `InProcessQueue` (threads in this process, the
default) and `SaqQueue` (loopwright/store/saq_queue.py: SAQ on Redis or PostgreSQL, shared
by every server and worker process, whose job takes a slot exactly as here; refused, the
job is deferred and enqueued again after a short delay). `open_queue` picks one from
`Settings.queue_url`.
"""

from __future__ import annotations

import queue
import threading
import time
import traceback
from collections.abc import Callable
from typing import Protocol

import structlog
from sqlalchemy.exc import SQLAlchemyError

from loopwright.config import Settings
from loopwright.redaction import Redactor
from loopwright.sandbox.docker.reaper import owner_id
from loopwright.store.missions import MissionClaim, MissionTakenOver, claimed
from loopwright.store.models import Mission
from loopwright.store.repository import Store

log = structlog.get_logger(__name__)

_WAKE = None
"""Handed to an idle worker thread so it notices the queue is stopping."""


class MissionQueue(Protocol):
    submit_blocks: bool
    """Whether `submit` waits on the network (an event loop calls it from a thread then)."""

    def submit(self, mission_id: str) -> None:
        """Ask for a stored, `queued` mission to run. Never blocks on the mission itself."""

    def start(self) -> None:
        """Start taking work."""

    def stop(self, timeout: float | None = None) -> bool:
        """Stop taking work and wait up to `timeout` seconds for running missions.

        Missions not yet started stay `queued` in the database. Returns True if every
        running mission finished in time.
        """

    def running(self) -> list[str]:
        """Ids of the missions this queue is running now."""

    def recover(self) -> list[Mission]:
        """At start-up: mark missions left `running` as `interrupted` (returned, so the
        caller can reap their containers and complete their check runs) and submit every
        `queued` mission again."""


class InProcessQueue:
    """Missions run on `concurrency` worker threads of this process, each under a slot of the
    store (`MissionSlots`), so the caps hold across every process on the store.

    `concurrency` is how many missions this process runs at once at most; `global_cap`
    (default `concurrency`) how many run at once in all processes on the store together;
    `installation_cap` how many of one App installation (None: no such cap). The server
    passes `LOOPWRIGHT_MAX_CONCURRENT_MISSIONS` as both `concurrency` and `global_cap`:
    any one process may take every slot when the others are idle, and together they never
    run more than the cap.

    One dispatcher thread takes submitted ids in order and hands a mission to an idle
    worker thread only once it holds a slot and is claimed (`mark_running`). A mission that
    gets no slot stays `queued` and waits in this process's pending list, without a
    thread, while missions of other installations go ahead; the dispatcher tries again
    when a mission here ends, when one is submitted, or every `retry_s` seconds (slots
    freed by other processes). Every exit of a claimed mission gives its slot back. A
    heartbeat thread renews the heartbeats of this queue's running missions and their
    slots every `heartbeat_s` seconds and frees the slots of dead processes
    (`expire_slots(stale_after_s)`); `recover` interrupts only missions whose runner is
    gone by the same measure. `runner` is the identity this queue's claims, slots and
    heartbeats are under: this process's owner id unless given. Only a stand-in for a
    process elsewhere (a test's) passes another: a reaper on another host takes a sandbox
    whose owner label differs from its mission's runner for abandoned.

    A mission whose `run` raises ends as `error` with the exception's message, redacted by
    `redactor` (token-shaped strings by default; pass one built with `Settings.secrets()`).

    `yield_to(seconds)`, when given, is called by the dispatcher before it claims missions
    and may block up to `seconds`. A server passes the wait for the webhook deliveries it
    is answering: a burst of deliveries is acknowledged before the missions it queued take
    slots and claims (writes on the same store) and start (token requests, sandboxes) on
    the same CPUs. GitHub waits ten seconds for an answer; a mission loses nothing by
    starting up to `yield_s` later.
    """

    submit_blocks = False

    def __init__(
        self,
        store: Store,
        run: Callable[[str], None],
        concurrency: int,
        *,
        global_cap: int | None = None,
        installation_cap: int | None = None,
        runner: str | None = None,
        redactor: Redactor | None = None,
        retry_s: float = 1.0,
        heartbeat_s: float = 10.0,
        stale_after_s: float = 60.0,
        yield_to: Callable[[float], object] | None = None,
        yield_s: float = 1.0,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {concurrency}")
        if global_cap is not None and global_cap < 1:
            raise ValueError(f"global_cap must be at least 1, not {global_cap}")
        if installation_cap is not None and installation_cap < 1:
            raise ValueError(f"installation_cap must be at least 1 or None, not {installation_cap}")
        if not 0 < heartbeat_s < stale_after_s:
            raise ValueError(
                f"heartbeat_s ({heartbeat_s}) must be positive and below stale_after_s "
                f"({stale_after_s}), or live slots would be freed"
            )
        self._store = store
        self._run = run
        self._concurrency = concurrency
        self._global_cap = global_cap or concurrency
        self._installation_cap = installation_cap
        self._runner = runner or owner_id()
        self._redactor = redactor or Redactor()
        self._retry_s = retry_s
        self._heartbeat_s = heartbeat_s
        self._stale_after_s = stale_after_s
        self._yield_to = yield_to
        self._yield_s = yield_s
        self._submitted: queue.SimpleQueue[str] = queue.SimpleQueue()
        self._admitted: queue.SimpleQueue[MissionClaim | None] = queue.SimpleQueue()
        self._pending: dict[str, None] = {}
        """Submitted ids not yet claimed, in order (only the dispatcher touches it)."""
        self._wake = threading.Event()
        self._workers: list[threading.Thread] = []
        self._helpers: list[threading.Thread] = []
        self._running: set[str] = set()
        self._idle = concurrency
        self._unreleased: set[str] = set()
        """Slots whose release failed (the database was unreachable); retried by the
        heartbeat, which would otherwise keep them alive."""
        self._lock = threading.Lock()
        self._stopping = threading.Event()

    def submit(self, mission_id: str) -> None:
        if not self._stopping.is_set():
            self._submitted.put(mission_id)
            self._wake.set()

    def start(self) -> None:
        with self._lock:
            if self._workers or self._stopping.is_set():
                return
            # Daemon threads: a mission that outlives stop(timeout) must not keep the
            # process alive; it stays `running` and the next start marks it interrupted.
            for n in range(self._concurrency):
                worker = threading.Thread(
                    target=self._work, name=f"loopwright-mission-{n}", daemon=True
                )
                self._workers.append(worker)
            self._helpers = [
                threading.Thread(target=self._dispatch, name="loopwright-dispatch", daemon=True),
                threading.Thread(
                    target=self._heartbeat, name="loopwright-slot-heartbeat", daemon=True
                ),
            ]
            for thread in [*self._workers, *self._helpers]:
                thread.start()

    def stop(self, timeout: float | None = None) -> bool:
        self._stopping.set()
        self._wake.set()
        deadline = None if timeout is None else time.monotonic() + timeout

        def remaining() -> float | None:
            return None if deadline is None else max(0.0, deadline - time.monotonic())

        # The dispatcher first, so no mission is handed to a worker after its wake-up call.
        if self._helpers:
            self._helpers[0].join(remaining())
        for _ in self._workers:
            self._admitted.put(_WAKE)
        for worker in self._workers:
            worker.join(remaining())
        for helper in self._helpers[1:]:
            helper.join(remaining())
        return not any(w.is_alive() for w in self._workers)

    def running(self) -> list[str]:
        with self._lock:
            return sorted(self._running)

    def recover(self) -> list[Mission]:
        interrupted = self._store.interrupt_running(stale_after_s=self._stale_after_s)
        for mission_id in self._store.queued_mission_ids():
            self.submit(mission_id)
        return interrupted

    def _dispatch(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()
            while True:
                try:
                    mission_id = self._submitted.get_nowait()
                except queue.Empty:
                    break
                self._pending.setdefault(mission_id, None)
            with self._lock:
                idle = self._idle
            if self._pending and idle and self._yield_to is not None:
                self._yield_to(self._yield_s)
                if self._stopping.is_set():
                    return
            try:
                self._admit()
            except SQLAlchemyError as exc:
                log.error("could not take missions from the queue", error=str(exc))
            # Waiting missions are retried now and then: other processes free slots too.
            self._wake.wait(self._retry_s if self._pending else self._heartbeat_s)

    def _admit(self) -> None:
        """Hand pending missions, oldest first, to idle workers while slots allow."""
        with self._lock:
            idle = self._idle
        if idle == 0 or not self._pending:
            return
        queued = self._store.queued_installations(list(self._pending))
        for mission_id in [m for m in self._pending if m not in queued]:
            del self._pending[mission_id]  # claimed elsewhere, cancelled or gone
        refused: set[int | None] = set()
        for mission_id, installation in [(m, queued[m]) for m in self._pending]:
            if idle == 0 or self._stopping.is_set():
                return
            if installation in refused:
                continue
            slot = self._store.acquire_slot(
                mission_id, installation, self._runner, self._global_cap, self._installation_cap
            )
            if slot is None:
                if installation is None or self._installation_cap is None:
                    return  # only the global cap can have refused: nothing else fits now
                refused.add(installation)
                continue
            del self._pending[mission_id]
            try:
                claim = self._store.claim(mission_id, runner=self._runner)
            except SQLAlchemyError:
                self._pending[mission_id] = None
                if slot == "taken":
                    self._release(mission_id)
                raise
            if claim is None:
                # Claimed by another process, or cancelled; a slot this runner already had
                # is the claiming run's (another queue of this process), not this call's.
                if slot == "taken":
                    self._release(mission_id)
                continue
            with self._lock:
                self._idle -= 1
                self._running.add(mission_id)
            idle -= 1
            self._admitted.put(claim)

    def _work(self) -> None:
        while True:
            claim = self._admitted.get()
            if claim is None:  # _WAKE
                return
            mission_id = claim.mission_id
            try:
                run_claimed(self._store, self._run, mission_id, self._redactor, claim)
            finally:
                self._release(mission_id)
                with self._lock:
                    self._running.discard(mission_id)
                    self._idle += 1
                self._wake.set()

    def _release(self, mission_id: str) -> None:
        try:
            self._store.release_slot(mission_id, self._runner)
        except SQLAlchemyError as exc:
            log.error("could not give a mission slot back", mission=mission_id, error=str(exc))
            with self._lock:
                self._unreleased.add(mission_id)

    def _heartbeat(self) -> None:
        while True:
            try:
                self._beat()
            except SQLAlchemyError as exc:
                log.error("could not renew the mission slots", error=str(exc))
            if self._stopping.wait(self._heartbeat_s):
                return

    def _beat(self) -> None:
        with self._lock:
            unreleased = sorted(self._unreleased)
        for mission_id in unreleased:
            self._store.release_slot(mission_id, self._runner)
            with self._lock:
                self._unreleased.discard(mission_id)
        with self._lock:
            running = sorted(self._running)
        for mission_id in running:
            # What tells a restarted server on another host that this worker lives.
            self._store.touch_runner(mission_id, self._runner)
        self._store.heartbeat_slots(self._runner, running)
        expired = self._store.expire_slots(self._stale_after_s)
        if expired:
            log.warning("freed the mission slots of a stopped process", missions=expired)
            self._wake.set()


def run_claimed(
    store: Store,
    run: Callable[[str], None],
    mission_id: str,
    redactor: Redactor,
    claim: MissionClaim | None = None,
) -> None:
    """Run a mission this process has claimed; a crash or a runner that records no result
    ends it `error` (the message redacted), so no mission stays `running` behind a live
    worker.

    With `claim` the run's store writes are the claim's (`claimed`): once another worker
    took the mission over, they are refused and the run stops (`MissionTakenOver`, logged
    here), leaving the new run alone."""
    with claimed(claim):
        try:
            _run_and_end(store, run, mission_id, redactor)
        except MissionTakenOver as exc:
            log.warning(
                "this worker no longer owns the mission; its run stops here",
                mission=mission_id,
                error=str(exc),
            )


def _run_and_end(
    store: Store, run: Callable[[str], None], mission_id: str, redactor: Redactor
) -> None:
    try:
        run(mission_id)
    except MissionTakenOver:
        raise
    except Exception as exc:  # noqa: BLE001 - one mission's failure must not end the worker
        message = redactor.text(f"{type(exc).__name__}: {exc}")
        trace = redactor.text("".join(traceback.format_exception(exc)))
        log.error("mission crashed", mission=mission_id, error=message, traceback=trace)
        store.set_status(mission_id, "error", message=message, expect="running")
        return
    if store.set_status(
        mission_id,
        "error",
        message="the runner returned without recording a result",
        expect="running",
    ):
        log.error("mission left running by its runner", mission=mission_id)


LostMission = Callable[[Mission, bool], None]
"""Called by a queue that took over a mission whose worker was lost, before it runs again:
the mission as the lost worker left it, and whether it ended `interrupted` (lost twice)
rather than going back to the queue. It reaps the lost worker's sandboxes and, when
interrupted, completes the check run and tells the tracking comment."""


def open_queue(
    settings: Settings,
    store: Store,
    run: Callable[[str], None] | None,
    concurrency: int,
    *,
    redactor: Redactor | None = None,
    on_lost: LostMission | None = None,
    yield_to: Callable[[float], object] | None = None,
) -> MissionQueue:
    """The queue `settings` ask for: SAQ on `queue_url`, else the in-process queue.

    `run=None` is a process that only submits (a web server in front of SAQ workers): its
    `start` runs no mission. The in-process queue has no other process to run them, so it
    needs `run`.

    `yield_to`: see `InProcessQueue` (a server's SAQ queue starts no mission in-process).
    """
    if settings.queue_url is None:
        if run is None:
            raise ValueError("the in-process queue runs its own missions: pass `run`")
        return InProcessQueue(
            store,
            run,
            concurrency,
            global_cap=settings.max_concurrent_missions,
            installation_cap=settings.max_missions_per_installation,
            redactor=redactor,
            yield_to=yield_to,
        )
    from loopwright.store.saq_queue import SaqQueue

    return SaqQueue(
        store,
        run,
        concurrency,
        url=settings.queue_url,
        redactor=redactor,
        on_lost=on_lost,
        heartbeat_s=settings.queue_heartbeat_s,
        global_cap=settings.max_concurrent_missions,
        installation_cap=settings.max_missions_per_installation,
    )
