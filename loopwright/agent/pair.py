"""Pair mode: a person approves a risky step, or redirects the plan, while the loop runs.

The tool layer raises `NeedsApproval` for an action `policy.AskRules` names; the loop then
publishes the `ApprovalRequest`, waits on its `Pair` for a `Decision` (the model is not
called meanwhile, the sandbox stays up) and turns the decision into the tool's outcome.
Where decisions come from is the `Pair` implementation's business: the store (the live
view, pull-request comments, any server process) or the terminal (`fix --pair`).
"""

from __future__ import annotations

import itertools
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Literal, Protocol

from loopwright.cancellation import Cancellation

DecisionKind = Literal["approve", "reject", "redirect"]
DECISION_KINDS: tuple[DecisionKind, ...] = ("approve", "reject", "redirect")
DEFAULT_EXPIRY_S = 15 * 60.0
POLL_INTERVAL_S = 0.5
"""How often a waiting mission looks for its decision."""


@dataclass(frozen=True)
class ApprovalRequest:
    """What the loop asks a person: the exact action, and why it needs them."""

    id: str
    """Unique within the mission across its runs, short enough to type in a comment: a
    counter and a random part (`3-k7pq`)."""
    tool: str
    rule: str
    """Which `AskRules` class it falls in: network, removals or ask_path."""
    what: str
    """The action in words, e.g. "Run `pip install requests`"."""
    why: str
    command: str | None = None
    diff: str | None = None
    """For a file write, the change as a unified diff."""
    network: bool = False
    """Approving runs the command with the network attached for just that command."""


@dataclass(frozen=True)
class Decision:
    """A person's answer to a request, or guidance sent at any time (`kind` redirect)."""

    kind: DecisionKind
    by: str
    """Who decided: `@login`, `dashboard`, `terminal`, or `expiry`."""
    text: str = ""
    """The reason of a reject, the guidance of a redirect."""


class NeedsApproval(Exception):
    """Raised by the tool layer for an action that waits for a decision."""

    def __init__(self, request: ApprovalRequest) -> None:
        super().__init__(request.what)
        self.request = request


class Pair(Protocol):
    """Where a mission's decisions and guidance come from."""

    def open(self, request: ApprovalRequest) -> None:
        """Record `request` as pending. Called before the `approval_requested` event is
        published, so a decision sent the moment someone sees the event finds it."""
        ...

    def ask(self, request: ApprovalRequest, cancellation: Cancellation) -> Decision:
        """Block on the opened `request` until it is decided, expires (a reject by
        `expiry`) or the mission is cancelled (`Cancelled` is raised)."""
        ...

    def guidance(self) -> list[Decision]:
        """Guidance sent since the last call, oldest first (never blocks)."""
        ...

    def taking_guidance(self, on: bool) -> None:
        """The loop starts (`on`) or has ended: from here on guidance reaches the model, or
        would never be read, and whoever sends it is told so."""
        ...


@dataclass
class PairMode:
    """A mission's pair channel, and whether it is on whatever the repository config says
    (`fix --pair`) or only where the config sets `pair: true` (the App)."""

    channel: Pair
    always: bool = False
    expiry_s: float = DEFAULT_EXPIRY_S
    _numbers: Iterator[int] = field(default_factory=lambda: itertools.count(1), repr=False)

    def request_id(self) -> str:
        """A request id unique within the mission. The counter starts again when a lost
        worker's mission runs again, so a random part keeps a new run's request from
        meeting a decision made on the old run's."""
        suffix = "".join(secrets.choice(_ID_ALPHABET) for _ in range(_ID_RANDOM_CHARS))
        return f"{next(self._numbers)}-{suffix}"


_ID_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"
"""Lower-case letters and digits that are not easily mistaken for one another."""
_ID_RANDOM_CHARS = 4


def wait_for_decision(
    poll: Callable[[], Decision | None],
    *,
    expiry_s: float,
    cancellation: Cancellation,
    interval_s: float = POLL_INTERVAL_S,
    clock: Callable[[], float] = time.monotonic,
) -> Decision:
    """Poll for a decision until it comes; past `expiry_s` the request is rejected."""
    deadline = clock() + expiry_s
    while True:
        cancellation.check()
        decision = poll()
        if decision is not None:
            return decision
        left = deadline - clock()
        if left <= 0:
            minutes = f"{expiry_s / 60:g} minutes" if expiry_s >= 60 else f"{expiry_s:g}s"
            return Decision("reject", "expiry", f"nobody decided within {minutes}")
        cancellation.wait(min(interval_s, left))
