"""Tool-call arguments that are JSON Python will not decode become errors the model hears."""

from __future__ import annotations

import pytest

from loopwright.agent.call_summary import describe_call

UNDECODABLE = {
    "huge-integer": ('{"path": "a.py", "start_line": ' + "9" * 5000 + "}", "digits"),
    "deep-nesting": ('{"path": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
}


@pytest.mark.parametrize(("raw", "problem"), UNDECODABLE.values(), ids=UNDECODABLE)
def test_undecodable_arguments_are_described_not_raised(raw, problem):
    described = describe_call("read_file", raw)
    assert described.args == {}
    assert described.summary == "Called read_file with arguments that are not JSON"
    assert described.args_error and problem in described.args_error


@pytest.mark.parametrize(("raw", "problem"), UNDECODABLE.values(), ids=UNDECODABLE)
def test_undecodable_arguments_go_back_to_the_model(toolbox, raw, problem):
    outcome = toolbox.run("read_file", raw)
    assert outcome.status == "error" and outcome.invalid
    assert "not valid JSON" in outcome.observation and problem in outcome.observation
    again = toolbox.run("read_file", '{"path": "missing.py"}')
    assert again.status in {"error", "refused"} and not again.invalid
