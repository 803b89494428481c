"""A scripted model endpoint: a real HTTP server speaking OpenAI chat completions that answers
each request with the next step of a script, for tests, demos and `loopwright fix --replay`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

EXHAUSTED_CONTENT = "The script has no more steps."
DEFAULT_MODEL = "scripted"

# Top-level chat-completions fields the OpenAI API accepts; anything else is rejected with 400,
# as the real endpoint does, so a client that sends a typo fails here and not in production.
KNOWN_FIELDS = frozenset(
    {
        "model", "messages", "tools", "tool_choice", "stream", "stream_options", "temperature",
        "top_p", "n", "stop", "max_tokens", "max_completion_tokens", "presence_penalty",
        "frequency_penalty", "logit_bias", "logprobs", "top_logprobs", "user", "seed",
        "response_format", "parallel_tool_calls", "functions", "function_call", "service_tier",
        "store", "metadata", "modalities", "audio", "prediction", "reasoning_effort",
        "web_search_options", "verbosity", "prompt_cache_key", "safety_identifier",
    }
)  # fmt: skip
ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
STEP_FIELDS = frozenset(
    {"content", "tool_calls", "usage", "status", "retry_after", "stall_s", "delay_s", "repeat",
     "finish_reason"}
)  # fmt: skip
FRAGMENTS = 3
"""Pieces each content string and each tool call's arguments are split into when streaming."""


@dataclass(frozen=True)
class ScriptToolCall:
    """A tool call the scripted model makes; `arguments` is the raw JSON text it sends."""

    name: str
    arguments: str
    id: str | None = None
    """Sent as the call id when given; otherwise the server numbers calls `call_1`, `call_2`…"""


@dataclass
class ScriptStep:
    """One scripted answer: an assistant message, or an HTTP error, with optional timing faults."""

    content: str = ""
    tool_calls: list[ScriptToolCall] = field(default_factory=list)
    usage: dict[str, int] | None = None
    """`prompt_tokens` / `completion_tokens`; a missing one is computed from the sizes."""
    status: int | None = None
    """Answer with this HTTP error status instead of a message."""
    retry_after: float | None = None
    """Seconds sent in the `Retry-After` header (with `status`)."""
    stall_s: float = 0.0
    """Send the first chunk, then nothing for this long, then the rest."""
    delay_s: float = 0.0
    """Wait this long before answering at all."""
    repeat: bool = False
    """Answer every later request with this step too (only allowed on the last step)."""
    finish_reason: str | None = None
    """Defaults to `tool_calls` when the step calls tools, else `stop`."""

    @classmethod
    def from_dict(cls, data: Any, index: int = 0) -> ScriptStep:
        """Parse one step; a ValueError names the step index and the field at fault."""

        def bad(what: str) -> ValueError:
            return ValueError(f"step {index}: {what}")

        if not isinstance(data, dict):
            raise bad(f"expected an object, got {type(data).__name__}")
        unknown = sorted(set(data) - STEP_FIELDS)
        if unknown:
            raise bad(f"unknown field(s) {unknown}; allowed: {sorted(STEP_FIELDS)}")
        content = data.get("content", "")
        if content is None:
            content = ""
        if not isinstance(content, str):
            raise bad("'content' must be a string")
        calls_raw = data.get("tool_calls") or []
        if not isinstance(calls_raw, list):
            raise bad("'tool_calls' must be a list")
        calls = [
            _parse_tool_call(raw, f"step {index}: tool_calls[{i}]")
            for i, raw in enumerate(calls_raw)
        ]
        usage = data.get("usage")
        if usage is not None:
            if not isinstance(usage, dict) or not all(
                k in ("prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens")
                and isinstance(v, int)
                and v >= 0
                for k, v in usage.items()
            ):
                raise bad(
                    "'usage' must map prompt_tokens/completion_tokens (and optionally "
                    "cached_tokens) to whole numbers ≥ 0"
                )
            usage = {k: v for k, v in usage.items() if k != "total_tokens"}
        status = data.get("status")
        if status is not None and (
            not isinstance(status, int) or isinstance(status, bool) or not 400 <= status <= 599
        ):
            raise bad(f"'status' must be an HTTP error status 400-599, got {status!r}")
        finish_reason = data.get("finish_reason")
        if finish_reason is not None and not isinstance(finish_reason, str):
            raise bad("'finish_reason' must be a string")
        repeat = data.get("repeat", False)
        if not isinstance(repeat, bool):
            raise bad("'repeat' must be true or false")
        return cls(
            content=content,
            tool_calls=calls,
            usage=usage,
            status=status,
            retry_after=_seconds(data, "retry_after", index, default=None),
            stall_s=_seconds(data, "stall_s", index, default=0.0) or 0.0,
            delay_s=_seconds(data, "delay_s", index, default=0.0) or 0.0,
            repeat=repeat,
            finish_reason=finish_reason,
        )


