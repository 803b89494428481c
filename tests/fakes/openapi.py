"""GitHub's published OpenAPI description as a route table and a request validator.

The fake GitHub uses it to refuse any request the real API would not understand: a method and
path that name no operation, a path parameter of the wrong shape, a missing or malformed query
parameter, or a JSON body that does not match the operation's request schema. It also builds
schema-valid response skeletons and checks the fake's own responses against the description.
"""

from __future__ import annotations

import copy
import json
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from jsonschema import Draft4Validator
from jsonschema.exceptions import ValidationError, best_match

DESCRIPTION_PATH = (
    Path(__file__).resolve().parent
    / "npm/node_modules/@octokit/openapi/generated/api.github.com.json"
)
METHODS = ("get", "post", "put", "patch", "delete")
# Keywords that only document a schema; dropping them keeps validation fast. `format` is
# dropped too: GitHub's own checks on formats are looser than the description suggests.
_DOC_KEYWORDS = frozenset(
    {
        "description",
        "example",
        "examples",
        "title",
        "format",
        "readOnly",
        "writeOnly",
        "deprecated",
        "discriminator",
        "default",
        "externalDocs",
        "nullable",
    }
)


class RequestInvalid(Exception):
    """The request does not match the operation; carries GitHub's status and error body."""

    def __init__(self, status: int, message: str, errors: list[dict[str, Any]] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = errors or []


@dataclass(frozen=True)
class Parameter:
    name: str
    location: str
    required: bool
    schema: dict[str, Any]
    multi_segment: bool


@dataclass(frozen=True)
class Operation:
    operation_id: str
    method: str
    template: str
    docs_url: str
    parameters: tuple[Parameter, ...]
    body_required: bool
    body_schema: dict[str, Any] | None
    """The `application/json` request schema, or None when the operation takes no JSON body."""
    body_content_types: tuple[str, ...]
    responses: dict[str, Any]

    def param(self, name: str) -> Parameter | None:
        return next((p for p in self.parameters if p.name == name), None)


@dataclass
class _Route:
    template: str
    regex: re.Pattern[str]
    names: tuple[str, ...]
    rank: tuple[int, tuple[int, ...]]
    operations: dict[str, Operation] = field(default_factory=dict)


@dataclass(frozen=True)
class Match:
    operation: Operation
    path_params: dict[str, str]


class Description:
    """One loaded description: operations by id, a compiled route table, schema validators."""

    def __init__(self, document: dict[str, Any], load_seconds: float = 0.0) -> None:
        self.document = document
        self.load_seconds = load_seconds
        self.operations: dict[str, Operation] = {}
        self._routes: list[_Route] = []
        self._definitions: dict[str, Any] = {}
        self._validators: dict[int, tuple[dict[str, Any], Draft4Validator]] = {}
        self._skeletons: dict[int, tuple[dict[str, Any], Any]] = {}
        self._lock = threading.Lock()
        self._build_routes()
        self._definitions = {
            name: _convert(schema) for name, schema in document["components"]["schemas"].items()
        }

    # ---- routing -------------------------------------------------------------------------

    def _build_routes(self) -> None:
        for template, item in self.document["paths"].items():
            shared = [self._deref(p) for p in item.get("parameters", [])]
            operations: dict[str, Operation] = {}
            for method in METHODS:
                if method not in item:
                    continue
                op = self._operation(template, method, item[method], shared)
                operations[method.upper()] = op
                self.operations[op.operation_id] = op
            multi = {
                p.name
                for op in operations.values()
                for p in op.parameters
                if p.location == "path" and p.multi_segment
            }
            segments = template.strip("/").split("/")
            names: list[str] = []
            parts: list[str] = []
            flags: list[int] = []
            for segment in segments:
                literal = True
                pattern = ""
                for piece in re.split(r"(\{[^}]+\})", segment):
                    if piece.startswith("{") and piece.endswith("}"):
                        name = piece[1:-1]
                        names.append(name)
                        pattern += (
                            f"(?P<p{len(names) - 1}>.+)"
                            if name in multi
                            else (f"(?P<p{len(names) - 1}>[^/]+)")
                        )
                        literal = False
                    else:
                        pattern += re.escape(piece)
                parts.append(pattern)
                flags.append(1 if literal else 0)
            regex = re.compile("^/" + "/".join(parts) + "/?$")
            self._routes.append(
                _Route(template, regex, tuple(names), (sum(flags), tuple(flags)), operations)
            )
        # GitHub's router prefers literal segments: `/pulls/comments` over `/pulls/{number}`,
        # `/commits/{ref}/check-runs` over a multi-segment `{ref}` that swallows the suffix.
        self._routes.sort(key=lambda r: r.rank, reverse=True)

    def _operation(
        self, template: str, method: str, op: dict[str, Any], shared: list[dict[str, Any]]
    ) -> Operation:
        params: dict[tuple[str, str], Parameter] = {}
        for raw in [*shared, *(self._deref(p) for p in op.get("parameters", []))]:
            params[(raw["name"], raw["in"])] = Parameter(
                name=raw["name"],
                location=raw["in"],
                required=bool(raw.get("required")),
                schema=raw.get("schema", {}),
                multi_segment=bool(raw.get("x-multi-segment")),
            )
        body = self._deref(op.get("requestBody", {}))
        content = body.get("content", {})
        json_schema = content.get("application/json", {}).get("schema")
        return Operation(
            operation_id=op["operationId"],
            method=method.upper(),
            template=template,
            docs_url=op.get("externalDocs", {}).get("url", "https://docs.github.com/rest"),
            parameters=tuple(params.values()),
            body_required=bool(body.get("required")),
            body_schema=json_schema,
            body_content_types=tuple(content),
            responses=op.get("responses", {}),
        )

    def match(self, method: str, raw_path: str) -> Match | None:
        """The operation GitHub would route `method raw_path` to, or None (GitHub's 404)."""
        method = method.upper()
        for route in self._routes:
            op = route.operations.get(method)
            if op is None:
                continue
            m = route.regex.match(raw_path)
            if m is None:
                continue
            values = {name: unquote(m.group(f"p{i}")) for i, name in enumerate(route.names)}
            if all(self._path_value_ok(op, name, value) for name, value in values.items()):
                return Match(op, values)
        return None

    def _path_value_ok(self, op: Operation, name: str, value: str) -> bool:
        param = op.param(name)
        if param is None or value == "":
            return value != ""
        try:
            self.validate_value(param.schema, _coerce(param.schema, value, self))
        except (ValueError, ValidationError):
            return False
        return True

    # ---- validation ----------------------------------------------------------------------

    def validator(self, schema: dict[str, Any]) -> Draft4Validator:
        """A validator for one schema node of the description (cached by identity)."""
        key = id(schema)
        with self._lock:
            found = self._validators.get(key)
            if found is None:
                converted = _convert(schema)
                if isinstance(converted, dict):
                    converted = {**converted, "definitions": self._definitions}
                # The node is kept with its validator so its id is never reused.
                found = (schema, Draft4Validator(converted))
                self._validators[key] = found
            return found[1]

    def validate_value(self, schema: dict[str, Any], value: Any) -> None:
        error = best_match(self.validator(schema).iter_errors(value))
        if error is not None:
            raise error

    def validate_request(
        self,
        match: Match,
        query: dict[str, list[str]],
        body: bytes,
        content_type: str,
    ) -> tuple[dict[str, Any], Any]:
        """Typed query values and the parsed body, or RequestInvalid as GitHub reports it."""
        op = match.operation
        values: dict[str, Any] = dict(match.path_params)
        for param in op.parameters:
            if param.location == "path":
                values[param.name] = _coerce(param.schema, match.path_params[param.name], self)
                continue
            if param.location != "query":
                continue
            raw = query.get(param.name) or query.get(f"{param.name}[]")
            if raw is None:
                if param.required:
                    raise RequestInvalid(
                        422,
                        f'Invalid request.\n\n"{param.name}" wasn\'t supplied.',
                        [{"resource": "Query", "field": param.name, "code": "missing_field"}],
                    )
                continue
            try:
                value = _coerce(param.schema, raw if len(raw) > 1 else raw[0], self)
                self.validate_value(param.schema, value)
            except (ValueError, ValidationError) as exc:
                detail = exc.message if isinstance(exc, ValidationError) else str(exc)
                raise RequestInvalid(
                    422,
                    f"Invalid request.\n\nFor '{param.name}', {detail}.",
                    [
                        {
                            "resource": "Query",
                            "field": param.name,
                            "code": "invalid",
                            "value": raw[0],
                        }
                    ],
                ) from None
            values[param.name] = value
        parsed: Any = None
        if op.body_schema is not None:
            if body.strip():
                media = content_type.split(";")[0].strip().lower()
                if media and "json" not in media and media not in ("text/plain",):
                    raise RequestInvalid(415, f"Unsupported 'Content-Type': '{media}'")
                try:
                    parsed = json.loads(body)
                except ValueError:
                    raise RequestInvalid(400, "Problems parsing JSON") from None
            elif op.body_required:
                parsed = {}
            if parsed is not None:
                errors = sorted(
                    self.validator(op.body_schema).iter_errors(parsed),
                    key=lambda e: list(e.absolute_path),
                )
                if errors:
                    raise RequestInvalid(
                        422,
                        "Invalid request.\n\n" + _describe(best_match(errors) or errors[0]),
                        [_error_entry(e) for e in errors],
                    )
        return values, parsed

    def response_schema(self, op: Operation, status: int) -> dict[str, Any] | None:
        response = self._deref(op.responses.get(str(status), {}))
        content = response.get("content", {})
        return content.get("application/json", {}).get("schema")

    def check_response(self, op: Operation, status: int, body: Any) -> str | None:
        """Why `body` is not what the description promises for `status`, or None."""
        schema = self.response_schema(op, status)
        return None if schema is None else self.check_value(schema, body)

    def check_value(self, schema: dict[str, Any], value: Any) -> str | None:
        """Why `value` does not match `schema`, or None."""
        error = best_match(self.validator(schema).iter_errors(value))
        return None if error is None else _describe(error)

    # ---- instances -----------------------------------------------------------------------

    def schema(self, name: str) -> dict[str, Any]:
        return self.document["components"]["schemas"][name]

    def skeleton(self, schema: dict[str, Any] | str) -> Any:
        """A minimal valid instance: every required property, nullable ones left null."""
        node = self.schema(schema) if isinstance(schema, str) else schema
        key = id(node)
        with self._lock:
            found = self._skeletons.get(key)
            if found is None:
                found = (node, self._instance(node, 0))
                self._skeletons[key] = found
        return copy.deepcopy(found[1])

    def _instance(self, node: dict[str, Any], depth: int) -> Any:
        node = self._deref(node)
        if depth > 12:
            return None
        if "allOf" in node:
            merged: dict[str, Any] = {}
            for part in node["allOf"]:
                value = self._instance(part, depth + 1)
                if isinstance(value, dict):
                    merged.update(value)
            return merged
        for key in ("oneOf", "anyOf"):
            if key in node:
                branches = [self._deref(b) for b in node[key]]
                concrete = [b for b in branches if b.get("type") != "null"] or branches
                return self._instance(concrete[0], depth + 1)
        kind = node.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), None)
        if kind is None and "properties" in node:
            kind = "object"
        example = node.get("example")
        if "enum" in node:
            options = [v for v in node["enum"] if v is not None]
            return example if example in options else (options[0] if options else None)
        if kind == "object":
            result: dict[str, Any] = {}
            properties = node.get("properties", {})
            for name in node.get("required", []):
                prop = self._deref(properties.get(name, {}))
                result[name] = None if prop.get("nullable") else self._instance(prop, depth + 1)
            return result
        if kind == "array":
            count = node.get("minItems", 0)
            return [self._instance(node.get("items", {}), depth + 1) for _ in range(count)]
        if kind == "string":
            if isinstance(example, str):
                return example
            return _FORMAT_DEFAULTS.get(node.get("format", ""), "")
        if kind == "integer":
            return example if isinstance(example, int) else max(node.get("minimum", 1), 1)
        if kind == "number":
            return example if isinstance(example, int | float) else 0
        if kind == "boolean":
            return example if isinstance(example, bool) else False
        return example

    # ---- helpers -------------------------------------------------------------------------

    def _deref(self, node: Any) -> Any:
        seen = 0
        while isinstance(node, dict) and "$ref" in node and seen < 20:
            node = self._pointer(node["$ref"])
            seen += 1
        return node

    def _pointer(self, ref: str) -> Any:
        if not ref.startswith("#/"):
            raise ValueError(f"external $ref not supported: {ref}")
        node: Any = self.document
        for part in ref[2:].split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node


