"""The mission queue: runs stored missions with a concurrency limit.

The database is the source of truth. A worker claims a mission with `Store.mark_running`
(a conditional UPDATE from `queued`), so a mission submitted twice runs once, and anything
not yet claimed when the process stops is still `queued` in the database for `recover()`.

A distributed backend implements the same `MissionQueue` with SAQ on Redis or PostgreSQL:
`submit` enqueues a job `run_mission(mission_id)` with `key=mission_id` (SAQ drops a second
job with the same key); `start`/`stop` start and stop a SAQ `Worker` whose `concurrency` is
`max_concurrent_missions` per worker process; `running` lists the ids of the jobs that
worker holds. The job calls the same `run` function, which claims the mission with
`mark_running` exactly as here. `recover` re-enqueues `queued` missions (idempotent thanks
to the job key) but must not call `interrupt_running()` blindly, because other workers may
be alive: it marks `interrupted` only missions whose SAQ job is gone or whose heartbeat
expired (SAQ's `heartbeat_timeout` aborts jobs of dead workers).
"""

from __future__ import annotations

import queue
import threading
import time
import traceback
from collections.abc import Callable
from typing import Protocol

import structlog

from loopwright.redaction import Redactor
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
            if not self._store.mark_running(mission_id):
                continue  # already claimed, finished or refused
            with self._lock:
                self._running.add(mission_id)
            try:
                self._run_one(mission_id)
            finally:
                with self._lock:
                    self._running.discard(mission_id)

    def _run_one(self, mission_id: str) -> None:
        try:
            self._run(mission_id)
        except Exception as exc:  # noqa: BLE001 - one mission's failure must not end the worker
            message = self._redactor.text(f"{type(exc).__name__}: {exc}")
            trace = self._redactor.text("".join(traceback.format_exception(exc)))
            log.error("mission crashed", mission=mission_id, error=message, traceback=trace)
            self._store.set_status(mission_id, "error", message=message, expect="running")
            return
        if self._store.set_status(
            mission_id,
            "error",
            message="the runner returned without recording a result",
            expect="running",
        ):
            log.error("mission left running by its runner", mission=mission_id)
