"""The model client against real HTTP endpoints: the scripted server, and small raw servers for
behaviour the script format does not express (no usage reported, errors inside a stream)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from loopwright.agent.model import ModelError, ModelRetry, OpenAIModel
from loopwright.agent.recording import Recorder
from loopwright.agent.replies import ModelReply, ToolCall, Usage
from loopwright.agent.scripted import ScriptedModelServer
from loopwright.agent.scripted_steps import ScriptStep, load_recording, load_script, parse_steps
from loopwright.agent.textcalls import recover_calls
from loopwright.agent.tools import TOOL_SPECS
from loopwright.config import ConfigError, Settings, Tier
from loopwright.events import ToolCallEvent, check_event

NANO = Tier("nano", "vendor/nano-9b")
SUPER = Tier("super", "vendor/super-49b")
MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You fix failing tests."},
    {"role": "user", "content": "tests/test_app.py::test_total fails"},
]
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name} tool",
            "parameters": {"type": "object", "properties": {}},
        },
    }
    for name in ("read_file", "run_command", "finish")
]
STALLED = (
    "model endpoint {url} stalled: nothing received for 0.5s; check the endpoint's health "
    "or raise LOOPWRIGHT_STALL_TIMEOUT_S"
)
"""The retry reason of an attempt the stall timeout (0.5 s in the harness) cut short."""


class Harness:
    """A scripted endpoint plus a client whose sleeps are recorded instead of slept."""

    def __init__(self) -> None:
        self.servers: list[ScriptedModelServer] = []
        self.models: list[OpenAIModel] = []
        self.waits: list[float] = []

    def serve(self, steps: list[dict[str, Any]], **kwargs: Any) -> ScriptedModelServer:
        return self.serve_script(parse_steps(steps), **kwargs)

    def serve_script(self, steps: list[ScriptStep], **kwargs: Any) -> ScriptedModelServer:
        server = ScriptedModelServer(steps, **kwargs).start()
        self.servers.append(server)
        return server

    def model(self, base_url: str, recorder: Recorder | None = None, **changes: Any) -> OpenAIModel:
        settings = Settings(
            model_base_url=base_url,
            model_api_key="sk-test-secret-key-123456",
            tiers=(NANO, SUPER),
            model_retries=2,
            stall_timeout_s=0.5,
            model_timeout_s=10.0,
        ).with_overrides(**changes)
        model = OpenAIModel(settings, recorder=recorder, sleep=self.waits.append)
        self.models.append(model)
        return model

    def close(self) -> None:
        for model in self.models:
            model.close()
        for server in self.servers:
            server.stop()


@pytest.fixture
def harness() -> Iterator[Harness]:
    h = Harness()
    yield h
    h.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_tool_calls_are_assembled_from_streamed_fragments(harness: Harness) -> None:
    server = harness.serve(
        [
            {
                "content": "Let me look at the test first.",
                "tool_calls": [
                    {"name": "read_file", "arguments": {"path": "tests/test_app.py", "start": 1}},
                    {"name": "run_command", "arguments": '{"command": "pytest -x'},
                ],
                "usage": {"prompt_tokens": 812, "completion_tokens": 41},
            }
        ]
    )
    reply = harness.model(server.base_url).complete(NANO, MESSAGES, TOOLS)

    assert reply.content == "Let me look at the test first."
    assert reply.tool_calls == (
        ToolCall("call_1", "read_file", '{"path": "tests/test_app.py", "start": 1}'),
        ToolCall("call_2", "run_command", '{"command": "pytest -x'),
    )
    assert reply.usage == Usage(812, 41)
    assert reply.finish_reason == "tool_calls"
    assert reply.model == NANO.model
    assert reply.duration_s > 0
    request = server.requests[0]
    assert request["model"] == NANO.model
    assert request["messages"] == MESSAGES
    assert request["tools"] == TOOLS
    assert request["tool_choice"] == "auto"
    assert request["stream"] is True
    assert request["stream_options"] == {"include_usage": True}


def test_each_tier_asks_for_its_own_model_and_no_tools_means_no_tool_fields(
    harness: Harness,
) -> None:
    server = harness.serve([{"content": "a"}, {"content": "b"}])
    model = harness.model(server.base_url)
    model.complete(NANO, MESSAGES, TOOLS)
    reply = model.complete(SUPER, MESSAGES, [])

    assert reply == ModelReply("b", (), reply.usage, SUPER.model, "stop", reply.duration_s)
    assert [r["model"] for r in server.requests] == [NANO.model, SUPER.model]
    assert "tools" not in server.requests[1] and "tool_choice" not in server.requests[1]


def test_429_waits_as_long_as_retry_after_says(harness: Harness) -> None:
    server = harness.serve(
        [{"status": 429, "retry_after": 2}, {"status": 429, "retry_after": 0.25}, {"content": "ok"}]
    )
    reply = harness.model(server.base_url).complete(NANO, MESSAGES, TOOLS)

    assert reply.content == "ok"
    assert harness.waits == [2.0, 0.25]
    assert len(server.requests) == 3


def test_429_without_retry_after_backs_off_with_jitter(harness: Harness) -> None:
    server = harness.serve([{"status": 429}, {"status": 429}, {"content": "ok"}])
    harness.model(server.base_url).complete(NANO, MESSAGES, TOOLS)

    first, second = harness.waits
    assert 0.5 <= first <= 1.0
    assert 1.0 <= second <= 2.0


def test_500_is_retried_then_succeeds(harness: Harness) -> None:
    server = harness.serve([{"status": 500}, {"status": 503}, {"content": "recovered"}])
    reply = harness.model(server.base_url).complete(NANO, MESSAGES, TOOLS)

    assert reply.content == "recovered"
    assert len(harness.waits) == 2
    assert len(server.requests) == 3


def test_persistent_500_becomes_a_model_error_after_the_retries(harness: Harness) -> None:
    server = harness.serve([{"status": 502, "repeat": True}])
    with pytest.raises(ModelError) as error:
        harness.model(server.base_url).complete(NANO, MESSAGES, TOOLS)

    assert "502" in str(error.value)
    assert "tried 3 times" in str(error.value)
    assert len(server.requests) == 3
    assert len(harness.waits) == 2


def test_401_raises_at_once_naming_the_api_key_setting(harness: Harness) -> None:
    server = harness.serve([{"content": "never"}], api_key="the-right-key")
    with pytest.raises(ModelError) as error:
        harness.model(server.base_url).complete(NANO, MESSAGES, TOOLS)

    message = str(error.value)
    assert "401" in message and "LOOPWRIGHT_MODEL_API_KEY" in message
    assert "sk-test-secret-key-123456" not in message
    assert "\n" not in message
    assert len(server.requests) == 1
    assert harness.waits == []


def test_unknown_model_id_names_the_tiers_setting(harness: Harness) -> None:
    server = harness.serve([{"content": "never"}], models=[SUPER.model])
    with pytest.raises(ModelError) as error:
        harness.model(server.base_url).complete(NANO, MESSAGES, TOOLS)

    message = str(error.value)
    assert NANO.model in message and "LOOPWRIGHT_MODEL_TIERS" in message
    assert len(server.requests) == 1


def test_400_is_not_retried(harness: Harness) -> None:
    server = harness.serve([{"status": 400}, {"content": "never"}])
    with pytest.raises(ModelError, match="rejected the request \\(400\\)"):
        harness.model(server.base_url).complete(NANO, MESSAGES, TOOLS)
    assert len(server.requests) == 1


def test_unreachable_endpoint_names_the_base_url_setting(harness: Harness) -> None:
    base_url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(ModelError) as error:
        harness.model(base_url, model_retries=1).complete(NANO, MESSAGES, TOOLS)

    message = str(error.value)
    assert base_url in message
    assert "unreachable" in message and "LOOPWRIGHT_MODEL_BASE_URL" in message
    # A refused connection fails at once: it is not the connect timeout that ran out.
    assert "no connection within" not in message
    assert len(harness.waits) == 1


def test_a_stalled_stream_is_abandoned_and_retried(harness: Harness) -> None:
    server = harness.serve([{"content": "slow", "stall_s": 5}, {"content": "fresh answer"}])
    retries: list[ModelRetry] = []
    reply = harness.model(server.base_url).complete(NANO, MESSAGES, TOOLS, on_retry=retries.append)

    # The stalled stream was abandoned by the stall timeout: had it been waited for, its
    # "slow" answer would have come back instead.
    assert reply.content == "fresh answer"
    assert len(server.requests) == 2
    assert [r.reason for r in retries] == [STALLED.format(url=server.base_url.rstrip("/"))]
    assert [round(w, 3) for w in harness.waits] == [retries[0].wait_s]


def test_an_endpoint_that_never_answers_is_abandoned_too(harness: Harness) -> None:
    server = harness.serve([{"delay_s": 5, "content": "late"}, {"content": "on time"}])
    retries: list[ModelRetry] = []
    reply = harness.model(server.base_url).complete(NANO, MESSAGES, TOOLS, on_retry=retries.append)

    assert reply.content == "on time"  # the late answer was not waited for
    assert len(server.requests) == 2
    assert [r.reason for r in retries] == [STALLED.format(url=server.base_url.rstrip("/"))]


def test_stalling_on_every_attempt_names_the_stall_setting(harness: Harness) -> None:
    server = harness.serve([{"content": "slow", "stall_s": 5, "repeat": True}])
    with pytest.raises(ModelError) as error:
        harness.model(server.base_url, model_retries=1).complete(NANO, MESSAGES, TOOLS)

    assert "stalled" in str(error.value) and "LOOPWRIGHT_STALL_TIMEOUT_S" in str(error.value)
    assert len(server.requests) == 2


def test_recording_replays_identically(harness: Harness, tmp_path: Path) -> None:
    steps: list[dict[str, Any]] = [
        {
            "content": "Plan: read, fix, test.",
            "tool_calls": [{"name": "read_file", "arguments": {"path": "a.py"}}],
        },
        {"status": 503},
        {"tool_calls": [{"name": "run_command", "arguments": '{"command": "pytest",}'}]},
        {
            "content": "Fixed.",
            "tool_calls": [{"name": "finish", "arguments": {"summary": "ünïcode ✓"}}],
            "finish_reason": "tool_calls",
        },
    ]
    path = tmp_path / "recordings" / "mission.json"
    original = harness.serve(steps)
    fingerprint = {"mode": "fix", "tree": "sha256:" + "0" * 64}
    recorder = Recorder(path, fingerprint)
    model = harness.model(original.base_url, recorder=recorder)

    first = model.complete(NANO, MESSAGES, TOOLS)
    assert len(load_script(path)) == 1, "each exchange is on disk as soon as it completes"
    recorded = [first, model.complete(SUPER, MESSAGES, TOOLS), model.complete(NANO, MESSAGES, [])]

    document = json.loads(path.read_text())
    assert document["version"] == 1
    assert load_recording(path)[1] == document["mission"] == fingerprint
    assert [e["tier"] for e in document["exchanges"]] == ["nano", "super", "nano"]
    assert [e["model"] for e in document["exchanges"]] == [NANO.model, SUPER.model, NANO.model]
    assert document["exchanges"][0]["response"]["tool_calls"][0]["arguments"] == {"path": "a.py"}
    assert list(tmp_path.joinpath("recordings").iterdir()) == [path], "no temporary files left"

    replay = harness.serve_script(load_script(path))
    replay_model = harness.model(replay.base_url)
    replayed = [
        replay_model.complete(NANO, MESSAGES, TOOLS),
        replay_model.complete(SUPER, MESSAGES, TOOLS),
        replay_model.complete(NANO, MESSAGES, []),
    ]
    strip = [(r.content, r.tool_calls, r.usage, r.model, r.finish_reason) for r in recorded]
    assert [(r.content, r.tool_calls, r.usage, r.model, r.finish_reason) for r in replayed] == strip


TRICKLE = ": keep-alive\n\n"
"""An answer that is only this SSE comment, repeated every 0.1 s until the client leaves."""


class RawEndpoint:
    """A real HTTP server answering the n-th POST with the n-th SSE body (the last repeats)."""

    def __init__(self, bodies: list[str], content_type: str = "text/event-stream") -> None:
        self.calls = 0
        self.stopping = threading.Event()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                endpoint.calls += 1
                body = bodies[min(endpoint.calls, len(bodies)) - 1]
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                try:
                    if body == TRICKLE:
                        while not endpoint.stopping.wait(0.1):
                            self.write_chunk(body.encode())
                    else:
                        self.write_chunk(body.encode())
                    self.wfile.write(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

            def write_chunk(self, data: bytes) -> None:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def stop(self) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def sse(*chunks: dict[str, Any]) -> str:
    base = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "raw-model"}
    return "".join(f"data: {json.dumps({**base, **c})}\n\n" for c in chunks) + "data: [DONE]\n\n"


def delta(finish: str | None = None, **fields: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": fields, "finish_reason": finish}]}


@pytest.fixture
def raw_endpoint() -> Iterator[Callable[..., RawEndpoint]]:
    endpoints: list[RawEndpoint] = []

    def start(bodies: list[str], content_type: str = "text/event-stream") -> RawEndpoint:
        endpoints.append(RawEndpoint(bodies, content_type))
        return endpoints[-1]

    yield start
    for endpoint in endpoints:
        endpoint.stop()


def test_missing_usage_is_estimated_from_sizes(
    harness: Harness, raw_endpoint: Callable[[list[str]], RawEndpoint]
) -> None:
    # Names repeated on every fragment and a missing final usage chunk, as some servers do.
    body = sse(
        delta(role="assistant", content="abcd" * 3),
        delta(
            tool_calls=[
                {"index": 0, "id": "t1", "function": {"name": "finish", "arguments": '{"a"'}}
            ]
        ),
        delta(tool_calls=[{"index": 0, "function": {"name": "finish", "arguments": ": 1}"}}]),
        delta("tool_calls"),
    )
    endpoint = raw_endpoint([body])
    reply = harness.model(endpoint.base_url).complete(NANO, MESSAGES, [])

    assert reply.tool_calls == (ToolCall("t1", "finish", '{"a": 1}'),)
    prompt_chars = len(json.dumps(MESSAGES))
    completion_chars = 12 + len("finish") + len('{"a": 1}')
    assert reply.usage == Usage(-(-prompt_chars // 4), -(-completion_chars // 4), estimated=True)
    assert reply.model == "raw-model"


def test_an_error_event_inside_the_stream_is_retried(
    harness: Harness, raw_endpoint: Callable[[list[str]], RawEndpoint]
) -> None:
    failing = 'data: {"error": {"message": "overloaded", "type": "server_error"}}\n\n'
    good = sse(delta(content="fine"), delta("stop"))
    endpoint = raw_endpoint([failing, good])
    reply = harness.model(endpoint.base_url).complete(NANO, MESSAGES, TOOLS)

    assert reply.content == "fine"
    assert endpoint.calls == 2
    assert len(harness.waits) == 1


def test_an_endpoint_trickling_keep_alives_forever_is_cut_at_model_timeout(
    harness: Harness, raw_endpoint: Callable[[list[str]], RawEndpoint]
) -> None:
    # Keep-alive comments defeat the read timeout, so only the whole-attempt budget stops this.
    endpoint = raw_endpoint([TRICKLE, sse(delta(content="finally"), delta("stop"))])
    model = harness.model(endpoint.base_url, model_timeout_s=1.0, stall_timeout_s=0.5)
    retries: list[ModelRetry] = []
    reply = model.complete(NANO, MESSAGES, TOOLS, on_retry=retries.append)

    assert reply.content == "finally"
    assert endpoint.calls == 2
    # The whole-attempt budget cut the first attempt, not the stall timeout.
    (retry,) = retries
    assert "was still streaming after 1s; raise LOOPWRIGHT_MODEL_TIMEOUT_S" in retry.reason


def test_trickling_on_every_attempt_names_the_model_timeout_setting(
    harness: Harness, raw_endpoint: Callable[[list[str]], RawEndpoint]
) -> None:
    endpoint = raw_endpoint([TRICKLE])
    model = harness.model(endpoint.base_url, model_timeout_s=0.6, model_retries=0)
    with pytest.raises(
        ModelError, match=r"still streaming after 0\.6s.*LOOPWRIGHT_MODEL_TIMEOUT_S.*tried 1 time\)"
    ):
        model.complete(NANO, MESSAGES, TOOLS)


def test_a_numeric_tool_call_id_becomes_a_string(
    harness: Harness, raw_endpoint: Callable[[list[str]], RawEndpoint]
) -> None:
    body = sse(
        delta(
            tool_calls=[
                {"index": 0, "id": 12345, "function": {"name": "finish", "arguments": "{}"}},
                {"index": 1, "id": 0, "function": {"name": "read_file", "arguments": "{}"}},
            ]
        ),
        delta("tool_calls"),
    )
    endpoint = raw_endpoint([body])
    reply = harness.model(endpoint.base_url).complete(NANO, MESSAGES, TOOLS)

    assert [call.id for call in reply.tool_calls] == ["12345", "0"]
    call = reply.tool_calls[0]
    event = check_event(
        {
            "type": "tool_call",
            "seq": 1,
            "ts": 0.0,
            "mission": "m",
            "stage": "loop",
            "id": call.id,
            "tool": call.name,
            "arguments": call.arguments,
            "args": {},
            "summary": "Finished",
        }
    )
    assert isinstance(event, ToolCallEvent) and event.id == "12345"


# -- tool calls written as text ------------------------------------------------------------
# Servers whose chat template does not match the model's habits pass its calls on as plain
# content; the client recovers those that name an offered tool with valid arguments.

PATH = {"path": "invoice/totals.py"}
READ = {"name": "read_file", "arguments": PATH}
TEST = {"name": "run_command", "arguments": {"command": "python -m pytest -q"}}


def text_reply(harness: Harness, content: str, **step: Any) -> ModelReply:
    server = harness.serve([{"content": content, **step}])
    return harness.model(server.base_url).complete(NANO, MESSAGES, TOOL_SPECS)


@pytest.mark.parametrize(
    "written",
    [
        pytest.param(f"```json\n{json.dumps(READ, indent=2)}\n```", id="json-fence"),
        pytest.param(f"```\n{json.dumps(READ)}\n```", id="bare-fence"),
        pytest.param(f"```json {json.dumps(READ)} ```", id="one-line-fence"),
        pytest.param(json.dumps(READ), id="bare-json"),
        pytest.param(f"<tool_call>\n{json.dumps(READ)}\n</tool_call>", id="hermes-tag"),
        pytest.param(f"<tool_call>\n{json.dumps(READ)}", id="hermes-tag-unclosed"),
        pytest.param(
            json.dumps(
                {
                    "type": "function",
                    "function": {**READ, "arguments": json.dumps(READ["arguments"])},
                }
            ),
            id="openai-shape-string-arguments",
        ),
        pytest.param(
            json.dumps({"name": "read_file", "parameters": READ["arguments"]}), id="parameters-key"
        ),
    ],
)
def test_a_call_written_in_the_content_is_recovered(harness: Harness, written: str) -> None:
    reply = text_reply(harness, f"The total is wrong; let me read the code.\n\n{written}\n")

    assert [(c.name, json.loads(c.arguments)) for c in reply.tool_calls] == [
        ("read_file", {"path": "invoice/totals.py"})
    ]
    assert reply.tool_calls[0].id.startswith("call_")
    assert reply.content == "The total is wrong; let me read the code."
    assert reply.tool_call_source == "content"


def test_two_calls_in_one_reply_are_kept_in_order(harness: Harness) -> None:
    content = (
        f"First the code:\n```json\n{json.dumps(READ)}\n```\n"
        f"then the tests:\n<tool_call>{json.dumps(TEST)}</tool_call>\nDone for now."
    )
    reply = text_reply(harness, content)

    assert [c.name for c in reply.tool_calls] == ["read_file", "run_command"]
    assert len({c.id for c in reply.tool_calls}) == 2
    assert reply.content == "First the code:\n\nthen the tests:\n\nDone for now."


def test_parallel_calls_in_one_block_are_all_recovered(harness: Harness) -> None:
    reply = text_reply(harness, f"```json\n{json.dumps([READ, TEST])}\n```")

    assert [c.name for c in reply.tool_calls] == ["read_file", "run_command"]
    assert reply.content == ""


@pytest.mark.parametrize(
    "call",
    [
        pytest.param({"name": "delete_repository", "arguments": {"path": "."}}, id="unknown-tool"),
        pytest.param({"name": "read_file", "arguments": {"path": 3}}, id="wrong-type"),
        pytest.param({"name": "read_file", "arguments": {}}, id="missing-required"),
        pytest.param(
            {"name": "read_file", "arguments": {"path": "a.py", "mode": "r"}}, id="unknown-argument"
        ),
        pytest.param({"name": "read_file", "arguments": "{not json"}, id="arguments-not-json"),
        pytest.param(
            {"name": "update_plan", "arguments": {"items": [{"step": "x", "status": "maybe"}]}},
            id="nested-enum",
        ),
    ],
)
def test_a_call_that_would_not_validate_stays_content(
    harness: Harness, call: dict[str, Any]
) -> None:
    content = f"I would run:\n```json\n{json.dumps(call)}\n```"
    reply = text_reply(harness, content)

    assert reply.tool_calls == ()
    assert reply.content == content
    assert reply.tool_call_source == "native"


def test_a_long_reply_full_of_brackets_is_searched_in_bounded_time(harness: Harness) -> None:
    noise = '{"a": [{ [ {"b": ' * 4_000
    content = f"{noise}\n{json.dumps(READ)}"
    reply = text_reply(harness, content)

    assert [c.name for c in reply.tool_calls] == ["read_file"]
    assert reply.content == noise.strip()
    # The search alone, in this thread's CPU time (a busy machine cannot fail it):
    # milliseconds here, where trying every bracket as the start of a value takes far longer.
    started = time.thread_time()
    recover_calls(content, TOOL_SPECS)
    assert time.thread_time() - started < 1


def test_a_fence_in_another_language_is_code_not_a_call(harness: Harness) -> None:
    content = f"Like this:\n```python\ncall = {json.dumps(READ)}\n```"
    reply = text_reply(harness, content)

    assert reply.tool_calls == ()
    assert reply.content == content


def test_plain_prose_with_braces_is_an_answer_without_a_tool_call(harness: Harness) -> None:
    content = 'The fix is to return {"total": 0} for an empty invoice, e.g. [1, 2] -> 3.'
    reply = text_reply(harness, content)

    assert reply.tool_calls == ()
    assert reply.content == content


def test_a_call_leaking_into_the_content_joins_the_native_ones(harness: Harness) -> None:
    reply = text_reply(
        harness,
        f"Reading.\n{json.dumps(TEST)}",
        tool_calls=[{"name": "read_file", "arguments": {"path": "a.py"}}],
    )

    assert [c.name for c in reply.tool_calls] == ["read_file", TEST["name"]]
    assert reply.tool_call_source == "native" and reply.recovered_calls == 1
    assert reply.content == "Reading."


def test_without_tools_offered_nothing_is_recovered(harness: Harness) -> None:
    server = harness.serve([{"content": json.dumps(READ)}])
    reply = harness.model(server.base_url).complete(NANO, MESSAGES, [])

    assert reply.tool_calls == ()
    assert reply.content == json.dumps(READ)


# -- what real servers send beside the answer ---------------------------------------------

FINISHED = {"name": "finish", "arguments": "{}"}


def test_a_server_that_does_not_stream_is_read_as_one_completion(
    harness: Harness, raw_endpoint: Callable[..., RawEndpoint]
) -> None:
    completion = {
        "id": "c1",
        "object": "chat.completion",
        "created": 0,
        "model": "raw-model",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": f"Reading.\n```json\n{json.dumps(READ)}\n```",
                    "reasoning_content": "The code is where the total is computed.",
                },
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 30, "completion_tokens": 12},
    }
    # A server may also send arguments as an object rather than JSON text, and an empty id.
    call = {
        "id": "",
        "type": "function",
        "function": {"name": "finish", "arguments": {"summary": "x"}},
    }
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    native = {**completion, "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
    bodies = [json.dumps(completion), json.dumps(native), "[1]"]
    endpoint = raw_endpoint(bodies, "application/json")
    model = harness.model(endpoint.base_url, model_retries=0)
    reply = model.complete(NANO, MESSAGES, TOOL_SPECS)

    assert reply.content == "Reading."
    assert [c.name for c in reply.tool_calls] == ["read_file"]
    assert reply.tool_call_source == "content"
    assert reply.usage == Usage(30, 12)
    assert reply.reasoning_tokens == -(-len("The code is where the total is computed.") // 4)
    second = model.complete(NANO, MESSAGES, TOOL_SPECS)
    assert [(c.name, c.arguments) for c in second.tool_calls] == [("finish", '{"summary": "x"}')]
    assert second.tool_calls[0].id.startswith("call_")
    with pytest.raises(ModelError, match="malformed"):
        model.complete(NANO, MESSAGES, TOOL_SPECS)


def test_empty_and_repeated_tool_call_ids_are_made_unique(
    harness: Harness, raw_endpoint: Callable[[list[str]], RawEndpoint]
) -> None:
    def call(index: int, call_id: str, name: str) -> dict[str, Any]:
        return {"index": index, "id": call_id, "function": {"name": name, "arguments": "{}"}}

    body = sse(
        delta(tool_calls=[call(0, "call_0", "read_file"), call(1, "call_0", "run_command")]),
        delta(tool_calls=[call(2, "", "finish"), call(3, "call_7", "read_file")]),
        delta("tool_calls"),
    )
    endpoint = raw_endpoint([body])
    earlier: list[dict[str, Any]] = [
        *MESSAGES,
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_7",
                    "type": "function",
                    "function": {"name": "finish", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_7", "content": "ok"},
    ]
    reply = harness.model(endpoint.base_url).complete(NANO, earlier, TOOLS)

    ids = [c.id for c in reply.tool_calls]
    assert ids[0] == "call_0"
    assert len(set(ids)) == 4 and "" not in ids and "call_7" not in ids
    assert [c.name for c in reply.tool_calls] == ["read_file", "run_command", "finish", "read_file"]


def test_reasoning_content_is_kept_out_of_the_answer_and_counted(
    harness: Harness, raw_endpoint: Callable[[list[str]], RawEndpoint]
) -> None:
    thought = f"Maybe I should call {json.dumps(READ)} first. " * 4
    body = sse(
        delta(role="assistant", reasoning_content=thought[:50]),
        delta(reasoning_content=thought[50:]),
        delta(content="I need to look at the tests."),
        delta("stop"),
        {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 90, "total_tokens": 99}},
    )
    endpoint = raw_endpoint([body])
    reply = harness.model(endpoint.base_url).complete(NANO, MESSAGES, TOOL_SPECS)

    assert reply.content == "I need to look at the tests."
    assert reply.tool_calls == (), "a call drafted while reasoning is not a call"
    assert reply.reasoning_tokens == -(-len(thought) // 4)
    assert reply.usage == Usage(9, 90)


def test_a_reasoning_token_count_the_endpoint_reports_is_used(
    harness: Harness, raw_endpoint: Callable[[list[str]], RawEndpoint]
) -> None:
    usage = {
        "prompt_tokens": 9,
        "completion_tokens": 300,
        "total_tokens": 309,
        "completion_tokens_details": {"reasoning_tokens": 280},
    }
    body = sse(delta(content="Done thinking."), delta("stop"), {"choices": [], "usage": usage})
    endpoint = raw_endpoint([body])
    reply = harness.model(endpoint.base_url).complete(NANO, MESSAGES, TOOL_SPECS)

    assert reply.reasoning_tokens == 280
    assert reply.usage == Usage(9, 300)


def test_think_tags_in_the_content_are_reasoning_too(harness: Harness) -> None:
    thought = f"<think>Should I run {json.dumps(TEST)}? No, read first.</think>"
    reply = text_reply(harness, f"{thought}\n\n```json\n{json.dumps(READ)}\n```")

    assert [c.name for c in reply.tool_calls] == ["read_file"]
    assert reply.content == ""
    assert reply.reasoning_tokens == -(-len(thought) // 4)


def test_a_reported_usage_is_not_marked_estimated(harness: Harness) -> None:
    reply = text_reply(harness, "ok", usage={"prompt_tokens": 5, "completion_tokens": 1})

    assert reply.usage == Usage(5, 1) and reply.usage.estimated is False


def test_missing_usage_with_calls_in_the_content_is_estimated(
    harness: Harness, raw_endpoint: Callable[[list[str]], RawEndpoint]
) -> None:
    written = f"```json\n{json.dumps(TEST)}\n```"
    endpoint = raw_endpoint([sse(delta(content=written), delta("stop"))])
    reply = harness.model(endpoint.base_url).complete(NANO, MESSAGES, TOOL_SPECS)

    assert [c.name for c in reply.tool_calls] == ["run_command"]
    assert reply.usage.estimated is True
    assert reply.usage.completion_tokens > 0
    assert reply.usage.prompt_tokens >= len(json.dumps(MESSAGES)) // 4


def test_cached_prompt_tokens_are_read_from_openai_usage_details(
    harness: Harness, raw_endpoint: Callable[[list[str]], RawEndpoint]
) -> None:
    usage = {
        "prompt_tokens": 1000,
        "completion_tokens": 10,
        "total_tokens": 1010,
        "prompt_tokens_details": {"cached_tokens": 960},
    }
    body = sse(delta(content="ok"), delta("stop"), {"choices": [], "usage": usage})
    reply = harness.model(raw_endpoint([body]).base_url).complete(NANO, MESSAGES, [])
    assert reply.usage == Usage(1000, 10, cached_tokens=960)


def test_cached_prompt_tokens_are_read_from_llama_cpp_timings(
    harness: Harness, raw_endpoint: Callable[[list[str]], RawEndpoint]
) -> None:
    # llama.cpp's server reports its prompt cache in `timings` beside the usage.
    final = {
        "choices": [],
        "usage": {"prompt_tokens": 1200, "completion_tokens": 30, "total_tokens": 1230},
        "timings": {"cache_n": 1150, "prompt_n": 50, "predicted_n": 30},
    }
    body = sse(delta(content="ok"), delta("stop"), final)
    reply = harness.model(raw_endpoint([body]).base_url).complete(NANO, MESSAGES, [])
    assert reply.usage.cached_tokens == 1150


def test_the_scripted_server_reports_the_prefix_a_cache_would_reuse(harness: Harness) -> None:
    server = harness.serve([{"content": "a"}, {"content": "b"}, {"content": "c"}])
    model = harness.model(server.base_url)
    first = model.complete(NANO, MESSAGES, [])
    longer = [*MESSAGES, {"role": "assistant", "content": "a"}, {"role": "user", "content": "go"}]
    second = model.complete(NANO, longer, [])
    changed = [{"role": "system", "content": "another system prompt"}, *longer[1:]]
    third = model.complete(NANO, changed, [])
    assert first.usage.cached_tokens == 0
    assert second.usage.cached_tokens == first.usage.prompt_tokens  # all of the first request
    assert third.usage.cached_tokens == 0  # the first message changed: nothing reused


def test_cached_tokens_are_priced_apart_when_a_price_is_set() -> None:
    settings = Settings.from_env({"LOOPWRIGHT_MODEL_PRICES": "nano=1/2/0.25"})
    nano = settings.tier("nano")
    assert nano.price_cached == 0.25
    # 600 uncached at $1, 400 cached at $0.25, 100 out at $2 (per million).
    assert nano.cost(1000, 100, cached_tokens=400) == pytest.approx((600 + 100 + 200) / 1e6)
    plain = Settings.from_env({"LOOPWRIGHT_MODEL_PRICES": "nano=1/2"}).tier("nano")
    assert plain.price_cached is None
    assert plain.cost(1000, 100, cached_tokens=400) == pytest.approx((1000 + 200) / 1e6)


@pytest.mark.parametrize("value", ["1/2/3/4", "1/x", "1/2/-1"])
def test_a_bad_price_names_the_setting_and_the_format(value: str) -> None:
    with pytest.raises(ConfigError, match=r"LOOPWRIGHT_MODEL_PRICES.*INPUT/OUTPUT\[/CACHED\]"):
        Settings.from_env({"LOOPWRIGHT_MODEL_PRICES": f"nano={value}"})
