"""What a trigger decides about one GitHub event, what it needs to know besides the
payload, and which accounts may trigger a mission at all."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from loopwright.github.command_text import Command
from loopwright.github.payload import Malformed
from loopwright.request import MissionRequest


@dataclass(frozen=True)
class Ignore:
    """Nothing to do; the reason is returned to GitHub in the webhook response and logged."""

    reason: str


@dataclass(frozen=True)
class NeedsPermission:
    """A `/loopwright fix` comment on a pull request, waiting for authorization.

    The caller asks the collaborator-permission endpoint about `user` and fetches the pull
    request, then calls `authorize`: only that step pins `request.head_sha` (empty here,
    because the issue_comment payload does not carry the head commit).
    """

    request: MissionRequest
    user: str


@dataclass(frozen=True)
class Reply:
    """A comment to post on an issue or pull request, and nothing else."""

    body: str
    issue_number: int
    refused: bool = False
    """The reply turns the request down (stored as `refused`, not `ignored`)."""


@dataclass(frozen=True)
class CommandComment:
    """A `/loopwright help|cancel|retry` (or unknown) comment on a pull request; the caller
    checks `user` against the collaborator-permission endpoint before acting on it."""

    command: Command
    request: MissionRequest
    """What a `retry` would ask for (its guidance and head are filled in by the caller)."""
    user: str
    written_at: datetime.datetime | None = None
    """When the comment was written (GitHub's `created_at`, to the second); a pair-mode
    decision without a request id applies only to a request asked before it."""


Decision = MissionRequest | NeedsPermission | CommandComment | Reply | Ignore


@dataclass(frozen=True)
class TriggerContext:
    """What `decide` needs to know besides the payload; built by the caller per delivery."""

    app_slug: str = "loopwright"
    """The App's slug; `<slug>[bot]` is its login and is never allowed to trigger."""
    bot_logins: frozenset[str] = frozenset()
    """Logins to treat as bots even when GitHub reports them as users (machine accounts)."""
    allowed_bots: frozenset[str] = frozenset()
    """Bot logins that may trigger missions (e.g. `dependabot[bot]`)."""
    attempts: Mapping[str, int] = field(default_factory=dict)
    """Missions already stored for this repository, by head SHA (queued ones included)."""
    max_attempts: int = 3
    loopwright_authored_shas: frozenset[str] = frozenset()
    """Commits Loopwright pushed; a red check on one of them must not start a mission."""
    branch_prefix: str = "loopwright/"

    @property
    def own_login(self) -> str:
        return f"{self.app_slug}[bot]"


def bot_reason(who: Mapping[str, Any], ctx: TriggerContext, label: str) -> str | None:
    """Why this account may not trigger a mission, or None. `author_association` is ignored."""
    login = who.get("login")
    if not isinstance(login, str) or not login:
        raise Malformed(f"{label}.login is missing")
    if login.lower() == ctx.own_login.lower():
        return f"{label} {login} is Loopwright itself"
    is_bot = who.get("type") == "Bot" or login.lower().endswith("[bot]") or login in ctx.bot_logins
    if is_bot and login.lower() not in {b.lower() for b in ctx.allowed_bots}:
        return f"{label} {login} is a bot"
    return None
