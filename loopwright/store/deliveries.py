"""Webhook deliveries in the store: each `X-GitHub-Delivery` id once, with what was decided
about it and, for work, the mission it made or joined."""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from typing import Any, cast

from sqlalchemy import Table, bindparam, delete, func, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from loopwright.request import MissionRequest
from loopwright.store.direct import DirectStatement
from loopwright.store.group_commit import GroupCommit
from loopwright.store.missions import attempts_on, lock_head, mission_values
from loopwright.store.models import Delivery, Mission, utcnow


class Accepted:
    """What `accept_delivery` did."""

    __slots__ = ("_mission", "_values", "created", "mission_id", "new_delivery")

    new_delivery: bool
    """False: this X-GitHub-Delivery id was seen before and nothing was written."""
    created: bool
    """True when this delivery created the mission (False: it joined an existing one)."""
    mission_id: str | None
    """The mission this delivery made or joined (None: it made none, or it was a replay)."""

    def __init__(
        self,
        new_delivery: bool,
        mission: Mission | None,
        created: bool,
        *,
        values: dict[str, Any] | None = None,
    ) -> None:
        """`values`: a mission this delivery inserted, as the values it was inserted with;
        its `Mission` is made when `mission` is first read (the webhook reads only its id,
        and making the mapped object is a tenth of a red check's write)."""
        self.new_delivery = new_delivery
        self.created = created
        self._mission = mission
        self._values = values
        self.mission_id = mission.id if mission is not None else (values or {}).get("id")

    @property
    def mission(self) -> Mission | None:
        if self._mission is None and self._values is not None:
            self._mission = Mission(**self._values)
        return self._mission

    def __repr__(self) -> str:
        return (
            f"Accepted(new_delivery={self.new_delivery}, mission_id={self.mission_id!r}, "
            f"created={self.created})"
        )


class DeliveryRecords:
    """The store's reads and writes of webhook deliveries."""

    _session: sessionmaker[Session]
    _writes: GroupCommit

    def record_delivery(self, delivery_id: str, event: str, action: str | None) -> bool:
        """Store a delivery; False when this `X-GitHub-Delivery` id was seen before."""
        try:
            with self._session.begin() as session:
                session.add(Delivery(id=delivery_id, event=event, action=action))
        except IntegrityError:
            return False
        return True

    def decide_delivery(
        self, delivery_id: str, decision: str, mission_id: str | None = None
    ) -> None:
        """Record what was done with a delivery (the ignore reason, or the mission it made)."""
        with self._session.begin() as session:
            session.execute(
                update(Delivery)
                .where(Delivery.id == delivery_id)
                .values(decision=decision, mission_id=mission_id)
            )

    def get_delivery(self, delivery_id: str) -> Delivery | None:
        with self._session() as session:
            return session.get(Delivery, delivery_id)

    def accept_delivery(
        self,
        delivery_id: str,
        event: str,
        action: str | None,
        *,
        decision: str,
        request: MissionRequest | None = None,
    ) -> Accepted:
        """Record a delivery, what was decided and (for work) its mission, in one transaction.

        The webhook answers right after this, so it is the one durable write on that path:
        a replayed delivery id changes nothing, and a second delivery about the same
        failure points at the existing mission. Deliveries that arrive together share one
        commit (`GroupCommit`); this returns once the commit holding this one is made.
        """

        return self.accept_delivery_later(
            delivery_id, event, action, decision=decision, request=request
        ).result()

    def accept_delivery_later(
        self,
        delivery_id: str,
        event: str,
        action: str | None,
        *,
        decision: str,
        request: MissionRequest | None = None,
    ) -> Future[Accepted]:
        """`accept_delivery` without waiting: the future holds what it did once committed."""

        def write(session: Session) -> Accepted:
            return _write(session, delivery_id, event, action, decision, request)

        return self._accept(write)

    def accept_delivery_deciding_later(
        self,
        delivery_id: str,
        event: str,
        action: str | None,
        *,
        repo: str,
        decide: Callable[[Mapping[str, int]], tuple[str, MissionRequest | None]],
    ) -> Future[Accepted]:
        """`accept_delivery_later` for a decision that needs the missions already stored per
        head of `repo` (the attempt cap): `decide(attempts)` runs in the write's own
        transaction and returns the decision to store and, for work, the mission's request.

        The count is read in the transaction that writes the row, so the caller needs no
        thread of its own to read it, and no mission counted the same way comes between
        the count and the write: SQLite has one writer at a time, and on PostgreSQL the
        count first takes the head's lock (`lock_head`), as a runner admitting a mission
        (`pin_within_cap`) does.
        `decide` may run more than once (see `GroupCommit`): only its last answer is
        stored.
        """

        def write(session: Session) -> Accepted:
            decision, request = decide(_StoredAttempts(session.connection(), repo))
            return _write(session, delivery_id, event, action, decision, request)

        return self._accept(write)

    def _accept(self, write: Callable[[Session], Accepted]) -> Future[Accepted]:
        accepted: Future[Accepted] = Future()

        def settle(written: Future[Accepted]) -> None:
            # Runs on the writer thread once the commit is made or has failed. A caller
            # that stopped waiting (a cancelled request) has cancelled `accepted`.
            if not accepted.set_running_or_notify_cancel():
                return
            try:
                error = written.exception()
                if error is None:
                    accepted.set_result(written.result())
                elif isinstance(error, IntegrityError):  # the delivery id was seen before
                    accepted.set_result(Accepted(False, None, False))
                else:
                    accepted.set_exception(error)
            except BaseException as exc:  # noqa: BLE001 - the caller must hear of it
                if not accepted.done():
                    accepted.set_exception(exc)

        self._writes.submit(write).add_done_callback(settle)
        return accepted

    def recent_deliveries(self, decision: str, seconds: float) -> int:
        """How many deliveries in the last `seconds` were recorded with this decision."""
        since = utcnow() - datetime.timedelta(seconds=seconds)
        with self._session() as session:
            count = session.scalar(
                select(func.count())
                .select_from(Delivery)
                .where(Delivery.decision == decision, Delivery.received_at >= since)
            )
        return int(count or 0)


