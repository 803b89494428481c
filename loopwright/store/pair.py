"""Pair mode in the store: the request a mission waits on, and the decisions and guidance
people send it from any server process (the live view, pull-request comments).

The store is the path a decision takes to the mission's worker, wherever it runs: the
worker polls for it. A request is decided once, by whoever comes first (a person or the
expiry): closing the open request is one conditional UPDATE, and the decision's unique
(mission_id, request_id) backs it up.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from loopwright.store.models import Mission, PairDecisionRecord, PairRequestRecord, utcnow


class DecisionRefused(ValueError):
    """A decision the mission cannot take now; the message says why and what to do."""


@dataclass(frozen=True)
class StoredDecision:
    """A decision as the store keeps it."""

    id: int
    mission: str
    request: str | None
    """The request it decides; None for guidance sent while no request was pending."""
    decision: str
    by: str
    text: str
    at: datetime.datetime

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "mission": self.mission,
            "request": self.request,
            "decision": self.decision,
            "by": self.by,
            "text": self.text,
            "at": self.at.isoformat(),
        }


class PairRecords:
    """The store's reads and writes of pair mode's requests and decisions."""

    _session: sessionmaker[Session]

    def open_request(self, mission_id: str, request_id: str, payload: dict[str, Any]) -> None:
        """Record the request the mission now waits on. Any request it left open before (a
        lost worker's) is closed: a mission waits on one request at a time."""
        now = utcnow()
        with self._session.begin() as session:
            session.execute(
                update(PairRequestRecord)
                .where(
                    PairRequestRecord.mission_id == mission_id,
                    PairRequestRecord.closed_at.is_(None),
                )
                .values(closed_at=now)
            )
            # An insert, never a merge: a request id that was used before (and may have a
            # decision) is an error, not the same request asked again.
            session.add(
                PairRequestRecord(
                    mission_id=mission_id,
                    id=request_id,
                    payload=payload,
                    asked_at=now,
                    closed_at=None,
                )
            )

    def set_pair_loop(self, mission_id: str, state: str) -> None:
        """Record that the mission's pair-mode loop is `running` (it takes guidance) or has
        `ended`, for whichever server process is sent guidance."""
        with self._session.begin() as session:
            session.execute(update(Mission).where(Mission.id == mission_id).values(pair_loop=state))

    def close_request(self, mission_id: str, request_id: str) -> None:
        """The mission no longer waits on the request (decided, expired or cancelled)."""
        with self._session.begin() as session:
            session.execute(
                update(PairRequestRecord)
                .where(
                    PairRequestRecord.mission_id == mission_id,
                    PairRequestRecord.id == request_id,
                    PairRequestRecord.closed_at.is_(None),
                )
                .values(closed_at=utcnow())
            )

    def pending_request(self, mission_id: str) -> dict[str, Any] | None:
        """The open request's payload (with its `id`), or None."""
        with self._session() as session:
            row = session.scalars(
                select(PairRequestRecord)
                .where(
                    PairRequestRecord.mission_id == mission_id,
                    PairRequestRecord.closed_at.is_(None),
                )
                .order_by(PairRequestRecord.asked_at.desc())
                .limit(1)
            ).one_or_none()
        return None if row is None else {**dict(row.payload), "id": row.id}

    def record_decision(
        self,
        mission_id: str,
        kind: str,
        by: str,
        text: str = "",
        *,
        request_id: str | None = None,
    ) -> StoredDecision:
        """Decide the pending request, or (a `redirect` with none pending) send guidance.

        `request_id`, when given, must name the pending request: a decision meant for an
        earlier request never lands on a newer one. Raises `DecisionRefused` when there is
        nothing to decide or another decision came first.
        """
        pending = self.pending_request(mission_id)
        if request_id is not None and (pending is None or pending["id"] != request_id):
            current = f"the pending request is {pending['id']}" if pending else "none is pending"
            raise DecisionRefused(
                f"request {request_id} is not pending ({current}); reload the mission and "
                "decide what it waits on now"
            )
        if pending is None and kind != "redirect":
            raise DecisionRefused(
                f"mission {mission_id} is not waiting for a decision; only redirect "
                "(guidance) can be sent while it runs"
            )
        target = pending["id"] if pending is not None else None
        now = utcnow()
        try:
            with self._session.begin() as session:
                if target is not None:
                    closed = session.execute(
                        update(PairRequestRecord)
                        .where(
                            PairRequestRecord.mission_id == mission_id,
                            PairRequestRecord.id == target,
                            PairRequestRecord.closed_at.is_(None),
                        )
                        .values(closed_at=now)
                    )
                    if closed.rowcount != 1:  # type: ignore[attr-defined]
                        raise DecisionRefused(
                            f"request {target} was decided meanwhile (or the mission stopped "
                            "waiting for it)"
                        )
                row = PairDecisionRecord(
                    mission_id=mission_id,
                    request_id=target,
                    kind=kind,
                    decided_by=by,
                    text=text,
                    decided_at=now,
                    taken_at=None,
                )
                session.add(row)
                session.flush()
                return _decision(row)
        except IntegrityError:
            raise DecisionRefused(f"request {target} was decided meanwhile") from None

    def decision_for(self, mission_id: str, request_id: str) -> StoredDecision | None:
        """The decision on a request, once there is one."""
        with self._session() as session:
            row = session.scalars(
                select(PairDecisionRecord).where(
                    PairDecisionRecord.mission_id == mission_id,
                    PairDecisionRecord.request_id == request_id,
                )
            ).one_or_none()
        return None if row is None else _decision(row)

    def take_guidance(self, mission_id: str) -> list[StoredDecision]:
        """Guidance not yet handed to the mission's loop, oldest first; each is handed
        over once (the UPDATE claims it)."""
        with self._session.begin() as session:
            rows = session.scalars(
                update(PairDecisionRecord)
                .where(
                    PairDecisionRecord.mission_id == mission_id,
                    PairDecisionRecord.request_id.is_(None),
                    PairDecisionRecord.taken_at.is_(None),
                )
                .values(taken_at=utcnow())
                .returning(PairDecisionRecord)
            ).all()
            return sorted((_decision(row) for row in rows), key=lambda d: d.id)

    def decisions(self, mission_id: str) -> list[StoredDecision]:
        """Every decision and guidance of the mission, oldest first."""
        with self._session() as session:
            rows = session.scalars(
                select(PairDecisionRecord)
                .where(PairDecisionRecord.mission_id == mission_id)
                .order_by(PairDecisionRecord.id)
            ).all()
        return [_decision(row) for row in rows]


def _decision(row: PairDecisionRecord) -> StoredDecision:
    return StoredDecision(
        id=row.id,
        mission=row.mission_id,
        request=row.request_id,
        decision=row.kind,
        by=row.decided_by,
        text=row.text,
        at=row.decided_at,
    )
