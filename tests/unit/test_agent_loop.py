"""What the agent loop promises, driven in-process: a `Model` and a `Sandbox` that implement
the real protocols answer from a script, and the real toolbox, conversation, budget,
escalation policy and event bus sit between them and the loop.

No endpoint and no subprocess: every outcome below is decided by the loop's own rules, so a
test fails exactly when one of those rules breaks.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import pytest

from loopwright.agent.budget import Budget
from loopwright.agent.context import Conversation
from loopwright.agent.loop import AgentLoop, LoopResult
from loopwright.agent.model import Model, RetryListener, Sampling
from loopwright.agent.replies import ModelReply, ToolCall, Usage
from loopwright.agent.tools import Toolbox
from loopwright.cancellation import Cancellation, Cancelled
from loopwright.config import Settings, Tier
from loopwright.events import EventBus, EventList
from loopwright.redaction import Redactor
from loopwright.sandbox.base import ExecResult, FileToolError, OutputCallback, RawCallback, Sandbox

TIERS = (Tier("nano", "small-model"), Tier("super", "large-model"))
PYTEST_FAILURE = "FAILED tests/test_total.py::test_total - assert 3 == 4\n1 failed\n"

Call = tuple[str, dict[str, Any]]
"""A tool call the scripted model makes: the tool's name and its arguments."""


@dataclass
class Request:
    """One `complete` call as the model received it."""

    tier: str
    messages: list[dict[str, Any]]

    def last_tool_result(self) -> str:
        return str([m for m in self.messages if m["role"] == "tool"][-1]["content"])


class ScriptedModel:
    """A `Model` that answers each call with the next turn of a script (a list of tool calls;
    an empty list is a reply with no tool call), then repeats `then` forever if given."""

    def __init__(self, turns: list[list[Call]], then: list[Call] | None = None) -> None:
        self._turns = iter(turns)
        self._then = then
        self._ids = itertools.count(1)
        self.requests: list[Request] = []
        self.on_complete: Callable[[int], None] | None = None
        """Called with the number of the call (from 1) just before it returns."""

    def complete(
        self,
        tier: Tier,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        on_retry: RetryListener | None = None,
        sampling: Sampling | None = None,
    ) -> ModelReply:
        self.requests.append(Request(tier.name, copy.deepcopy(messages)))
        turn = next(self._turns, None)
        if turn is None:
            if self._then is None:
                raise AssertionError(f"the script ran out after {len(self.requests) - 1} calls")
            turn = self._then
        calls = tuple(
            ToolCall(f"call-{next(self._ids)}", name, json.dumps(arguments))
            for name, arguments in turn
        )
        if self.on_complete is not None:
            self.on_complete(len(self.requests))
        return ModelReply(
            content="",
            tool_calls=calls,
            usage=Usage(prompt_tokens=100, completion_tokens=10),
            model=tier.model,
            finish_reason="tool_calls",
            duration_s=0.0,
        )

    @property
    def tiers(self) -> list[str]:
        return [r.tier for r in self.requests]


@dataclass
class MemorySandbox:
    """A `Sandbox` whose workspace is a dict and whose commands answer from `results`
    (command → exit code and output; anything else exits 0 with no output)."""

    mission_id: str = "m-loop"
    files: dict[str, bytes] = field(default_factory=dict)
    results: dict[str, tuple[int, str]] = field(default_factory=dict)
    commands: list[str] = field(default_factory=list)
    on_exec: Callable[[str], None] | None = None

    def exec(
        self,
        command: str,
        *,
        timeout_s: float,
        on_output: OutputCallback | None = None,
        on_raw: RawCallback | None = None,
    ) -> ExecResult:
        self.commands.append(command)
        if self.on_exec is not None:
            self.on_exec(command)
        code, output = self.results.get(command, (0, ""))
        return ExecResult(output, code)

    def read_file(self, path: str) -> bytes:
        try:
            return self.files[path]
        except KeyError:
            raise FileToolError(f"{path} does not exist.") from None

    def write_file(self, path: str, data: bytes) -> None:
        self.files[path] = data

    def set_network(self, enabled: bool) -> None:
        pass

    def run_service(
        self, command: str, *, port: int, env: Mapping[str, str], log: str
    ) -> AbstractContextManager[str]:
        raise AssertionError("the loop never starts a service")

    def close(self) -> None:
        pass

    def resolve_path(self, path: str) -> str:
        return path


