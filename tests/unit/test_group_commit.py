"""The group-commit writer on a real SQLite store and a real PostgreSQL database: units that
wait together share one commit, each caller gets its own result or error, a failed commit
fails every caller of the batch, and units are applied in the order they arrived."""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, insert, select, text
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from loopwright.store import Store, migrate
from loopwright.store.deliveries import _INSERT_DELIVERY
from loopwright.store.engine import make_engine
from loopwright.store.group_commit import (
    RETRIES,
    GroupCommit,
    GroupCommitClosed,
    _flock_within,
    _transient,
)
from loopwright.store.models import Delivery, utcnow
from loopwright.store.repository import _writers_lock_path


@pytest.fixture
def sessions(store_url: str) -> Any:
    engine = make_engine(store_url)
    yield sessionmaker(engine, expire_on_commit=False)
    engine.dispose()


def _add(delivery_id: str) -> Callable[[Session], str]:
    def work(session: Session) -> str:
        session.execute(insert(Delivery).values(id=delivery_id, event="ping", action=None))
        return delivery_id

    return work


def _recorded(delivery_id: str, runs: list[str]) -> Callable[[Session], str]:
    """`_add`, noting each run of the unit in `runs`."""

    def work(session: Session) -> str:
        runs.append(delivery_id)
        return _add(delivery_id)(session)

    return work


def _stored(sessions: sessionmaker[Session]) -> list[str]:
    with sessions() as session:
        return list(session.scalars(select(Delivery.id).order_by(Delivery.received_at)))


def _blocked_writer(writer: GroupCommit, pool: ThreadPoolExecutor) -> tuple[threading.Event, Any]:
    """Hold the writer inside a first unit, so the next units queue up behind it."""
    entered, release = threading.Event(), threading.Event()

    def hold(session: Session) -> str:
        entered.set()
        release.wait(10)
        return "held"

    first = pool.submit(writer.run, hold)
    assert entered.wait(10)
    return release, first


def _wait_queued(writer: GroupCommit, n: int) -> None:
    deadline = time.monotonic() + 10
    while writer._units.qsize() < n:
        assert time.monotonic() < deadline, "the units never reached the writer"
        time.sleep(0.005)


def test_units_waiting_together_share_one_commit(sessions: sessionmaker[Session]) -> None:
    writer = GroupCommit(sessions, max_batch=64)
    with ThreadPoolExecutor(20) as pool:
        release, first = _blocked_writer(writer, pool)
        waiting = [pool.submit(writer.run, _add(f"d{i}")) for i in range(10)]
        _wait_queued(writer, 10)
        release.set()
        assert first.result(10) == "held"
        assert [f.result(10) for f in waiting] == [f"d{i}" for i in range(10)]
    # One commit for the held unit, one for the ten that queued behind it.
    assert writer.batches == 2
    assert sorted(_stored(sessions)) == sorted(f"d{i}" for i in range(10))
    writer.close()


def test_a_batch_is_bounded(sessions: sessionmaker[Session]) -> None:
    writer = GroupCommit(sessions, max_batch=4)
    with ThreadPoolExecutor(20) as pool:
        release, first = _blocked_writer(writer, pool)
        waiting = [pool.submit(writer.run, _add(f"d{i}")) for i in range(10)]
        _wait_queued(writer, 10)
        release.set()
        first.result(10)
        for future in waiting:
            future.result(10)
    assert writer.batches == 1 + 3  # 10 units in batches of 4, 4 and 2
    writer.close()


def test_an_idle_writer_commits_a_lone_unit_at_once(sessions: sessionmaker[Session]) -> None:
    writer = GroupCommit(sessions)
    started = time.perf_counter()
    assert writer.run(_add("alone")) == "alone"
    assert time.perf_counter() - started < 1.0
    assert _stored(sessions) == ["alone"] and writer.batches == 1
    writer.close()


