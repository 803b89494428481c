"""The store's `ClaimLedger`: which mission each claimed warm-pool container serves, kept
where every process on the store (and the server after a restart) can read it."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from loopwright.sandbox.claims import MissionRun, SandboxClaim
from loopwright.store.models import RUNNING_STATUSES, Mission, SandboxClaimRecord


class SandboxClaims:
    """The store's reads and writes of sandbox claims (a `ClaimLedger`), and which process
    runs a mission (`MissionRuns`), for the reaper.

    Rows are kept after the container is gone: they say which container served which
    mission, one row per pool claim.
    """

    _session: sessionmaker[Session]

    def record_claim(self, claim: SandboxClaim) -> None:
        """Record the claim. A container is claimed once (ids are unique per engine); one
        recorded again keeps the latest claim."""
        with self._session.begin() as session:
            session.merge(
                SandboxClaimRecord(
                    container_id=claim.container_id,
                    mission_id=claim.mission_id,
                    owner=claim.owner,
                    claimed_at=claim.claimed_at,
                )
            )

    def claim_of(self, container_id: str) -> SandboxClaim | None:
        with self._session() as session:
            row = session.get(SandboxClaimRecord, container_id)
            return None if row is None else _claim(row)

    def mission_run(self, mission_id: str) -> MissionRun | None:
        """Whether the mission is active and which process runs it (a `MissionRuns`), or
        None for a mission this store does not hold."""
        with self._session() as session:
            row = session.execute(
                select(Mission.status, Mission.runner).where(Mission.id == mission_id)
            ).one_or_none()
        if row is None:
            return None
        return MissionRun(row.status in RUNNING_STATUSES, row.runner)

    def claims_of_mission(self, mission_id: str) -> list[SandboxClaim]:
        """Every pool container the mission claimed (its loop's and its verification's)."""
        with self._session() as session:
            rows = session.scalars(
                select(SandboxClaimRecord)
                .where(SandboxClaimRecord.mission_id == mission_id)
                .order_by(SandboxClaimRecord.claimed_at)
            )
            return [_claim(row) for row in rows]


def _claim(row: SandboxClaimRecord) -> SandboxClaim:
    return SandboxClaim(row.container_id, row.mission_id, row.owner, row.claimed_at)
