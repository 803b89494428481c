"""`Store`: every read and write of missions, deliveries, events, usage, sign-in sessions
(revoked ones, and the repository lists of GitHub sign-ins), warm-pool sandbox claims and
mission slots and pair mode's requests and decisions goes through here.

Sync SQLAlchemy, because missions run on worker threads and the web handlers call it through
a thread. Whatever must happen once (a delivery, a mission per dedupe key, an event per
sequence number) is enforced by a UNIQUE constraint and an INSERT that may fail, never by a
read followed by a write, so it holds across threads, processes and dialects.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType

from sqlalchemy.engine import Engine
from sqlalchemy.orm import sessionmaker

from loopwright.config import Settings
from loopwright.store.claims import SandboxClaims
from loopwright.store.costs import CostView
from loopwright.store.deliveries import Accepted, DeliveryRecords
from loopwright.store.engine import database_url, make_engine, migrate
from loopwright.store.event_log import EventLog
from loopwright.store.group_commit import GroupCommit
from loopwright.store.missions import (
    CANCEL_REQUESTED,
    INTERRUPTED_MESSAGE,
    CancelAnswer,
    FinishedResult,
    MissionClaim,
    MissionNotFound,
    MissionRecords,
    MissionTakenOver,
    new_mission_id,
)
from loopwright.store.pair import DecisionRefused, PairRecords, StoredDecision
from loopwright.store.sessions import SessionRevocations, SignInSessions
from loopwright.store.slots import MissionSlots

__all__ = [
    "CANCEL_REQUESTED",
    "INTERRUPTED_MESSAGE",
    "Accepted",
    "CancelAnswer",
    "DecisionRefused",
    "FinishedResult",
    "MissionClaim",
    "MissionNotFound",
    "MissionTakenOver",
    "Store",
    "StoredDecision",
    "new_mission_id",
    "open_store",
]


def open_store(settings: Settings) -> Store:
    """Migrate the configured database to the newest schema and open a store on it."""
    url = database_url(settings)
    migrate(url)
    return Store(url)


class Store(
    DeliveryRecords,
    MissionRecords,
    EventLog,
    CostView,
    SessionRevocations,
    SignInSessions,
    SandboxClaims,
    MissionSlots,
    PairRecords,
):
    """The store: deliveries, missions, the event log, the cost view, sign-in sessions
    (revoked ones and GitHub sign-ins' repository lists), sandbox claims (the `ClaimLedger`
    of the Docker provider) and mission slots (the concurrency caps of every process on
    the store) and pair mode's requests and decisions over one engine."""

    def __init__(self, url: str) -> None:
        self.engine = make_engine(url)
        # Objects handed out stay readable after their session closes.
        self._session = sessionmaker(self.engine, expire_on_commit=False)
        self._writes = GroupCommit(self._session, lock_path=_writers_lock_path(self.engine))

    def close(self) -> None:
        self._writes.close()
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _writers_lock_path(engine: Engine) -> Path | None:
    """Beside a SQLite file, the lock its processes' group-commit writers take turns on."""
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not database or database == ":memory:":
        return None
    return Path(f"{database}-writers.lock")
