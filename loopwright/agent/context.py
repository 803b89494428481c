"""The conversation the model sees, kept inside a token budget.

Long tool outputs are cut to head + tail when they are recorded. Every request extends the
previous one (an endpoint's prompt cache then reuses all of it): a short state message is
appended whenever the plan or the latest test result changes, holding only what changed
(the test run as its command, exit code and failing tests; its output is already in the
conversation, in the task or the command's own result, and is not sent twice). When the
whole conversation outgrows the context size, the oldest tool observations are elided in
one large step, down to `ELIDE_TO` of the budget.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from loopwright.agent.failures import failing_tests
from loopwright.clip import truncate_middle

CHARS_PER_TOKEN = 4
"""A deliberately conservative estimate; no tokenizer is needed for budgeting."""
ELIDE_TO = 0.6
"""Fraction of the budget an over-full conversation is elided down to, so that the cached
prefix is invalidated rarely rather than a little on every step."""


def estimate_tokens(text: str) -> int:
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


@dataclass
class PlanItem:
    step: str
    status: str


@dataclass
class Conversation:
    """System prompt, task, and the turns since; renders a request that fits the budget."""

    system: str
    task: str
    context_tokens: int
    observation_chars: int = 8_000
    """Per-observation cap applied when a tool result is recorded."""
    turns: list[dict[str, Any]] = field(default_factory=list)
    plan: list[PlanItem] = field(default_factory=list)
    latest_test: str | None = None
    _elided: set[int] = field(default_factory=set)
    _last_plan: str | None = None
    _last_test: str | None = None
    _test_turn: int | None = None
    """The turn holding the latest test run's output, never elided."""

    def add_assistant(self, content: str, tool_calls: list[dict[str, Any]]) -> None:
        message: dict[str, Any] = {"role": "assistant", "content": content or None}
        if tool_calls:
            message["tool_calls"] = tool_calls
        self.turns.append(message)

    def add_tool_result(self, call_id: str, text: str) -> None:
        content = truncate_middle(text, self.observation_chars)
        self.turns.append({"role": "tool", "tool_call_id": call_id, "content": content})

    def add_user(self, text: str) -> None:
        self.turns.append({"role": "user", "content": text})

    def set_latest_test(
        self, command: str, exit_code: int, output: str, *, in_task: bool = False
    ) -> None:
        """Record the latest run of the tests. Its `output` is already in the conversation:
        in the task (`in_task`), or else in the tool result just added, which is then kept
        out of elision for as long as it is the latest run."""
        if not in_task and self.turns and self.turns[-1]["role"] == "tool":
            self._test_turn = len(self.turns) - 1
        shown = in_task or self._test_turn is not None
        line = f"`{command}` exited {exit_code}" + (" (its output is above)." if shown else ".")
        names = failing_tests(output) if exit_code != 0 else []
        if names:
            line += " Failing: " + ", ".join(names) + "."
        self.latest_test = line

    def _plan_text(self) -> str:
        if not self.plan:
            return "Plan: none yet; call update_plan with a short checklist first."
        marks = {"done": "[x]", "in_progress": "[~]", "pending": "[ ]"}
        return "\n".join(
            ["Plan:", *(f"  {marks.get(i.status, '[ ]')} {i.step}" for i in self.plan)]
        )

    def _state_update(self) -> str | None:
        """What changed since the last state message, or None."""
        plan, test = self._plan_text(), self.latest_test
        lines = ["Current state."]
        if plan != self._last_plan:
            lines.append(plan)
        if test and test != self._last_test:
            lines.append(f"Latest test run: {test}")
        self._last_plan, self._last_test = plan, test
        return "\n".join(lines) if len(lines) > 1 else None

    def render(self) -> list[dict[str, Any]]:
        """The messages for the next request: always the previous request plus what happened
        since, so an endpoint's prompt cache reuses the whole prefix.

        What changed in the state (plan, latest test run) is appended as a new message,
        never rewritten in place. When the conversation outgrows the budget, the oldest tool
        observations are elided down to `ELIDE_TO` of it in one go, so the prefix changes in
        rare large steps rather than a little on every request.
        """
        update = self._state_update()
        if update is not None:
            self.turns.append({"role": "user", "content": update})
        budget = int(self.context_tokens * 0.85)
        head = [
            {"role": "system", "content": self.system},
            {"role": "user", "content": self.task},
        ]
        fixed = sum(_message_tokens(m) for m in head)
        sizes = [_message_tokens(m) for m in self._rendered_turns()]
        total = fixed + sum(sizes)
        if total > budget:
            target = int(budget * ELIDE_TO)
            # Elide the oldest tool observations first; the most recent turns stay verbatim
            # because they are what the model is reasoning about right now.
            protected_from = max(len(self.turns) - 6, 0)
            for index, message in enumerate(self.turns):
                if total <= target or index >= protected_from:
                    break
                if message["role"] != "tool" or index in self._elided or index == self._test_turn:
                    continue
                before = sizes[index]
                self._elided.add(index)
                sizes[index] = _message_tokens(self._render_turn(index))
                total -= before - sizes[index]
        return [*head, *self._rendered_turns()]

    def _rendered_turns(self) -> list[dict[str, Any]]:
        return [self._render_turn(i) for i in range(len(self.turns))]

    def _render_turn(self, index: int) -> dict[str, Any]:
        message = self.turns[index]
        if index not in self._elided:
            return message
        size = len(message.get("content") or "")
        return {
            **message,
            "content": f"[older output elided ({size} characters); re-run the command if needed]",
        }


def _message_tokens(message: dict[str, Any]) -> int:
    text = message.get("content") or ""
    if message.get("tool_calls"):
        text += json.dumps(message["tool_calls"])
    return estimate_tokens(text) + 4
