"""`MissionRequest`: what a trigger (webhook, comment, CLI, Action) asks Loopwright to do.

Pure data, built by the trigger functions and stored before any work starts, so a mission
can be queued, deduplicated, resumed after a restart and shown in the live view.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

Trigger = Literal["check_run", "check_suite", "workflow_run", "comment", "cli", "action"]
MissionKind = Literal["fix", "build"]


@dataclass(frozen=True)
class ReviewComment:
    """Where a `/loopwright fix` review comment was left on a pull request's diff: the
    model is told about it as a reviewer's note, never as instructions of its own."""

    id: int
    path: str
    line: int | None = None
    """The line of the file the comment is on (None for a comment on an outdated diff)."""
    start_line: int | None = None
    """The first line of a multi-line comment."""
    side: str | None = None
    """`RIGHT` (the pull request's version) or `LEFT` (the base's)."""
    diff_hunk: str = ""
    url: str | None = None


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
    review: ReviewComment | None = None
    """The review comment that asked, when the command came in one (`comment_id` is None
    then: the id is a review comment's, not an issue comment's)."""
    iterate: bool = False
    """The pull request is Loopwright's own: a verified change is pushed as a new commit on
    its head branch instead of opening a pull request."""

    @property
    def dedupe_key(self) -> str:
        """Deliveries about the same commit's red CI give one mission.

        One failing Actions run arrives as a check_run per job, a check_suite and a
        workflow_run, each naming a different check; the test suite a mission runs covers
        them all, so CI triggers share one key per commit. Each `/loopwright fix` comment
        is its own request, so a maintainer can always ask again.
        """
        if self.trigger == "comment" and self.review is not None:
            return f"{self.repo}#review-comment:{self.review.id}"
        if self.trigger == "comment":
            return f"{self.repo}#comment:{self.comment_id}"
        if self.trigger in ("check_run", "check_suite", "workflow_run"):
            return f"{self.repo}@{self.head_sha}:ci"
        return f"{self.repo}@{self.head_sha}:{self.trigger}"

    def to_dict(self) -> dict[str, Any]:
        """What `dataclasses.asdict` gives, without its deep copy of each plain value (a
        red check's mission is stored with this on the webhook's path): the text, number
        and flag fields are kept as they are, `extra` (JSON values: a delivery's id, a
        retried mission's) is copied whole and `review` made a dict."""
        data = {name: getattr(self, name) for name in _FIELDS}
        data["extra"] = copy.deepcopy(self.extra)
        data["review"] = None if self.review is None else asdict(self.review)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MissionRequest:
        review = data.get("review")
        if isinstance(review, dict):
            data = {**data, "review": ReviewComment(**review)}
        return cls(**data)


_FIELDS = tuple(each.name for each in fields(MissionRequest))
