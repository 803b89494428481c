"""Which mission a claimed warm-pool container serves, where a second process can read it.

A pool container is created before any mission wants it, and Docker labels cannot change
after creation, so its `loopwright.mission` label names the pool. When a mission claims it,
the claim is written into the container (a root-owned file the sandbox user cannot change)
and into a `ClaimLedger` (the store's, in the App), and the reaper reads it back from there.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

CLAIM_DIR = "/tmp/.loopwright"
"""Root-owned (0755) directory in the container's /tmp. /tmp is sticky, so the sandbox user
can neither rename nor remove it, and cannot write into it."""
CLAIM_FILE = f"{CLAIM_DIR}/claim.json"
ABANDONED_FILE = f"{CLAIM_DIR}/abandoned"
"""Written, in place of a claim, when the process that started an idle pool container went
away before any mission took it: the connection it held to the container's claim writer
ended. Any reaper may then remove the container, wherever its owner ran."""
ABANDONED = "abandoned"
"""The marker's content."""


@dataclass(frozen=True)
class SandboxClaim:
    """One mission's claim of one pool container."""

    container_id: str
    mission_id: str
    owner: str
    """The claiming process (`host:pid:start`, as in the `loopwright.owner` label)."""
    claimed_at: datetime.datetime
    """Aware UTC."""

    def to_json(self) -> str:
        return json.dumps(
            {
                "container": self.container_id,
                "mission": self.mission_id,
                "owner": self.owner,
                "claimed_at": self.claimed_at.isoformat(),
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> SandboxClaim | None:
        """The claim a claim file holds, or None when it is not one."""
        try:
            data = json.loads(text)
            claim = cls(
                container_id=data["container"],
                mission_id=data["mission"],
                owner=data["owner"],
                claimed_at=datetime.datetime.fromisoformat(data["claimed_at"]),
            )
        except (ValueError, TypeError, KeyError):
            return None
        fields = (claim.container_id, claim.mission_id, claim.owner)
        if not all(isinstance(v, str) and v for v in fields) or claim.claimed_at.tzinfo is None:
            return None
        return claim


@dataclass(frozen=True)
class MissionRun:
    """What the store says of a mission, for a reaper judging a sandbox made elsewhere."""

    active: bool
    """Running or waiting for a decision."""
    runner: str | None
    """The process running it now (`host:pid:start`), if one is recorded."""


class ClaimLedger(Protocol):
    """Durable record of pool claims, shared by every process on one store."""

    def record_claim(self, claim: SandboxClaim) -> None:
        """Record that `claim.mission_id` now holds `claim.container_id`."""
        ...

    def claim_of(self, container_id: str) -> SandboxClaim | None:
        """The claim recorded for a container, or None when none was."""
        ...


@runtime_checkable
class MissionRuns(Protocol):
    """The store's view of which process runs a mission (the store, in the App)."""

    def mission_run(self, mission_id: str) -> MissionRun | None:
        """The mission's state, or None when this store does not know the mission."""
        ...
