"""Tool calls a model wrote as text: recovered from a reply's `content` when it has no
`tool_calls`, because many servers only parse one template's call syntax and pass the rest on.

Three shapes are recognised, in the order they appear: Hermes `<tool_call>{...}</tool_call>`
tags, fenced ```json blocks, and bare JSON objects in the prose. A candidate becomes a call only
when it names a tool offered in the request and its arguments validate against that tool's
parameters; anything else stays text, so prose that merely shows JSON is never executed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MAX_SCANNED_CHARS = 100_000
"""Longer content is not searched for bare JSON: each place a call could start costs a
decode attempt, and a failed one costs time in proportion to the text before it."""

_TAG = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
_FENCE = re.compile(
    r"```[ \t]*(json5|jsonc|json|tool_call|tool_code)?[ \t]*\r?\n?(.*?)```", re.DOTALL | re.I
)
"""A fenced block, on its own lines or on one; a fence in another language is never a call."""
_CALL_KEYS = "name|tool|tool_name|function|arguments|parameters|args|input|type|id|tool_calls"
_OPENING = re.compile(rf'\{{\s*"(?:{_CALL_KEYS})"\s*:')
"""Where a call object can start (or, after a `[`, a list of them); other braces are never
decoded."""
_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL)
_NAME_KEYS = ("name", "tool", "tool_name", "function")
_ARGUMENT_KEYS = ("arguments", "parameters", "args", "input")


@dataclass(frozen=True)
class TextCall:
    """A recovered call: the tool's name and its arguments as JSON text."""

    name: str
    arguments: str


@dataclass(frozen=True)
class Recovered:
    content: str
    """The text outside the recovered calls."""
    calls: tuple[TextCall, ...]


def split_reasoning(content: str) -> tuple[str, str]:
    """`content` without `<think>…</think>` blocks, and those blocks' text: reasoning a server
    left in the content is neither the answer nor a place to look for calls."""
    thoughts = [m.group(0) for m in _THINK.finditer(content)]
    if not thoughts:
        return content, ""
    return _THINK.sub("", content).strip(), "".join(thoughts)


def recover_calls(content: str, tools: Sequence[Mapping[str, Any]]) -> Recovered:
    """The calls written in `content` to the tools offered (OpenAI `tools` entries), in order."""
    schemas = _schemas(tools)
    if not schemas or not content:
        return Recovered(content, ())
    spans: list[tuple[int, int, list[TextCall]]] = []
    taken: list[tuple[int, int]] = []
    for match in _TAG.finditer(content):
        taken.append(match.span())
        calls = _calls_in(_unfence(match.group(1)), schemas)
        if calls:
            spans.append((match.start(), match.end(), calls))
    for match in _FENCE.finditer(content):
        if _overlaps(match.span(), taken):
            continue
        taken.append(match.span())
        calls = _calls_in(match.group(2), schemas)
        if calls:
            spans.append((match.start(), match.end(), calls))
    if len(content) <= MAX_SCANNED_CHARS:
        for start, end, value in _bare_json(content, taken):
            calls = _calls_from(value, schemas)
            if calls:
                spans.append((start, end, calls))
    if not spans:
        return Recovered(content, ())
    spans.sort(key=lambda span: span[0])
    pieces: list[str] = []
    position = 0
    for start, end, _ in spans:
        pieces.append(content[position:start])
        position = end
    pieces.append(content[position:])
    text = re.sub(r"\n{3,}", "\n\n", "".join(pieces)).strip()
    return Recovered(text, tuple(call for _, _, calls in spans for call in calls))