def test_a_failing_unit_fails_only_its_caller(sessions: sessionmaker[Session]) -> None:
    writer = GroupCommit(sessions)
    writer.run(_add("taken"))
    with ThreadPoolExecutor(10) as pool:
        release, first = _blocked_writer(writer, pool)
        before = pool.submit(writer.run, _add("before"))
        _wait_queued(writer, 1)
        replay = pool.submit(writer.run, _add("taken"))
        _wait_queued(writer, 2)
        after = pool.submit(writer.run, _add("after"))
        _wait_queued(writer, 3)
        release.set()
        first.result(10)
        assert before.result(10) == "before" and after.result(10) == "after"
        with pytest.raises(IntegrityError):
            replay.result(10)
    assert writer.batches == 3  # "taken", the held unit, then one batch of three
    assert sorted(_stored(sessions)) == ["after", "before", "taken"]
    writer.close()


def _failing_at_commit(sessions: sessionmaker[Session]) -> Callable[[Session], str]:
    """A unit whose own statements succeed and whose batch's COMMIT then fails: a deferred
    foreign key to a mission that does not exist is checked only at COMMIT."""
    if sessions.kw["bind"].dialect.name == "postgresql":
        with sessions.begin() as session:
            session.execute(
                text(
                    "ALTER TABLE deliveries ALTER CONSTRAINT fk_deliveries_mission_id_missions"
                    " DEFERRABLE"
                )
            )
        defer = "SET CONSTRAINTS ALL DEFERRED"
    else:
        defer = "PRAGMA defer_foreign_keys=ON"

    def dangling(session: Session) -> str:
        session.execute(text(defer))
        session.execute(
            insert(Delivery).values(id="dangling", event="ping", mission_id="no-such-mission")
        )
        return "dangling"

    return dangling


def _statements(sessions: sessionmaker[Session]) -> list[str]:
    """Every statement the writer's engine sends from now on."""
    sent: list[str] = []
    event.listen(sessions.kw["bind"], "before_cursor_execute", lambda *args: sent.append(args[2]))
    return sent


def test_a_batch_in_which_no_unit_raises_takes_no_savepoint(
    sessions: sessionmaker[Session],
) -> None:
    writer = GroupCommit(sessions)
    with ThreadPoolExecutor(20) as pool:
        release, first = _blocked_writer(writer, pool)
        sent = _statements(sessions)
        waiting = [pool.submit(writer.run, _add(f"d{i}")) for i in range(10)]
        _wait_queued(writer, 10)
        release.set()
        first.result(10)
        assert [f.result(10) for f in waiting] == [f"d{i}" for i in range(10)]
    assert writer.batches == 2
    assert [s for s in sent if "SAVEPOINT" in s.upper()] == []
    assert sum(1 for s in sent if s.lstrip().upper().startswith("INSERT")) == 10
    writer.close()


def test_a_unit_that_raises_after_writing_leaves_none_of_its_writes(
    sessions: sessionmaker[Session],
) -> None:
    """The batch is rolled back and run again unit by unit: the others' writes are made
    once, the failing unit's first insert is not kept, and its caller gets its error."""
    writer = GroupCommit(sessions)
    runs: list[str] = []

    def half_done(session: Session) -> str:
        runs.append("half")
        _add("half")(session)
        raise ValueError("the second write of this unit was refused")

    with ThreadPoolExecutor(10) as pool:
        release, first = _blocked_writer(writer, pool)
        futures = []
        for work in (_recorded("a", runs), half_done, _recorded("b", runs)):
            futures.append(pool.submit(writer.run, work))
            _wait_queued(writer, len(futures))
        release.set()
        first.result(10)
        assert futures[0].result(10) == "a" and futures[2].result(10) == "b"
        with pytest.raises(ValueError, match="second write"):
            futures[1].result(10)
    assert sorted(_stored(sessions)) == ["a", "b"]
    # The first run stopped at the unit that raised; the second ran every unit.
    assert runs == ["a", "half", "a", "half", "b"]
    writer.close()