def _parse_tool_call(raw: Any, where: str) -> ScriptToolCall:
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: expected an object with 'name' and 'arguments'")
    unknown = sorted(set(raw) - {"name", "arguments", "id"})
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {unknown}; allowed: id, name, arguments")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where}: 'name' must be a non-empty string")
    arguments = raw.get("arguments", {})
    # An object is sent as its JSON text; a string is sent verbatim, so a script can feed the
    # client malformed arguments on purpose.
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments)
    call_id = raw.get("id")
    if call_id is not None and (not isinstance(call_id, str) or not call_id):
        raise ValueError(f"{where}: 'id' must be a non-empty string")
    return ScriptToolCall(name=name, arguments=arguments, id=call_id)


def _seconds(data: dict[str, Any], key: str, index: int, default: float | None) -> float | None:
    value = data.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ValueError(f"step {index}: {key!r} must be a number of seconds ≥ 0, got {value!r}")
    return float(value)


def parse_steps(data: Any) -> list[ScriptStep]:
    """Steps from decoded JSON: a list of steps, or a recording `{"version": 1, "exchanges": …}`."""
    if isinstance(data, dict):
        if data.get("version") != 1:
            raise ValueError(
                f"unsupported recording version {data.get('version')!r}; expected 1 "
                "(or give a plain list of steps)"
            )
        exchanges = data.get("exchanges")
        if not isinstance(exchanges, list):
            raise ValueError("a recording needs an 'exchanges' list")
        raw_steps = []
        for i, exchange in enumerate(exchanges):
            if not isinstance(exchange, dict) or "response" not in exchange:
                raise ValueError(f"step {i}: exchange has no 'response'")
            raw_steps.append(exchange["response"])
    elif isinstance(data, list):
        raw_steps = data
    else:
        raise ValueError("a script is a JSON list of steps or a recording object")
    steps = [ScriptStep.from_dict(raw, i) for i, raw in enumerate(raw_steps)]
    for i, step in enumerate(steps[:-1]):
        if step.repeat:
            raise ValueError(f"step {i}: 'repeat' is only allowed on the last step")
    return steps


def load_script(path: Path) -> list[ScriptStep]:
    """Read a script or a recording; any problem is a ValueError naming the file (and step)."""
    return load_recording(path)[0]


def load_recording(path: Path) -> tuple[list[ScriptStep], dict[str, Any] | None]:
    """The steps of a script or recording, and the recording's mission fingerprint (None for
    a plain list of steps or a recording made before fingerprints)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"cannot read script {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON: {exc}") from None
    try:
        steps = parse_steps(data)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    mission = data.get("mission") if isinstance(data, dict) else None
    if mission is not None and not isinstance(mission, dict):
        raise ValueError(f"{path}: 'mission' must be an object (the recorded mission)")
    return steps, mission


def fix_fingerprint(tree: str | None, source: str) -> dict[str, Any]:
    """What a fix recording belongs to: the hash of the repository's files (or, for a git
    URL, the URL)."""
    return {"mode": "fix", "tree": tree} if tree else {"mode": "fix", "source": source}


def build_fingerprint(spec: str, lang: str) -> dict[str, Any]:
    """What a build recording belongs to: the specification's hash and the language."""
    digest = hashlib.sha256(spec.strip().encode("utf-8")).hexdigest()
    return {"mode": "build", "spec": f"sha256:{digest}", "lang": lang}


