"""The model client: one streamed chat completion per call against an OpenAI-compatible endpoint,
with our own retries, backoff and stall detection, and an optional recording of every exchange.
"""

from __future__ import annotations

import json
import math
import os
import random
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, NoReturn, Protocol, cast

import httpx2
import openai
import pydantic
from openai.types.chat.chat_completion_chunk import ChatCompletionChunk, ChoiceDeltaToolCall

from loopwright.agent.textcalls import Recovered, recover_calls, split_reasoning
from loopwright.config import Settings, Tier
from loopwright.redaction import Redactor
from loopwright.retry_after import finite_number, parse_retry_after

BACKOFF_BASE_S = 1.0
BACKOFF_CAP_S = 30.0
MAX_RETRY_AFTER_S = 300.0
"""A `retry-after` longer than this is capped: a mission should fail visibly, not hang."""
CONNECT_TIMEOUT_S = 30.0
"""Connecting needs no model work, so it gets a shorter budget than a whole call."""
MESSAGE_LIMIT = 300
"""Characters of an endpoint's error message quoted in a ModelError."""


@dataclass(frozen=True)
class ToolCall:
    """A tool call as the model sent it; `arguments` is raw JSON text the caller validates."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    estimated: bool = False
    """The endpoint reported no usage; the counts are a local estimate (four characters a token)."""
    cached_tokens: int = 0
    """Prompt tokens the endpoint served from its prompt cache: `prompt_tokens_details.
    cached_tokens` (OpenAI and compatible APIs) or llama.cpp's `timings.cache_n`."""


ToolCallSource = Literal["native", "content"]


@dataclass(frozen=True)
class ModelReply:
    """One assistant turn. `duration_s` covers the whole call, retries and waits included."""

    content: str
    tool_calls: tuple[ToolCall, ...]
    usage: Usage
    model: str
    finish_reason: str | None
    duration_s: float
    tool_call_source: ToolCallSource = "native"
    """`content` when the calls were recovered from text the model wrote (see textcalls)."""
    recovered_calls: int = 0
    """How many of `tool_calls` were recovered from the text: all of them when the source is
    `content`, or extra calls a model wrote next to its native ones."""
    reasoning_tokens: int = 0
    """Size of the reasoning the endpoint sent apart from the content (or in `<think>` tags):
    the endpoint's count when it reports one, else an estimate. It is neither content nor
    searched for calls."""


@dataclass(frozen=True)
class ModelRetry:
    """An attempt failed and the call will be tried again after `wait_s` seconds."""

    attempt: int
    """The attempt that failed, from 1."""
    attempts: int
    """How many attempts the call may take in all."""
    reason: str
    wait_s: float


RetryListener = Callable[[ModelRetry], None]


@dataclass(frozen=True)
class Sampling:
    """Sampling for one call: independent attempts sample with a temperature and a seed of
    their own; without it the endpoint's defaults apply."""

    temperature: float
    seed: int


class ModelError(Exception):
    """The endpoint gave no answer after retries; the message is one line saying what to fix."""


class Model(Protocol):
    def complete(
        self,
        tier: Tier,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        on_retry: RetryListener | None = None,
        sampling: Sampling | None = None,
    ) -> ModelReply: ...


