"""The tables behind the App: missions, webhook deliveries, the event log, per-tier usage,
the revoked sign-in sessions, the repository lists of GitHub sign-ins, the warm-pool sandbox
claims, the mission slots and pair mode's requests and decisions.

Plain SQLAlchemy that runs unchanged on SQLite and PostgreSQL: timestamps are aware UTC on
every dialect, JSON is JSONB on PostgreSQL. The keys are our own (a mission's short hex id,
GitHub's delivery id, the event's sequence number), so advanced-alchemy's UUID/BigInt base
classes do not fit; its naming convention is kept so constraint names match its models.
"""

from __future__ import annotations

import datetime
from typing import Any, Literal, get_args

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    literal,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

MissionStatus = Literal[
    "queued",
    "running",
    "waiting",
    "verified",
    "unverified",
    "flaky",
    "nothing_to_fix",
    "budget_exceeded",
    "error",
    "refused",
    "ignored",
    "interrupted",
    "cancelled",
]
MISSION_STATUSES: frozenset[str] = frozenset(get_args(MissionStatus))
ACTIVE_STATUSES: frozenset[str] = frozenset({"queued", "running", "waiting"})
"""Every other status is final: the mission will not run again by itself."""
RUNNING_STATUSES: frozenset[str] = frozenset({"running", "waiting"})
"""A runner holds the mission (its slot, its sandbox, its heartbeat); `waiting` is running
paused on a person's decision (pair mode)."""


JSONB = JSON().with_variant(postgresql.JSONB(), "postgresql")

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
"""Stable constraint names across dialects, so later migrations can name what they alter."""


