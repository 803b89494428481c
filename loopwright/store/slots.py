"""Mission slots: a semaphore in the store, so the concurrency caps hold across every process
that runs missions from it (the server's workers, `loopwright worker`, SAQ workers).

A mission takes a slot before it is claimed (`mark_running`) and gives it back when it ends.
Taking one counts the slots held and inserts a row in one transaction that holds the store's
slot lock (SQLite: `BEGIN IMMEDIATE`, the database's write lock; PostgreSQL: a transaction
advisory lock), so two processes never both take the last slot. A process that dies keeps
its rows until `expire_slots` frees them: at once when it ran on this host and its pid is
gone, else once its heartbeat is older than `stale_after_s`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from contextlib import contextmanager
from typing import Literal

from sqlalchemy import delete, func, or_, select, text, update
from sqlalchemy.orm import Session, sessionmaker

from loopwright.sandbox.docker.reaper import owner_alive
from loopwright.store.models import Mission, MissionSlot, database_now

SLOT_LOCK_KEY = 0x6C77_736C_6F74  # "lwslot": the PostgreSQL advisory lock of the slots
"""Every transaction that takes a slot holds this lock, and nothing else takes it."""


SlotGrant = Literal["taken", "held"]
"""A slot granted: `taken` now by this call, or already `held` by the same holder (another
call of it took it, and gives it back)."""


class SlotsUnsupported(RuntimeError):
    """The store's database has no lock the slots can be taken under."""


class MissionSlots:
    """The store's reads and writes of mission slots."""

    _session: sessionmaker[Session]

    def acquire_slot(
        self,
        mission_id: str,
        installation_id: int | None,
        holder: str,
        global_cap: int,
        installation_cap: int | None,
    ) -> SlotGrant | None:
        """Take a slot for `mission_id` on behalf of `holder` (an owner id, `host:pid:start`)
        if fewer than `global_cap` slots are held and, with `installation_cap` and an
        installation, fewer than that many by the installation: `taken`. None: the mission
        waits.

        Taking again a slot the same holder has is `held` (its heartbeat renewed): the
        caller did not take it and must not give it back unless it then claims the
        mission, since two jobs of one process racing for a mission both get here and the
        loser would free the winner's slot. A slot of another holder is not shared, so the
        second of two processes racing for one mission is refused and never frees the
        first one's slot.
        """
        if global_cap < 1:
            raise ValueError(f"global_cap must be at least 1, not {global_cap}")
        if installation_cap is not None and installation_cap < 1:
            raise ValueError(f"installation_cap must be at least 1 or None, not {installation_cap}")
        with self._slot_lock() as session:
            now = database_now()  # heartbeats are judged by the database's clock too
            mine = session.get(MissionSlot, mission_id)
            if mine is not None:
                if mine.holder != holder:
                    return None
                mine.heartbeat_at = now
                return "held"
            held = session.scalar(select(func.count()).select_from(MissionSlot)) or 0
            if held >= global_cap:
                return None
            if installation_cap is not None and installation_id is not None:
                of_installation = session.scalar(
                    select(func.count())
                    .select_from(MissionSlot)
                    .where(MissionSlot.installation_id == installation_id)
                )
                if (of_installation or 0) >= installation_cap:
                    return None
            session.add(
                MissionSlot(
                    mission_id=mission_id,
                    installation_id=installation_id,
                    holder=holder,
                    acquired_at=now,
                    heartbeat_at=now,
                )
            )
            return "taken"

    def heartbeat_slots(self, holder: str, mission_ids: Collection[str]) -> None:
        """Say that `holder` still runs `mission_ids`: their slots are not stale. Only
        those: a slot the holder could not give back (the database was unreachable) is not
        renewed by the holder's other missions, so it expires if the holder never frees it."""
        if not mission_ids:
            return
        with self._session.begin() as session:
            session.execute(
                update(MissionSlot)
                .where(MissionSlot.holder == holder, MissionSlot.mission_id.in_(mission_ids))
                .values(heartbeat_at=database_now())
            )

    def release_slot(self, mission_id: str, holder: str) -> None:
        """Give back the slot `holder` holds for the mission (nothing happens when it holds
        none). A slot another holder took for the mission stays: a worker taken as lost
        whose run ends late must not free the slot of the worker that runs it now."""
        with self._session.begin() as session:
            session.execute(
                delete(MissionSlot).where(
                    MissionSlot.mission_id == mission_id, MissionSlot.holder == holder
                )
            )

    def expire_slots(self, stale_after_s: float) -> list[str]:
        """Free the slots of dead holders and return their missions' ids, oldest first.

        A holder is dead when it named a process on this host that is gone (or whose pid now
        belongs to another process), or when it has not renewed its slots for
        `stale_after_s` seconds by the database's clock (a holder on another host, or one
        that hangs).
        """
        cutoff = database_now(-stale_after_s)
        with self._session.begin() as session:
            holders = session.scalars(select(MissionSlot.holder).distinct()).all()
            dead = [h for h in holders if not owner_alive(h)]
            expired = or_(MissionSlot.heartbeat_at < cutoff, MissionSlot.holder.in_(dead))
            return list(
                session.scalars(
                    delete(MissionSlot)
                    .where(expired)
                    .returning(MissionSlot.mission_id)
                    .execution_options(synchronize_session=False)
                )
            )

    def slots_held(self, installation_id: int | None = None) -> int:
        """How many slots are held, in all or by one installation."""
        query = select(func.count()).select_from(MissionSlot)
        if installation_id is not None:
            query = query.where(MissionSlot.installation_id == installation_id)
        with self._session() as session:
            return int(session.scalar(query) or 0)

    def queue_positions(self) -> dict[str, int]:
        """Each `queued` mission's place in the queue, 1 for the next to run, in the order
        the queue takes them (oldest first)."""
        with self._session() as session:
            ids = session.scalars(
                select(Mission.id)
                .where(Mission.status == "queued")
                .order_by(Mission.created_at, Mission.id)
            ).all()
        return {mission_id: n for n, mission_id in enumerate(ids, start=1)}

    def queued_installations(self, mission_ids: list[str]) -> dict[str, int | None]:
        """Of `mission_ids`, those still `queued`, each with its request's installation id."""
        if not mission_ids:
            return {}
        with self._session() as session:
            rows = session.execute(
                select(Mission.id, Mission.request).where(
                    Mission.id.in_(mission_ids), Mission.status == "queued"
                )
            ).all()
        return {str(mission_id): _installation(request) for mission_id, request in rows}

    @contextmanager
    def _slot_lock(self) -> Iterator[Session]:
        """A transaction holding the slot lock, committed when the block ends cleanly."""
        with self._session() as session:
            connection = session.connection()
            dialect = connection.dialect.name
            if dialect == "sqlite":
                connection.exec_driver_sql("BEGIN IMMEDIATE")
            elif dialect == "postgresql":
                connection.execute(
                    text("SELECT pg_advisory_xact_lock(:key)"), {"key": SLOT_LOCK_KEY}
                )
            else:
                raise SlotsUnsupported(
                    f"mission slots need SQLite or PostgreSQL, not {dialect!r}; set "
                    "LOOPWRIGHT_DATABASE_URL to a postgresql+psycopg:// or sqlite:/// URL"
                )
            try:
                yield session
            except BaseException:
                session.rollback()
                raise
            session.commit()


def _installation(request: object) -> int | None:
    value = request.get("installation_id") if isinstance(request, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None
