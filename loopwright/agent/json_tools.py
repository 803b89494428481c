"""The conversation for a server without tool support: tools described in the prompt,
calls and results as text."""

from __future__ import annotations

import json
from typing import Any

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
    except (ValueError, RecursionError):
        return arguments