class UTCDateTime(TypeDecorator[datetime.datetime]):
    """Aware datetimes in, aware UTC datetimes out: also on SQLite (which drops the zone) and
    on PostgreSQL (which answers in the session's `TimeZone`, whatever the server says)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(
        self, value: datetime.datetime | None, dialect: Dialect
    ) -> datetime.datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: pass an aware one (UTC)")
        return value.astimezone(datetime.UTC)

    def process_result_value(
        self, value: datetime.datetime | None, dialect: Dialect
    ) -> datetime.datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=datetime.UTC)
        return value.astimezone(datetime.UTC)


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class database_now(FunctionElement[datetime.datetime]):
    """The database's clock, `offset_s` seconds later (earlier when negative), as SQL.

    Heartbeats are written and judged stale with it, so processes on hosts whose clocks
    disagree still agree on how old a heartbeat is. SQLite gets its text in the format
    SQLAlchemy stores datetimes in (so stored and computed values compare as text);
    PostgreSQL its `clock_timestamp()` (`now()` is the transaction's start)."""

    type = UTCDateTime()
    inherit_cache = True
    name = "database_now"

    def __init__(self, offset_s: float = 0.0) -> None:
        super().__init__(literal(float(offset_s), Float()))


@compiles(database_now, "sqlite")
def _sqlite_now(element: database_now, compiler: SQLCompiler, **kw: Any) -> str:
    offset = compiler.process(element.clauses, **kw)
    return f"strftime('%Y-%m-%d %H:%M:%f000', 'now', ({offset}) || ' seconds')"


@compiles(database_now, "postgresql")
def _postgresql_now(element: database_now, compiler: SQLCompiler, **kw: Any) -> str:
    offset = compiler.process(element.clauses, **kw)
    return f"(clock_timestamp() + make_interval(secs => CAST(({offset}) AS double precision)))"


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {
        datetime.datetime: UTCDateTime(),
        dict[str, Any]: JSONB,
    }


class Mission(Base):
    __tablename__ = "missions"
    __table_args__ = (
        Index("ix_missions_repo_head_sha", "repo", "head_sha"),
        Index("ix_missions_status_created_at", "status", "created_at"),
        Index("ix_missions_created_at", "created_at"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    """Short hex id shared with the CLI, sandbox labels, events and URLs."""
    status: Mapped[str] = mapped_column(String(32), default="queued")
    kind: Mapped[str] = mapped_column(String(16))
    trigger: Mapped[str] = mapped_column(String(32))
    repo: Mapped[str] = mapped_column(String(512))
    head_sha: Mapped[str] = mapped_column(String(64))
    pr_number: Mapped[int | None] = mapped_column(Integer)
    dedupe_key: Mapped[str] = mapped_column(String(1024), unique=True)
    request: Mapped[dict[str, Any]]
    result: Mapped[dict[str, Any] | None]
    message: Mapped[str | None] = mapped_column(Text)
    """Why the mission ended the way it did (the error, the refusal, the interruption)."""
    stage: Mapped[str | None] = mapped_column(String(16))
    tier_reached: Mapped[str | None] = mapped_column(String(64))
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    """How many times a worker has started this mission."""
    runner: Mapped[str | None] = mapped_column(String(255))
    """The process running (or that last ran) the mission, `host:pid:start` like the
    sandboxes' owner label; a worker that takes over a lost mission reads whose it was."""
    runner_seen_at: Mapped[datetime.datetime | None]
    """When the runner last said it still runs the mission (its heartbeat)."""
    check_run_id: Mapped[int | None] = mapped_column(BigInteger)
    pr_url: Mapped[str | None] = mapped_column(String(1024))
    tracking_comment_id: Mapped[int | None] = mapped_column(BigInteger)
    """The comment on the pull request that follows the mission (edited in place)."""
    pair_loop: Mapped[str | None] = mapped_column(String(8))
    """Pair mode: `running` while the mission's loop takes guidance, `ended` once it has
    ended; None when its loop never ran with pair mode on."""
    created_at: Mapped[datetime.datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime.datetime | None]
    finished_at: Mapped[datetime.datetime | None]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data for the API and the dashboard."""
        return {
            "id": self.id,
            "status": self.status,
            "kind": self.kind,
            "trigger": self.trigger,
            "repo": self.repo,
            "head_sha": self.head_sha,
            "pr_number": self.pr_number,
            "dedupe_key": self.dedupe_key,
            "request": self.request,
            "result": self.result,
            "message": self.message,
            "stage": self.stage,
            "tier_reached": self.tier_reached,
            "cost_usd": self.cost_usd,
            "attempts": self.attempts,
            "runner": self.runner,
            "check_run_id": self.check_run_id,
            "pr_url": self.pr_url,
            "tracking_comment_id": self.tracking_comment_id,
            "created_at": _iso(self.created_at),
            "started_at": _iso(self.started_at),
            "finished_at": _iso(self.finished_at),
        }


class Delivery(Base):
    """One webhook delivery; the unique id is the replay guard (signatures carry no time)."""

    __tablename__ = "deliveries"

    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    """The `X-GitHub-Delivery` header; a redelivery keeps it."""
    event: Mapped[str] = mapped_column(String(64))
    action: Mapped[str | None] = mapped_column(String(64))
    received_at: Mapped[datetime.datetime] = mapped_column(default=utcnow)
    decision: Mapped[str | None] = mapped_column(Text)
    mission_id: Mapped[str | None] = mapped_column(
        String(32), ForeignKey("missions.id", ondelete="SET NULL"), index=True
    )


class EventRecord(Base):
    """One event of a mission's log; the primary key (mission_id, seq) is the unique
    constraint and the index that `seq > N` range reads use."""

    __tablename__ = "events"

    mission_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("missions.id", ondelete="CASCADE"), primary_key=True
    )
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    ts: Mapped[float] = mapped_column(Float)
    """Seconds since the epoch, exactly as the event carried it."""
    type: Mapped[str] = mapped_column(String(32))
    stage: Mapped[str | None] = mapped_column(String(16))
    body: Mapped[dict[str, Any]]
    """The type-specific fields (everything but seq, ts, mission, type and stage)."""


class MissionUsage(Base):
    """Model usage of one mission on one tier, for the cost view.

    Grown by `model_call` events while the mission runs (so an interrupted mission's spend
    is still counted) and replaced by the result's totals when it finishes.
    """

    __tablename__ = "mission_usage"

    mission_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("missions.id", ondelete="CASCADE"), primary_key=True
    )
    tier: Mapped[str] = mapped_column(String(64), primary_key=True)
    calls: Mapped[int] = mapped_column(Integer, default=0)
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)


class RevokedSession(Base):
    """A signed-out session: its cookie is refused until it would have expired anyway, by
    every server process on this store."""

    __tablename__ = "revoked_sessions"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    """The SHA-256 (hex) of the random session id the cookie carries, never the id."""
    expires_at: Mapped[datetime.datetime] = mapped_column(index=True)
    """When the cookie expires; past it the row is of no use and is pruned."""


class SignInSession(Base):
    """A GitHub sign-in whose repository list is too long for its cookie: the list, kept
    for every server process on this store until the cookie expires or is signed out.

    The cookie (signed) still carries the login and the expiry; no GitHub token is kept.
    """

    __tablename__ = "sign_in_sessions"

    id_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    """The SHA-256 (hex) of the session id: a reader of the database learns no cookie."""
    repos: Mapped[list[str]] = mapped_column(JSONB)
    """The `owner/name` of each repository the user could read at sign-in."""
    expires_at: Mapped[datetime.datetime] = mapped_column(index=True)
    """When the cookie expires; a row past it is refused and deleted."""


class SandboxClaimRecord(Base):
    """A warm-pool container claimed by a mission: its labels name the pool (labels cannot
    change after creation), so the reaper of any process reads the mission from here."""

    __tablename__ = "sandbox_claims"

    container_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    """The Docker container id (64 hex digits)."""
    mission_id: Mapped[str] = mapped_column(String(64), index=True)
    owner: Mapped[str] = mapped_column(String(255))
    """The claiming process, `host:pid:start` as in the container's `loopwright.owner` label."""
    claimed_at: Mapped[datetime.datetime]


class MissionSlot(Base):
    """A running mission's place under the concurrency caps, shared by every process on the
    store: a row is a slot taken, so the rows of one installation count against its cap and
    all rows against the global one."""

    __tablename__ = "mission_slots"

    mission_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    installation_id: Mapped[int | None] = mapped_column(BigInteger, index=True)
    """The App installation the mission works for; None (a local mission) counts only
    against the global cap."""
    holder: Mapped[str] = mapped_column(String(255), index=True)
    """The process running the mission, `host:pid:start` as in sandbox owner labels."""
    acquired_at: Mapped[datetime.datetime]
    heartbeat_at: Mapped[datetime.datetime]
    """When the holder last said it is alive; a slot not renewed for long is freed."""


class PairRequestRecord(Base):
    """Pair mode: a request for approval the loop published; open until it is decided or
    the mission stops waiting for it (expiry, cancel, a lost worker)."""

    __tablename__ = "pair_requests"

    mission_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("missions.id", ondelete="CASCADE"), primary_key=True
    )
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    """The request id of the `approval_requested` event."""
    payload: Mapped[dict[str, Any]]
    """The request as the live view and the tracking comment show it (what, why, the
    command or diff, `expires_at`)."""
    asked_at: Mapped[datetime.datetime]
    closed_at: Mapped[datetime.datetime | None]
    """When it was decided or the mission stopped waiting; None while it is pending."""


class PairDecisionRecord(Base):
    """Pair mode: a person's decision on a request, or guidance sent at any time
    (`request_id` None, kind `redirect`). A request is decided once: the unique
    (mission_id, request_id) holds across processes (guidance rows, NULL, never clash)."""

    __tablename__ = "pair_decisions"
    __table_args__ = (UniqueConstraint("mission_id", "request_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    mission_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("missions.id", ondelete="CASCADE"), index=True
    )
    request_id: Mapped[str | None] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(16))
    """approve, reject or redirect."""
    decided_by: Mapped[str] = mapped_column(String(255))
    """`@login`, `dashboard` or `expiry`."""
    text: Mapped[str] = mapped_column(Text, default="")
    decided_at: Mapped[datetime.datetime]
    taken_at: Mapped[datetime.datetime | None]
    """Guidance: when the mission's loop took it (each is handed over once)."""


def _iso(value: datetime.datetime | None) -> str | None:
    return value.isoformat() if value is not None else None
