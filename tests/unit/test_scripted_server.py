"""The scripted model endpoint, driven over real HTTP by urllib and by the openai client."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from loopwright.agent.scripted import EXHAUSTED_CONTENT, ScriptedModelServer
from loopwright.agent.scripted_steps import ScriptStep, ScriptToolCall, load_script, parse_steps

USER = {"role": "user", "content": "fix the failing test"}
ServerFactory = Callable[..., ScriptedModelServer]


@pytest.fixture
def serve() -> Iterator[ServerFactory]:
    servers: list[ScriptedModelServer] = []

    def start(steps: list[dict[str, Any]], **kwargs: Any) -> ScriptedModelServer:
        server = ScriptedModelServer(parse_steps(steps), **kwargs).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def post(
    server: ScriptedModelServer, body: Any, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(
        f"{server.base_url}/chat/completions",
        data=data,
        headers={"Content-Type": "application/json", **(headers or {})},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def sse_events(raw: bytes) -> list[str]:
    return [
        line.removeprefix("data: ")
        for line in raw.decode().split("\n\n")
        if line.startswith("data: ")
    ]


def test_stream_splits_tool_call_arguments_into_fragments(serve: ServerFactory) -> None:
    server = serve(
        [
            {
                "content": "Reading it.",
                "tool_calls": [{"name": "read_file", "arguments": {"path": "src/app.py"}}],
            }
        ]
    )
    body = {
        "model": "m",
        "messages": [USER],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    status, headers, raw = post(server, body)

    assert status == 200
    assert headers["Content-Type"].startswith("text/event-stream")
    events = sse_events(raw)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == "m" for c in chunks)
    call_deltas = [
        tc
        for c in chunks
        for choice in c["choices"]
        for tc in choice["delta"].get("tool_calls", [])
    ]
    assert call_deltas[0]["id"] == "call_1"
    assert call_deltas[0]["function"]["name"] == "read_file"
    fragments = [d["function"]["arguments"] for d in call_deltas if d["function"].get("arguments")]
    assert len(fragments) > 1
    assert "".join(fragments) == '{"path": "src/app.py"}'
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["prompt_tokens"] == -(-len(json.dumps([USER])) // 4)


def test_stream_without_include_usage_sends_no_usage_chunk(serve: ServerFactory) -> None:
    server = serve([{"content": "done"}])
    _, _, raw = post(server, {"model": "m", "messages": [USER], "stream": True})
    chunks = [json.loads(e) for e in sse_events(raw)[:-1]]
    assert all("usage" not in c for c in chunks)
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks) == "done"


def test_non_streaming_completion_through_openai_client(serve: ServerFactory) -> None:
    server = serve(
        [
            {
                "tool_calls": [{"name": "run_command", "arguments": '{"cmd": "pytest'}],
                "usage": {"prompt_tokens": 120, "completion_tokens": 7},
            }
        ]
    )
    with openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0) as client:
        completion = client.chat.completions.create(model="nano-model", messages=[USER])  # type: ignore[list-item]

    message = completion.choices[0].message
    assert completion.object == "chat.completion"
    assert message.tool_calls is not None
    call = message.tool_calls[0]
    assert (call.id, call.function.name, call.function.arguments) == (  # type: ignore[union-attr]
        "call_1",
        "run_command",
        '{"cmd": "pytest',
    )
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (120, 7)


def test_steps_are_consumed_in_order_then_the_script_says_it_is_exhausted(
    serve: ServerFactory,
) -> None:
    server = serve([{"content": "one"}, {"content": "two"}])
    replies = []
    with openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0) as client:
        for model in ("nano-model", "super-model", "ultra-model"):
            completion = client.chat.completions.create(model=model, messages=[USER])  # type: ignore[list-item]
            replies.append(completion.choices[0].message)

    assert [r.content for r in replies] == ["one", "two", EXHAUSTED_CONTENT]
    assert replies[2].tool_calls is None
    assert [r["model"] for r in server.requests] == ["nano-model", "super-model", "ultra-model"]
    assert server.steps_used == 2


def test_repeat_answers_every_later_request_with_the_last_step(serve: ServerFactory) -> None:
    server = serve([{"content": "first"}, {"content": "again", "repeat": True}])
    contents = []
    for _ in range(4):
        _, _, raw = post(server, {"model": "m", "messages": [USER]})
        contents.append(json.loads(raw)["choices"][0]["message"]["content"])
    assert contents == ["first", "again", "again", "again"]


def test_status_step_answers_with_an_openai_style_error(serve: ServerFactory) -> None:
    server = serve([{"status": 429, "retry_after": 3}, {"status": 503}, {"content": "ok"}])
    status, headers, raw = post(server, {"model": "m", "messages": [USER]})
    assert status == 429
    assert headers["Retry-After"] == "3"
    assert json.loads(raw)["error"]["type"] == "rate_limit_error"
    assert post(server, {"model": "m", "messages": [USER]})[0] == 503
    assert post(server, {"model": "m", "messages": [USER]})[0] == 200


ASSISTANT_CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    ],
}


@pytest.mark.parametrize(
    ("body", "param"),
    [
        pytest.param({"messages": [USER]}, "model", id="missing-model"),
        pytest.param({"model": "m"}, "messages", id="missing-messages"),
        pytest.param({"model": "m", "messages": []}, "messages", id="empty-messages"),
        pytest.param(
            {"model": "m", "messages": [{"content": "hi"}]}, "messages[0].role", id="no-role"
        ),
        pytest.param(
            {
                "model": "m",
                "messages": [USER, {"role": "tool", "tool_call_id": "call_9", "content": "x"}],
            },
            "messages[1].tool_call_id",
            id="tool-message-without-matching-call",
        ),
        pytest.param(
            {
                "model": "m",
                "messages": [
                    USER,
                    {"role": "tool", "tool_call_id": "call_1", "content": "x"},
                    ASSISTANT_CALL,
                ],
            },
            "messages[1].tool_call_id",
            id="tool-message-before-its-call",
        ),
        pytest.param(
            {"model": "m", "messages": [USER], "temprature": 0.2}, "temprature", id="unknown-field"
        ),
        pytest.param(
            {"model": "m", "messages": [USER], "stream_options": {"include_usage": True}},
            "stream_options",
            id="stream-options-without-stream",
        ),
        pytest.param({"model": "m", "messages": [USER], "tools": []}, "tools", id="empty-tools"),
        pytest.param(
            {"model": "m", "messages": [{**ASSISTANT_CALL, "tool_calls": [{"id": "c"}]}]},
            "messages[0].tool_calls[0]",
            id="malformed-assistant-tool-call",
        ),
    ],
)
def test_malformed_requests_get_400(serve: ServerFactory, body: dict[str, Any], param: str) -> None:
    server = serve([{"content": "never sent"}])
    status, _, raw = post(server, body)
    assert status == 400
    error = json.loads(raw)["error"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert error["message"]
    assert server.steps_used == 0
    assert server.requests == [body]


def test_invalid_json_body_gets_400(serve: ServerFactory) -> None:
    server = serve([])
    status, _, raw = post(server, b"{not json")
    assert status == 400
    assert "not valid JSON" in json.loads(raw)["error"]["message"]


def test_tool_message_answering_a_preceding_call_is_accepted(serve: ServerFactory) -> None:
    server = serve([{"content": "thanks"}])
    tool_reply = {"role": "tool", "tool_call_id": "call_1", "content": "file text"}
    status, _, _ = post(server, {"model": "m", "messages": [USER, ASSISTANT_CALL, tool_reply]})
    assert status == 200


def test_api_key_and_model_list_are_enforced_when_given(serve: ServerFactory) -> None:
    server = serve([{"content": "ok"}], api_key="right-key", models=["nano-model"])
    body = {"model": "nano-model", "messages": [USER]}
    assert post(server, body, {"Authorization": "Bearer wrong"})[0] == 401
    status, _, raw = post(server, {**body, "model": "ghost"}, {"Authorization": "Bearer right-key"})
    assert status == 404
    assert json.loads(raw)["error"]["code"] == "model_not_found"
    assert post(server, body, {"Authorization": "Bearer right-key"})[0] == 200


def test_models_endpoint_and_unknown_paths(serve: ServerFactory) -> None:
    server = serve([], models=["a", "b"])
    with urllib.request.urlopen(f"{server.base_url}/models", timeout=5) as response:
        assert [m["id"] for m in json.load(response)["data"]] == ["a", "b"]
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"{server.base_url}/completions", timeout=5)
    assert missing.value.code == 404


def test_load_script_reads_steps_and_recordings(tmp_path: Path) -> None:
    steps = [{"content": "a", "tool_calls": [{"name": "finish", "arguments": {"summary": "s"}}]}]
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps(steps))
    recording = tmp_path / "recording.json"
    exchange = {"tier": "nano", "model": "m", "response": steps[0]}
    recording.write_text(json.dumps({"version": 1, "exchanges": [exchange]}))

    expected = [ScriptStep(content="a", tool_calls=[ScriptToolCall("finish", '{"summary": "s"}')])]
    assert load_script(plain) == expected
    assert load_script(recording) == expected


@pytest.mark.parametrize(
    ("document", "message"),
    [
        pytest.param("{oops", "not valid JSON", id="not-json"),
        pytest.param('"text"', "a JSON list of steps", id="wrong-top-level"),
        pytest.param('[{"content": "ok"}, 5]', "step 1: expected an object", id="step-not-object"),
        pytest.param('[{"contnet": "typo"}]', "step 0: unknown field", id="unknown-step-field"),
        pytest.param(
            '[{"tool_calls": [{"arguments": {}}]}]',
            "step 0: tool_calls[0]: 'name'",
            id="call-without-name",
        ),
        pytest.param('[{}, {"status": 200}]', "step 1: 'status'", id="status-not-an-error"),
        pytest.param('[{"stall_s": -1}]', "step 0: 'stall_s'", id="negative-stall"),
        pytest.param('[{"usage": {"prompt_tokens": "many"}}]', "step 0: 'usage'", id="bad-usage"),
        pytest.param(
            '[{"repeat": true}, {}]', "step 0: 'repeat' is only allowed", id="repeat-not-last"
        ),
        pytest.param('{"version": 2, "exchanges": []}', "version 2", id="future-recording"),
        pytest.param(
            '{"version": 1, "exchanges": [{"tier": "nano"}]}',
            "step 0: exchange has no 'response'",
            id="exchange-without-response",
        ),
    ],
)
def test_load_script_rejects_malformed_files(tmp_path: Path, document: str, message: str) -> None:
    path = tmp_path / "script.json"
    path.write_text(document)
    with pytest.raises(ValueError, match=r"script\.json") as error:
        load_script(path)
    assert message in str(error.value)


def test_load_script_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot read script"):
        load_script(tmp_path / "absent.json")


def test_runs_standalone_and_prints_its_base_url(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"content": "from the command line"}]))
    process = subprocess.Popen(
        [sys.executable, "-m", "loopwright.agent.scripted", str(script), "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        base_url = process.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        with openai.OpenAI(base_url=base_url, api_key="k", max_retries=0) as client:
            completion = client.chat.completions.create(model="m", messages=[USER])  # type: ignore[list-item]
        assert completion.choices[0].message.content == "from the command line"
    finally:
        process.terminate()
        process.wait(timeout=5)


def test_per_conversation_each_conversation_gets_the_script_from_its_own_turn(serve):
    server = serve([{"content": "one"}, {"content": "two"}, {"content": "three"}],
                   per_conversation=True)  # fmt: skip

    def ask(history: list[dict[str, Any]]) -> str:
        status, _, raw = post(server, {"model": "m", "messages": [USER, *history]})
        assert status == 200
        return str(json.loads(raw)["choices"][0]["message"]["content"])

    a1 = ask([])
    b1 = ask([])  # a second mission starts while the first is mid-script
    a2 = ask([{"role": "assistant", "content": a1}, {"role": "user", "content": "go on"}])
    b2 = ask([{"role": "assistant", "content": b1}, {"role": "user", "content": "go on"}])
    again = ask([{"role": "assistant", "content": a1}, {"role": "user", "content": "go on"}])
    assert (a1, b1, a2, b2, again) == ("one", "one", "two", "two", "two")
    done = [{"role": "assistant", "content": c} for c in ("one", "two", "three")]
    assert ask(done) == EXHAUSTED_CONTENT
