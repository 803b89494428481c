"""Usage accounting per tier and the mission's hard limits (steps, cost, tokens, time)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from loopwright.config import Settings, Tier


class LimitsExceeded(Exception):
    """A hard cap was reached; the message names the cap and its value."""


@dataclass
class TierUsage:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    """Prompt tokens the endpoint reported as served from its prompt cache."""
    cost_usd: float = 0.0


class Budget:
    """Counts model steps, tokens and dollars per tier and refuses to go past the caps."""

    def __init__(self, settings: Settings, clock: Callable[[], float] = time.monotonic) -> None:
        self._settings = settings
        self._clock = clock
        self._started = clock()
        self.steps = 0
        self.usage: dict[str, TierUsage] = {}

    @property
    def cost_usd(self) -> float:
        return sum(u.cost_usd for u in self.usage.values())

    @property
    def tokens(self) -> int:
        return sum(u.prompt_tokens + u.completion_tokens for u in self.usage.values())

    @property
    def elapsed_s(self) -> float:
        return self._clock() - self._started

    def check(self) -> None:
        """Raise `LimitsExceeded` if another model call would break a cap."""
        s = self._settings
        if self.steps >= s.max_steps:
            raise LimitsExceeded(f"step limit reached ({s.max_steps}, LOOPWRIGHT_MAX_STEPS)")
        if s.max_cost_usd is not None and self.cost_usd >= s.max_cost_usd:
            raise LimitsExceeded(
                f"cost limit reached (${self.cost_usd:.4f} of ${s.max_cost_usd:g}, "
                "LOOPWRIGHT_MAX_COST_USD)"
            )
        if s.max_prompt_tokens is not None and self.tokens >= s.max_prompt_tokens:
            raise LimitsExceeded(
                f"token limit reached ({self.tokens} of {s.max_prompt_tokens}, "
                "LOOPWRIGHT_MAX_TOKENS)"
            )
        if self.elapsed_s >= s.wall_clock_s:
            raise LimitsExceeded(
                f"wall-clock limit reached ({s.wall_clock_s:g}s, LOOPWRIGHT_WALL_CLOCK_S)"
            )

    def charge(
        self, tier: Tier, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0
    ) -> float:
        self.steps += 1
        usage = self.usage.setdefault(tier.name, TierUsage())
        cost = tier.cost(prompt_tokens, completion_tokens, cached_tokens)
        usage.calls += 1
        usage.prompt_tokens += prompt_tokens
        usage.completion_tokens += completion_tokens
        usage.cached_tokens += cached_tokens
        usage.cost_usd += cost
        return cost

    def report(self) -> dict[str, dict[str, Any]]:
        return {
            name: {**asdict(u), "cost_usd": round(u.cost_usd, 6)} for name, u in self.usage.items()
        }
