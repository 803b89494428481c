"""A scripted model endpoint: a real HTTP server speaking OpenAI chat completions that answers
each request with the next step of a script, for tests, demos and `loopwright fix --replay`.

The script itself (its steps, read from a file) is `scripted_steps`; the requests refused as
the real endpoint would refuse them are `scripted_requests`.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

from loopwright.agent.scripted_requests import RequestError, validate_request
from loopwright.agent.scripted_steps import ScriptStep, ScriptToolCall, load_script

EXHAUSTED_CONTENT = "The script has no more steps."
DEFAULT_MODEL = "scripted"
FRAGMENTS = 3
"""Pieces each content string and each tool call's arguments are split into when streaming."""


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
        per_conversation: bool = False,
    ) -> None:
        """`api_key`: when set, requests must carry it as a bearer token (else 401).
        `models`: when set, only these model ids exist (else 404 model_not_found).
        `per_conversation`: instead of one script shared by every request in arrival order,
        each conversation gets the script from its start: the step is the one at the index
        of the number of assistant turns already in the request. Many missions at once
        then each see the whole script, however their requests interleave (a retried
        request gets the same step again)."""
        self.steps = list(steps)
        self.per_conversation = per_conversation
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

    def _take_step(self, body: dict[str, Any]) -> ScriptStep | None:
        with self._lock:
            if self.per_conversation:
                messages = body.get("messages") or []
                turn = sum(
                    1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant"
                )
                self._next_step = max(self._next_step, turn + 1)
                if turn < len(self.steps):
                    return self.steps[turn]
                return self.steps[-1] if self.steps and self.steps[-1].repeat else None
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
            self._send_error(RequestError(404, f"Unknown path GET {self.path}"))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send_error(RequestError(404, f"Unknown path POST {self.path}"))
            return
        try:
            body = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            self._send_error(RequestError(400, "The request body is not valid JSON."))
            return
        if isinstance(body, dict):
            self.scripted._record(body)
        try:
            self._check_auth()
            validate_request(body)
            self._check_model(body["model"])
        except RequestError as err:
            self._send_error(err)
            return
        step = self.scripted._take_step(body)
        if step is None:
            step = ScriptStep(content=EXHAUSTED_CONTENT)
        self.scripted._wait(step.delay_s)
        if step.status is not None:
            headers = {} if step.retry_after is None else {"Retry-After": f"{step.retry_after:g}"}
            self._send_error(RequestError(step.status, _status_message(step.status)), headers)
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
            raise RequestError(401, "Incorrect API key provided.", code="invalid_api_key")

    def _check_model(self, model: str) -> None:
        models = self.scripted.models
        if models is not None and model not in models:
            raise RequestError(
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

    def _send_error(self, err: RequestError, headers: dict[str, str] | None = None) -> None:
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
