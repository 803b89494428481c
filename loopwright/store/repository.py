"""`Store`: every read and write of missions, deliveries, events and usage goes through here.

Sync SQLAlchemy, because missions run on worker threads and the web handlers call it through
a thread. Whatever must happen once (a delivery, a mission per dedupe key, an event per
sequence number) is enforced by a UNIQUE constraint and an INSERT that may fail, never by a
read followed by a write, so it holds across threads, processes and dialects.
"""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, Protocol

from sqlalchemy import ColumnElement, Select, delete, distinct, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from loopwright.config import Settings
from loopwright.events import Event, EventSink
from loopwright.request import MissionRequest
from loopwright.store.engine import database_url, make_engine, migrate
from loopwright.store.models import (
    ACTIVE_STATUSES,
    MISSION_STATUSES,
    Delivery,
    EventRecord,
    Mission,
    MissionStatus,
    MissionUsage,
    utcnow,
)

INTERRUPTED_MESSAGE = "the server stopped while the mission was running"
CANCEL_REQUESTED = "cancel requested: "
"""How a running mission's `message` starts once someone asked to cancel it; the rest is
the summary the mission ends with. A running mission has no other message."""
CancelAnswer = Literal["cancelled", "requested", "not_active", "not_found"]


class FinishedResult(Protocol):
    """What `mark_finished` stores of a fix's or a build's result."""

    mission: str
    status: Any
    message: str
    cost_usd: float
    final_tier: str | None
    usage: dict[str, dict[str, Any]]

    def to_dict(self) -> dict[str, Any]: ...


class MissionNotFound(LookupError):
    """No mission has this id."""


@dataclass(frozen=True)
class Accepted:
    """What `accept_delivery` did."""

    new_delivery: bool
    """False: this X-GitHub-Delivery id was seen before and nothing was written."""
    mission: Mission | None
    created: bool
    """True when this delivery created the mission (False: it joined an existing one)."""


def _new_mission(
    request: MissionRequest, mission_id: str | None, status: MissionStatus, message: str | None
) -> Mission:
    now = utcnow()
    return Mission(
        id=mission_id or new_mission_id(),
        status=status,
        kind=request.kind,
        trigger=request.trigger,
        repo=request.repo,
        head_sha=request.head_sha,
        pr_number=request.pr_number,
        dedupe_key=request.dedupe_key,
        request=request.to_dict(),
        message=message,
        cost_usd=0.0,
        attempts=0,
        created_at=now,
        finished_at=None if status in ACTIVE_STATUSES else now,
    )


def new_mission_id() -> str:
    """Twelve hex digits, like the CLI's mission ids."""
    return uuid.uuid4().hex[:12]


def open_store(settings: Settings) -> Store:
    """Migrate the configured database to the newest schema and open a store on it."""
    url = database_url(settings)
    migrate(url)
    return Store(url)


