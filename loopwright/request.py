"""`MissionRequest`: what a trigger (webhook, comment, CLI, Action) asks Loopwright to do.

Pure data, built by the trigger functions and stored before any work starts, so a mission
can be queued, deduplicated, resumed after a restart and shown in the live view.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Trigger = Literal["check_run", "check_suite", "workflow_run", "comment", "cli", "action"]
MissionKind = Literal["fix", "build"]


@dataclass(frozen=True)
class MissionRequest:
    trigger: Trigger
    repo: str
    """`owner/name` on GitHub, or a local path for CLI missions."""
    clone_url: str
    head_sha: str
    """The commit to fix; pinned when the request is made, never re-read later."""
    head_ref: str | None = None
    """The branch the failure is on (the PR head branch, or the default branch)."""
    base_ref: str | None = None
    pr_number: int | None = None
    installation_id: int | None = None
    check_name: str | None = None
    """The failing check run / suite / workflow that triggered the mission."""
    actor: str | None = None
    """Who asked: the commenter for `/loopwright fix`, the sender for CI events."""
    guidance: str | None = None
    """Text after `/loopwright fix`, passed to the model as the maintainer's guidance."""
    fork: bool = False
    """The head lives in another repository: nothing is pushed to the base repository."""
    head_repo: str | None = None
    comment_id: int | None = None
    kind: MissionKind = "fix"
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def dedupe_key(self) -> str:
        """Deliveries about the same commit's red CI give one mission.

        One failing Actions run arrives as a check_run per job, a check_suite and a
        workflow_run, each naming a different check; the test suite a mission runs covers
        them all, so CI triggers share one key per commit. Each `/loopwright fix` comment
        is its own request, so a maintainer can always ask again.
        """
        if self.trigger == "comment":
            return f"{self.repo}#comment:{self.comment_id}"
        if self.trigger in ("check_run", "check_suite", "workflow_run"):
            return f"{self.repo}@{self.head_sha}:ci"
        return f"{self.repo}@{self.head_sha}:{self.trigger}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MissionRequest:
        return cls(**data)
