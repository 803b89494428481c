"""Webhook triggers: what to do with one GitHub event, decided from its payload alone.

`decide` turns (event, payload, repository config, context) into a `Decision`: a
`MissionRequest` to queue, a `NeedsPermission` for a `/loopwright fix` comment whose author
must first be checked against the collaborator-permission endpoint, a `Reply` to post, or
`Ignore(reason)`. `authorize` finishes a `NeedsPermission` once the caller has fetched the
commenter's permission and the pull request. Nothing here does I/O and nothing raises on a
bad payload: a payload missing a key or holding the wrong type is ignored with the path of
the offending field.

This module routes an event to `ci_triggers` (failed checks and workflow runs) or
`comment_triggers` (`/loopwright` commands, and `authorize`); the decision types and
`TriggerContext` live in `decisions`.

`pull_request` events are acknowledged and ignored: whether Loopwright's own pull request
was closed unmerged is read from the API at delivery time, because GitHub does not
redeliver lost webhooks and bookkeeping built from them would drift.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loopwright.github.ci_triggers import CI_EVENTS, FAILING_CONCLUSIONS, decide_ci
from loopwright.github.comment_triggers import (
    WRITE_PERMISSIONS,
    authorize,
    decide_comment,
    decide_review_comment,
)
from loopwright.github.decisions import (
    CommandComment,
    Decision,
    Ignore,
    NeedsPermission,
    Reply,
    TriggerContext,
)
from loopwright.github.payload import Malformed
from loopwright.repo_config import RepoConfig

__all__ = [
    "CI_EVENTS",
    "FAILING_CONCLUSIONS",
    "WRITE_PERMISSIONS",
    "CommandComment",
    "Decision",
    "Ignore",
    "NeedsPermission",
    "Reply",
    "TriggerContext",
    "authorize",
    "decide",
]


def decide(
    event: str, payload: Mapping[str, Any], repo_config: RepoConfig, ctx: TriggerContext
) -> Decision:
    """The decision for one delivery. `event` is the `X-GitHub-Event` header value."""
    name, _, suffix = event.partition(".")
    try:
        if not isinstance(payload, Mapping):
            raise Malformed("the payload is not a JSON object")
        action = payload.get("action")
        if suffix and action != suffix:
            return Ignore(f"event {event} does not match the payload's action {action!r}")
        if name in CI_EVENTS:
            return decide_ci(CI_EVENTS[name], payload, repo_config, ctx)
        if name == "issue_comment":
            return decide_comment(payload, ctx)
        if name == "pull_request_review_comment":
            return decide_review_comment(payload, ctx)
        if name == "pull_request":
            return Ignore(
                f"pull_request.{action} needs no action: delivery reads the state of "
                "Loopwright's pull requests from the API"
            )
        return Ignore(f"event {name} is not handled")
    except Malformed as exc:
        return Ignore(f"malformed payload: {exc}")
