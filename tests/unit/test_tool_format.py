"""`tool_format=json` for servers without tool support, and calls that leak into the text
next to native ones, against the scripted OpenAI-compatible server over HTTP."""

from __future__ import annotations

import json
from typing import Any

from loopwright.agent.json_tools import json_tool_messages
from loopwright.agent.model import OpenAIModel
from loopwright.agent.scripted import ScriptedModelServer
from loopwright.agent.scripted_steps import parse_steps
from loopwright.agent.tools import TOOL_SPECS
from loopwright.config import Settings, Tier

MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You fix failing tests."},
    {"role": "user", "content": "tests/test_calc.py fails"},
]


def model_for(server: ScriptedModelServer) -> OpenAIModel:
    return OpenAIModel(Settings(model_base_url=server.base_url, model_retries=0))


def test_json_format_describes_the_tools_and_reads_one_object() -> None:
    reply_text = '{"name": "read_file", "arguments": {"path": "calc.py"}}'
    with ScriptedModelServer(parse_steps([{"content": reply_text}])) as server:
        with model_for(server) as model:
            reply = model.complete(Tier("local", "q", tool_format="json"), MESSAGES, TOOL_SPECS)
        sent = server.requests[0]
    assert "tools" not in sent and "tool_choice" not in sent
    assert sent["messages"][0]["role"] == "system"
    assert '"name": "edit_file"' in sent["messages"][0]["content"]
    assert [(c.name, json.loads(c.arguments)) for c in reply.tool_calls] == [
        ("read_file", {"path": "calc.py"})
    ]
    assert reply.tool_call_source == "content" and reply.recovered_calls == 1


def test_json_format_takes_only_the_first_object() -> None:
    text = (
        '{"name": "read_file", "arguments": {"path": "a.py"}}\n'
        '{"name": "read_file", "arguments": {"path": "b.py"}}'
    )
    server = ScriptedModelServer(parse_steps([{"content": text}]))
    with server, model_for(server) as model:
        reply = model.complete(Tier("local", "q", tool_format="json"), MESSAGES, TOOL_SPECS)
    assert [json.loads(c.arguments)["path"] for c in reply.tool_calls] == ["a.py"]


def test_json_history_renders_calls_and_results_as_text_and_only_grows() -> None:
    history = [
        *MESSAGES,
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "calc.py"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "def add(a, b): ..."},
    ]
    first = json_tool_messages(history[:2], TOOL_SPECS)
    later = json_tool_messages(history, TOOL_SPECS)
    assert later[: len(first)] == first
    assert later[2] == {
        "role": "assistant",
        "content": '{"name": "read_file", "arguments": {"path": "calc.py"}}',
    }
    assert later[3]["role"] == "user" and "def add" in later[3]["content"]


def test_calls_leaking_next_to_native_ones_join_without_repeats() -> None:
    leaked = (
        "Reading it, then running the tests.\n"
        '```json\n{"name": "read_file", "arguments": {"path": "calc.py"}}\n```\n'
        '```json\n{"name": "run_command", "arguments": {"command": "python -m pytest -q"}}\n```'
    )
    step = {
        "content": leaked,
        "tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}],
    }
    with ScriptedModelServer(parse_steps([step])) as server:
        with model_for(server) as model:
            reply = model.complete(Tier("nano", "m"), MESSAGES, TOOL_SPECS)
        assert "tools" in server.requests[0]
    assert [c.name for c in reply.tool_calls] == ["read_file", "run_command"]
    assert len({c.id for c in reply.tool_calls}) == 2
    assert reply.tool_call_source == "native" and reply.recovered_calls == 1
    assert reply.content == "Reading it, then running the tests."


def test_a_call_cut_off_mid_arguments_is_sent_back_as_valid_json() -> None:
    cut = '{"items": [{"step": "read the tests", "status": "pend'
    history = [
        *MESSAGES,
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "update_plan", "arguments": cut},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "error: arguments do not parse"},
    ]
    with ScriptedModelServer(parse_steps([{"content": "ok"}])) as server:
        with model_for(server) as model:
            model.complete(Tier("nano", "m"), history, TOOL_SPECS)
        sent = server.requests[0]["messages"][2]["tool_calls"][0]["function"]["arguments"]
    # llama.cpp re-parses earlier calls and answers 500 to arguments that are not JSON.
    assert json.loads(sent) == {"unparsed_arguments": cut}
    assert history[2]["tool_calls"][0]["function"]["arguments"] == cut
