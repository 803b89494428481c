"""A model reply: its types, assembling one from a streamed (or whole) chat completion,
and writing it back as a script step so a replay yields the same reply.
"""

from __future__ import annotations

import json
import math
import uuid
from dataclasses import dataclass
from typing import Any, Literal

import pydantic
from openai.types.chat.chat_completion_chunk import ChatCompletionChunk, ChoiceDeltaToolCall

from loopwright.agent.textcalls import Recovered, recover_calls, split_reasoning
from loopwright.events import LONE_SURROGATE


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


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: str = ""


def as_text(value: str) -> str:
    """`value` as text every encoder takes. JSON can carry half of a surrogate pair
    (`\\ud83d`), and a stream may split a pair across two chunks: a split pair is joined
    into its character, a lone half becomes U+FFFD. Nothing later (the request that sends
    the conversation back, an event, a file) can then fail to encode the model's text."""
    if LONE_SURROGATE.search(value) is None:
        return value
    return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


class ReplyAssembler:
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
        text, thoughts = split_reasoning(as_text("".join(self.content)))
        reasoning = as_text("".join(self.reasoning)) + thoughts
        partial = [
            (as_text(p.id), as_text(p.name), as_text(p.arguments))
            for _, p in sorted(self.calls.items())
        ]
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


def _canonical(arguments: str) -> str:
    """Arguments in one spelling, so a call repeated with other whitespace is seen as one."""
    try:
        return json.dumps(json.loads(arguments), sort_keys=True)
    except (ValueError, RecursionError):
        return arguments


def as_chunk(completion: Any) -> ChatCompletionChunk:
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
    except (ValueError, RecursionError):
        return raw
    return parsed if isinstance(parsed, dict) and json.dumps(parsed) == raw else raw