def test_a_failed_commit_fails_every_caller_of_the_batch(sessions: sessionmaker[Session]) -> None:
    writer = GroupCommit(sessions)
    dangling = _failing_at_commit(sessions)

    with ThreadPoolExecutor(10) as pool:
        release, first = _blocked_writer(writer, pool)
        futures: list[Future[str]] = []
        for work in (_add("a"), dangling, _add("b")):
            futures.append(pool.submit(writer.run, work))
            _wait_queued(writer, len(futures))
        release.set()
        first.result(10)
        for future in futures:
            with pytest.raises(IntegrityError):
                future.result(10)
    assert _stored(sessions) == []
    assert writer.run(_add("later")) == "later"  # the writer goes on after a failed batch
    writer.close()


class _Deadlocked(Exception):
    sqlstate = "40P01"  # what psycopg raises when PostgreSQL breaks a deadlock


def _deadlocked_twice(tries: list[int]) -> Callable[[Session], str]:
    """A unit aborted by a deadlock in its batch's first run and again in its savepoint;
    its third run adds "retried"."""

    def work(session: Session) -> str:
        tries.append(1)
        if len(tries) <= 2:
            raise DBAPIError("INSERT ...", {}, _Deadlocked())
        return _add("retried")(session)

    return work


def test_a_failed_commit_after_a_retry_fails_each_caller_once_and_the_writer_goes_on(
    sessions: sessionmaker[Session],
) -> None:
    """A unit aborted by a deadlock even in its own savepoint is retried after its batch;
    when that batch's commit fails, its caller hears the failure once and the writer is
    still there for the next."""
    writer = GroupCommit(sessions)
    dangling = _failing_at_commit(sessions)
    tries: list[int] = []
    assert _transient(DBAPIError("INSERT ...", {}, _Deadlocked()))  # so it is retried

    with ThreadPoolExecutor(4) as pool:
        release, first = _blocked_writer(writer, pool)
        futures = [pool.submit(writer.run, _deadlocked_twice(tries))]
        _wait_queued(writer, 1)
        futures.append(pool.submit(writer.run, dangling))
        _wait_queued(writer, 2)
        release.set()
        first.result(10)
        for future in futures:
            with pytest.raises(IntegrityError):
                future.result(10)
    assert len(tries) == 2  # the retry was due after a commit that failed: it never ran
    assert writer.submit(_add("later")).result(10) == "later"  # the writer is still there
    assert _stored(sessions) == ["later"]
    writer.close()


def test_a_unit_deadlocked_in_its_own_savepoint_is_run_again_after_its_batch(
    sessions: sessionmaker[Session],
) -> None:
    writer = GroupCommit(sessions)
    tries: list[int] = []
    with ThreadPoolExecutor(4) as pool:
        release, first = _blocked_writer(writer, pool)
        retried = pool.submit(writer.run, _deadlocked_twice(tries))
        _wait_queued(writer, 1)
        other = pool.submit(writer.run, _add("other"))
        _wait_queued(writer, 2)
        release.set()
        first.result(10)
        assert other.result(10) == "other" and retried.result(10) == "retried"
    assert len(tries) == 3
    assert writer.batches == 3  # the held unit, the batch, then the retry on its own
    assert _stored(sessions) == ["other", "retried"]
    writer.close()


def test_a_unit_whose_caller_cancelled_it_is_not_written(sessions: sessionmaker[Session]) -> None:
    writer = GroupCommit(sessions)
    with ThreadPoolExecutor(2) as pool:
        release, first = _blocked_writer(writer, pool)
        cancelled = writer.submit(_add("cancelled"))
        kept = writer.submit(_add("kept"))
        assert cancelled.cancel()
        release.set()
        first.result(10)
        assert kept.result(10) == "kept"
    assert writer.submit(_add("later")).result(10) == "later"
    assert _stored(sessions) == ["kept", "later"]
    writer.close()


