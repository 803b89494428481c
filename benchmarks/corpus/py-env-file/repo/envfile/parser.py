"""A small `.env` parser: `KEY=value` lines, comments, optional quotes and `export`."""

from __future__ import annotations

import re
from pathlib import Path

_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class EnvSyntaxError(ValueError):
    def __init__(self, line_number: int, line: str, reason: str) -> None:
        super().__init__(f"line {line_number}: {reason}: {line!r}")
        self.line_number = line_number


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        inner = value[1:-1]
        return inner.replace("\\n", "\n") if value[0] == '"' else inner
    # An unquoted value ends at an inline comment.
    return value.split(" #", 1)[0].rstrip()


def parse_line(line_number: int, line: str) -> tuple[str, str] | None:
    stripped = line.strip()
    if not stripped or stripped.startswith("#"):
        return None
    if stripped.startswith("export "):
        stripped = stripped[len("export ") :].lstrip()
    parts = stripped.split("=")
    if len(parts) != 2:
        raise EnvSyntaxError(line_number, line, "expected KEY=value")
    key, value = parts[0].strip(), parts[1].strip()
    if not _KEY.match(key):
        raise EnvSyntaxError(line_number, line, f"{key!r} is not a valid variable name")
    return key, _unquote(value)


def parse(text: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        pair = parse_line(number, line)
        if pair is not None:
            values[pair[0]] = pair[1]
    return values


def load(path: str | Path) -> dict[str, str]:
    return parse(Path(path).read_text(encoding="utf-8"))
