"""The event log in the store: each (mission, seq) once, in order; stage and model-call
events also keep the mission's current stage, cost and per-tier usage live."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from loopwright.events import Event, EventSink
from loopwright.store.models import EventRecord, Mission, MissionUsage


class EventLog:
    """The store's reads and writes of mission events."""

    _session: sessionmaker[Session]

    def append_event(self, event: Event) -> bool:
        """Store one event; False if this (mission, seq) is already stored.

        A `stage` event moves the mission's current stage, a `model_call` event adds to its
        cost and per-tier usage, so the list and cost views are live while it runs.
        """
        record = EventRecord(
            mission_id=event.mission,
            seq=event.seq,
            ts=event.ts,
            type=event.type,
            stage=event.stage,
            body=dict(event.fields),
        )
        try:
            with self._session.begin() as session:
                session.add(record)
                session.flush()
                if event.type == "stage" and event.stage is not None:
                    session.execute(
                        update(Mission).where(Mission.id == event.mission).values(stage=event.stage)
                    )
                elif event.type == "model_call":
                    _count_model_call(session, event)
        except IntegrityError:
            with self._session() as session:
                if session.get(EventRecord, (event.mission, event.seq)) is None:
                    raise  # not a duplicate: the mission does not exist
            return False
        return True

    def last_event_seq(self, mission_id: str) -> int:
        """The sequence number of the mission's last stored event (0 for none): a mission
        run again after its worker was lost goes on numbering from there."""
        with self._session() as session:
            seq = session.scalar(
                select(func.max(EventRecord.seq)).where(EventRecord.mission_id == mission_id)
            )
        return int(seq or 0)

    def event_sink(self, mission_id: str) -> EventSink:
        """An `EventBus` sink that appends the mission's events to the log."""

        def sink(event: Event) -> None:
            if event.mission != mission_id:
                raise ValueError(
                    f"event of mission {event.mission!r} sent to the sink of {mission_id!r}"
                )
            self.append_event(event)

        return sink

    def events_after(
        self, mission_id: str, seq: int, *, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """The mission's events with a sequence number above `seq`, in order, as event dicts
        (the same shape as NDJSON lines and SSE messages)."""
        query = (
            select(EventRecord)
            .where(EventRecord.mission_id == mission_id, EventRecord.seq > seq)
            .order_by(EventRecord.seq)
        )
        if limit is not None:
            query = query.limit(limit)
        with self._session() as session:
            records = session.scalars(query).all()
        return [
            Event(
                seq=r.seq,
                ts=r.ts,
                mission=r.mission_id,
                type=r.type,  # type: ignore[arg-type]
                stage=r.stage,  # type: ignore[arg-type]
                fields=r.body,
            ).to_dict()
            for r in records
        ]


def _count_model_call(session: Session, event: Event) -> None:
    fields = event.fields
    tier = str(fields.get("tier") or "unknown")
    prompt = int(fields.get("prompt_tokens") or 0)
    completion = int(fields.get("completion_tokens") or 0)
    cost = float(fields.get("cost_usd") or 0.0)
    grown = session.execute(
        update(MissionUsage)
        .where(MissionUsage.mission_id == event.mission, MissionUsage.tier == tier)
        .values(
            calls=MissionUsage.calls + 1,
            prompt_tokens=MissionUsage.prompt_tokens + prompt,
            completion_tokens=MissionUsage.completion_tokens + completion,
            cost_usd=MissionUsage.cost_usd + cost,
        )
    )
    if grown.rowcount == 0:  # type: ignore[attr-defined]
        # One EventBus per mission emits under a lock, so nothing else inserts this row now.
        session.add(
            MissionUsage(
                mission_id=event.mission,
                tier=tier,
                calls=1,
                prompt_tokens=prompt,
                completion_tokens=completion,
                cost_usd=cost,
            )
        )
    total = fields.get("total_cost_usd")
    session.execute(
        update(Mission)
        .where(Mission.id == event.mission)
        .values(
            tier_reached=tier,
            cost_usd=float(total) if total is not None else Mission.cost_usd + cost,
        )
    )
