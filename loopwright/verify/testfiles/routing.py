"""Where verification puts each changed file (applied first, before setup, only for the
new tests' own pass, or withheld), and the command that runs the new tests on their own."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from loopwright.verify.testfiles.changes import Change
from loopwright.verify.testfiles.paths import is_test_module

ALLOW_TEST_EDITS_HINT = "(a repository can allow it with allow_test_edits in .loopwright.yml)"
"""How a repository lets a fix change tests, as every refusal and finding says it."""

Status = Literal["added", "deleted", "modified"]


@dataclass(frozen=True)
class Routed:
    """One changed file and where verification puts it."""

    path: str
    status: Status
    change: Change
    phase: Literal["main", "dependency", "new_tests", "base"]
    """main: applied before the original tests run; dependency: applied before setup (when
    dependency changes are allowed); new_tests: applied only for the separate pass of new
    tests; base: withheld, the base version stays."""
    allowed: bool = False
    """Whether the repository's allow_test_edits covers the path."""


def route(
    path: str,
    status: Status,
    change: Change,
    *,
    test_edit_allowed: bool,
    dependency_allowed: bool,
) -> Routed:
    """Where the changed file `path` goes in verification (see `Routed.phase`)."""
    if change.touches_tests:
        if status == "added" and change.test and not change.test_config:
            if is_test_module(path) or not test_edit_allowed:
                return Routed(path, status, change, "new_tests", test_edit_allowed)
            return Routed(path, status, change, "main", True)
        return Routed(
            path, status, change, "main" if test_edit_allowed else "base", test_edit_allowed
        )
    if change.dependency and dependency_allowed:
        return Routed(path, status, change, "dependency")
    return Routed(path, status, change, "main")


def new_tests_command(
    command: str, runner: str, files: Sequence[str], preloads: Sequence[str]
) -> str | None:
    """A command that runs only `files` with the suite's runner, in a process of their own;
    None when the runner cannot be pointed at single files."""
    py = [f for f in files if f.endswith(".py")]
    js = [f for f in files if f.endswith((".js", ".mjs", ".cjs"))]
    if runner == "pytest" and py:
        match = _PYTEST_INVOCATION.match(command)
        if match:
            return f"{match.group(1)} {shlex.join(py)}"
        return None
    if runner in ("node", "npm") and js:
        flags = [
            word
            for p in preloads
            for word in (
                "--import" if p.endswith(".mjs") else "--require",
                p if p.startswith("/") else "./" + p,
            )
        ]
        return shlex.join(["node", "--test", *flags, *js])
    return None


_PYTEST_INVOCATION = re.compile(r"^(.*?(?:-m\s+pytest|(?:^|[\s/])(?:pytest|py\.test)))(?=\s|$)")