@dataclass
class Harness:
    model: ScriptedModel
    sandbox: MemorySandbox
    events: EventList
    bus: EventBus
    cancellation: Cancellation
    loop: AgentLoop

    def run(self) -> LoopResult:
        return self.loop.run()

    def statuses(self, tool: str) -> list[str]:
        return [
            e.fields["status"]
            for e in self.events.of_type("tool_result")
            if e.fields["tool"] == tool
        ]


def make_loop(
    model: ScriptedModel,
    sandbox: MemorySandbox | None = None,
    *,
    clock: Callable[[], float] | None = None,
    step_limit: int | None = None,
    tiers: tuple[Tier, ...] = TIERS,
    **settings: Any,
) -> Harness:
    config = Settings(model_base_url="http://model.invalid/v1", tiers=tiers, **settings)
    sandbox = sandbox or MemorySandbox()
    events = EventList()
    bus = EventBus("m-loop", [events], Redactor())
    cancellation = Cancellation()
    # The protocols are what the loop depends on; these fakes must satisfy them.
    as_model: Model = model
    as_sandbox: Sandbox = sandbox
    loop = AgentLoop(
        settings=config,
        model=as_model,
        toolbox=Toolbox(
            as_sandbox, command_timeout_s=30, protected_paths=(".github/**",), test_command=None
        ),
        conversation=Conversation(system="sys", task="fix it", context_tokens=64_000),
        budget=Budget(config, clock) if clock else Budget(config),
        events=bus,
        cancellation=cancellation,
        step_limit=step_limit,
    )
    return Harness(model, sandbox, events, bus, cancellation, loop)


def run(command: str) -> Call:
    return ("run_command", {"command": command})


def finish(summary: str = "Fixed it.") -> Call:
    return ("finish", {"summary": summary})


# Tool errors come back to the model as observations.


def test_a_failing_file_tool_is_an_observation_and_the_loop_goes_on():
    model = ScriptedModel([[("read_file", {"path": "missing.py"})], [finish()]])
    h = make_loop(model)
    result = h.run()
    assert result == LoopResult("finished", "Fixed it.")
    assert h.statuses("read_file") == ["error"]
    assert "missing.py does not exist." in model.requests[1].last_tool_result()


@pytest.mark.parametrize(
    ("name", "arguments", "says"),
    [
        ("read_file", "{not json", "are not valid JSON"),
        ("read_file", '{"path": 3}', "Invalid arguments for read_file"),
        ("delete_everything", "{}", "Unknown tool 'delete_everything'"),
    ],
)
def test_an_invalid_tool_call_is_an_observation_and_a_failure(name, arguments, says):
    model = ScriptedModel([[], [finish()]])
    h = make_loop(model)
    bad = ToolCall("call-bad", name, arguments)
    # The first turn's reply is replaced by one with the malformed call, as an endpoint
    # would send it (ScriptedModel only writes valid JSON).
    original = model.complete

    def first_bad(tier: Tier, *args: Any, **kwargs: Any) -> ModelReply:
        reply = original(tier, *args, **kwargs)
        if len(model.requests) == 1:
            return ModelReply("", (bad,), reply.usage, reply.model, "tool_calls", 0.0)
        return reply

    model.complete = first_bad  # type: ignore[method-assign]
    result = h.run()
    assert result.outcome == "finished"
    assert says in model.requests[1].last_tool_result()
    assert h.loop.escalation.consecutive_failures == 1


def test_a_reply_without_a_tool_call_is_answered_and_counted_as_a_failure():
    model = ScriptedModel([[], [finish()]])
    h = make_loop(model)
    assert h.run().outcome == "finished"
    last = model.requests[1].messages[-1]
    assert last["role"] == "user" and "tool" in last["content"].lower()
    assert h.loop.escalation.consecutive_failures == 1


# A refused command is an observation, not a crash, and never reaches the sandbox.


def test_a_refused_command_is_an_observation_and_never_runs():
    model = ScriptedModel([[run("kill -9 1")], [run("echo ok")], [finish()]])
    h = make_loop(model)
    result = h.run()
    assert result.outcome == "finished"
    assert h.statuses("run_command") == ["refused", "ok"]
    assert model.requests[1].last_tool_result().startswith("Refused (kill)")
    assert h.sandbox.commands == ["echo ok"]


def test_a_write_to_a_protected_path_is_refused_and_nothing_is_written():
    write = ("write_file", {"path": ".github/workflows/ci.yml", "content": "on: push\n"})
    model = ScriptedModel([[write], [finish()]])
    h = make_loop(model)
    assert h.run().outcome == "finished"
    assert h.statuses("write_file") == ["refused"]
    assert "protected path" in model.requests[1].last_tool_result()
    assert h.sandbox.files == {}


