"""Tool calls in words: what the events and the progress output say a call did.

`describe_call` decodes a call's arguments and summarises it in one line ("Read
tests/test_totals.py:1-40", "Ran `pytest -q`", "Edited app.py (+3 \u22121)"), whether or
not the call is valid.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from loopwright.jsonshape import nests_within


@dataclass(frozen=True)
class CallDescription:
    """A tool call as the events carry it: the decoded arguments and a line saying what it
    does ("Read tests/test_totals.py:1-40", "Ran `pytest -q`")."""

    args: dict[str, Any]
    summary: str
    args_error: str | None = None


MAX_ARGUMENT_NESTING = 32
"""The deepest a call's arguments may nest (no tool's schema goes past four levels): deeper
arguments are refused where they come in, before an event, the redaction or a copy of them
walks them one frame a level."""
SUMMARY_CHARS = 120
MINUS = "\u2212"
"""Lines removed, as in "(+1 \u22121)": a minus sign, not a hyphen."""


def describe_call(name: str, raw_arguments: str) -> CallDescription:
    """Decode a call's arguments and summarise it in words, whether or not the call is
    valid: an unknown tool or arguments that do not parse are said as such."""
    try:
        data = json.loads(raw_arguments or "{}")
    except (ValueError, RecursionError) as exc:
        return CallDescription(
            {}, f"Called {_short(name)} with arguments that are not JSON", json_problem(exc)
        )
    if not isinstance(data, dict):
        return CallDescription(
            {}, f"Called {_short(name)} with arguments that are not an object", "not an object"
        )
    if not nests_within(data, MAX_ARGUMENT_NESTING):
        return CallDescription(
            {}, f"Called {_short(name)} with arguments nested too deeply", "nested too deeply"
        )
    if name not in _summaries:
        return CallDescription(data, f"Called the unknown tool `{_short(name)}`")
    return CallDescription(data, _summaries[name](data))


def json_problem(exc: ValueError | RecursionError) -> str:
    """Why arguments did not decode: bad syntax, or JSON that Python will not build (an
    integer of thousands of digits, nesting deeper than the interpreter's stack)."""
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at position {exc.pos}"
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return _short(exc)


def _short(text: Any, limit: int = SUMMARY_CHARS) -> str:
    """One line, at most `limit` characters."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _path(args: dict[str, Any]) -> str:
    path = args.get("path")
    return _short(path) if isinstance(path, str) and path else "(no path)"


def _lines(text: Any) -> int:
    return len(text.splitlines()) if isinstance(text, str) else 0


def _plan_summary(args: dict[str, Any]) -> str:
    items = args.get("items")
    if not isinstance(items, list):
        return "Updated the plan (no items)"
    return f"Updated the plan ({len(items)} item{'' if len(items) == 1 else 's'})"


def _read_summary(args: dict[str, Any]) -> str:
    start, end = args.get("start_line"), args.get("end_line")
    span = ""
    if isinstance(start, int) or isinstance(end, int):
        first = start if isinstance(start, int) else 1
        span = f":{first}-{end}" if isinstance(end, int) else f":{first}-end"
    return f"Read {_path(args)}{span}"


def _write_summary(args: dict[str, Any]) -> str:
    count = _lines(args.get("content"))
    return f"Wrote {_path(args)} ({count} line{'' if count == 1 else 's'})"


def _edit_summary(args: dict[str, Any]) -> str:
    old, new = args.get("old"), args.get("new")
    if not isinstance(old, str) or not isinstance(new, str):
        return f"Edited {_path(args)}"
    added, removed = _line_changes(old.splitlines(), new.splitlines())
    return f"Edited {_path(args)} (+{added} {MINUS}{removed})"


DIFF_WORK = 400_000
"""Steps an edit's summary may spend matching lines in order (well under a second)."""


def _line_changes(old: list[str], new: list[str]) -> tuple[int, int]:
    """Lines added and removed from `old` to `new`, as a minimal diff counts them.

    The summary is made before any budget is checked, so its work is bounded: lines common
    to both ends are set aside in linear time, the rest is matched with Myers' O(ND)
    algorithm for at most `DIFF_WORK` steps; past that, lines are matched regardless of
    order (a line moved is then not counted), which takes linear time."""
    start, limit = 0, min(len(old), len(new))
    while start < limit and old[start] == new[start]:
        start += 1
    end = 0
    while end < limit - start and old[-1 - end] == new[-1 - end]:
        end += 1
    old, new = old[start : len(old) - end], new[start : len(new) - end]
    distance = _edit_distance(old, new, DIFF_WORK)
    if distance is None:
        old_count, new_count = Counter(old), Counter(new)
        return (new_count - old_count).total(), (old_count - new_count).total()
    grown = len(new) - len(old)
    return (distance + grown) // 2, (distance - grown) // 2


def _edit_distance(a: list[str], b: list[str], budget: int) -> int | None:
    """Lines inserted plus lines deleted in a shortest edit from `a` to `b` (Myers, 1986),
    or None once more than `budget` steps are spent."""
    ids: dict[str, int] = {}
    xs = [ids.setdefault(line, len(ids)) for line in a]
    ys = [ids.setdefault(line, len(ids)) for line in b]
    n, m = len(xs), len(ys)
    offset = n + m + 1
    furthest = [0] * (2 * offset + 1)
    """The furthest x reached on each diagonal k = x - y, at index offset + k."""
    work = 0
    for d in range(n + m + 1):
        for k in range(-d, d + 1, 2):
            if k == -d or (k != d and furthest[offset + k - 1] < furthest[offset + k + 1]):
                x = furthest[offset + k + 1]
            else:
                x = furthest[offset + k - 1] + 1
            y, before = x - k, x
            while x < n and y < m and xs[x] == ys[y]:
                x, y = x + 1, y + 1
            work += 1 + x - before
            furthest[offset + k] = x
            if x >= n and y >= m:
                return d
            if work > budget:
                return None
    return n + m


def _command_summary(args: dict[str, Any]) -> str:
    command = args.get("command")
    if not isinstance(command, str) or not command.strip():
        return "Ran (no command)"
    return "Ran `" + _short(command).replace("`", "'") + "`"


def _finish_summary(args: dict[str, Any]) -> str:
    return "Finished"


_summaries: dict[str, Callable[[dict[str, Any]], str]] = {
    "update_plan": _plan_summary,
    "read_file": _read_summary,
    "write_file": _write_summary,
    "edit_file": _edit_summary,
    "run_command": _command_summary,
    "finish": _finish_summary,
}
