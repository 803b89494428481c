"""Where a failing run points: the repository files and lines its tracebacks name, and the
source around them, so the first request already shows a small model where to look.

Frames are read from Python tracebacks (`File "…", line N`) and pytest's short form
(`path.py:N: …`), node stack lines (`at f (/workspace/x.js:N:C)`, `file:///…`) and `go test`
lines (`x_test.go:N:`). Absolute paths are taken relative to the sandbox's workspace;
paths outside it, in installed environments or that do not exist are skipped. Product
code comes before tests, the innermost frame first.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass

from loopwright.verify.testfiles import in_environment, is_test_path

_FRAMES = (
    re.compile(r'File "(?P<path>[^"]+)", line (?P<line>\d+)'),
    re.compile(r"^(?P<path>[\w./-]+\.py):(?P<line>\d+): "),
    re.compile(r"\(?(?:file://)?(?P<path>/[^\s():]+\.(?:js|mjs|cjs|ts)):(?P<line>\d+):\d+\)?"),
    re.compile(r"^\s+(?P<path>[\w./-]+\.go):(?P<line>\d+): "),
)
WORKSPACE_MARK = "/workspace/"
MAX_FRAMES = 4
CONTEXT_LINES = 6
MAX_EXCERPT_CHARS = 1_500

Reader = Callable[[str], bytes | None]
"""The bytes of a workspace file by relative path, or None when it cannot be read."""


@dataclass(frozen=True)
class Frame:
    path: str
    line: int


def failing_frames(output: str) -> list[Frame]:
    """Every distinct repository frame in `output`, product code first, innermost first."""
    seen: list[Frame] = []
    for text in output.splitlines():
        for pattern in _FRAMES:
            for match in pattern.finditer(text):
                path = _relative(match.group("path"))
                frame = Frame(path, int(match.group("line"))) if path else None
                if frame is not None and frame not in seen:
                    seen.append(frame)
    product = [f for f in reversed(seen) if not is_test_path(f.path)]
    tests = [f for f in reversed(seen) if is_test_path(f.path)]
    return product + tests


def source_excerpts(output: str, read: Reader) -> str:
    """Numbered source around up to four failing frames, or "" when none can be read."""
    blocks: list[str] = []
    for frame in failing_frames(output):
        raw = read(frame.path)
        if raw is None or b"\0" in raw[:8192]:
            continue
        lines = raw.decode("utf-8", errors="replace").splitlines()
        if not 1 <= frame.line <= len(lines):
            continue
        start = max(frame.line - CONTEXT_LINES, 1)
        end = min(frame.line + CONTEXT_LINES, len(lines))
        body = "\n".join(
            f"{'>' if n == frame.line else ' '}{n:5d}  {lines[n - 1]}"
            for n in range(start, end + 1)
        )
        blocks.append(f"{frame.path}:{frame.line}\n{body[:MAX_EXCERPT_CHARS]}")
        if len(blocks) == MAX_FRAMES:
            break
    return "\n\n".join(blocks)


def _relative(path: str) -> str | None:
    if path.startswith("/"):
        at = path.find(WORKSPACE_MARK)
        if at < 0:
            return None
        path = path[at + len(WORKSPACE_MARK) :]
    path = posixpath.normpath(path)
    if path.startswith("../") or path == ".." or in_environment(path):
        return None
    return path