def test_a_call_after_finish_in_the_same_reply_is_answered_and_never_run():
    """Pair mode reviews the change when the model finishes: a write after the finish, in
    the same reply, would reach verification unreviewed. A write before it still runs."""
    before = ("write_file", {"path": "fix.py", "content": "fixed = True\n"})
    after = ("write_file", {"path": "CHANGELOG.md", "content": "unreviewed\n"})
    model = ScriptedModel([[before, finish(), after, run("touch later")]])
    h = make_loop(model)
    assert h.run() == LoopResult("finished", "Fixed it.")
    assert h.sandbox.files == {"fix.py": b"fixed = True\n"}
    assert h.sandbox.commands == []
    assert h.statuses("write_file") == ["ok", "refused"]
    assert h.statuses("run_command") == ["refused"]
    results = h.loop.conversation.render()[-2:]
    assert [m["role"] for m in results] == ["tool", "tool"]
    assert all(m["content"].startswith("Not run: it came after finish") for m in results)


# Escalation: after `escalate_after` consecutive failures the next call goes a tier up.


def test_the_default_threshold_is_three_consecutive_failures():
    assert Settings().escalate_after == 3


def test_consecutive_failures_move_the_next_call_up_a_tier():
    sandbox = MemorySandbox(results={"false": (1, "")})
    model = ScriptedModel([[run("false")]] * 3 + [[finish()]])
    h = make_loop(model, sandbox)
    assert h.run().outcome == "finished"
    assert model.tiers == ["nano", "nano", "nano", "super"]
    (switch,) = h.events.of_type("escalation")
    assert (switch.fields["from_tier"], switch.fields["to_tier"]) == ("nano", "super")
    assert "3 consecutive failures on nano" in switch.fields["reason"]


def test_a_success_in_between_resets_the_count():
    sandbox = MemorySandbox(results={"false": (1, "")})
    script = [[run("false")], [run("false")], [run("true")], [run("false")], [run("false")]]
    model = ScriptedModel([*script, [finish()]])
    h = make_loop(model, sandbox)
    assert h.run().outcome == "finished"
    assert model.tiers == ["nano"] * 6
    assert h.events.of_type("escalation") == []


def test_the_threshold_comes_from_the_settings():
    sandbox = MemorySandbox(results={"false": (1, "")})
    model = ScriptedModel([[run("false")], [finish()]])
    h = make_loop(model, sandbox, escalate_after=1)
    h.run()
    assert model.tiers == ["nano", "super"]


def test_the_top_tier_is_kept():
    sandbox = MemorySandbox(results={"false": (1, "")})
    model = ScriptedModel([[run("false")]] * 4 + [[finish()]])
    h = make_loop(model, sandbox, escalate_after=1)
    h.run()
    assert model.tiers == ["nano", "super", "super", "super", "super"]
    assert len(h.events.of_type("escalation")) == 1


# A finish right after a failing test run is refused once.


def test_finish_after_a_failing_test_run_is_refused_once_then_taken():
    sandbox = MemorySandbox(results={"pytest": (1, PYTEST_FAILURE)})
    model = ScriptedModel([[run("pytest")], [finish("first")], [finish("second")]])
    h = make_loop(model, sandbox)
    result = h.run()
    assert result == LoopResult("finished", "second")
    assert h.statuses("finish") == ["refused", "ok"]
    refusal = model.requests[2].last_tool_result()
    assert "failed with exit code 1" in refusal
    assert "Failing: tests/test_total.py::test_total." in refusal


def test_finish_after_an_edit_since_the_failing_run_is_not_refused():
    sandbox = MemorySandbox(results={"pytest": (1, PYTEST_FAILURE)})
    write = ("write_file", {"path": "total.py", "content": "TOTAL = 4\n"})
    model = ScriptedModel([[run("pytest")], [write], [finish("edited")]])
    h = make_loop(model, sandbox)
    assert h.run() == LoopResult("finished", "edited")
    assert h.statuses("finish") == ["ok"]


def test_finish_after_a_passing_test_run_is_taken_at_once():
    sandbox = MemorySandbox(results={"pytest": (0, "1 passed\n")})
    model = ScriptedModel([[run("pytest")], [finish("green")]])
    h = make_loop(model, sandbox)
    assert h.run() == LoopResult("finished", "green")
    assert len(model.requests) == 2


