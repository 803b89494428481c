"""The requests the scripted model refuses: the chat-completions bodies the real OpenAI
endpoint would answer with 400, so a client that sends a typo fails here and not in
production."""

from __future__ import annotations

from typing import Any

# Top-level chat-completions fields the OpenAI API accepts; anything else is rejected.
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


class RequestError(Exception):
    """A request the real endpoint would refuse; becomes an OpenAI-style error body."""

    def __init__(
        self, status: int, message: str, *, param: str | None = None, code: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code


def validate_request(body: Any) -> None:
    """Raise `RequestError` (400) for a body the OpenAI API would reject."""
    if not isinstance(body, dict):
        raise RequestError(400, "The request body must be a JSON object.")
    unknown = sorted(set(body) - KNOWN_FIELDS)
    if unknown:
        raise RequestError(
            400, f"Unrecognized request argument supplied: {unknown[0]}", param=unknown[0]
        )
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise RequestError(400, "you must provide a model parameter", param="model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError(
            400, "'messages' must be a non-empty array of message objects", param="messages"
        )
    pending_ids: set[str] = set()
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise RequestError(400, f"{where} must be an object", param=where)
        role = message.get("role")
        if role not in ROLES:
            raise RequestError(
                400, f"{where}: missing or invalid 'role' {role!r}", param=f"{where}.role"
            )
        if role == "assistant":
            for j, call in enumerate(message.get("tool_calls") or []):
                _validate_assistant_call(call, f"{where}.tool_calls[{j}]")
                pending_ids.add(call["id"])
        elif role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in pending_ids:
                raise RequestError(
                    400,
                    f"Invalid parameter: {where} with role 'tool' must be a response to a "
                    f"preceding message with 'tool_calls' (tool_call_id {call_id!r} not found).",
                    param=f"{where}.tool_call_id",
                )
        elif "content" not in message:
            raise RequestError(400, f"{where}: missing 'content'", param=f"{where}.content")
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list) or not tools:
            raise RequestError(400, "'tools' must be a non-empty array", param="tools")
        for i, tool in enumerate(tools):
            function = tool.get("function") if isinstance(tool, dict) else None
            if (
                not isinstance(tool, dict)
                or tool.get("type") != "function"
                or not isinstance(function, dict)
                or not isinstance(function.get("name"), str)
            ):
                raise RequestError(
                    400,
                    f"tools[{i}] must be {{'type': 'function', 'function': {{'name': ...}}}}",
                    param=f"tools[{i}]",
                )
    stream_options = body.get("stream_options")
    if stream_options is not None and not body.get("stream"):
        raise RequestError(
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
        raise RequestError(
            400,
            f"{where} must be {{'id': str, 'type': 'function', "
            "'function': {'name': str, 'arguments': str}}",
            param=where,
        )