class Store:
    def __init__(self, url: str) -> None:
        self.engine = make_engine(url)
        # Objects handed out stay readable after their session closes.
        self._session = sessionmaker(self.engine, expire_on_commit=False)

    def close(self) -> None:
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

    # -- webhook deliveries --------------------------------------------------------------

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

    # -- missions ------------------------------------------------------------------------

    def create_mission(
        self,
        request: MissionRequest,
        mission_id: str | None = None,
        *,
        status: MissionStatus = "queued",
        message: str | None = None,
    ) -> tuple[Mission, bool]:
        """Store a mission for `request`, or return the one already stored for its dedupe key.

        The second value is True when this call created the mission. A `refused` mission is
        stored with its status and message so the refusal is visible and not repeated.
        """
        _check_status(status)
        mission = _new_mission(request, mission_id, status, message)
        try:
            with self._session.begin() as session:
                session.add(mission)
        except IntegrityError:
            existing = self._by_dedupe_key(request.dedupe_key)
            if existing is None:
                raise  # the id collided, not the dedupe key
            return existing, False
        return mission, True

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
        failure points at the existing mission.
        """
        try:
            with self._session.begin() as session:
                delivery = Delivery(id=delivery_id, event=event, action=action, decision=decision)
                session.add(delivery)
                session.flush()
                if request is None:
                    return Accepted(True, None, False)
                mission = _new_mission(request, None, "queued", None)
                created = True
                try:
                    with session.begin_nested():
                        session.add(mission)
                except IntegrityError:
                    created = False
                    existing = session.scalars(
                        select(Mission).where(Mission.dedupe_key == request.dedupe_key)
                    ).one()
                    mission = existing
                    delivery.decision = "duplicate mission"
                delivery.mission_id = mission.id
                return Accepted(True, mission, created)
        except IntegrityError:
            return Accepted(False, None, False)

    def _by_dedupe_key(self, key: str) -> Mission | None:
        with self._session() as session:
            return session.scalars(select(Mission).where(Mission.dedupe_key == key)).one_or_none()

    def get_mission(self, mission_id: str) -> Mission | None:
        with self._session() as session:
            return session.get(Mission, mission_id)

    def list_missions(
        self, status: str | None = None, repo: str | None = None, limit: int = 100
    ) -> list[Mission]:
        """Newest first."""
        query = select(Mission)
        if status is not None:
            query = query.where(Mission.status == status)
        if repo is not None:
            query = query.where(Mission.repo == repo)
        query = query.order_by(Mission.created_at.desc(), Mission.id).limit(limit)
        return self._all(query)

    def count_by_status(self) -> dict[str, int]:
        """How many missions are stored in each status (statuses with none are absent)."""
        with self._session() as session:
            rows = session.execute(
                select(Mission.status, func.count()).group_by(Mission.status)
            ).all()
        return {str(status): int(count) for status, count in rows}

    def missions_for_pull(self, repo: str, number: int, *, limit: int = 20) -> list[Mission]:
        """The missions of one pull request, newest first."""
        return self._all(
            select(Mission)
            .where(Mission.repo == repo, Mission.pr_number == number)
            .order_by(Mission.created_at.desc(), Mission.id)
            .limit(limit)
        )

    def request_cancel(self, mission_id: str, summary: str) -> CancelAnswer:
        """Cancel a mission: a queued one ends `cancelled` now (it never starts); a running
        one gets the request recorded, for its runner to notice (`cancel_requested`) in
        whichever process runs it. Each step is one conditional UPDATE, so a mission that a
        worker claims meanwhile is caught as running."""
        queued = {"status": "cancelled", "message": summary, "finished_at": utcnow()}
        if self._update_mission(mission_id, queued, "queued"):
            return "cancelled"
        with self._session.begin() as session:
            marked = session.execute(
                update(Mission)
                .where(
                    Mission.id == mission_id,
                    Mission.status == "running",
                    Mission.message.is_(None),
                )
                .values(message=CANCEL_REQUESTED + summary)
            )
            if marked.rowcount == 1:  # type: ignore[attr-defined]
                return "requested"
        mission = self.get_mission(mission_id)
        if mission is None:
            return "not_found"
        if mission.status == "running":
            return "requested"  # already asked
        return "not_active"

    def cancel_requested(self, mission_id: str) -> str | None:
        """The summary of a pending cancel request of a running mission, or None."""
        with self._session() as session:
            message = session.scalar(
                select(Mission.message).where(Mission.id == mission_id, Mission.status == "running")
            )
        if isinstance(message, str) and message.startswith(CANCEL_REQUESTED):
            return message[len(CANCEL_REQUESTED) :]
        return None

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

    def queued_missions(self) -> list[Mission]:
        """Oldest first, the order they should run in."""
        return self._all(
            select(Mission)
            .where(Mission.status == "queued")
            .order_by(Mission.created_at, Mission.id)
        )

    def attempts_for_head(self, repo: str, head_sha: str) -> int:
        """Missions for this commit that were not turned away (`refused` or `ignored`), for
        the attempt cap."""
        with self._session() as session:
            count = session.scalar(
                select(func.count())
                .select_from(Mission)
                .where(
                    Mission.repo == repo,
                    Mission.head_sha == head_sha,
                    Mission.status.not_in(("refused", "ignored")),
                )
            )
        return int(count or 0)

    def set_status(
        self,
        mission_id: str,
        status: MissionStatus,
        *,
        message: str | None = None,
        expect: MissionStatus | None = None,
    ) -> bool:
        """Move a mission to `status`; with `expect`, only if it is in that status now.

        Returns whether the mission changed. A final status also stamps `finished_at`.
        """
        _check_status(status)
        values: dict[str, Any] = {"status": status}
        if message is not None:
            values["message"] = message
        if status not in ACTIVE_STATUSES:
            values["finished_at"] = utcnow()
        return self._update_mission(mission_id, values, expect)

    def mark_running(self, mission_id: str) -> bool:
        """Claim a queued mission for a worker; False if it is not queued (any more).

        The claim is one conditional UPDATE, so two workers never run the same mission.
        """
        values = {
            "status": "running",
            "started_at": utcnow(),
            "attempts": Mission.attempts + 1,
            "message": None,
        }
        return self._update_mission(mission_id, values, "queued")

    def mark_finished(self, result: FinishedResult) -> None:
        """Store a mission's result, its final status and its per-tier usage."""
        values: dict[str, Any] = {
            "status": result.status,
            "result": result.to_dict(),
            "message": result.message or None,
            "cost_usd": result.cost_usd,
            "finished_at": utcnow(),
        }
        if result.final_tier is not None:
            values["tier_reached"] = result.final_tier
        with self._session.begin() as session:
            updated = session.execute(
                update(Mission).where(Mission.id == result.mission).values(**values)
            )
            if updated.rowcount != 1:  # type: ignore[attr-defined]
                raise MissionNotFound(result.mission)
            session.execute(delete(MissionUsage).where(MissionUsage.mission_id == result.mission))
            session.add_all(
                MissionUsage(
                    mission_id=result.mission,
                    tier=tier,
                    calls=int(usage.get("calls", 0)),
                    prompt_tokens=int(usage.get("prompt_tokens", 0)),
                    completion_tokens=int(usage.get("completion_tokens", 0)),
                    cost_usd=float(usage.get("cost_usd", 0.0)),
                )
                for tier, usage in result.usage.items()
            )

    def update_request(self, mission_id: str, request: MissionRequest) -> None:
        """Replace a mission's request once admission pinned it (head SHA, branches)."""
        values = {"request": request.to_dict(), "head_sha": request.head_sha}
        if not self._update_mission(mission_id, values, None):
            raise MissionNotFound(mission_id)

    def set_links(
        self,
        mission_id: str,
        *,
        check_run_id: int | None = None,
        pr_url: str | None = None,
        tracking_comment_id: int | None = None,
    ) -> None:
        """Remember the check run, pull request and tracking comment a mission reports to."""
        values: dict[str, Any] = {}
        if check_run_id is not None:
            values["check_run_id"] = check_run_id
        if pr_url is not None:
            values["pr_url"] = pr_url
        if tracking_comment_id is not None:
            values["tracking_comment_id"] = tracking_comment_id
        if values and not self._update_mission(mission_id, values, None):
            raise MissionNotFound(mission_id)

    def interrupt_running(self, message: str = INTERRUPTED_MESSAGE) -> list[Mission]:
        """Mark every `running` mission `interrupted` and return them.

        Call it at start-up, before any worker of this store runs: the caller reaps their
        containers and completes their check runs. In a multi-process deployment only the
        process that knows the workers are gone may call it.
        """
        with self._session.begin() as session:
            return list(
                session.scalars(
                    update(Mission)
                    .where(Mission.status == "running")
                    .values(status="interrupted", message=message, finished_at=utcnow())
                    .returning(Mission)
                )
            )

    # -- the event log -------------------------------------------------------------------

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

    # -- the cost view -------------------------------------------------------------------

    def costs_by_tier(self) -> list[dict[str, Any]]:
        """Spend and tokens per tier, and how many finished missions ended on each tier
        (`finished` and `share`), ordered by tier name."""
        rows = self._usage_totals(MissionUsage.tier, select_from=MissionUsage)
        with self._session() as session:
            ended = dict(
                session.execute(
                    select(Mission.tier_reached, func.count())
                    .where(
                        Mission.tier_reached.is_not(None),
                        Mission.status.not_in(ACTIVE_STATUSES),
                    )
                    .group_by(Mission.tier_reached)
                ).all()
            )
        total_ended = sum(ended.values())
        tiers = sorted({*rows, *ended})
        result = []
        for tier in tiers:
            totals = rows.get(tier, _zero_totals())
            finished = int(ended.get(tier, 0))
            share = finished / total_ended if total_ended else 0.0
            result.append({"tier": tier, **totals, "finished": finished, "share": share})
        return result

    def costs_by_repo(self) -> list[dict[str, Any]]:
        """Spend and tokens per repository, most expensive first."""
        rows = self._usage_totals(Mission.repo, select_from=Mission, outer=True)
        result = [{"repo": repo, **totals} for repo, totals in rows.items()]
        return sorted(result, key=lambda r: (-r["cost_usd"], r["repo"]))

    def costs_by_day(self) -> list[dict[str, Any]]:
        """Spend and tokens per UTC day the missions were created on, oldest first."""
        day = func.date(Mission.created_at)
        rows = self._usage_totals(day, select_from=Mission, outer=True)
        result = [{"day": str(d), **totals} for d, totals in rows.items()]
        return sorted(result, key=lambda r: r["day"])

    # -- internals -----------------------------------------------------------------------

    def _all(self, query: Select[Mission]) -> list[Mission]:
        with self._session() as session:
            return list(session.scalars(query).all())

    def _update_mission(self, mission_id: str, values: dict[str, Any], expect: str | None) -> bool:
        query = update(Mission).where(Mission.id == mission_id).values(**values)
        if expect is not None:
            query = query.where(Mission.status == expect)
        with self._session.begin() as session:
            result = session.execute(query)
            return bool(result.rowcount == 1)  # type: ignore[attr-defined]

    def _usage_totals(
        self, key: ColumnElement[Any] | Any, *, select_from: type[Any], outer: bool = False
    ) -> dict[Any, dict[str, Any]]:
        """Sum usage grouped by `key`; with `outer`, missions without usage still count."""
        query = select(
            key,
            func.count(distinct(MissionUsage.mission_id if not outer else Mission.id)),
            func.coalesce(func.sum(MissionUsage.calls), 0),
            func.coalesce(func.sum(MissionUsage.prompt_tokens), 0),
            func.coalesce(func.sum(MissionUsage.completion_tokens), 0),
            func.coalesce(func.sum(MissionUsage.cost_usd), 0.0),
        ).select_from(select_from)
        if outer:
            query = query.outerjoin(MissionUsage, MissionUsage.mission_id == Mission.id)
        query = query.group_by(key)
        with self._session() as session:
            rows = session.execute(query).all()
        return {
            k: {
                "missions": int(missions),
                "calls": int(calls),
                "prompt_tokens": int(prompt),
                "completion_tokens": int(completion),
                "cost_usd": round(float(cost), 6),
            }
            for k, missions, calls, prompt, completion, cost in rows
        }


def _zero_totals() -> dict[str, Any]:
    return {"missions": 0, "calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0}


def _check_status(status: str) -> None:
    if status not in MISSION_STATUSES:
        raise ValueError(f"unknown mission status {status!r}; one of {sorted(MISSION_STATUSES)}")


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
