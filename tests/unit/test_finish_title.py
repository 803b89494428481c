"""The `finish` tool's optional title: one line under 72 characters, or the model hears why."""

from __future__ import annotations

import json

import pytest

from loopwright.agent.tools import TOOL_SPECS


@pytest.mark.parametrize(
    ("title", "problem"),
    [
        ("x" * 72, "the title has 72 characters; keep it under 72"),
        ("Divide by 100\nand more", "the title must be one line"),
        ("   ", "the title is empty"),
    ],
)
def test_a_bad_title_goes_back_to_the_model(toolbox, title, problem):
    outcome = toolbox.run("finish", json.dumps({"summary": "s", "title": title}))
    assert outcome.status == "error" and outcome.invalid
    assert problem in outcome.observation
    assert outcome.finished is None and toolbox.title is None


def test_a_good_title_is_kept_and_is_optional(toolbox):
    outcome = toolbox.run("finish", '{"summary": "s", "title": "  Divide by 100 "}')
    assert outcome.finished == "s" and toolbox.title == "Divide by 100"
    toolbox.run("finish", '{"summary": "s"}')
    assert toolbox.title is None
    finish = next(t for t in TOOL_SPECS if t["function"]["name"] == "finish")
    assert "title" in finish["function"]["parameters"]["properties"]
    assert finish["function"]["parameters"]["required"] == ["summary"]