def test_units_are_applied_in_arrival_order(sessions: sessionmaker[Session]) -> None:
    writer = GroupCommit(sessions)
    seen: list[str] = []
    with ThreadPoolExecutor(30) as pool:
        release, first = _blocked_writer(writer, pool)
        futures = []
        for i in range(25):
            futures.append(pool.submit(writer.run, _recorded(f"u{i:02d}", seen)))
            _wait_queued(writer, i + 1)
        release.set()
        first.result(10)
        assert [f.result(10) for f in futures] == [f"u{i:02d}" for i in range(25)]
    assert seen == [f"u{i:02d}" for i in range(25)]
    writer.close()


def test_a_closed_writer_refuses_new_units(sessions: sessionmaker[Session]) -> None:
    writer = GroupCommit(sessions)
    writer.run(_add("first"))
    writer.close()
    with pytest.raises(GroupCommitClosed, match="nothing was written"):
        writer.run(_add("second"))
    assert _stored(sessions) == ["first"]


def test_two_writers_deadlocking_on_postgresql_both_finish(postgres_url: str) -> None:
    """Two servers' writers insert the same ids in opposite orders: PostgreSQL aborts one
    statement, which rolls back that writer's whole batch (run without savepoints); the
    other batch commits, and the rolled-back one, run again unit by unit, finds its rows."""
    from loopwright.store.engine import migrate

    migrate(postgres_url)
    engines = [make_engine(postgres_url) for _ in range(2)]
    writers = [GroupCommit(sessionmaker(e, expire_on_commit=False)) for e in engines]
    has_first = [threading.Event(), threading.Event()]

    def insert_after(me: int, delivery_id: str) -> Callable[[Session], str]:
        def work(session: Session) -> str:
            if delivery_id == ("d1", "d2")[me]:
                result = _add(delivery_id)(session)
                has_first[me].set()
                return result
            assert has_first[1 - me].wait(10)
            return _add(delivery_id)(session)

        return work

    try:
        with ThreadPoolExecutor(8) as pool:
            holds = [_blocked_writer(w, pool) for w in writers]
            futures: list[list[Future[str]]] = [[], []]
            for me, order in enumerate((("d1", "d2"), ("d2", "d1"))):
                for delivery_id in order:
                    futures[me].append(pool.submit(writers[me].run, insert_after(me, delivery_id)))
                    _wait_queued(writers[me], len(futures[me]))
            for release, _ in holds:
                release.set()
            outcomes = []
            for future in [*futures[0], *futures[1]]:
                try:
                    outcomes.append(future.result(30))
                except IntegrityError:
                    outcomes.append("duplicate")
        # Each id was inserted once; the unit that lost the deadlock found the other's row.
        assert sorted(outcomes) == ["d1", "d2", "duplicate", "duplicate"]
        # Each writer committed its hold, then its batch. The loser's rerun can deadlock
        # again: its first insert may land before the winner, woken by the rollback, makes
        # its own, so the winner then waits on the loser, and the loser's next insert on the
        # winner. A unit aborted so is run in one more transaction, at most RETRIES times.
        for writer in writers:
            assert 2 <= writer.batches <= 2 + RETRIES
        assert sorted(_stored(sessionmaker(engines[0]))) == ["d1", "d2"]
    finally:
        for writer in writers:
            writer.close()
        for engine in engines:
            engine.dispose()


def test_writers_on_one_sqlite_file_take_turns_on_the_lock_beside_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'loopwright.db'}"
    migrate(url)
    with Store(url) as store:
        store.accept_delivery("d-first", "ping", None, decision="ignored: ping")
        lock = tmp_path / "loopwright.db-writers.lock"
        assert lock.is_file() and lock.stat().st_mode & 0o777 == 0o600
        # Another process's writer holds the lock (a lock of its own open file, as flock's
        # are per open file, so this one excludes the store's writer like a process would).
        other = os.open(lock, os.O_RDWR)
        fcntl.flock(other, fcntl.LOCK_EX)
        with ThreadPoolExecutor(1) as pool:
            try:
                waiting = pool.submit(
                    store.accept_delivery, "d-second", "ping", None, decision="ignored: ping"
                )
                time.sleep(0.5)
                assert not waiting.done()
                assert store.get_delivery("d-second") is None
            finally:  # the writer must not wait out its timeout if an assertion failed
                fcntl.flock(other, fcntl.LOCK_UN)
                os.close(other)
            assert waiting.result(timeout=5).new_delivery
        assert store.get_delivery("d-second") is not None


