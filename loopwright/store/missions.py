"""Missions in the store: created once per dedupe key, claimed by one worker, cancelled,
finished with their result and per-tier usage.

Every change of status is one conditional UPDATE, so two threads or processes never both
win the same transition.

A queue's worker runs a mission under its claim (`claim`: the runner and the start's
number, as the claim recorded them), set for the run's thread with `claimed`. While it is
set, every write of that mission (its status, its result, its links) also requires that the
mission is still that run: a worker taken as lost whose mission another worker runs again
has its late writes refused (`MissionTakenOver`), rather than overwriting the new run.
Without a claim (the CLI's missions) nothing is checked.
"""

from __future__ import annotations

import base64
import socket
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from sqlalchemy import (
    ColumnElement,
    Select,
    Update,
    and_,
    bindparam,
    delete,
    func,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from loopwright.cancellation import Superseded
from loopwright.events import LONE_SURROGATE
from loopwright.request import MissionRequest
from loopwright.sandbox.docker.reaper import owner_alive
from loopwright.store.direct import DirectStatement
from loopwright.store.group_commit import GroupCommit
from loopwright.store.models import (
    ACTIVE_STATUSES,
    MISSION_STATUSES,
    RUNNING_STATUSES,
    Mission,
    MissionSlot,
    MissionStatus,
    MissionUsage,
    PairRequestRecord,
    database_now,
    utcnow,
)

INTERRUPTED_MESSAGE = "the server stopped while the mission was running"
CANCEL_REQUESTED = "cancel requested: "
"""How a running mission's `message` starts once someone asked to cancel it; the rest is
the summary the mission ends with. A running mission has no other message."""
RUNNER_STALE_S = 60.0
"""A runner on another host whose heartbeat is older than this is gone (its workers renew
it every few seconds)."""
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


PATCH_BASE64 = "patch_base64"
"""The key of a stored result that holds its patch's exact bytes, when its text cannot
(bytes that are not UTF-8, or a NUL)."""


def stored_result(result: dict[str, Any]) -> dict[str, Any]:
    """What the store keeps of a result. A patch of a file that is not UTF-8 (Latin-1 text,
    say) holds lone surrogates, which no column stores, and a patch of a file git diffs as
    text may hold NUL, which PostgreSQL does not: the result's `patch` is kept with U+FFFD
    in their place, for reading, and its exact bytes in base64 under `PATCH_BASE64`, which
    `patch_bytes` gives back (what `git apply` takes)."""
    result = {k: v for k, v in result.items() if k != PATCH_BASE64}  # only ever the store's
    patch = result.get("patch")
    if not isinstance(patch, str):
        return result
    if "\x00" not in patch and (patch.isascii() or not LONE_SURROGATE.search(patch)):
        return result
    try:
        exact = patch.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate no byte stands for: not from a file
        return result
    return {**result, PATCH_BASE64: base64.b64encode(exact).decode("ascii")}


def patch_bytes(result: Mapping[str, Any] | None) -> bytes | None:
    """A stored result's patch as the bytes the mission made, or None without one."""
    result = result or {}
    exact = result.get(PATCH_BASE64)
    if isinstance(exact, str):
        with suppress(ValueError):
            return base64.b64decode(exact, validate=True)
    patch = result.get("patch")
    return patch.encode("utf-8") if isinstance(patch, str) and patch else None


class MissionNotFound(LookupError):
    """No mission has this id."""


@dataclass(frozen=True)
class MissionClaim:
    """One run of a mission: the process that claimed it and which start it is."""

    mission_id: str
    runner: str | None
    attempts: int


class MissionTakenOver(Superseded, RuntimeError):
    """A write of a mission whose run is no longer this worker's: another worker took it
    over (this one was taken as lost), so this run must stop without a word to GitHub."""

    def __init__(self, claim: MissionClaim) -> None:
        super().__init__(
            f"this worker no longer owns mission {claim.mission_id} (start "
            f"{claim.attempts} by {claim.runner}); another worker took it over"
        )
        self.claim = claim


_CLAIM: ContextVar[MissionClaim | None] = ContextVar("loopwright_mission_claim", default=None)


@contextmanager
def claimed(claim: MissionClaim | None) -> Iterator[None]:
    """Run the block as `claim`'s run: the store's writes of its mission check it."""
    token = _CLAIM.set(claim)
    try:
        yield
    finally:
        _CLAIM.reset(token)


def current_claim(mission_id: str) -> MissionClaim | None:
    """The claim this thread runs `mission_id` under, if any."""
    claim = _CLAIM.get()
    return claim if claim is not None and claim.mission_id == mission_id else None


def _owned_by(query: Update, claim: MissionClaim) -> Update:
    return query.where(_the_run(claim))


def _the_run(claim: MissionClaim) -> ColumnElement[bool]:
    """The mission is still `claim`'s run: its runner and start number."""
    runner = Mission.runner.is_(None) if claim.runner is None else Mission.runner == claim.runner
    return and_(Mission.id == claim.mission_id, runner, Mission.attempts == claim.attempts)


def mission_row(
    request: MissionRequest, mission_id: str | None, status: MissionStatus, message: str | None
) -> Mission:
    return Mission(**mission_values(request, mission_id, status, message))


def mission_values(
    request: MissionRequest, mission_id: str | None, status: MissionStatus, message: str | None
) -> dict[str, Any]:
    """The values a new mission is made with; every other column is unset."""
    now = utcnow()
    return {
        "id": mission_id or new_mission_id(),
        "status": status,
        "kind": request.kind,
        "trigger": request.trigger,
        "repo": request.repo,
        "head_sha": request.head_sha,
        "pr_number": request.pr_number,
        "dedupe_key": request.dedupe_key,
        "request": request.to_dict(),
        "message": message,
        "cost_usd": 0.0,
        "attempts": 0,
        "created_at": now,
        "finished_at": None if status in ACTIVE_STATUSES else now,
    }


def new_mission_id() -> str:
    """Twelve hex digits, like the CLI's mission ids."""
    return uuid.uuid4().hex[:12]


_ATTEMPTS = (
    select(func.count())
    .select_from(Mission)
    .where(
        Mission.repo == bindparam("repo"),
        Mission.head_sha == bindparam("head_sha"),
        # Two comparisons rather than NOT IN: a tuple is an expanding parameter, which
        # SQLAlchemy renders again on every execution of the cached statement.
        Mission.status != "refused",
        Mission.status != "ignored",
    )
)


_ATTEMPTS_BESIDE = _ATTEMPTS.where(Mission.id != bindparam("mission_id"))
"""The attempts on a head by missions other than one."""


def attempts_on(connection: Connection, repo: str, head_sha: str) -> int:
    """`MissionRecords.attempts_for_head` on a connection the caller holds."""
    return int(_ATTEMPTS_ON.first(connection, {"repo": repo, "head_sha": head_sha}) or 0)


_ATTEMPTS_ON = DirectStatement(_ATTEMPTS)
"""On the driver's cursor: a red check's delivery counts its head's attempts."""


HEAD_LOCK_SPACE = 0x6C77_6864  # "lwhd"
"""The first key of PostgreSQL's two-key advisory locks that `lock_head` takes. The store's
other advisory locks (the migrations', the mission slots') have one key: the two key spaces
do not overlap."""
_LOCK_HEAD = DirectStatement(text("SELECT pg_advisory_xact_lock(:space, hashtext(:head))"))


def lock_head(connection: Connection, repo: str, head_sha: str) -> None:
    """Before counting a head's attempts to decide on one more: on PostgreSQL, wait for and
    hold until the transaction ends the head's advisory lock, so that another server's
    writer deciding on the same head counts after this transaction's mission is committed
    or rolled back. SQLite needs none: its writers take turns on the whole database.

    Only in a unit of the store's writer (`GroupCommit`), whose transactions are READ
    COMMITTED (`make_engine`): each statement after the wait sees what was committed
    during it. A process's writer waiting here makes that process's other writes wait too.
    Heads whose text hashes alike share a lock, which only makes one wait a commit longer.
    Transactions that lock two heads in opposite orders deadlock like any others: the
    database aborts one after its deadlock timeout (a second by default), and the writer
    runs that batch's units again, up to `RETRIES` times."""
    if connection.dialect.name == "postgresql":
        _LOCK_HEAD.first(connection, {"space": HEAD_LOCK_SPACE, "head": f"{repo}@{head_sha}"})


class MissionRecords:
    """The store's reads and writes of missions."""

    engine: Engine
    _session: sessionmaker[Session]
    _writes: GroupCommit

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
        mission = mission_row(request, mission_id, status, message)
        try:
            with self._session.begin() as session:
                session.add(mission)
        except IntegrityError:
            existing = self._by_dedupe_key(request.dedupe_key)
            if existing is None:
                raise  # the id collided, not the dedupe key
            return existing, False
        return mission, True

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
                    Mission.status.in_(RUNNING_STATUSES),
                    Mission.message.is_(None),
                )
                .values(message=CANCEL_REQUESTED + summary)
            )
            if marked.rowcount == 1:  # type: ignore[attr-defined]
                return "requested"
        mission = self.get_mission(mission_id)
        if mission is None:
            return "not_found"
        if mission.status in RUNNING_STATUSES:
            return "requested"  # already asked
        return "not_active"

    def cancel_requested(self, mission_id: str) -> str | None:
        """The summary of a pending cancel request of a running (or waiting) mission, or None."""
        with self._session() as session:
            message = session.scalar(
                select(Mission.message).where(
                    Mission.id == mission_id, Mission.status.in_(RUNNING_STATUSES)
                )
            )
        if isinstance(message, str) and message.startswith(CANCEL_REQUESTED):
            return message[len(CANCEL_REQUESTED) :]
        return None

    def running_missions(self) -> list[Mission]:
        """Every `running` (or `waiting`) mission, oldest start first."""
        return self._all(
            select(Mission)
            .where(Mission.status.in_(RUNNING_STATUSES))
            .order_by(Mission.started_at, Mission.id)
        )

    def queued_missions(self) -> list[Mission]:
        """Oldest first, the order they should run in."""
        return self._all(_queued(select(Mission)))

    def queued_mission_ids(self) -> list[str]:
        """`queued_missions`, only their ids: what a process that hands them to its queue
        needs, polled every few seconds, without reading every request back."""
        with self._session() as session:
            return list(session.scalars(_queued(select(Mission.id))).all())

    def attempts_for_head(self, repo: str, head_sha: str) -> int:
        """Missions for this commit that were not turned away (`refused` or `ignored`), for
        the attempt cap."""
        # On a connection, with the statement built once: the webhook asks this for every
        # red check it is sent, and a session costs more than the query.
        with self.engine.connect() as connection:
            return attempts_on(connection, repo, head_sha)

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
        `expect="running"` also matches a `waiting` mission: it is running, paused on a
        person's decision, and a crash or a cancel ends it the same way.
        """
        _check_status(status)
        values: dict[str, Any] = {"status": status}
        if message is not None:
            values["message"] = message
        if status not in ACTIVE_STATUSES:
            values["finished_at"] = utcnow()
        return self._update_mission(mission_id, values, expect)

    def mark_running(self, mission_id: str, *, runner: str | None = None) -> bool:
        """Claim a queued mission for a worker; False if it is not queued (any more).

        The claim is one conditional UPDATE, so two workers never run the same mission.
        `runner` names the claiming process (`host:pid:start`).
        """
        return self.claim(mission_id, runner=runner) is not None

    def claim(self, mission_id: str, *, runner: str | None = None) -> MissionClaim | None:
        """`mark_running`, returning the run's claim (None: not queued any more), which a
        worker runs the mission under (`claimed`)."""
        values = {
            "status": "running",
            "started_at": utcnow(),
            "attempts": Mission.attempts + 1,
            "message": None,
            "runner": runner,
            "runner_seen_at": database_now(),
        }
        query = (
            update(Mission)
            .where(Mission.id == mission_id, Mission.status == "queued")
            .values(**values)
            .returning(Mission.attempts)
        )
        with self._session.begin() as session:
            attempts = session.scalars(query).one_or_none()
        return None if attempts is None else MissionClaim(mission_id, runner, int(attempts))

    def owns(self, claim: MissionClaim) -> bool:
        """Whether the mission is still `claim`'s run (no other worker took it over)."""
        with self._session() as session:
            found = session.scalar(select(func.count()).select_from(Mission).where(_the_run(claim)))
        return bool(found)

    def check_owner(self, mission_id: str) -> None:
        """Raise `MissionTakenOver` when this thread runs `mission_id` under a claim that is
        no longer the mission's run; nothing without a claim."""
        claim = current_claim(mission_id)
        if claim is not None and not self.owns(claim):
            raise MissionTakenOver(claim)

    def touch_runner(self, mission_id: str, runner: str) -> None:
        """The runner's heartbeat: it still runs the mission. Stamped with the database's
        clock, which `runner_silent` judges it by, so hosts' clocks do not matter."""
        with self._session.begin() as session:
            session.execute(
                update(Mission)
                .where(
                    Mission.id == mission_id,
                    Mission.status.in_(RUNNING_STATUSES),
                    Mission.runner == runner,
                )
                .values(runner_seen_at=database_now())
            )

    def runner_silent(self, mission_id: str, runner: str | None, stale_after_s: float) -> bool:
        """Whether `runner` still runs the mission (`running` or `waiting`) without a
        heartbeat (or a start) for `stale_after_s` seconds by the database's clock. False
        when the mission is no longer that runner's."""
        seen = func.coalesce(Mission.runner_seen_at, Mission.started_at)
        runs = Mission.runner.is_(None) if runner is None else Mission.runner == runner
        with self._session() as session:
            silent = session.scalar(
                select(or_(seen.is_(None), seen < database_now(-stale_after_s))).where(
                    Mission.id == mission_id, Mission.status.in_(RUNNING_STATUSES), runs
                )
            )
        return bool(silent)

    def take_over_lost(
        self, mission_id: str, runner: str | None, status: MissionStatus, message: str
    ) -> bool:
        """Move a `running` (or `waiting`) mission whose `runner` was lost to `queued` (to
        run again from the start) or to a final status; False if it is no longer running
        there (another worker took it over first, or it finished after all). The runner is
        cleared: the lost run's claim no longer matches, so its late writes are refused."""
        _check_status(status)
        values: dict[str, Any] = {"status": status, "message": message, "runner": None}
        if status not in ACTIVE_STATUSES:
            values["finished_at"] = utcnow()
        query = update(Mission).where(
            Mission.id == mission_id, Mission.status.in_(RUNNING_STATUSES)
        )
        if runner is None:
            query = query.where(Mission.runner.is_(None))
        else:
            query = query.where(Mission.runner == runner)
        with self._session.begin() as session:
            result = session.execute(query.values(**values))
            taken = bool(result.rowcount == 1)  # type: ignore[attr-defined]
            if taken:
                # The lost run's pending request ends with it: a decision sent now must
                # not be taken by the next run as the answer to a request of its own.
                session.execute(
                    update(PairRequestRecord)
                    .where(
                        PairRequestRecord.mission_id == mission_id,
                        PairRequestRecord.closed_at.is_(None),
                    )
                    .values(closed_at=utcnow())
                )
            return taken

    def mark_finished(self, result: FinishedResult) -> None:
        """Store a mission's result, its final status and its per-tier usage."""
        values: dict[str, Any] = {
            "status": result.status,
            "result": stored_result(result.to_dict()),
            "message": result.message or None,
            "cost_usd": result.cost_usd,
            "finished_at": utcnow(),
        }
        if result.final_tier is not None:
            values["tier_reached"] = result.final_tier
        query = update(Mission).where(Mission.id == result.mission).values(**values)
        claim = current_claim(result.mission)
        if claim is not None:
            query = _owned_by(query, claim)
        with self._session.begin() as session:
            updated = session.execute(query)
            if updated.rowcount != 1:  # type: ignore[attr-defined]
                if claim is not None and session.get(Mission, result.mission) is not None:
                    raise MissionTakenOver(claim)
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

    def pin_within_cap(
        self, mission_id: str, request: MissionRequest, max_attempts: int
    ) -> int | None:
        """Replace a mission's request once admission pinned it (head SHA, branches), while
        the head's other missions are fewer than `max_attempts`, its attempt cap. Returns
        None once stored, else their count, and nothing is written. `MissionNotFound` or,
        under a claim another run has taken over, `MissionTakenOver`, either way.

        The count and the write are one transaction of the store's writer, taken after the
        head's lock (`lock_head`): two missions admitted at once on one head, by two of a
        server's runners, two servers, or a runner and a red check's delivery, cannot both
        take its last attempt."""
        claim = current_claim(mission_id)
        query = (
            update(Mission)
            .where(Mission.id == mission_id)
            .values(request=request.to_dict(), head_sha=request.head_sha)
        )
        if claim is not None:
            query = _owned_by(query, claim)
        still = select(Mission.id).where(Mission.id == mission_id)
        if claim is not None:
            still = still.where(_the_run(claim))
        counted = {"repo": request.repo, "head_sha": request.head_sha, "mission_id": mission_id}

        def pin(session: Session) -> tuple[bool, int | None]:
            """Whether the mission is there (and still the claim's run), and the count at
            the cap when nothing was written."""
            connection = session.connection()
            lock_head(connection, request.repo, request.head_sha)
            used = int(connection.execute(_ATTEMPTS_BESIDE, counted).scalar() or 0)
            if used >= max_attempts:
                return connection.execute(still).first() is not None, used
            return connection.execute(query).rowcount == 1, None

        changed, used = self._writes.run(pin)
        if not changed:
            self._refuse_if_taken_over(mission_id, claim)
            raise MissionNotFound(mission_id)
        return used

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

    def interrupt_running(
        self, message: str = INTERRUPTED_MESSAGE, *, stale_after_s: float = RUNNER_STALE_S
    ) -> list[Mission]:
        """Mark `interrupted` every `running` (or `waiting`) mission whose runner is gone,
        free their slots (the dead processes cannot give them back) and return them.

        Gone: no runner recorded, a process of this host that exited (the process table
        says), or a runner on another host whose heartbeat is older than `stale_after_s`
        by the database's clock. A live worker's missions (`loopwright worker` beside a
        restarted server) run on. The runner is cleared, so a run taken for gone that
        still writes has its writes refused (`MissionTakenOver`).

        Call it at start-up: the caller reaps their containers and completes their check
        runs.
        """
        seen = func.coalesce(Mission.runner_seen_at, Mission.started_at)
        silent = or_(seen.is_(None), seen < database_now(-stale_after_s))
        with self._session.begin() as session:
            rows = session.execute(
                select(Mission.id, Mission.runner, silent).where(
                    Mission.status.in_(RUNNING_STATUSES)
                )
            ).all()
            gone = [
                (mission_id, runner)
                for mission_id, runner, is_silent in rows
                if runner is None
                or not owner_alive(runner)
                or (not _on_this_host(runner) and is_silent)
            ]
            interrupted: list[Mission] = []
            for mission_id, runner in gone:
                query = update(Mission).where(
                    Mission.id == mission_id,
                    Mission.status.in_(RUNNING_STATUSES),
                    Mission.runner.is_(None) if runner is None else Mission.runner == runner,
                )
                values = {
                    "status": "interrupted",
                    "message": message,
                    "finished_at": utcnow(),
                    "runner": None,
                }
                interrupted += session.scalars(query.values(**values).returning(Mission))
            if interrupted:
                # Any holder's: no run of an interrupted mission remains to need it.
                session.execute(
                    delete(MissionSlot).where(
                        MissionSlot.mission_id.in_([m.id for m in interrupted])
                    )
                )
            return interrupted

    def _all(self, query: Select[Mission]) -> list[Mission]:
        with self._session() as session:
            return list(session.scalars(query).all())

    def _update_mission(self, mission_id: str, values: dict[str, Any], expect: str | None) -> bool:
        """One conditional UPDATE; under a claim of this mission, only of the claim's run
        (`MissionTakenOver` when another run has it now)."""
        query = update(Mission).where(Mission.id == mission_id).values(**values)
        if expect == "running":
            query = query.where(Mission.status.in_(RUNNING_STATUSES))
        elif expect is not None:
            query = query.where(Mission.status == expect)
        claim = current_claim(mission_id)
        if claim is not None:
            query = _owned_by(query, claim)
        with self._session.begin() as session:
            result = session.execute(query)
            changed = bool(result.rowcount == 1)  # type: ignore[attr-defined]
        if not changed:
            self._refuse_if_taken_over(mission_id, claim)
        return changed

    def _refuse_if_taken_over(self, mission_id: str, claim: MissionClaim | None) -> None:
        """After a write under `claim` changed nothing: `MissionTakenOver` when the mission
        is still there but another run has it now."""
        if claim is not None and not self.owns(claim) and self.get_mission(mission_id) is not None:
            raise MissionTakenOver(claim)


def _on_this_host(runner: str) -> bool:
    return runner.split(":", 1)[0] == socket.gethostname()


def _check_status(status: str) -> None:
    if status not in MISSION_STATUSES:
        raise ValueError(f"unknown mission status {status!r}; one of {sorted(MISSION_STATUSES)}")


_Query = TypeVar("_Query", bound=Select[Any])


def _queued(query: _Query) -> _Query:
    """`query` over the queued missions, oldest first (ties by id): the order they run in."""
    return query.where(Mission.status == "queued").order_by(Mission.created_at, Mission.id)
