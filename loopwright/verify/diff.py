"""Git-format (or plain) unified diffs, split into files and hunks.

Paths keep git's C quoting rules (`"a/\\303\\251.py"` is `a/é.py`), and a removed line
`-- x` (shown as `--- x`) is told from the next file's header by counting hunk lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

FileStatus = Literal["added", "deleted", "renamed", "modified"]


@dataclass(frozen=True)
class Hunk:
    old_start: int
    new_start: int
    lines: tuple[tuple[str, str], ...]
    """(op, text) pairs: op is " " for context, "-" for removed, "+" for added."""

    @property
    def removed(self) -> tuple[str, ...]:
        return tuple(text for op, text in self.lines if op == "-")

    @property
    def added(self) -> tuple[str, ...]:
        return tuple(text for op, text in self.lines if op == "+")


@dataclass(frozen=True)
class FilePatch:
    old_path: str | None
    """None for an added file."""
    new_path: str | None
    """None for a deleted file."""
    status: FileStatus
    hunks: tuple[Hunk, ...] = ()
    binary: bool = False

    @property
    def path(self) -> str:
        return self.new_path or self.old_path or ""

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p for p in (self.old_path, self.new_path) if p))


_HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def parse_patch(patch: str) -> list[FilePatch]:
    """Split a git-format (or plain) unified diff into its files and hunks."""
    lines = [line.removesuffix("\r") for line in patch.split("\n")]
    files: list[FilePatch] = []
    builder: _FileBuilder | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("diff --git "):
            if builder:
                files.append(builder.build())
            builder = _FileBuilder()
            builder.old_path, builder.new_path = _git_header_paths(line[len("diff --git ") :])
        elif line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            if builder is None or builder.hunks or builder.saw_markers:
                if builder:
                    files.append(builder.build())
                builder = _FileBuilder()
            builder.old_path = _marker_path(line[4:])
            builder.new_path = _marker_path(lines[i + 1][4:])
            builder.saw_markers = True
            if builder.old_path is None:
                builder.status = "added"
            elif builder.new_path is None:
                builder.status = "deleted"
            i += 1
        elif line.startswith("@@") and builder is not None:
            i = _read_hunk(lines, i, builder)
            continue
        elif builder is not None:
            _read_extended_header(line, builder)
        i += 1
    if builder:
        files.append(builder.build())
    return files


class _FileBuilder:
    def __init__(self) -> None:
        self.old_path: str | None = None
        self.new_path: str | None = None
        self.status: FileStatus = "modified"
        self.hunks: list[Hunk] = []
        self.binary = False
        self.saw_markers = False

    def build(self) -> FilePatch:
        old = None if self.status == "added" else self.old_path
        new = None if self.status == "deleted" else self.new_path
        return FilePatch(old, new, self.status, tuple(self.hunks), self.binary)


def _read_extended_header(line: str, builder: _FileBuilder) -> None:
    if line.startswith("new file mode"):
        builder.status = "added"
    elif line.startswith("deleted file mode"):
        builder.status = "deleted"
    elif line.startswith(("rename from ", "copy from ")):
        builder.old_path = _unquote(line.split(" ", 2)[2])
        builder.status = "renamed" if line.startswith("rename") else "added"
    elif line.startswith(("rename to ", "copy to ")):
        builder.new_path = _unquote(line.split(" ", 2)[2])
    elif line.startswith("Binary files ") or line == "GIT binary patch":
        builder.binary = True


def _read_hunk(lines: list[str], i: int, builder: _FileBuilder) -> int:
    """Read the hunk starting at `lines[i]`; return the index after it.

    Counting lines against the header is what tells a removed line `-- x` (shown as `--- x`)
    from the next file's header.
    """
    match = _HUNK_HEADER.match(lines[i])
    if not match:
        return i + 1
    old_left = int(match.group(2) or "1")
    new_left = int(match.group(4) or "1")
    body: list[tuple[str, str]] = []
    i += 1
    while i < len(lines) and (old_left > 0 or new_left > 0):
        line = lines[i]
        op, text = (line[:1] or " "), line[1:]
        if op == "\\":  # "\ No newline at end of file"
            i += 1
            continue
        if op == "-":
            old_left -= 1
        elif op == "+":
            new_left -= 1
        elif op == " ":
            old_left -= 1
            new_left -= 1
        else:
            break
        body.append((op, text))
        i += 1
    while i < len(lines) and lines[i].startswith("\\"):
        i += 1
    builder.hunks.append(Hunk(int(match.group(1)), int(match.group(3)), tuple(body)))
    return i


def _git_header_paths(rest: str) -> tuple[str | None, str | None]:
    if rest.startswith('"'):
        first, _, tail = _split_quoted(rest)
        second = _unquote(tail.strip())
        return _strip_prefix(first, "a/"), _strip_prefix(second, "b/")
    # `a/X b/X`: with identical names (the usual case) the split point is unambiguous even
    # when X contains spaces.
    half = (len(rest) - 1) // 2
    if len(rest) % 2 == 1 and rest[half] == " " and rest[2:half] == rest[half + 3 :]:
        return _strip_prefix(rest[:half], "a/"), _strip_prefix(rest[half + 1 :], "b/")
    old, sep, new = rest.partition(" b/")
    if sep:
        return _strip_prefix(old, "a/"), new
    return None, None


def _marker_path(value: str) -> str | None:
    value = value.split("\t", 1)[0]
    value = _unquote(value.strip()) if value.startswith('"') else value.rstrip()
    if value == "/dev/null":
        return None
    for prefix in ("a/", "b/"):
        if value.startswith(prefix):
            return value[2:]
    return value


def _strip_prefix(value: str, prefix: str) -> str:
    return value[len(prefix) :] if value.startswith(prefix) else value


def _split_quoted(text: str) -> tuple[str, str, str]:
    """Split a leading C-quoted string (git's quoting of unusual names) off `text`."""
    i = 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == '"':
            return _unquote(text[: i + 1]), '"', text[i + 1 :]
        i += 1
    return _unquote(text), "", ""


_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def _unquote(value: str) -> str:
    if not (len(value) >= 2 and value.startswith('"') and value.endswith('"')):
        return value
    body = value[1:-1]
    out = bytearray()
    i = 0
    while i < len(body):
        char = body[i]
        if char == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in "01234567" and re.match(r"[0-7]{3}", body[i + 1 : i + 4]):
                out.append(int(body[i + 1 : i + 4], 8))
                i += 4
                continue
            out.append(_ESCAPES.get(nxt, ord(nxt)))
            i += 2
            continue
        out.extend(char.encode("utf-8"))
        i += 1
    return out.decode("utf-8", errors="replace")


def squash(text: str) -> str:
    """`text` without any whitespace, to compare lines that differ only in spacing."""
    return re.sub(r"\s+", "", text)