def test_a_postgresql_store_has_no_writers_lock(postgres_url: str) -> None:
    # Its database name is not a path: no lock file may appear in the working directory.
    assert _writers_lock_path(make_engine(postgres_url)) is None


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_writer_ended_by_systemexit_refuses_new_units_rather_than_hang(
    sessions: sessionmaker[Session],
) -> None:
    writer = GroupCommit(sessions)

    def leave(session: Session) -> str:
        raise SystemExit(3)

    with pytest.raises(SystemExit):
        writer.submit(leave).result(10)
    with pytest.raises(GroupCommitClosed):
        writer.submit(_add("after")).result(10)
    assert writer._thread is not None
    writer._thread.join(10)  # it ended here, so its exception is reported in this test
    assert not writer._thread.is_alive()


def test_the_writers_lock_gives_up_after_its_timeout(tmp_path: Path) -> None:
    path = tmp_path / "held.lock"
    holder = os.open(path, os.O_RDWR | os.O_CREAT)
    waiter = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)
        started = time.monotonic()
        assert not _flock_within(waiter, 0.3)
        assert time.monotonic() - started >= 0.3
        fcntl.flock(holder, fcntl.LOCK_UN)
        assert _flock_within(waiter, 0.3)
    finally:
        os.close(holder)
        os.close(waiter)


def test_a_lock_file_that_cannot_be_opened_leaves_writes_to_sqlite(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'loopwright.db'}"
    migrate(url)
    (tmp_path / "loopwright.db-writers.lock").mkdir()  # opening it for writing fails
    with Store(url) as store:
        assert store.accept_delivery("d-1", "ping", None, decision="ignored: ping").new_delivery
        assert store.get_delivery("d-1") is not None


def test_a_batch_whose_connection_is_lost_on_a_direct_statement_is_run_again(
    postgres: Any, postgres_url: str
) -> None:
    """A unit's backend is ended (a failover, an idle timeout, `pg_terminate_backend`)
    under a statement on the driver's cursor (a webhook delivery's insert): the lost
    connection is invalidated as SQLAlchemy's own execution would, so the batch is run
    again on a fresh one and every other delivery of it is stored."""
    migrate(postgres_url)
    engine = make_engine(postgres_url)
    writer = GroupCommit(sessionmaker(engine, expire_on_commit=False))
    ended: list[int] = []

    def lose_connection_then_insert(session: Session) -> str:
        if not ended:
            pid = session.connection().exec_driver_sql("SELECT pg_backend_pid()").scalar()
            ended.append(int(pid or 0))
            postgres.sql(f"SELECT pg_terminate_backend({ended[0]})")
        row = {"id": "lost", "event": "ping", "action": None, "decision": "x",
               "mission_id": None, "received_at": utcnow()}  # fmt: skip
        _INSERT_DELIVERY["postgresql"].first(session.connection(), row)
        return "lost"

    try:
        with ThreadPoolExecutor(8) as pool:
            release, first = _blocked_writer(writer, pool)
            waiting = [pool.submit(writer.run, lose_connection_then_insert)]
            waiting += [pool.submit(writer.run, _add(f"d{i}")) for i in range(3)]
            _wait_queued(writer, 4)
            release.set()
            assert first.result(30) == "held"
            assert [f.result(30) for f in waiting] == ["lost", "d0", "d1", "d2"]
        assert ended and ended[0] > 0
        assert sorted(_stored(sessionmaker(engine))) == ["d0", "d1", "d2", "lost"]
    finally:
        writer.close()
        engine.dispose()
