"""The mission queue: runs stored missions with a concurrency limit.

The database is the source of truth. A worker claims a mission with `Store.mark_running`
(a conditional UPDATE from `queued`), so a mission submitted twice runs once, and anything
not yet claimed when the process stops is still `queued` in the database for `recover()`.

Two implementations of `MissionQueue`: `InProcessQueue` (threads in this process, the
default) and `SaqQueue` (loopwright/store/saq_queue.py: SAQ on Redis or PostgreSQL, shared
by every server and worker process). `open_queue` picks one from `Settings.queue_url`.
"""

from __future__ import annotations

import queue
import threading
import time
import traceback
from collections.abc import Callable
from typing import Protocol

import structlog

from loopwright.config import Settings
from loopwright.redaction import Redactor
from loopwright.sandbox.docker.reaper import owner_id
from loopwright.store.models import Mission
from loopwright.store.repository import Store

log = structlog.get_logger(__name__)

_WAKE = ""
"""Put on the queue to wake an idle worker so it notices the queue is stopping."""


class MissionQueue(Protocol):
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
    """`concurrency` worker threads in this process, fed from an in-memory queue of ids.

    A mission whose `run` raises ends as `error` with the exception's message, redacted by
    `redactor` (token-shaped strings by default; pass one built with `Settings.secrets()`).
    """

    def __init__(
        self,
        store: Store,
        run: Callable[[str], None],
        concurrency: int,
        *,
        redactor: Redactor | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {concurrency}")
        self._store = store
        self._run = run
        self._concurrency = concurrency
        self._redactor = redactor or Redactor()
        self._ids: queue.SimpleQueue[str] = queue.SimpleQueue()
        self._workers: list[threading.Thread] = []
        self._running: set[str] = set()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._runner = owner_id()

    def submit(self, mission_id: str) -> None:
        if not self._stopping.is_set():
            self._ids.put(mission_id)

    def start(self) -> None:
        with self._lock:
            if self._workers or self._stopping.is_set():
                return
            for n in range(self._concurrency):
                # Daemon threads: a mission that outlives stop(timeout) must not keep the
                # process alive; it stays `running` and the next start marks it interrupted.
                worker = threading.Thread(
                    target=self._work, name=f"loopwright-mission-{n}", daemon=True
                )
                self._workers.append(worker)
                worker.start()

    def stop(self, timeout: float | None = None) -> bool:
        self._stopping.set()
        for _ in self._workers:
            self._ids.put(_WAKE)
        deadline = None if timeout is None else time.monotonic() + timeout
        for worker in self._workers:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            worker.join(remaining)
        return not any(w.is_alive() for w in self._workers)

    def running(self) -> list[str]:
        with self._lock:
            return sorted(self._running)

    def recover(self) -> list[Mission]:
        interrupted = self._store.interrupt_running()
        for mission in self._store.queued_missions():
            self.submit(mission.id)
        return interrupted

    def _work(self) -> None:
        while not self._stopping.is_set():
            mission_id = self._ids.get()
            if self._stopping.is_set() or mission_id == _WAKE:
                continue
            if not self._store.mark_running(mission_id, runner=self._runner):
                continue  # already claimed, finished or refused
            with self._lock:
                self._running.add(mission_id)
            try:
                self._run_one(mission_id)
            finally:
                with self._lock:
                    self._running.discard(mission_id)

    def _run_one(self, mission_id: str) -> None:
        run_claimed(self._store, self._run, mission_id, self._redactor)


def run_claimed(
    store: Store, run: Callable[[str], None], mission_id: str, redactor: Redactor
) -> None:
    """Run a mission this process has claimed; a crash or a runner that records no result
    ends it `error` (the message redacted), so no mission stays `running` behind a live
    worker."""
    try:
        run(mission_id)
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
) -> MissionQueue:
    """The queue `settings` ask for: SAQ on `queue_url`, else the in-process queue.

    `run=None` is a process that only submits (a web server in front of SAQ workers): its
    `start` runs no mission. The in-process queue has no other process to run them, so it
    needs `run`.
    """
    if settings.queue_url is None:
        if run is None:
            raise ValueError("the in-process queue runs its own missions: pass `run`")
        return InProcessQueue(store, run, concurrency, redactor=redactor)
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
