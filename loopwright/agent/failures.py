"""Failing test names read from a test command's plain output, for the loop's own messages.

Verification judges with structured reports (`verify/reports.py`); the loop only needs to
tell a model which tests its latest run left failing, from whatever the command printed:
pytest's short summary, node's TAP and spec reporters, jest/vitest marks and `go test`.
"""

from __future__ import annotations

import re

_PATTERNS = (
    re.compile(r"^(?:FAILED|ERROR) (\S+?)(?: - .*)?$"),  # pytest -rfE short summary
    re.compile(r"^not ok \d+ - (.+?)(?:\s+#.*)?$"),  # TAP (node --test, tap)
    # jest, vitest and node's spec reporter mark a failure with a cross
    re.compile(r"^\s*[\u2715\u2716\u00d7] (.+?)(?: \(\d+(?:\.\d+)? ?m?s\))?$"),
    re.compile(r"^\s*--- FAIL: (\S+)"),  # go test
)
MAX_NAMES = 20


def failing_tests(output: str) -> list[str]:
    """The distinct failing test names in `output`, in order of appearance (at most 20)."""
    names: list[str] = []
    for line in output.splitlines():
        for pattern in _PATTERNS:
            match = pattern.match(line.rstrip())
            if match and match.group(1) not in names:
                names.append(match.group(1))
                break
        if len(names) >= MAX_NAMES:
            break
    return names