def fingerprint_mismatch(recorded: Mapping[str, Any], actual: Mapping[str, Any]) -> str | None:
    """Why a recording made for mission `recorded` cannot replay mission `actual` (None when
    it can): a replay only makes sense against the mission it was recorded for."""
    mode = recorded.get("mode")
    if mode != actual["mode"]:
        return f"it was recorded for `loopwright {mode}`, and this is `loopwright {actual['mode']}`"
    if mode == "build":
        if recorded.get("lang") != actual["lang"]:
            return f"it was recorded for --lang {recorded.get('lang')}, not --lang {actual['lang']}"
        if recorded.get("spec") != actual["spec"]:
            return "it was recorded for another specification"
        return None
    if "tree" in actual or "tree" in recorded:
        if recorded.get("tree") != actual.get("tree"):
            return (
                "it was recorded against another repository (or other files in it): its "
                f"files hashed to {str(recorded.get('tree'))[:19]}…, these hash to "
                f"{str(actual.get('tree'))[:19]}…"
            )
        return None
    if recorded.get("source") != actual.get("source"):
        return f"it was recorded for {recorded.get('source')}, not {actual.get('source')}"
    return None


class _RequestError(Exception):
    """A request the real endpoint would refuse; becomes an OpenAI-style error body."""

    def __init__(
        self, status: int, message: str, *, param: str | None = None, code: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code


def _validate_request(body: Any) -> None:
    """Raise `_RequestError` (400) for a body the OpenAI API would reject."""
    if not isinstance(body, dict):
        raise _RequestError(400, "The request body must be a JSON object.")
    unknown = sorted(set(body) - KNOWN_FIELDS)
    if unknown:
        raise _RequestError(
            400, f"Unrecognized request argument supplied: {unknown[0]}", param=unknown[0]
        )
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise _RequestError(400, "you must provide a model parameter", param="model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _RequestError(
            400, "'messages' must be a non-empty array of message objects", param="messages"
        )
    pending_ids: set[str] = set()
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise _RequestError(400, f"{where} must be an object", param=where)
        role = message.get("role")
        if role not in ROLES:
            raise _RequestError(
                400, f"{where}: missing or invalid 'role' {role!r}", param=f"{where}.role"
            )
        if role == "assistant":
            for j, call in enumerate(message.get("tool_calls") or []):
                _validate_assistant_call(call, f"{where}.tool_calls[{j}]")
                pending_ids.add(call["id"])
        elif role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in pending_ids:
                raise _RequestError(
                    400,
                    f"Invalid parameter: {where} with role 'tool' must be a response to a "
                    f"preceding message with 'tool_calls' (tool_call_id {call_id!r} not found).",
                    param=f"{where}.tool_call_id",
                )
        elif "content" not in message:
            raise _RequestError(400, f"{where}: missing 'content'", param=f"{where}.content")
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list) or not tools:
            raise _RequestError(400, "'tools' must be a non-empty array", param="tools")
        for i, tool in enumerate(tools):
            function = tool.get("function") if isinstance(tool, dict) else None
            if (
                not isinstance(tool, dict)
                or tool.get("type") != "function"
                or not isinstance(function, dict)
                or not isinstance(function.get("name"), str)
            ):
                raise _RequestError(
                    400,
                    f"tools[{i}] must be {{'type': 'function', 'function': {{'name': ...}}}}",
                    param=f"tools[{i}]",
                )
    stream_options = body.get("stream_options")
    if stream_options is not None and not body.get("stream"):
        raise _RequestError(
            400,
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
            param="stream_options",
        )


def _validate_assistant_call(call: Any, where: str) -> None:
    function = call.get("function") if isinstance(call, dict) else None
    if (
        not isinstance(call, dict)
        or not isinstance(call.get("id"), str)
        or call.get("type") != "function"
        or not isinstance(function, dict)
        or not isinstance(function.get("name"), str)
        or not isinstance(function.get("arguments"), str)
    ):
        raise _RequestError(
            400,
            f"{where} must be {{'id': str, 'type': 'function', "
            "'function': {'name': str, 'arguments': str}}",
            param=where,
        )


def _status_message(status: int) -> str:
    try:
        return f"scripted {status} {HTTPStatus(status).phrase}"
    except ValueError:
        return f"scripted {status}"


