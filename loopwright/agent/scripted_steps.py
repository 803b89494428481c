"""The scripted model's script: the steps it answers with, and reading them from a file.

A script is a JSON list of steps; a recording (what `--record` writes) is an object
`{"version": 1, "mission": …, "exchanges": [{"response": step}, …]}`. A problem is a
ValueError that says what is wrong and where: the step, the field, the file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STEP_FIELDS = frozenset(
    {"content", "tool_calls", "usage", "status", "retry_after", "stall_s", "delay_s", "repeat",
     "finish_reason"}
)  # fmt: skip


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
