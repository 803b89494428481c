"""The tier escalation policy: start on the cheapest model, move up after repeated failure.

Pure state machine, no I/O: the loop reports each tool outcome and asks which tier to use.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Signal = Literal["failure", "success", "neutral"]
"""failure: a command exited non-zero, was refused, or the tool call was invalid/unknown.
success: a command exited 0. neutral: reads, writes and plan updates."""


@dataclass(frozen=True)
class Switch:
    """One escalation: the tier left, the tier entered, and why."""

    from_tier: str
    to_tier: str
    reason: str


class EscalationPolicy:
    """Counts consecutive failures; after `escalate_after` of them the next call moves up a tier.

    The top tier is kept once reached; successes only reset the count, they never step down,
    because a model that needed help once will likely need it again on the same problem.
    """

    def __init__(self, tiers: Sequence[str], escalate_after: int) -> None:
        if not tiers:
            raise ValueError("at least one tier is required")
        if escalate_after < 1:
            raise ValueError("escalate_after must be at least 1")
        self._tiers = list(tiers)
        self._escalate_after = escalate_after
        self._index = 0
        self.consecutive_failures = 0

    @property
    def current(self) -> str:
        return self._tiers[self._index]

    @property
    def at_top(self) -> bool:
        return self._index == len(self._tiers) - 1

    def record(self, signal: Signal, what: str = "") -> Switch | None:
        """Account for one tool outcome; return the switch if the next call changes tier."""
        if signal == "success":
            self.consecutive_failures = 0
            return None
        if signal == "neutral":
            return None
        self.consecutive_failures += 1
        if self.consecutive_failures < self._escalate_after or self.at_top:
            return None
        before = self.current
        self._index += 1
        self.consecutive_failures = 0
        detail = f" (last: {what})" if what else ""
        return Switch(
            before,
            self.current,
            f"{self._escalate_after} consecutive failures on {before}{detail}",
        )