class OpenAIModel:
    """`Model` on the `openai` package; retries are ours so stalls and errors are handled alike."""

    def __init__(
        self,
        settings: Settings,
        *,
        recorder: Recorder | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._settings = settings
        self._recorder = recorder
        self._sleep = sleep
        self._redactor = Redactor(settings.secrets())
        # The read timeout is the stall detector: httpx2 applies it to every socket read, so a
        # stream that sends nothing for stall_timeout_s raises a timeout and the attempt is
        # retried. The whole-attempt budget (model_timeout_s) is enforced by `_Deadline`.
        self._connect_timeout_s = min(CONNECT_TIMEOUT_S, settings.model_timeout_s)
        self._timeout = httpx2.Timeout(
            settings.model_timeout_s,
            connect=self._connect_timeout_s,
            read=settings.stall_timeout_s,
        )
        self._clients: dict[str, openai.OpenAI] = {}
        self._clients_lock = threading.Lock()

    def _client(self, tier: Tier) -> openai.OpenAI:
        """One HTTP client per endpoint. Only the shared endpoint gets the API key: a tier's
        own endpoint (a local server, say) never sees it."""
        url = self._settings.endpoint(tier)
        with self._clients_lock:
            client = self._clients.get(url)
            if client is None:
                key = self._settings.model_api_key if tier.base_url is None else None
                client = openai.OpenAI(
                    base_url=url, api_key=key or "unused", max_retries=0, timeout=self._timeout
                )
                self._clients[url] = client
            return client

    def close(self) -> None:
        with self._clients_lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()

    def __enter__(self) -> OpenAIModel:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def complete(
        self,
        tier: Tier,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        on_retry: RetryListener | None = None,
        sampling: Sampling | None = None,
    ) -> ModelReply:
        """One reply; `on_retry` hears of each failed attempt before the wait for the next."""
        started = time.monotonic()
        attempts = self._settings.model_retries + 1
        for attempt in range(attempts):
            try:
                reply = self._attempt(tier, messages, tools, started, sampling)
            except _Retryable as failure:
                if attempt + 1 == attempts:
                    times = "1 time" if attempts == 1 else f"{attempts} times"
                    message = f"{failure.message} (tried {times})"
                    raise ModelError(self._redactor.text(message)) from None
                wait_s = _backoff(attempt, failure.wait_s)
                if on_retry is not None:
                    reason = self._redactor.text(failure.message)
                    on_retry(ModelRetry(attempt + 1, attempts, reason, round(wait_s, 3)))
                self._sleep(wait_s)
                continue
            if self._recorder is not None:
                self._recorder.record(tier, reply)
            return reply
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _attempt(
        self,
        tier: Tier,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        started: float,
        sampling: Sampling | None = None,
    ) -> ModelReply:
        deadline = _Deadline(self._settings.model_timeout_s)
        reply = _Accumulator(tier.model)
        url = self._settings.endpoint(tier).rstrip("/")
        where = _where(tier)
        json_format = tier.tool_format == "json" and bool(tools)
        sent = json_tool_messages(messages, tools) if json_format else _sendable(messages)
        native = tools and not json_format
        try:
            # An empty tools array is a 400 at OpenAI, so a tool-less call omits both fields.
            stream = self._client(tier).chat.completions.create(
                model=tier.model,
                messages=cast(Any, sent),
                tools=cast(Any, tools) if native else openai.omit,
                tool_choice="auto" if native else openai.omit,
                temperature=sampling.temperature if sampling else openai.omit,
                seed=sampling.seed if sampling else openai.omit,
                stream=True,
                stream_options={"include_usage": True},
            )
            with stream, deadline.armed(stream.response.close):
                # Some servers ignore `stream` and answer with one JSON completion, in which
                # the SDK's event stream would find nothing at all.
                if "json" in stream.response.headers.get("content-type", ""):
                    reply.add(_as_chunk(json.loads(stream.response.read())))
                else:
                    for chunk in stream:
                        reply.add(chunk)
        except openai.APITimeoutError as exc:
            if isinstance(exc.__cause__, httpx2.ConnectTimeout | httpx2.PoolTimeout):
                raise _Retryable(
                    f"model endpoint {url} unreachable: no connection within "
                    f"{self._connect_timeout_s:g}s; "
                    f"check {where}"
                ) from None
            raise _Retryable(
                f"model endpoint {url} stalled: nothing received for "
                f"{self._settings.stall_timeout_s:g}s; check the endpoint's health or raise "
                "LOOPWRIGHT_STALL_TIMEOUT_S"
            ) from None
        except openai.APIConnectionError as exc:
            if deadline.expired:
                raise _Retryable(
                    f"model endpoint {url} was still streaming after "
                    f"{self._settings.model_timeout_s:g}s; raise LOOPWRIGHT_MODEL_TIMEOUT_S "
                    "or pick a faster tier"
                ) from None
            raise _Retryable(
                f"model endpoint {url} unreachable: {_cause(exc)}; check {where}"
            ) from None
        except openai.APIStatusError as exc:
            self._raise_for_status(exc, tier, url)
        except openai.APIError as exc:
            # An error event inside an otherwise successful stream: the provider failed mid-answer.
            raise _Retryable(
                f"model endpoint {url} failed mid-stream: {_quote(exc.message)}"
            ) from None
        except json.JSONDecodeError as exc:
            raise _Retryable(
                f"model endpoint {url} sent a malformed stream ({exc.msg}); "
                f"check {where} points at an OpenAI-compatible /v1 endpoint"
            ) from None
        return reply.reply(messages, tools, time.monotonic() - started, json_format=json_format)

    def _raise_for_status(self, exc: openai.APIStatusError, tier: Tier, url: str) -> NoReturn:
        where = _where(tier)
        status = exc.status_code
        detail = _quote(_error_message(exc))
        if status == 429:
            raise _Retryable(
                f"model endpoint {url} is rate limiting (429): {detail}; wait, run fewer "
                "missions at once, or raise LOOPWRIGHT_MODEL_RETRIES",
                _retry_after(exc.response.headers),
            )
        if status >= 500 or status == 408:
            raise _Retryable(
                f"model endpoint {url} failed with {status}: {detail}; the provider may be "
                f"down, retry later or point {where} elsewhere",
                _retry_after(exc.response.headers),
            )
        if status == 401:
            message = f"401 from model endpoint {url}: {detail}; check LOOPWRIGHT_MODEL_API_KEY"
        elif status == 403:
            message = (
                f"403 from model endpoint {url} for model id {tier.model!r}: {detail}; check "
                "that LOOPWRIGHT_MODEL_API_KEY has access to it, or change LOOPWRIGHT_MODEL_TIERS"
            )
        elif status == 404 and _mentions_model(exc):
            message = (
                f"model id {tier.model!r} (tier {tier.name}) not found at endpoint {url}: "
                f"{detail}; check LOOPWRIGHT_MODEL_TIERS"
            )
        elif status == 404:
            message = (
                f"no chat completions endpoint at {url} (404): {detail}; check "
                f"{where} (it usually ends in /v1)"
            )
        elif any(word in detail.lower() for word in ("context", "too long", "maximum")):
            message = (
                f"model endpoint {url} refused the request as too long ({status}): "
                f"{detail}; lower LOOPWRIGHT_CONTEXT_TOKENS"
            )
        else:
            message = (
                f"model endpoint {url} rejected the request ({status}) for model id "
                f"{tier.model!r}: {detail}; check that it supports tool calling, or change "
                "LOOPWRIGHT_MODEL_TIERS"
            )
        raise ModelError(self._redactor.text(message)) from None


class _Deadline:
    """Closes a response still streaming after `seconds`.

    The read timeout only catches silence; an endpoint that trickles keep-alive bytes (or
    tokens) forever would pass it, so the whole attempt also gets a wall-clock budget.
    Closing the response from the timer thread makes the reading thread's iteration fail.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.expired = False

    @contextmanager
    def armed(self, close: Callable[[], None]) -> Iterator[None]:
        def expire() -> None:
            self.expired = True
            close()

        timer = threading.Timer(self.seconds, expire)
        timer.daemon = True
        timer.start()
        try:
            yield
        finally:
            timer.cancel()


class _Retryable(Exception):
    """One attempt failed in a way worth retrying; `wait_s` is the endpoint's own hint."""

    def __init__(self, message: str, wait_s: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.wait_s = wait_s


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: str = ""


class _Accumulator:
    """Assembles one reply from streamed chunks: content, reasoning, tool calls by index, usage."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, _PartialCall] = {}
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.reasoning_tokens: int | None = None

    def add(self, chunk: ChatCompletionChunk) -> None:
        self.model = chunk.model or self.model
        if chunk.usage is not None:
            self.usage = Usage(
                chunk.usage.prompt_tokens,
                chunk.usage.completion_tokens,
                cached_tokens=_cached_tokens(chunk),
            )
            details = chunk.usage.completion_tokens_details
            if details is not None and details.reasoning_tokens:
                self.reasoning_tokens = details.reasoning_tokens
        for choice in chunk.choices:
            if choice.index != 0:
                continue
            self.finish_reason = choice.finish_reason or self.finish_reason
            if choice.delta.content:
                self.content.append(choice.delta.content)
            # llama.cpp, vLLM and DeepSeek send thinking apart from the answer under one of
            # these names; the SDK keeps such fields as extras.
            extra = choice.delta.model_extra or {}
            for key in ("reasoning_content", "reasoning"):
                if isinstance(extra.get(key), str):
                    self.reasoning.append(extra[key])
            for position, delta in enumerate(choice.delta.tool_calls or ()):
                self._merge_call(position, delta)

    def _merge_call(self, position: int, delta: ChoiceDeltaToolCall) -> None:
        # Some endpoints omit `index`; the position in the delta list is the best guess then.
        index = delta.index if delta.index is not None else position
        call = self.calls.setdefault(index, _PartialCall())
        # The SDK does not validate the stream: an id may arrive as a number, which the
        # tool-call event (a string) and the tool message answering it would both refuse.
        if delta.id is not None and str(delta.id):
            call.id = str(delta.id)
        function = delta.function
        if function is None:
            return
        # Some endpoints repeat the full name on every fragment, others split it; appending
        # only a name that differs from what we have covers both.
        if function.name and function.name != call.name:
            call.name += function.name
        if function.arguments:
            call.arguments += function.arguments

    def reply(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        duration_s: float,
        *,
        json_format: bool = False,
    ) -> ModelReply:
        text, thoughts = split_reasoning("".join(self.content))
        reasoning = "".join(self.reasoning) + thoughts
        partial = [(p.id, p.name, p.arguments) for _, p in sorted(self.calls.items())]
        source: ToolCallSource = "native"
        extra = 0
        if tools:
            recovered = recover_calls(text, tools)
            if json_format:
                # One strict object per reply: the first valid call, nothing more.
                recovered = Recovered(recovered.content, recovered.calls[:1])
            if recovered.calls and not partial:
                text = recovered.content
                partial = [("", c.name, c.arguments) for c in recovered.calls]
                source = "content"
                extra = len(partial)
            elif recovered.calls:
                # Calls that leaked into the text next to native ones (parallel calls a
                # server parsed only in part): the new ones join, repeats are dropped.
                text = recovered.content
                seen = {(name, _canonical(args)) for _, name, args in partial}
                for call in recovered.calls:
                    key = (call.name, _canonical(call.arguments))
                    if key not in seen:
                        seen.add(key)
                        partial.append(("", call.name, call.arguments))
                        extra += 1
        tool_calls = _unique_ids(partial, _answered_ids(messages))
        usage = self.usage or _estimate_usage(messages, tools, text + reasoning, tool_calls)
        return ModelReply(
            content=text,
            tool_calls=tool_calls,
            usage=usage,
            model=self.model,
            finish_reason=self.finish_reason,
            duration_s=duration_s,
            tool_call_source=source,
            recovered_calls=extra,
            reasoning_tokens=self.reasoning_tokens or _tokens(reasoning),
        )


def _sendable(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation with every earlier call's arguments as a JSON object.

    A reply cut off mid-call (a token cap) leaves arguments that do not parse; the tool
    answered that as an error, but servers that re-parse the history (llama.cpp) refuse the
    whole request with a 500. Such arguments travel as `{"unparsed_arguments": RAW}`; the
    same history always becomes the same request, so caching is unaffected."""
    if not any(_has_bad_arguments(m) for m in messages):
        return messages
    fixed: list[dict[str, Any]] = []
    for message in messages:
        if not _has_bad_arguments(message):
            fixed.append(message)
            continue
        calls = []
        for call in message["tool_calls"]:
            function = dict(call.get("function") or {})
            raw = function.get("arguments")
            if isinstance(raw, str) and not _is_json_object(raw):
                function["arguments"] = json.dumps({"unparsed_arguments": raw})
            calls.append({**call, "function": function})
        fixed.append({**message, "tool_calls": calls})
    return fixed


def _has_bad_arguments(message: dict[str, Any]) -> bool:
    for call in message.get("tool_calls") or ():
        raw = (call.get("function") or {}).get("arguments") if isinstance(call, dict) else None
        if isinstance(raw, str) and not _is_json_object(raw):
            return True
    return False


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except json.JSONDecodeError:
        return False


def _canonical(arguments: str) -> str:
    """Arguments in one spelling, so a call repeated with other whitespace is seen as one."""
    try:
        return json.dumps(json.loads(arguments), sort_keys=True)
    except json.JSONDecodeError:
        return arguments


JSON_TOOLS_PROMPT = """\
# Tools

You act by calling exactly one of these tools per reply. Reply with ONE JSON object and \
nothing else: {{"name": "<tool name>", "arguments": {{<arguments>}}}}

{tools}"""


def json_tool_messages(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The conversation for a server without tool support: the tools described in the
    system prompt, earlier calls written as the JSON objects the model sent, and tool
    results as user messages. The same history always renders the same way, so the
    requests stay an append-only sequence."""
    described = "\n".join(json.dumps(t.get("function", t)) for t in tools)
    prompt = JSON_TOOLS_PROMPT.format(tools=described)
    rendered: list[dict[str, Any]] = []
    if not messages or messages[0].get("role") != "system":
        rendered.append({"role": "system", "content": prompt})
    for position, message in enumerate(messages):
        role = message.get("role")
        content = message.get("content") or ""
        if position == 0 and role == "system":
            rendered.append({"role": "system", "content": f"{content}\n\n{prompt}"})
        elif role == "assistant" and message.get("tool_calls"):
            written = [
                json.dumps({"name": c["function"]["name"], "arguments": _loaded(c["function"])})
                for c in message["tool_calls"]
            ]
            text = "\n".join([content, *written]).strip()
            rendered.append({"role": "assistant", "content": text})
        elif role == "tool":
            rendered.append(
                {
                    "role": "user",
                    "content": f"Result of call {message.get('tool_call_id')}:\n{content}",
                }
            )
        else:
            rendered.append(message)
    return rendered


def _loaded(function: dict[str, Any]) -> Any:
    arguments = function.get("arguments")
    if not isinstance(arguments, str):
        return arguments
    try:
        return json.loads(arguments)
    except json.JSONDecodeError:
        return arguments


def _where(tier: Tier) -> str:
    """The setting that names a tier's endpoint, for error messages."""
    return "LOOPWRIGHT_MODEL_TIERS" if tier.base_url else "LOOPWRIGHT_MODEL_BASE_URL"


def _as_chunk(completion: Any) -> ChatCompletionChunk:
    """A whole (non-streamed) chat completion as the one chunk that carries all of it."""
    try:
        return ChatCompletionChunk.model_validate(_chunk_fields(completion))
    except (TypeError, ValueError, AttributeError, pydantic.ValidationError):
        raise json.JSONDecodeError("a JSON body that is not a chat completion", "", 0) from None


def _chunk_fields(completion: Any) -> dict[str, Any]:
    if not isinstance(completion, dict) or not isinstance(completion.get("choices"), list):
        raise TypeError("not a chat completion")
    choices = []
    for position, choice in enumerate(completion["choices"]):
        message = dict(choice.get("message") or {}) if isinstance(choice, dict) else {}
        calls = []
        for index, call in enumerate(message.pop("tool_calls", None) or ()):
            function = dict(call.get("function") or {})
            if not isinstance(function.get("arguments", ""), str):
                function["arguments"] = json.dumps(function["arguments"])
            calls.append({"index": index, "id": call.get("id"), "function": function})
        choices.append(
            {
                "index": choice.get("index", position) if isinstance(choice, dict) else position,
                "delta": {**message, "tool_calls": calls or None},
                "finish_reason": choice.get("finish_reason") if isinstance(choice, dict) else None,
            }
        )
    usage = completion.get("usage")
    if isinstance(usage, dict):
        usage = {
            "total_tokens": int(usage.get("prompt_tokens", 0))
            + int(usage.get("completion_tokens", 0)),
            **usage,
        }
    return {
        "id": str(completion.get("id") or "completion"),
        "object": "chat.completion.chunk",
        "created": int(completion.get("created") or 0),
        "model": str(completion.get("model") or ""),
        "choices": choices,
        "usage": usage if isinstance(usage, dict) else None,
    }


def _answered_ids(messages: list[dict[str, Any]]) -> set[str]:
    """The tool-call ids the conversation already uses."""
    ids: set[str] = set()
    for message in messages:
        for call in message.get("tool_calls") or ():
            if isinstance(call, dict) and isinstance(call.get("id"), str):
                ids.add(call["id"])
    return ids


def _unique_ids(calls: list[tuple[str, str, str]], used: set[str]) -> tuple[ToolCall, ...]:
    """Calls whose ids are unique in the conversation: a tool message answers a call by id, so
    an empty id, or one that repeats (servers that number each reply's calls from 0), would
    answer the wrong call or none. Such a call gets a fresh id."""
    taken = set(used)
    unique: list[ToolCall] = []
    for call_id, name, arguments in calls:
        if not call_id or call_id in taken:
            call_id = f"call_{uuid.uuid4().hex[:12]}"
        taken.add(call_id)
        unique.append(ToolCall(call_id, name, arguments))
    return tuple(unique)


def _tokens(text: str) -> int:
    """Roughly four characters per token: the estimate used where an endpoint reports nothing."""
    return math.ceil(len(text) / 4)


def _estimate_usage(
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    content: str,
    tool_calls: tuple[ToolCall, ...],
) -> Usage:
    """Roughly four characters per token, for endpoints that do not report usage."""
    prompt_chars = len(json.dumps(messages)) + (len(json.dumps(tools)) if tools else 0)
    completion_chars = len(content) + sum(len(c.name) + len(c.arguments) for c in tool_calls)
    return Usage(math.ceil(prompt_chars / 4), math.ceil(completion_chars / 4), estimated=True)


def _cached_tokens(chunk: ChatCompletionChunk) -> int:
    """Cached prompt tokens from the usage chunk, as OpenAI-compatible APIs or llama.cpp's
    server report them; 0 when the endpoint says nothing."""
    usage = chunk.usage
    details = usage.prompt_tokens_details if usage is not None else None
    if details is not None and details.cached_tokens:
        return max(int(details.cached_tokens), 0)
    timings = (chunk.model_extra or {}).get("timings")
    if isinstance(timings, dict) and isinstance(timings.get("cache_n"), int):
        return max(int(timings["cache_n"]), 0)
    return 0


def _backoff(attempt: int, hint_s: float | None) -> float:
    """Seconds to wait before retry number `attempt + 1`: the endpoint's hint, else exponential."""
    if hint_s is not None:
        return min(max(hint_s, 0.0), MAX_RETRY_AFTER_S)
    ceiling = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2.0**attempt)
    # Half fixed, half random: spreads simultaneous missions apart without ever retrying at once.
    return ceiling / 2 + random.uniform(0, ceiling / 2)


def _retry_after(headers: httpx2.Headers) -> float | None:
    """Seconds the endpoint asked us to wait (`retry-after-ms`, `retry-after` seconds or date)."""
    millis = finite_number(headers.get("retry-after-ms"))
    if millis is not None:
        return millis * 0.001
    return parse_retry_after(headers.get("retry-after"), time.time())


def _error_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
        if isinstance(body.get("message"), str):
            return str(body["message"])
    return exc.response.reason_phrase or str(exc.status_code)


def _mentions_model(exc: openai.APIStatusError) -> bool:
    """Whether a 404 is about the model id rather than the URL path."""
    body = exc.body
    inner = body.get("error", body) if isinstance(body, dict) else None
    if isinstance(inner, dict) and (
        inner.get("code") == "model_not_found" or inner.get("param") == "model"
    ):
        return True
    return isinstance(inner, dict) and "model" in _error_message(exc).lower()


def _quote(text: str) -> str:
    """`text` on one line, shortened: errors are shown in one-line events and logs."""
    line = " ".join(text.split())
    return line if len(line) <= MESSAGE_LIMIT else line[: MESSAGE_LIMIT - 1] + "…"


def _cause(exc: BaseException) -> str:
    """The innermost reason for a connection failure, e.g. 'connection refused'."""
    reason = exc
    while (inner := reason.__cause__ or reason.__context__) is not None:
        reason = inner
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused"
    return _quote(str(reason)) or type(reason).__name__


class Recorder:
    """Appends each completed exchange to a JSON recording that `load_script` can replay.

    The file is rewritten atomically after every exchange, so a crash keeps what was recorded.
    """

    def __init__(self, path: Path, mission: dict[str, Any] | None = None) -> None:
        self.path = Path(path)
        self.mission = mission
        """The fingerprint of the recorded mission, checked when the recording is replayed."""
        self._exchanges: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    @property
    def exchanges(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._exchanges)

    def record(self, tier: Tier, reply: ModelReply) -> None:
        exchange = {"tier": tier.name, "model": reply.model, "response": reply_to_step(reply)}
        with self._lock:
            self._exchanges.append(exchange)
            document: dict[str, Any] = {"version": 1}
            if self.mission is not None:
                document["mission"] = self.mission
            document["exchanges"] = self._exchanges
            self._write(document)

    def _write(self, document: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(document, out, indent=2, ensure_ascii=False)
                out.write("\n")
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def reply_to_step(reply: ModelReply) -> dict[str, Any]:
    """A reply in the script step format, so that replaying it yields the same reply."""
    step: dict[str, Any] = {}
    if reply.content:
        step["content"] = reply.content
    if reply.tool_calls:
        step["tool_calls"] = [
            {"id": c.id, "name": c.name, "arguments": _readable_arguments(c.arguments)}
            for c in reply.tool_calls
        ]
    step["usage"] = {
        "prompt_tokens": reply.usage.prompt_tokens,
        "completion_tokens": reply.usage.completion_tokens,
    }
    if reply.usage.cached_tokens:
        step["usage"]["cached_tokens"] = reply.usage.cached_tokens
    if reply.finish_reason is not None:
        step["finish_reason"] = reply.finish_reason
    return step


def _readable_arguments(raw: str) -> Any:
    """The arguments as a JSON object when that re-encodes to exactly `raw`, else `raw` itself.

    The scripted server sends an object as `json.dumps(object)`, so this keeps recordings
    readable without changing a single byte of what is replayed.
    """
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError:
        return raw
    return parsed if isinstance(parsed, dict) and json.dumps(parsed) == raw else raw
