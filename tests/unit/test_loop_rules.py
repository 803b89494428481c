"""The loop's rules for weak models, driven through the real client against the scripted
model server and a local sandbox: a finish after a failing test run is refused once, and
steps that only update the plan count as failures for escalation."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from loopwright.agent.budget import Budget
from loopwright.agent.context import Conversation
from loopwright.agent.failures import failing_tests
from loopwright.agent.loop import AgentLoop, LoopResult
from loopwright.agent.model import OpenAIModel
from loopwright.agent.scripted import ScriptedModelServer
from loopwright.agent.tools import Toolbox
from loopwright.config import SandboxLimits, Settings, Tier
from loopwright.events import Event, EventBus, check_event
from loopwright.missions.progress import ProgressPrinter
from loopwright.redaction import Redactor
from loopwright.sandbox.local import LocalProvider
from tests.conftest import step, tool

FAILING_TEST = (
    "import sys\nprint('FAILED tests/test_total.py::test_total - assert 3 == 4')\nsys.exit(1)\n"
)
Run = Callable[..., tuple[LoopResult, list[Event], ScriptedModelServer]]


@pytest.fixture
def run_loop(
    tmp_path: Path, scripted: Callable[[list[dict[str, Any]]], ScriptedModelServer]
) -> Iterator[Run]:
    opened: list[Any] = []

    def run(
        steps: list[dict[str, Any]], **overrides: Any
    ) -> tuple[LoopResult, list[Event], ScriptedModelServer]:
        tree = tmp_path / f"repo-{len(opened)}"
        tree.mkdir()
        (tree / "check.py").write_text(FAILING_TEST)
        provider = LocalProvider(SandboxLimits(), base_dir=tmp_path / "sandboxes")
        sandbox = provider.create(f"m-rules-{len(opened)}", tree, network=False)
        opened.append(sandbox)
        server = scripted(steps)
        settings = Settings(
            model_base_url=server.base_url,
            tiers=(Tier("nano", "scripted"), Tier("super", "scripted")),
            **{"model_retries": 0, **overrides},
        )
        events: list[Event] = []
        bus = EventBus("m-rules", [events.append], Redactor())
        model = OpenAIModel(settings)
        try:
            result = AgentLoop(
                settings=settings,
                model=model,
                toolbox=Toolbox(
                    sandbox,
                    command_timeout_s=10,
                    protected_paths=(),
                    test_command="python3 check.py",
                ),
                conversation=Conversation(system="sys", task="fix it", context_tokens=64_000),
                budget=Budget(settings),
                events=bus,
            ).run()
        finally:
            model.close()
        return result, events, server

    yield run
    for sandbox in opened:
        sandbox.close()


def _results(events: list[Event], name: str) -> list[Event]:
    return [e for e in events if e.type == "tool_result" and e.fields["tool"] == name]


def _tool_message(request: dict[str, Any]) -> str:
    return str([m for m in request["messages"] if m["role"] == "tool"][-1]["content"])


def test_finish_after_a_failing_test_run_is_refused_once_with_the_failures(run_loop: Run):
    result, events, server = run_loop(
        [
            step(tool("run_command", command="python3 check.py")),
            step(tool("finish", summary="Fixed the total.")),
            step(tool("finish", summary="Fixed the total, really.")),
        ]
    )
    finishes = _results(events, "finish")
    assert [e.fields["status"] for e in finishes] == ["refused", "ok"]
    refusal = _tool_message(server.requests[2])
    assert "failed with exit code 1" in refusal
    assert "tests/test_total.py::test_total" in refusal
    # The second finish is taken at its word: verification, not the loop, decides.
    assert result.outcome == "finished" and result.summary == "Fixed the total, really."


def test_finish_after_a_passing_run_is_accepted_at_once(run_loop: Run):
    result, events, _ = run_loop(
        [
            step(tool("write_file", path="check.py", content="print('1 passed')\n")),
            step(tool("run_command", command="python3 check.py")),
            step(tool("finish", summary="Made it pass.")),
        ]
    )
    assert [e.fields["status"] for e in _results(events, "finish")] == ["ok"]
    assert result.summary == "Made it pass."


def test_finish_without_running_tests_in_the_loop_goes_to_verification(run_loop: Run):
    result, events, _ = run_loop([step(tool("finish", summary="Nothing to run."))])
    assert [e.fields["status"] for e in _results(events, "finish")] == ["ok"]
    assert result.outcome == "finished"


def test_plan_only_steps_escalate_and_tell_the_model_to_act(run_loop: Run):
    plan = tool("update_plan", items=[{"step": "think", "status": "in_progress"}])
    result, events, server = run_loop(
        [step(plan), step(plan), step(plan), step(tool("finish", summary="done"))],
        plan_only_steps=2,
        escalate_after=2,
    )
    escalations = [e for e in events if e.type == "escalation"]
    # Step 1 is a plan; steps 2 and 3 are plan-only failures, the second moves nano to super.
    assert [(e.fields["from_tier"], e.fields["to_tier"]) for e in escalations] == [
        ("nano", "super")
    ]
    assert escalations[0].fields["reason"] == (
        "2 consecutive failures on nano (last: 3 plan-only steps in a row)"
    )
    nudges = [
        m["content"]
        for m in server.requests[3]["messages"]
        if m["role"] == "user" and "only updated the plan" in str(m["content"])
    ]
    assert nudges, json.dumps(server.requests[3]["messages"])[:2000]
    assert [e.fields["tier"] for e in events if e.type == "model_call"][-1] == "super"
    assert result.outcome == "finished"


def test_a_plan_between_actions_resets_the_count(run_loop: Run):
    plan = tool("update_plan", items=[{"step": "think", "status": "in_progress"}])
    read = tool("read_file", path="check.py")
    _, events, _ = run_loop(
        [
            step(plan),
            step(read),
            step(plan),
            step(read),
            step(plan),
            step(tool("finish", summary="ok")),
        ],
        plan_only_steps=2,
        escalate_after=1,
    )
    assert [e for e in events if e.type == "escalation"] == []


@pytest.mark.parametrize(
    ("output", "names"),
    [
        (
            "..F\nFAILED tests/test_a.py::test_x - assert 1 == 2\nERROR tests/test_b.py::test_y\n",
            ["tests/test_a.py::test_x", "tests/test_b.py::test_y"],
        ),
        ("TAP version 13\nok 1 - adds\nnot ok 2 - totals add up # time=1ms\n", ["totals add up"]),
        ("  \u2715 adds numbers (5 ms)\n  \u2713 subtracts\n", ["adds numbers"]),
        ("--- FAIL: TestSum (0.00s)\nFAIL\n", ["TestSum"]),
        ("all good\n", []),
    ],
)
def test_failing_tests_are_read_from_each_runner(output: str, names: list[str]):
    assert failing_tests(output) == names


def test_a_retried_model_call_is_an_event_and_a_progress_line(run_loop: Run):
    _, events, _ = run_loop(
        [{"status": 503, "retry_after": 0}, step(tool("finish", summary="done"))],
        model_retries=2,
    )
    (retry,) = [e for e in events if e.type == "model_retry"]
    assert retry.fields["attempt"] == 1 and retry.fields["attempts"] == 3
    assert "503" in retry.fields["reason"] and retry.fields["wait_s"] == 0
    assert retry.fields["tier"] == "nano"
    check_event(retry.to_dict())
    # The retry comes before the model_call it delayed.
    kinds = [e.type for e in events]
    assert kinds.index("model_retry") < kinds.index("model_call")
    line = ProgressPrinter(color=False).render(retry)
    assert line is not None and "attempt 1 of 3" in line and "503" in line


def test_every_request_extends_the_previous_one_and_the_reuse_is_reported(run_loop: Run):
    plan = tool("update_plan", items=[{"step": "fix", "status": "in_progress"}])
    _, events, server = run_loop(
        [
            step(plan),
            step(tool("read_file", path="check.py")),
            step(tool("run_command", command="python3 check.py")),
            step(tool("write_file", path="check.py", content="print('ok')\n")),
            step(tool("run_command", command="python3 check.py")),
            step(tool("finish", summary="done")),
        ]
    )
    bodies = [r["messages"] for r in server.requests]
    for before, after in itertools.pairwise(bodies):
        assert after[: len(before)] == before
    calls = [e.fields for e in events if e.type == "model_call"]
    assert calls[0]["cached_tokens"] == 0
    for previous, call in itertools.pairwise(calls):
        # The whole previous request came from the (simulated) cache: 100% prefix reuse.
        assert call["cached_tokens"] == previous["prompt_tokens"], call
    assert all(check_event(e.to_dict()) for e in events)


def test_finish_after_an_edit_that_followed_the_failing_run_goes_to_verification(run_loop: Run):
    _, events, _ = run_loop(
        [
            step(tool("run_command", command="python3 check.py")),
            step(tool("write_file", path="check.py", content="print('fixed')\n")),
            step(tool("finish", summary="Fixed it without re-running.")),
        ]
    )
    assert [e.fields["status"] for e in _results(events, "finish")] == ["ok"]