def _schemas(tools: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    schemas: dict[str, dict[str, Any]] = {}
    for tool in tools:
        function = tool.get("function")
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            parameters = function.get("parameters")
            schemas[function["name"]] = dict(parameters) if isinstance(parameters, Mapping) else {}
    return schemas


def _overlaps(span: tuple[int, int], taken: Sequence[tuple[int, int]]) -> bool:
    return any(span[0] < end and start < span[1] for start, end in taken)


def _unfence(text: str) -> str:
    match = _FENCE.search(text)
    return match.group(2) if match else text


def _calls_in(text: str, schemas: Mapping[str, dict[str, Any]]) -> list[TextCall]:
    """Calls in a tag or fence body: one JSON value, or several one after another."""
    decoder = json.JSONDecoder()
    values: list[Any] = []
    position = _skip_space(text, 0)
    while position < len(text):
        try:
            value, position = decoder.raw_decode(text, position)
        except (ValueError, RecursionError):
            return []
        values.append(value)
        position = _skip_space(text, position)
    calls: list[TextCall] = []
    for value in values:
        found = _calls_from(value, schemas)
        if not found:
            return []
        calls.extend(found)
    return calls


def _skip_space(text: str, position: int) -> int:
    while position < len(text) and (text[position].isspace() or text[position] == ","):
        position += 1
    return position


def _bare_json(text: str, taken: Sequence[tuple[int, int]]) -> Iterator[tuple[int, int, Any]]:
    """Each top-level JSON value in `text`, outside the `taken` spans, that may hold calls."""
    decoder = json.JSONDecoder()
    position = 0
    for opening in _OPENING.finditer(text):
        bracket = opening.start() - 1
        while bracket >= position and text[bracket].isspace():
            bracket -= 1
        starts = [opening.start()]
        if bracket >= position and text[bracket] == "[":
            starts.insert(0, bracket)
        for start in starts:
            if start < position or _overlaps((start, start + 1), taken):
                continue
            try:
                value, end = decoder.raw_decode(text, start)
            except (ValueError, RecursionError):
                continue
            if not _overlaps((start, end), taken):
                yield start, end, value
                position = end
            break


def _calls_from(value: Any, schemas: Mapping[str, dict[str, Any]]) -> list[TextCall]:
    """`value` as calls: a call object, a list of them, or `{"tool_calls": [...]}`; all or none."""
    if isinstance(value, dict) and isinstance(value.get("tool_calls"), list):
        value = value["tool_calls"]
    items = value if isinstance(value, list) else [value]
    calls = [_call_from(item, schemas) for item in items]
    if not calls or any(call is None for call in calls):
        return []
    return [call for call in calls if call is not None]


def _call_from(item: Any, schemas: Mapping[str, dict[str, Any]]) -> TextCall | None:
    if not isinstance(item, dict):
        return None
    function = item.get("function")
    if isinstance(function, dict):
        item = function
    name = next((item[k] for k in _NAME_KEYS if isinstance(item.get(k), str)), None)
    if name is None or name not in schemas:
        return None
    keys = [k for k in _ARGUMENT_KEYS if k in item]
    if len(keys) > 1 or set(item) - {*_NAME_KEYS, *_ARGUMENT_KEYS, "type", "id"}:
        return None
    arguments = item[keys[0]] if keys else {}
    if isinstance(arguments, str):
        # Some models encode the arguments a second time, as OpenAI's wire format does.
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):
            return None
    if not isinstance(arguments, dict) or not _valid(arguments, schemas[name], schemas[name]):
        return None
    return TextCall(name, json.dumps(arguments, ensure_ascii=False))


_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def _valid(value: Any, schema: Any, root: Mapping[str, Any]) -> bool:
    """Whether `value` satisfies the JSON Schema keywords that tool parameters use (types,
    properties, required, additionalProperties, enum, anyOf, $ref, items and size bounds);
    keywords outside that set are not checked here: the tool validates fully when it runs."""
    if not isinstance(schema, Mapping):
        return True
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = _resolve(ref, root)
        if target is None or not _valid(value, target, root):
            return False
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and not any(_valid(value, o, root) for o in options):
            return False
    options = schema.get("allOf")
    if isinstance(options, list) and not all(_valid(value, o, root) for o in options):
        return False
    if "enum" in schema and value not in schema["enum"]:
        return False
    if "const" in schema and value != schema["const"]:
        return False
    kind = schema.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        if not any(_is_type(value, k) for k in kinds):
            return False
    if isinstance(value, dict):
        return _valid_object(value, schema, root)
    if isinstance(value, list):
        return _valid_array(value, schema, root)
    if isinstance(value, str):
        return _within(len(value), schema, "minLength", "maxLength")
    if isinstance(value, int | float) and not isinstance(value, bool):
        return _valid_number(value, schema)
    return True


def _is_type(value: Any, kind: Any) -> bool:
    types = _TYPES.get(str(kind))
    if types is None:
        return True
    if isinstance(value, bool) and kind != "boolean":
        return False
    if kind == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, types)


def _valid_object(
    value: dict[str, Any], schema: Mapping[str, Any], root: Mapping[str, Any]
) -> bool:
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    required = schema.get("required")
    if isinstance(required, list) and any(key not in value for key in required):
        return False
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        if key in properties:
            if not _valid(item, properties[key], root):
                return False
        elif extra is False or (isinstance(extra, Mapping) and not _valid(item, extra, root)):
            return False
    return _within(len(value), schema, "minProperties", "maxProperties")


def _valid_array(value: list[Any], schema: Mapping[str, Any], root: Mapping[str, Any]) -> bool:
    items = schema.get("items")
    if isinstance(items, Mapping) and not all(_valid(item, items, root) for item in value):
        return False
    return _within(len(value), schema, "minItems", "maxItems")


def _valid_number(value: float, schema: Mapping[str, Any]) -> bool:
    def bound(key: str) -> float | None:
        limit = schema.get(key)
        return limit if isinstance(limit, int | float) and not isinstance(limit, bool) else None

    low, high = bound("minimum"), bound("maximum")
    above, below = bound("exclusiveMinimum"), bound("exclusiveMaximum")
    return (
        (low is None or value >= low)
        and (high is None or value <= high)
        and (above is None or value > above)
        and (below is None or value < below)
    )


def _within(size: int, schema: Mapping[str, Any], low: str, high: str) -> bool:
    minimum, maximum = schema.get(low), schema.get(high)
    if isinstance(minimum, int) and size < minimum:
        return False
    return not (isinstance(maximum, int) and size > maximum)


def _resolve(ref: str, root: Mapping[str, Any]) -> Any:
    """A local `#/...` reference inside the tool's parameters; None when it does not resolve."""
    if not ref.startswith("#/"):
        return None
    node: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node
