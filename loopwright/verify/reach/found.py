"""What the reach check reports, and the words both languages' scans look for."""

from __future__ import annotations

import re
from dataclasses import dataclass

PY_SUFFIXES = (".py",)
JS_SUFFIXES = (".js", ".mjs", ".cjs", ".jsx", ".ts", ".mts", ".cts", ".tsx")


UNCHECKABLE = "uncheckable"
"""The key of a file the scan could not walk: a finding whether or not the base version
was uncheckable too, since nothing the patch adds to it was checked."""


@dataclass(frozen=True)
class Reach:
    """One construct that reaches into the test run."""

    path: str
    line: int
    key: str
    """What was found, independent of where (the unit the base comparison counts)."""
    detail: str


SUSPICIOUS_TEXT = re.compile(
    r"pytest|pluggy|unittest|conftest|junit|runtest|makereport|loopwright|atexit|_exit"
    r"|sys\.modules|builtins|__import__|f_back|f_globals|__globals__|__subclasses__"
    r"|node:test|node:assert|reallyExit|exitCode|beforeExit|/proc\b|NODE_TEST",
    re.IGNORECASE,
)
