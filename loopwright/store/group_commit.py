"""Group commit: writes that arrive together share one transaction and one commit.

SQLite has one writer at a time, so a burst of webhook deliveries, each committing its own
transaction from its own thread, queues on the database lock. `GroupCommit` owns one
writer thread instead: a caller hands it a unit of work and blocks; the writer takes every
unit waiting at that moment (up to `max_batch`), runs them in one transaction, commits once
and then wakes each caller with its own result. A unit that raises sends its batch back:
the transaction is rolled back and the batch run again with each unit in a savepoint of
its own, so that only that unit's writes are lost (a savepoint costs more than a webhook's
insert, and units rarely raise). A unit may therefore run twice, and must do nothing but
its writes. An idle writer starts on the first unit that arrives, so a lone write waits
for nobody.

Several processes on one SQLite file (`serve --workers N`) each have a writer. SQLite
makes a writer that finds the file locked sleep and try again, for up to 100 ms a time,
so two writers taking turns wait far longer than the other's commit takes. With
`lock_path`, the writers of every process on the file take an exclusive `flock` on that
file first, trying again after half a millisecond and then less often, up to every 5 ms:
a waiting writer goes on within milliseconds of the other's commit.

On PostgreSQL several processes (servers) write at once, each with its own writer: two
batches that insert the same keys in opposite orders deadlock, and PostgreSQL aborts one
statement to break the cycle. The aborted batch is rolled back, which releases what the
other batch waits for, and run again unit by unit; a unit aborted again in its savepoint
is run in the next transaction, after its batch committed.
"""

from __future__ import annotations

import fcntl
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import structlog
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from loopwright.store.engine import BUSY_TIMEOUT_S

T = TypeVar("T")
log = structlog.get_logger("loopwright.store")
DEFAULT_MAX_BATCH = 64
"""Units per transaction at most: a bound on how long the last unit of a batch waits."""
RETRIES = 3
"""How many times a unit aborted by a deadlock or serialization failure is run again."""


class GroupCommitClosed(RuntimeError):
    """The store was closed; the write was not made."""


@dataclass(frozen=True)
class _Unit:
    work: Callable[[Session], Any]
    done: Future[Any]
    attempt: int = 0


_STOP = object()