def _write(
    session: Session,
    delivery_id: str,
    event: str,
    action: str | None,
    decision: str,
    request: MissionRequest | None,
) -> Accepted:
    # Core statements on the session's connection, not the unit of work: the batch shares
    # one session, and a duplicate id must be found by the database, not by the session's
    # identity map. Table statements with the values as parameters: one cached statement
    # each, where ORM inserts with `.values(...)` are keyed and compiled on every delivery.
    # Through the session, a Core statement takes the ORM's execution path; an UPDATE that
    # recorded the decision there searched the identity map too (0.17 ms, against 0.09 ms
    # on the connection).
    # Both inserts do nothing on a conflict rather than fail: a failing statement would
    # send the whole batch back to be run again unit by unit (see GroupCommit), and a
    # replayed delivery id or a second delivery about the same failure are common.
    # The mission first, so the delivery's row is written once, whole: a replayed id is
    # rarer than a new one, and only its mission, when this unit created it, is taken back.
    connection = session.connection()
    dialect = connection.dialect.name
    mission: Mission | None = None
    values: dict[str, Any] | None = None
    mission_id: str | None = None
    if request is not None:
        values = mission_values(request, None, "queued", None)
        if _INSERT_MISSION[dialect].first(connection, mission_columns(values)) is not None:
            mission_id = values["id"]
        else:
            values = None
            mission = session.scalars(
                select(Mission).where(Mission.dedupe_key == request.dedupe_key)
            ).one()
            session.expunge(mission)
            mission_id = mission.id
            decision = "duplicate mission"
    row = {"id": delivery_id, "event": event, "action": action, "decision": decision,
           "mission_id": mission_id, "received_at": utcnow()}  # fmt: skip
    if _INSERT_DELIVERY[dialect].first(connection, row) is None:
        # This X-GitHub-Delivery id was seen before: nothing of this delivery is kept.
        if values is not None:
            _FORGET_MISSION.first(connection, {"id": mission_id})
        return Accepted(False, None, False)
    return Accepted(True, mission, values is not None, values=values)


class _StoredAttempts(Mapping[str, int]):
    """Missions stored per head SHA of one repository, read in the writer's transaction."""

    def __init__(self, connection: Connection, repo: str) -> None:
        self._connection = connection
        self._repo = repo

    def __getitem__(self, sha: str) -> int:
        lock_head(self._connection, self._repo, sha)
        return attempts_on(self._connection, self._repo, sha)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


# The statements of a delivery's write run on the driver's cursor (`DirectStatement`): each
# is given every column, so no column default applies.
_INSERT_DELIVERY = {
    dialect: DirectStatement(
        insert_(cast(Table, Delivery.__table__))
        .on_conflict_do_nothing(index_elements=["id"])
        .returning(Delivery.id)
    )
    for dialect, insert_ in (("sqlite", sqlite.insert), ("postgresql", postgresql.insert))
}
"""A delivery unless its id is stored; it returns the id only when the row was inserted."""
_FORGET_MISSION = DirectStatement(
    delete(_MISSIONS := cast(Table, Mission.__table__)).where(_MISSIONS.c.id == bindparam("id"))
)
"""The mission a replayed delivery's unit inserted, taken back in the same transaction."""
_INSERT_MISSION = {
    dialect: DirectStatement(
        insert_(cast(Table, Mission.__table__))
        .on_conflict_do_nothing(index_elements=["dedupe_key"])
        .returning(Mission.id)
    )
    for dialect, insert_ in (("sqlite", sqlite.insert), ("postgresql", postgresql.insert))
}
"""A mission unless one with its dedupe key is stored, in each of the store's dialects; it
returns the id only when the row was inserted."""

_UNSET: dict[str, Any] = {column.key: None for column in _MISSIONS.columns}


def mission_columns(values: dict[str, Any]) -> dict[str, Any]:
    """A new mission's `mission_values` as `_INSERT_MISSION` takes them: every column, the
    ones they leave unset None (as the columns of a `Mission` made with them read)."""
    return {**_UNSET, **values}