_FORMAT_DEFAULTS = {
    "date-time": "2024-01-01T00:00:00Z",
    "date": "2024-01-01",
    "uri": "https://github.com",
    "uri-template": "https://github.com",
    "email": "octocat@github.com",
}


def _convert(node: Any) -> Any:
    """OpenAPI 3.0 schema → JSON Schema draft 4 as GitHub's server interprets it.

    `nullable` becomes a `null` type (or an `anyOf` with null when there is no `type`);
    `$ref` into components/schemas points at the shared `definitions`; `oneOf` is checked as
    `anyOf`, because several of GitHub's `oneOf` branches overlap and the API accepts a body
    that matches any of them.
    """
    if isinstance(node, list):
        return [_convert(item) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        ref = node["$ref"]
        prefix = "#/components/schemas/"
        return {"$ref": "#/definitions/" + ref[len(prefix) :]} if ref.startswith(prefix) else node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DOC_KEYWORDS or key.startswith("x-"):
            continue
        if key == "properties":
            out[key] = {name: _convert(schema) for name, schema in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            out[key] = _convert(value)
        elif key in ("oneOf", "anyOf", "allOf"):
            out["anyOf" if key == "oneOf" else key] = [_convert(v) for v in value]
        else:
            out[key] = value
    if node.get("nullable"):
        kind = out.get("type")
        if isinstance(kind, str):
            out["type"] = [kind, "null"]
            if "enum" in out and None not in out["enum"]:
                out["enum"] = [*out["enum"], None]
        else:
            out = {"anyOf": [out, {"type": "null"}]}
    return out


def _coerce(schema: dict[str, Any], raw: str | list[str], description: Description) -> Any:
    """A query or path string as the typed value its schema describes (ValueError if not)."""
    schema = description._deref(schema)
    kind = schema.get("type")
    if kind is None:
        for key in ("oneOf", "anyOf"):
            for branch in schema.get(key, []):
                try:
                    value = _coerce(branch, raw, description)
                    description.validate_value(branch, value)
                except (ValueError, ValidationError):
                    continue
                return value
        return raw
    if kind == "array":
        items = raw if isinstance(raw, list) else raw.split(",")
        return [_coerce(schema.get("items", {}), item, description) for item in items]
    if isinstance(raw, list):
        raw = raw[-1]
    if kind == "integer":
        if not re.fullmatch(r"-?\d+", raw):
            raise ValueError(f'"{raw}" is not an integer')
        return int(raw)
    if kind == "number":
        try:
            return float(raw)
        except ValueError:
            raise ValueError(f'"{raw}" is not a number') from None
    if kind == "boolean":
        if raw not in ("true", "false"):
            raise ValueError(f'"{raw}" is not a boolean')
        return raw == "true"
    return raw


def _describe(error: ValidationError) -> str:
    path = "/".join(f"properties/{p}" if isinstance(p, str) else str(p) for p in error.path)
    if error.validator == "required":
        missing = re.findall(r"'([^']+)' is a required property", error.message)
        return f'"{missing[0] if missing else error.message}" wasn\'t supplied.'
    where = f"For '{path}', " if path else ""
    return f"{where}{error.message}."


def _error_entry(error: ValidationError) -> dict[str, Any]:
    field_name = ".".join(str(p) for p in error.path)
    code = "invalid"
    if error.validator == "required":
        code = "missing_field"
        missing = re.findall(r"'([^']+)' is a required property", error.message)
        field_name = ".".join([field_name, *missing[:1]]).strip(".")
    entry: dict[str, Any] = {"resource": "Request", "field": field_name, "code": code}
    entry["message"] = error.message
    return entry


_cache: dict[Path, Description] = {}
_cache_lock = threading.Lock()


def load_description(path: Path = DESCRIPTION_PATH) -> Description:
    """The description at `path`, parsed and compiled once per process."""
    with _cache_lock:
        found = _cache.get(path)
        if found is None:
            # CPU time of this process: the load's own cost, which other work on the
            # machine cannot inflate (the unit tests bound it).
            started = time.process_time()
            document = json.loads(path.read_bytes())
            found = Description(document)
            found.load_seconds = time.process_time() - started
            _cache[path] = found
        return found


def deep_merge(base: Any, overlay: Any) -> Any:
    """`overlay` on top of `base`; nested dicts merge, everything else replaces."""
    if isinstance(base, dict) and isinstance(overlay, dict):
        merged = dict(base)
        for key, value in overlay.items():
            merged[key] = deep_merge(base.get(key), value) if key in base else copy.copy(value)
        return merged
    return overlay