def _split(text: str, pieces: int = FRAGMENTS) -> list[str]:
    """`text` in up to `pieces` non-empty consecutive parts (at least one part, maybe empty)."""
    if not text:
        return [text]
    size = math.ceil(len(text) / pieces)
    return [text[i : i + size] for i in range(0, len(text), size)]


class ScriptedModelServer:
    """Serves `steps` in order at `base_url`; keeps every chat-completions body in `requests`."""

    def __init__(
        self,
        steps: Sequence[ScriptStep],
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        api_key: str | None = None,
        models: Sequence[str] | None = None,
    ) -> None:
        """`api_key`: when set, requests must carry it as a bearer token (else 401).
        `models`: when set, only these model ids exist (else 404 model_not_found)."""
        self.steps = list(steps)
        self.requests: list[dict[str, Any]] = []
        self.api_key = api_key
        self.models = list(models) if models is not None else None
        self._host = host
        self._port = port
        self._lock = threading.Lock()
        self._next_step = 0
        self._next_call_id = 0
        self._cached_messages: list[Any] = []
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("ScriptedModelServer is not started; call start() first")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    @property
    def steps_used(self) -> int:
        """How many script steps have been consumed so far."""
        with self._lock:
            return self._next_step

    def start(self) -> ScriptedModelServer:
        server = self

        class Handler(_Handler):
            scripted = server

        self._stopping.clear()
        self._httpd = ThreadingHTTPServer((self._host, self._port), Handler)
        self._httpd.daemon_threads = True
        # A short poll interval keeps stop() (which waits for the serve loop to notice) fast.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="scripted-model",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        # Wakes handlers sleeping in a stall or delay so they finish promptly.
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._thread = None

    def __enter__(self) -> ScriptedModelServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _record(self, body: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(body)

    def _cached_prefix_tokens(self, messages: list[Any]) -> int:
        """What a server's prompt cache would reuse: the messages this request shares, in
        order from the start, with the one before it (tokens estimated as for the prompt)."""
        with self._lock:
            previous = self._cached_messages
            self._cached_messages = list(messages)
        shared = 0
        while shared < min(len(previous), len(messages)) and previous[shared] == messages[shared]:
            shared += 1
        return math.ceil(len(json.dumps(messages[:shared])) / 4) if shared else 0

    def _take_step(self) -> ScriptStep | None:
        with self._lock:
            if self._next_step < len(self.steps):
                step = self.steps[self._next_step]
                self._next_step += 1
                return step
            if self.steps and self.steps[-1].repeat:
                return self.steps[-1]
            return None

    def _call_id(self) -> str:
        with self._lock:
            self._next_call_id += 1
            return f"call_{self._next_call_id}"

    def _wait(self, seconds: float) -> None:
        if seconds > 0:
            self._stopping.wait(seconds)


class _Handler(BaseHTTPRequestHandler):
    scripted: ScriptedModelServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests and demos read the requests from `ScriptedModelServer.requests`."""

    def handle(self) -> None:
        try:
            super().handle()
        except (ConnectionResetError, BrokenPipeError):
            # A client that abandons a stream (or closes a kept-alive connection) resets the
            # socket; that is normal for an HTTP server and not worth a traceback.
            self.close_connection = True

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            ids = self.scripted.models or [DEFAULT_MODEL]
            data = [
                {"id": m, "object": "model", "created": 0, "owned_by": "loopwright"} for m in ids
            ]
            self._send_json(200, {"object": "list", "data": data})
        else:
            self._send_error(_RequestError(404, f"Unknown path GET {self.path}"))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send_error(_RequestError(404, f"Unknown path POST {self.path}"))
            return
        try:
            body = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            self._send_error(_RequestError(400, "The request body is not valid JSON."))
            return
        if isinstance(body, dict):
            self.scripted._record(body)
        try:
            self._check_auth()
            _validate_request(body)
            self._check_model(body["model"])
        except _RequestError as err:
            self._send_error(err)
            return
        step = self.scripted._take_step()
        if step is None:
            step = ScriptStep(content=EXHAUSTED_CONTENT)
        self.scripted._wait(step.delay_s)
        if step.status is not None:
            headers = {} if step.retry_after is None else {"Retry-After": f"{step.retry_after:g}"}
            self._send_error(_RequestError(step.status, _status_message(step.status)), headers)
            return
        try:
            if body.get("stream"):
                self._stream(body, step)
            else:
                self.scripted._wait(step.stall_s)
                self._send_json(200, self._completion(body, step))
        except (BrokenPipeError, ConnectionResetError):
            # The client gave up (e.g. its stall timeout fired); nothing left to answer.
            self.close_connection = True

    def _check_auth(self) -> None:
        key = self.scripted.api_key
        if key is not None and self.headers.get("Authorization") != f"Bearer {key}":
            raise _RequestError(401, "Incorrect API key provided.", code="invalid_api_key")

    def _check_model(self, model: str) -> None:
        models = self.scripted.models
        if models is not None and model not in models:
            raise _RequestError(
                404,
                f"The model `{model}` does not exist or you do not have access to it.",
                param="model",
                code="model_not_found",
            )

    def _calls(self, step: ScriptStep) -> list[tuple[str, ScriptToolCall]]:
        return [(c.id or self.scripted._call_id(), c) for c in step.tool_calls]

    def _usage(self, body: dict[str, Any], step: ScriptStep) -> dict[str, Any]:
        given = step.usage or {}
        prompt = given.get("prompt_tokens")
        cached = given.get("cached_tokens")
        if prompt is None:
            prompt = math.ceil(len(json.dumps(body["messages"])) / 4)
            if cached is None:
                cached = min(self.scripted._cached_prefix_tokens(body["messages"]), prompt)
        completion = given.get("completion_tokens")
        if completion is None:
            size = len(step.content) + sum(len(c.name) + len(c.arguments) for c in step.tool_calls)
            completion = math.ceil(size / 4)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached or 0},
        }

    @staticmethod
    def _finish_reason(step: ScriptStep) -> str:
        return step.finish_reason or ("tool_calls" if step.tool_calls else "stop")

    def _completion(self, body: dict[str, Any], step: ScriptStep) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": step.content or None}
        if step.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call_id, call in self._calls(step)
            ]
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": self._finish_reason(step),
                    "logprobs": None,
                }
            ],
            "usage": self._usage(body, step),
        }

    def _chunks(self, body: dict[str, Any], step: ScriptStep) -> Iterator[dict[str, Any]]:
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        base = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body["model"],
        }

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
            extra = {"usage": None} if include_usage else {}
            return {**base, "choices": [choice], **extra}

        yield chunk({"role": "assistant", "content": ""})
        if step.content:
            for piece in _split(step.content):
                yield chunk({"content": piece})
        for index, (call_id, call) in enumerate(self._calls(step)):
            head = {"index": index, "id": call_id, "type": "function"}
            yield chunk(
                {"tool_calls": [{**head, "function": {"name": call.name, "arguments": ""}}]}
            )
            for piece in _split(call.arguments):
                yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        yield chunk({}, self._finish_reason(step))
        if include_usage:
            yield {**base, "choices": [], "usage": self._usage(body, step)}

    def _stream(self, body: dict[str, Any], step: ScriptStep) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for n, chunk in enumerate(self._chunks(body, step)):
            self._write_event(json.dumps(chunk))
            if n == 0:
                self.scripted._wait(step.stall_s)
        self._write_event("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _write_event(self, data: str) -> None:
        payload = f"data: {data}\n\n".encode()
        self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
        self.wfile.flush()

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _send_error(self, err: _RequestError, headers: dict[str, str] | None = None) -> None:
        kind = {401: "invalid_request_error", 429: "rate_limit_error"}.get(
            err.status, "invalid_request_error" if err.status < 500 else "server_error"
        )
        body = {
            "error": {"message": err.message, "type": kind, "param": err.param, "code": err.code}
        }
        self._send_json(err.status, body, headers)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m loopwright.agent.scripted",
        description="Serve a script (or a recording) as an OpenAI-compatible model endpoint.",
    )
    parser.add_argument("script", type=Path, help="JSON list of steps, or a --record file")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    args = parser.parse_args(argv)
    try:
        steps = load_script(args.script)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    server = ScriptedModelServer(steps, args.host, args.port).start()
    print(server.base_url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return 0
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