class GroupCommit:
    """The one writer thread of a store for writes that may share a commit.

    `run(work)` returns what `work(session)` returned once the transaction holding it is
    committed. An exception raised by `work` undoes only that unit's writes and is raised
    to its caller; the other units of the batch still commit (their batch is run again, so
    `work` may run twice). An exception from the
    commit itself (the database is gone, the disk is full) is raised to every caller of the
    batch: none of their writes was made. Units run in the order they arrived.
    """

    def __init__(
        self,
        sessions: sessionmaker[Session],
        *,
        max_batch: int = DEFAULT_MAX_BATCH,
        name: str = "loopwright-group-commit",
        lock_path: Path | None = None,
    ) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, not {max_batch}")
        self._sessions = sessions
        self._lock_path = lock_path
        self._lock_fd: int | None = None
        self._max_batch = max_batch
        self._name = name
        self._units: queue.SimpleQueue[_Unit | object] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        self.batches = 0
        """Transactions committed so far (for tests and the benchmark's reading)."""

    def run(self, work: Callable[[Session], T]) -> T:
        result: T = self.submit(work).result()
        return result

    def submit(self, work: Callable[[Session], T]) -> Future[T]:
        """`run` without waiting: the future is done once the commit holding `work` is
        made (an event loop awaits it with `asyncio.wrap_future`)."""
        unit = _Unit(work, Future())
        with self._lock:
            if self._closed:
                raise GroupCommitClosed("the store is closed; nothing was written")
            if self._thread is None:
                self._thread = threading.Thread(target=self._write, name=self._name, daemon=True)
                self._thread.start()
            self._units.put(unit)
        return unit.done

    def close(self, timeout: float | None = 30) -> None:
        """Finish the units already handed in, then stop the writer."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
            self._units.put(_STOP)
        if thread is not None:
            thread.join(timeout)
        if self._lock_fd is not None and (thread is None or not thread.is_alive()):
            os.close(self._lock_fd)
            self._lock_fd = None

    @contextmanager
    def _writers_lock(self) -> Iterator[None]:
        """The lock every process's writer on this SQLite file takes (see the module).

        It only spares writers SQLite's sleeps; SQLite keeps the writes correct without
        it. So a lock that cannot be opened, or that another process holds for as long as
        SQLite's own busy timeout (a process stopped with the lock), is done without: the
        writes go on under SQLite's locking alone, with a warning."""
        fd = self._lock_file()
        held = fd is not None and _flock_within(fd, BUSY_TIMEOUT_S)
        if fd is not None and not held:
            log.warning(
                f"another process on the store held {self._lock_path} for "
                f"{BUSY_TIMEOUT_S:.0f} s; this write goes on without it"
            )
        try:
            yield
        finally:
            if held and fd is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def _lock_file(self) -> int | None:
        if self._lock_path is None or self._lock_fd is not None:
            return self._lock_fd
        try:
            self._lock_fd = os.open(
                self._lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600
            )
        except OSError as exc:
            log.warning(
                "cannot open the store's writers' lock; writes go on under SQLite's locking alone",
                path=str(self._lock_path),
                error=str(exc),
            )
            self._lock_path = None
        return self._lock_fd

    def _write(self) -> None:
        stopping = False
        while not stopping:
            first = self._units.get()
            if first is _STOP:
                return
            batch = [first]
            while len(batch) < self._max_batch:
                try:
                    more = self._units.get_nowait()
                except queue.Empty:
                    break
                if more is _STOP:
                    stopping = True
                    break
                batch.append(more)
            # A unit whose caller cancelled its future is not run; the others can no longer
            # be cancelled, so only this thread settles them.
            units = [
                u for u in batch if isinstance(u, _Unit) and u.done.set_running_or_notify_cancel()
            ]
            if not units:
                continue
            try:
                self._commit(units)
            except BaseException as exc:
                for unit in units:
                    if not unit.done.done():
                        unit.done.set_exception(exc)
                if not isinstance(exc, Exception):  # SystemExit and the like end the writer
                    self._refuse_the_rest(exc)
                    raise
                log.error("a group commit failed", error=str(exc))

    def _refuse_the_rest(self, exc: BaseException) -> None:
        """The writer is ending: no caller may wait for it, now or later."""
        with self._lock:
            self._closed = True
        while True:
            try:
                unit = self._units.get_nowait()
            except queue.Empty:
                return
            if isinstance(unit, _Unit) and unit.done.set_running_or_notify_cancel():
                unit.done.set_exception(
                    GroupCommitClosed(f"the store's writer stopped ({exc!r}); nothing was written")
                )

    def _commit(self, batch: list[_Unit]) -> None:
        """The batch in one transaction; when a unit raises, the transaction is rolled back
        and the batch is run again with each unit in a savepoint of its own.

        A savepoint costs more than the insert it guards (two statements, and SQLAlchemy's
        nested-transaction bookkeeping), and a unit almost never raises: so the batch is
        first run without any, which leaves every unit's writes or none."""
        try:
            results = self._run_batch(batch, savepoints=False)
        except _UnitRaised:
            results = self._run_batch(batch, savepoints=True)
        if results is None:  # the commit failed: every caller of the batch has heard
            return
        done, again = results
        self.batches += 1
        for unit, ok, value in done:
            if ok:
                unit.done.set_result(value)
            else:
                unit.done.set_exception(value)
        if again:
            self._commit(again)

    def _run_batch(
        self, batch: list[_Unit], *, savepoints: bool
    ) -> tuple[list[tuple[_Unit, bool, Any]], list[_Unit]] | None:
        """Each unit's outcome and the units to try again, once committed; None when the
        commit failed (each caller is told). Without `savepoints`, a unit that raises rolls
        the transaction back and `_UnitRaised` is raised."""
        results: list[tuple[_Unit, bool, Any]] = []
        again: list[_Unit] = []
        try:
            with self._writers_lock(), self._sessions.begin() as session:
                connection = session.connection()
                if connection.dialect.name == "sqlite":
                    # pysqlite opens a transaction only before DML; a SAVEPOINT first would be
                    # its own transaction and each RELEASE a commit of its own.
                    connection.exec_driver_sql("BEGIN IMMEDIATE")
                for unit in batch:
                    if not savepoints:
                        try:
                            results.append((unit, True, unit.work(session)))
                        except Exception as exc:
                            raise _UnitRaised from exc
                        continue
                    savepoint = session.begin_nested()
                    try:
                        value = unit.work(session)
                        savepoint.commit()
                    except Exception as exc:  # noqa: BLE001 - raised to this unit's caller
                        if savepoint.is_active:
                            savepoint.rollback()
                        if _transient(exc) and unit.attempt < RETRIES:
                            again.append(replace(unit, attempt=unit.attempt + 1))
                        else:
                            results.append((unit, False, exc))
                    else:
                        results.append((unit, True, value))
        except _UnitRaised:
            raise
        except BaseException as exc:  # the commit failed: every caller of the batch hears it
            # `again` holds retries of units of `batch`: the same futures.
            for unit in batch:
                if not unit.done.done():
                    unit.done.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return None
        return results, again


class _UnitRaised(Exception):
    """A unit raised in a batch run without savepoints; the transaction was rolled back."""


LOCK_POLL_S = 0.0005
"""How soon a writer waiting for the writers' lock first tries again (SQLite's sleeps grow
to 100 ms; a blocking flock would wait without end for a stopped process)."""
LOCK_POLL_MAX_S = 0.005


def _flock_within(fd: int, timeout: float) -> bool:
    """Take an exclusive flock on `fd`; False if another holder kept it `timeout` seconds.
    The first tries come every `LOCK_POLL_S` (a commit takes milliseconds), then less often
    (up to every `LOCK_POLL_MAX_S`), so a long wait does not keep taking the CPU."""
    deadline = time.monotonic() + timeout
    pause = LOCK_POLL_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(pause)
            pause = min(pause * 1.5, LOCK_POLL_MAX_S)


def _transient(exc: Exception) -> bool:
    """A deadlock or serialization failure (SQLSTATE class 40): the database aborted this
    statement so that another transaction could go on; the same work may succeed later."""
    code = getattr(getattr(exc, "orig", None), "sqlstate", None)
    return isinstance(exc, DBAPIError) and isinstance(code, str) and code.startswith("40")