def test_a_refused_finish_counts_as_a_failure_for_escalation():
    sandbox = MemorySandbox(results={"pytest": (1, PYTEST_FAILURE)})
    model = ScriptedModel([[run("pytest")], [finish()], [finish()]])
    h = make_loop(model, sandbox, escalate_after=2)
    h.run()
    # The failing run and the refused finish are two failures in a row.
    assert model.tiers == ["nano", "nano", "super"]


# Limits end the loop with a reason that names the cap.


def test_the_step_limit_ends_the_loop_with_its_reason():
    model = ScriptedModel([], then=[run("true")])
    h = make_loop(model, max_steps=3)
    result = h.run()
    assert result.outcome == "budget_exceeded"
    assert result.reason == "step limit reached (3, LOOPWRIGHT_MAX_STEPS)"
    assert len(model.requests) == 3
    # The loop leaves its stage with the reason it ended.
    last = h.events.of_type("stage")[-1]
    assert (last.stage, last.fields["status"]) == ("loop", "budget_exceeded")


def test_an_attempt_step_limit_ends_the_attempt_not_the_mission():
    model = ScriptedModel([], then=[run("true")])
    h = make_loop(model, step_limit=2)
    result = h.run()
    assert result.outcome == "attempt_exhausted"
    assert "attempt step limit reached (2" in result.reason
    assert len(model.requests) == 2


def test_the_cost_limit_ends_the_loop_with_its_reason():
    priced = (Tier("nano", "small-model", price_in=10_000.0), TIERS[1])
    model = ScriptedModel([], then=[run("true")])
    # Each call costs 100 prompt tokens at $10,000 a million: $1, so the second call is
    # the last one under the cap.
    h = make_loop(model, tiers=priced, max_cost_usd=1.5)
    result = h.run()
    assert result.outcome == "budget_exceeded"
    assert result.reason.startswith("cost limit reached ($2.0000 of $1.5")
    assert len(model.requests) == 2


def test_the_wall_clock_limit_ends_the_loop_on_the_budget_clock():
    now = [0.0]
    sandbox = MemorySandbox()
    # Each command takes 40 simulated seconds; the third check sees 120s >= 100s.
    sandbox.on_exec = lambda _command: now.__setitem__(0, now[0] + 40.0)
    model = ScriptedModel([], then=[run("make")])
    h = make_loop(model, sandbox, clock=lambda: now[0], wall_clock_s=100.0)
    result = h.run()
    assert result == LoopResult(
        "budget_exceeded", "", "wall-clock limit reached (100s, LOOPWRIGHT_WALL_CLOCK_S)"
    )
    assert len(model.requests) == 3
    assert sandbox.commands == ["make"] * 3


# Cancellation is noticed between steps and between tool calls.


def test_a_cancel_during_a_command_stops_the_loop_before_the_next_model_call():
    sandbox = MemorySandbox()
    model = ScriptedModel([], then=[run("make")])
    h = make_loop(model, sandbox)
    sandbox.on_exec = lambda _command: h.cancellation.cancel("Cancelled by @ann.")
    with pytest.raises(Cancelled, match=r"^Cancelled by @ann\.$"):
        h.run()
    assert len(model.requests) == 1
    assert sandbox.commands == ["make"]


def test_a_cancel_between_tool_calls_skips_the_rest_of_the_reply():
    sandbox = MemorySandbox()
    model = ScriptedModel([[run("first"), run("second")]])
    h = make_loop(model, sandbox)
    sandbox.on_exec = lambda _command: h.cancellation.cancel("stop")
    with pytest.raises(Cancelled):
        h.run()
    assert sandbox.commands == ["first"]
    assert [e.fields["tool"] for e in h.events.of_type("tool_call")] == ["run_command"]


def test_a_reply_that_arrives_after_a_cancel_is_recorded_but_not_acted_on():
    sandbox = MemorySandbox()
    model = ScriptedModel([[run("make")]])
    h = make_loop(model, sandbox)
    model.on_complete = lambda _n: h.cancellation.cancel("stop")
    with pytest.raises(Cancelled):
        h.run()
    assert len(h.events.of_type("model_call")) == 1
    assert h.events.of_type("tool_call") == []
    assert sandbox.commands == []


def test_a_loop_cancelled_before_it_starts_never_calls_the_model():
    model = ScriptedModel([[finish()]])
    h = make_loop(model)
    h.cancellation.cancel("early")
    with pytest.raises(Cancelled, match="early"):
        h.run()
    assert model.requests == []
