"""The agent loop: ask the model, run its tool calls, feed the observations back.

Everything else (escalation, the command policy, the context budget, the caps) lives in
its own module and is called from here. The loop ends when the model calls `finish`
(`Submitted`) or a cap is hit (`LimitsExceeded`); model endpoint failures and `Cancelled`
(checked before each model call and each tool call) propagate.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from loopwright.agent.budget import Budget, LimitsExceeded
from loopwright.agent.call_summary import describe_call
from loopwright.agent.context import Conversation
from loopwright.agent.escalation import EscalationPolicy, Signal
from loopwright.agent.failures import failing_tests
from loopwright.agent.model import Model, ModelRetry, Sampling
from loopwright.agent.pair import ApprovalRequest, Decision, NeedsApproval, PairMode
from loopwright.agent.prompts import (
    AFTER_FINISH,
    FINISH_REJECTED,
    GUIDANCE,
    NO_TOOL_CALL,
    PLAN_ONLY,
    REDIRECTED,
    REJECTED,
)
from loopwright.agent.replies import ToolCall
from loopwright.agent.tools import TOOL_SPECS, Toolbox, ToolOutcome
from loopwright.cancellation import Cancellation
from loopwright.clip import truncate_middle
from loopwright.config import Settings
from loopwright.events import EventBus

TEST_RUNNER = re.compile(
    r"\b(pytest|unittest|npm (run )?test|node --test|go test|cargo test|make test"
    r"|jest|vitest|mocha)\b"
)
EVENT_OUTPUT_CHARS = 20_000
FAILING_OUTPUT_CHARS = 1_500


class Submitted(Exception):
    """The model called finish; carries its summary."""


class AttemptStepsExceeded(LimitsExceeded):
    """An independent attempt used its steps (LOOPWRIGHT_ATTEMPT_STEPS); the mission's own
    budget may still have room for another."""


@dataclass(frozen=True)
class TestRun:
    """The latest test command the model ran in the loop, as the finish rule reads it."""

    __test__ = False  # not a pytest test class despite the name

    command: str
    exit_code: int
    output: str


@dataclass(frozen=True)
class LoopResult:
    outcome: Literal["finished", "budget_exceeded", "attempt_exhausted"]
    summary: str
    reason: str = ""


class AgentLoop:
    def __init__(
        self,
        *,
        settings: Settings,
        model: Model,
        toolbox: Toolbox,
        conversation: Conversation,
        budget: Budget,
        events: EventBus,
        cancellation: Cancellation | None = None,
        step_limit: int | None = None,
        sampling: Sampling | None = None,
        manage_stages: tuple[bool, bool] = (True, True),
        pair: PairMode | None = None,
    ) -> None:
        """`step_limit` and `sampling` make this one independent attempt; `manage_stages`
        says whether the loop enters the plan stage at its start and leaves plan/loop at
        its end (a mission of several attempts enters once and leaves once); `pair` is
        where decisions and guidance come from in pair mode."""
        self.pair = pair
        self.redirects: list[str] = []
        """Guidance of redirect decisions, added after the reply's tool results."""
        self.settings = settings
        self.cancellation = cancellation or Cancellation()
        self.model = model
        self.toolbox = toolbox
        self.conversation = conversation
        self.budget = budget
        self.events = events
        self.escalation = EscalationPolicy(settings.tier_names, settings.escalate_after)
        self.latest_test: TestRun | None = None
        """The model's latest test run in this loop (the reproduction before it is not one)."""
        self.finish_refused = False
        self.changed_since_test = False
        """Whether the model wrote, edited or ran something else since its latest test run."""
        self.plan_only_streak = 0
        self.step_limit = step_limit
        self.sampling = sampling
        self.steps_taken = 0
        self._enters, self._leaves = manage_stages

    def run(self) -> LoopResult:
        if self._enters:
            self.events.enter("plan")
        try:
            while True:
                self.step()
        except Submitted as done:
            if self._leaves:
                leave_loop_stage(self.events, "finished")
            return LoopResult("finished", str(done))
        except AttemptStepsExceeded as limit:
            if self._leaves:
                leave_loop_stage(self.events, "budget_exceeded")
            return LoopResult("attempt_exhausted", "", str(limit))
        except LimitsExceeded as limit:
            if self._leaves:
                leave_loop_stage(self.events, "budget_exceeded")
            return LoopResult("budget_exceeded", "", str(limit))

    def step(self) -> None:
        self.cancellation.check()
        self.budget.check()
        if self.step_limit is not None and self.steps_taken >= self.step_limit:
            raise AttemptStepsExceeded(
                f"attempt step limit reached ({self.step_limit}, LOOPWRIGHT_ATTEMPT_STEPS)"
            )
        self.steps_taken += 1
        self._take_guidance()
        tier = self.settings.tier(self.escalation.current)

        def retrying(retry: ModelRetry) -> None:
            self.events.emit(
                "model_retry",
                step=self.budget.steps,
                tier=tier.name,
                attempt=retry.attempt,
                attempts=retry.attempts,
                reason=retry.reason,
                wait_s=retry.wait_s,
            )

        reply = self.model.complete(
            tier,
            self.conversation.render(),
            TOOL_SPECS,
            on_retry=retrying,
            sampling=self.sampling,
        )
        usage = reply.usage
        cost = self.budget.charge(
            tier, usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens
        )
        recovered = reply.recovered_calls
        self.events.emit(
            "model_call",
            step=self.budget.steps,
            tier=tier.name,
            model=reply.model or tier.model,
            prompt_tokens=reply.usage.prompt_tokens,
            completion_tokens=reply.usage.completion_tokens,
            cost_usd=round(cost, 6),
            total_cost_usd=round(self.budget.cost_usd, 6),
            duration_s=round(reply.duration_s, 3),
            tool_calls=[c.name for c in reply.tool_calls],
            content=truncate_middle(reply.content, 2_000),
            tool_call_source=reply.tool_call_source,
            recovered_tool_calls=recovered,
            usage_estimated=reply.usage.estimated,
            reasoning_tokens=reply.reasoning_tokens,
            cached_tokens=usage.cached_tokens,
        )
        # A reply that arrives after a cancel is recorded (it was paid for) but not acted on.
        self.cancellation.check()
        self.conversation.add_assistant(
            reply.content,
            [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in reply.tool_calls
            ],
        )
        if not reply.tool_calls:
            self.conversation.add_user(NO_TOOL_CALL)
            self._signal("failure", "answered without a tool call")
            return
        finished: str | None = None
        for call in reply.tool_calls:
            self.cancellation.check()
            # A call after a finish in the same reply would change the tree after finish
            # judged it (pair mode's review of the change): it is answered, never run.
            outcome = self._run_tool(call, after_finish=finished is not None)
            if outcome.finished is not None:
                finished = outcome.finished
        for text in self.redirects:
            self.conversation.add_user(GUIDANCE.format(text=text))
        self.redirects.clear()
        if finished is not None:
            raise Submitted(finished)
        self._count_plan_only({c.name for c in reply.tool_calls})

    def _count_plan_only(self, tools: set[str]) -> None:
        """From the `plan_only_steps`-th step in a row that only updated the plan, each such
        step is a failure for escalation, and the model is told to act."""
        if tools != {"update_plan"}:
            self.plan_only_streak = 0
            return
        self.plan_only_streak += 1
        limit = self.settings.plan_only_steps
        if self.plan_only_streak >= limit:
            self.conversation.add_user(PLAN_ONLY.format(count=self.plan_only_streak))
            self._signal("failure", f"{self.plan_only_streak} plan-only steps in a row")

    def _run_tool(self, call: ToolCall, *, after_finish: bool = False) -> ToolOutcome:
        described = describe_call(call.name, call.arguments)
        extra: dict[str, Any] = {"args_error": described.args_error} if described.args_error else {}
        self.events.emit(
            "tool_call",
            id=call.id,
            tool=call.name,
            arguments=call.arguments,
            args=described.args,
            summary=described.summary,
            **extra,
        )
        try:
            if after_finish:
                outcome = ToolOutcome("refused", AFTER_FINISH)
            else:
                outcome = self._finish_gate(call) or self.toolbox.run(call.name, call.arguments)
        except NeedsApproval as needed:
            outcome = self._ask(call, needed.request)
        self.conversation.add_tool_result(call.id, outcome.observation)
        if outcome.plan is not None:
            self.conversation.plan = outcome.plan
            self.events.emit("plan", items=[vars(i) for i in outcome.plan])
            if self.events.stage == "plan":
                self.events.leave("plan", "done")
                self.events.enter("loop")
        elif self.events.stage == "plan":
            # The model skipped planning; the checklist stays empty and the loop starts.
            self.events.leave("plan", "skipped")
            self.events.enter("loop")
        output = outcome.output if outcome.output is not None else outcome.observation
        self.events.emit(
            "tool_result",
            id=call.id,
            tool=call.name,
            status=outcome.status,
            exit_code=outcome.exit_code,
            timed_out=outcome.timed_out,
            duration_s=round(outcome.duration_s, 3),
            output=truncate_middle(output, EVENT_OUTPUT_CHARS),
        )
        if call.name == "run_command" and outcome.exit_code is not None:
            command = _command_of(call.arguments)
            test_cmd = self.toolbox.test_command
            if (test_cmd and test_cmd in command) or TEST_RUNNER.search(command):
                self.conversation.set_latest_test(command, outcome.exit_code, output)
                self.latest_test = TestRun(command, outcome.exit_code, output)
                self.changed_since_test = False
            else:
                self.changed_since_test = True
        elif call.name in ("write_file", "edit_file") and outcome.status == "ok":
            self.changed_since_test = True
        self._signal(_signal_for(call.name, outcome), f"{call.name} {outcome.status}")
        return outcome

    def _finish_gate(self, call: ToolCall) -> ToolOutcome | None:
        """Refuse the first `finish` that comes right after a failing test run (nothing
        written, edited or run since), naming the failures.

        Only once: a model that calls finish again is taken at its word and verification
        decides, so a test that cannot pass in the loop's sandbox never traps the mission.
        """
        run = self.latest_test
        if call.name != "finish" or self.finish_refused or run is None or run.exit_code == 0:
            return None
        if self.changed_since_test:
            return None
        self.finish_refused = True
        names = failing_tests(run.output)
        failing = (
            "Failing: " + ", ".join(names) + "."
            if names
            else "Its output ends:\n" + run.output[-FAILING_OUTPUT_CHARS:]
        )
        return ToolOutcome(
            "refused",
            f"Refused: your latest test run (`{run.command}`) failed with exit code "
            f"{run.exit_code}. {failing}\nFix the code and run the tests again before you "
            "call finish. If you are sure the change is right anyway, call finish again: "
            "verification will then judge it.",
        )

    def _ask(self, call: ToolCall, request: ApprovalRequest) -> ToolOutcome:
        """Wait for a person's decision on `request` and carry it out: approve runs the
        call, reject refuses it with the reason, redirect refuses it and hands the model
        the guidance with the plan to revise."""
        if self.pair is None:
            raise RuntimeError("the toolbox asked for approval, but the loop has no pair channel")
        request = dataclasses.replace(request, id=self.pair.request_id())
        extra: dict[str, Any] = {
            k: v for k, v in (("command", request.command), ("diff", request.diff)) if v
        }
        self.pair.channel.open(request)
        self.events.emit(
            "approval_requested",
            id=request.id,
            tool=request.tool,
            rule=request.rule,
            what=request.what,
            why=request.why,
            network=request.network,
            expires_s=self.pair.expiry_s,
            **extra,
        )
        decision = self.pair.channel.ask(request, self.cancellation)
        self._decided(decision, request.id)
        if decision.kind == "approve":
            return self.toolbox.run(call.name, call.arguments, approved=request)
        if decision.kind == "reject":
            because = f": {decision.text}" if decision.text else ""
            template = FINISH_REJECTED if request.tool == "finish" else REJECTED
            return ToolOutcome(
                "refused", template.format(what=request.what, why=request.why, because=because)
            )
        self.redirects.append(decision.text)
        return ToolOutcome("refused", REDIRECTED.format(what=request.what))

    def _take_guidance(self) -> None:
        """Guidance a person sent while the loop ran, as user messages before the next
        model call; each asks the model to revise its plan."""
        if self.pair is None:
            return
        for decision in self.pair.channel.guidance():
            self._decided(decision, None)
            self.conversation.add_user(GUIDANCE.format(text=decision.text))

    def _decided(self, decision: Decision, request_id: str | None) -> None:
        kind = decision.kind if request_id is not None else "guidance"
        fields: dict[str, Any] = {"decision": kind, "by": decision.by}
        if request_id is not None:
            fields["id"] = request_id
        if decision.text:
            fields["text"] = decision.text
        self.events.emit("decision", **fields)

    def _signal(self, signal: Signal, what: str) -> None:
        switch = self.escalation.record(signal, what)
        if switch is not None:
            self.events.emit(
                "escalation",
                from_tier=switch.from_tier,
                to_tier=switch.to_tier,
                reason=switch.reason,
            )


def leave_loop_stage(events: EventBus, status: str) -> None:
    """Leave the plan or loop stage, whichever the mission is in."""
    if events.stage == "plan":
        events.leave("plan", status)
    elif events.stage == "loop":
        events.leave("loop", status)


def _signal_for(tool: str, outcome: ToolOutcome) -> Signal:
    """Invalid calls and refusals are failures; a command's exit code decides for commands;
    reads, writes and plan updates are neutral."""
    if outcome.invalid or outcome.status == "refused":
        return "failure"
    if tool == "run_command":
        return "success" if outcome.status == "ok" else "failure"
    return "neutral"


def _command_of(arguments: str) -> str:
    try:
        data = json.loads(arguments)
    except (ValueError, RecursionError):
        return ""
    return str(data.get("command", "")) if isinstance(data, dict) else ""
