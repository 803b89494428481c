"""Compact, readable terminal progress for a mission, rendered from its events."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, TextIO

from loopwright.events import Event
from loopwright.instructions import describe

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """`text` with every control character but newline and tab shown as an escape (`\\x1b`),
    so text from the model or the repository cannot move the cursor, rewrite a line, retitle
    the window or set the clipboard of the terminal it is printed to."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group(0)):02x}", text)


def _terminal_safe_data(value: Any) -> Any:
    if isinstance(value, str):
        return terminal_safe(value)
    if isinstance(value, dict):
        return {k: _terminal_safe_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_terminal_safe_data(v) for v in value]
    return value


_MARKS = {"done": "[x]", "in_progress": "[~]", "pending": "[ ]"}
_STATUS_WORDS = {
    "verified": "verified",
    "unverified": "NOT verified",
    "flaky": "flaky test, nothing changed",
    "nothing_to_fix": "nothing to fix",
    "budget_exceeded": "budget exceeded",
    "error": "error",
    "cancelled": "cancelled",
}


def color_enabled(stream: TextIO, env: Mapping[str, str] | None = None) -> bool:
    """Whether to colour what goes to `stream`, as https://no-color.org and force-color.org say:
    a non-empty NO_COLOR turns colour off, a non-empty FORCE_COLOR (other than 0 or false)
    turns it on, TERM=dumb turns it off, and otherwise colour follows whether `stream` is a
    terminal."""
    env = os.environ if env is None else env
    if env.get("NO_COLOR"):
        return False
    force = env.get("FORCE_COLOR")
    if force:
        return force.lower() not in ("0", "false")
    if env.get("TERM") == "dumb":
        return False
    return stream.isatty()


class ProgressPrinter:
    """An event sink that prints one short line per meaningful event."""

    def __init__(self, stream: TextIO | None = None, color: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.color = color_enabled(self.stream) if color is None else color
        self._cost = 0.0
        self._calls: dict[str, str] = {}
        """Each tool call's summary by call id, for the line its result prints."""

    def __call__(self, event: Event) -> None:
        line = self.render(event)
        if line is not None:
            print(line, file=self.stream, flush=True)

    def _c(self, code: str, text: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.color else text

    def render(self, event: Event) -> str | None:
        # Only the printer's own colour codes reach the terminal.
        event = replace(event, fields=_terminal_safe_data(event.fields))
        f = event.fields
        if event.type == "stage":
            status = f.get("status")
            if status == "started":
                return self._c("1;36", f"● {event.stage}")
            if status == "detected":
                line = f"  test command: {f.get('test_command')}  ({f.get('reason')})"
                found = f.get("instructions")
                if isinstance(found, dict):
                    size = describe(int(found.get("bytes") or 0), bool(found.get("truncated")))
                    line += f"\n  Repository instructions: {found.get('path')} ({size})"
                return line
            detail = _stage_detail(f)
            return f"  {event.stage} {status}{detail}"
        if event.type == "plan":
            items = f.get("items") or []
            return "\n".join(
                f"  {_MARKS.get(i.get('status', ''), '[ ]')} {i.get('step')}" for i in items
            )
        if event.type == "model_call":
            self._cost = float(f.get("total_cost_usd") or 0.0)
            tools = ", ".join(f.get("tool_calls") or []) or "no tool call"
            if f.get("tool_call_source") == "content":
                tools += " (written as text)"
            about = "~" if f.get("usage_estimated") else ""
            cached = f" ({f['cached_tokens']} cached)" if f.get("cached_tokens") else ""
            return self._c(
                "2",
                f"  · step {f.get('step')} on {f.get('tier')}: {tools}  "
                f"({about}{f.get('prompt_tokens')}{cached}+{f.get('completion_tokens')} tokens, "
                f"${self._cost:.4f} so far)",
            )
        if event.type == "attempt":
            head = f"attempt {f.get('attempt')}/{f.get('attempts')} on {f.get('tier')}"
            if f.get("status") == "started":
                return self._c("1;36", f"  ▶ {head} (seed {f.get('seed')})")
            if f.get("status") == "passed":
                return self._c("32", f"  ✓ {head}: the tests pass; verification judges it")
            return self._c("33", f"  ✗ {head} after {f.get('steps')} steps: {f.get('reason')}")
        if event.type == "model_retry":
            return self._c(
                "33",
                f"  ↻ model call failed (attempt {f.get('attempt')} of {f.get('attempts')}), "
                f"retrying in {float(f.get('wait_s') or 0):.1f}s: {f.get('reason')}",
            )
        if event.type == "tool_call":
            if f.get("summary"):
                self._calls[str(f.get("id"))] = str(f["summary"])
            return None
        if event.type == "tool_result":
            status = f.get("status")
            code = f.get("exit_code")
            mark = {"ok": "✓", "failed": "✗", "refused": "⊘", "error": "!"}.get(str(status), "?")
            summary = self._calls.pop(str(f.get("id")), None)
            what = summary or f.get("tool")
            tail = "" if code is None else f" · exit {code}" if summary else f" exit {code}"
            if status in ("refused", "error"):
                tail += f": {_first_line(f.get('output', ''))}"
            color = "32" if status == "ok" else "33" if status == "failed" else "31"
            return self._c(color, f"  {mark} {what}{tail}")
        if event.type == "approval_requested":
            return self._c(
                "1;33",
                f"  ⏸ waiting for approval ({f.get('rule')}): {f.get('what')}  "
                f"(request {f.get('id')}, rejected after {wait_words(f.get('expires_s'))})",
            )
        if event.type == "decision":
            return self._c("1;33" if f.get("decision") == "approve" else "33", _decision(f))
        if event.type == "escalation":
            return self._c(
                "1;35",
                f"  ⇧ escalated {f.get('from_tier')} → {f.get('to_tier')}: {f.get('reason')}",
            )
        if event.type == "verification":
            return render_verification(f)
        if event.type == "screenshot":
            if f.get("path"):
                return f"  screenshot: {f.get('path')} (HTTP {f.get('http_status')})"
            return self._c("33", f"  no screenshot: {f.get('reason') or 'the page did not load'}")
        if event.type == "phase":
            return self._c("2", render_phase(f))
        if event.type == "error":
            return self._c("31", f"  error: {f.get('message')}")
        if event.type == "done":
            status = str(f.get("status"))
            color = "1;32" if status == "verified" else "1;31"
            return self._c(
                color,
                f"■ {_STATUS_WORDS.get(status, status)}  "
                f"({f.get('steps')} steps, ${float(f.get('cost_usd') or 0):.4f}, "
                f"{float(f.get('elapsed_s') or 0):.1f}s)"
                + (f"\n  {f.get('message')}" if f.get("message") else ""),
            )
        return None


_PHASE_WORDS = {
    "snapshot": "snapshot",
    "sandbox_start": "sandbox start",
    "setup": "setup",
    "reproduce": "reproduce",
    "patch_export": "patch export",
    "verify_sandbox": "verification sandbox",
    "verify_setup": "verification setup",
    "verify_tests": "verification tests",
    "web_check": "web check",
    "new_tests": "new tests",
    "deliver": "deliver",
}


def render_phase(f: dict[str, Any]) -> str:
    """`  ⏱ patch export 0.31s`: which timed phase just ended and how long it took."""
    name = str(f.get("name"))
    try:
        seconds = f"{float(f.get('duration_s') or 0):.2f}s"
    except (TypeError, ValueError):
        seconds = "?s"
    return f"  ⏱ {_PHASE_WORDS.get(name, name)} {seconds}"


def render_verification(f: dict[str, Any]) -> str:
    """The before/after table, tamper findings and commands as plain text."""
    rows = f.get("rows") or []
    lines = ["  verification:"]
    if rows:
        width = min(max(len(str(r.get("id"))) for r in rows), 70)
        lines.append(f"    {'test':<{width}}  {'before':<8} {'after':<8} status")
        for r in rows:
            test_id = str(r.get("id"))
            if len(test_id) > width:
                test_id = "…" + test_id[-(width - 1) :]
            lines.append(
                f"    {test_id:<{width}}  {r.get('before') or '-':<8} {r.get('after') or '-':<8} "
                f"{r.get('status')}"
            )
    for cmd in f.get("commands") or []:
        lines.append(
            f"    {cmd.get('phase')}: `{cmd.get('command')}` exited {cmd.get('exit_code')}"
        )
    for finding in f.get("tamper") or []:
        lines.append(f"    tamper: {finding.get('path')}: {finding.get('detail')}")
    for reason in f.get("reasons") or []:
        lines.append(f"    why not verified: {reason}")
    return "\n".join(lines)


def _stage_detail(f: dict[str, Any]) -> str:
    keys = [k for k in ("failing", "reason", "tests", "path", "url") if f.get(k)]
    if not keys:
        return ""
    parts = []
    for k in keys:
        v = f[k]
        if isinstance(v, list):
            v = ", ".join(map(str, v[:5])) + (f" (+{len(v) - 5})" if len(v) > 5 else "")
        parts.append(f"{k}: {v}")
    return " — " + "; ".join(parts)


_DECISION_WORDS = {
    "approve": "✓ approved",
    "reject": "⊘ rejected",
    "redirect": "↪ redirected",
    "guidance": "✎ guidance",
}


def _decision(f: dict[str, Any]) -> str:
    """`  ⊘ rejected by expiry: nobody decided within 15 minutes`."""
    kind = str(f.get("decision"))
    by = "from" if kind == "guidance" else "by"
    text = f": {f['text']}" if f.get("text") else ""
    return f"  {_DECISION_WORDS.get(kind, kind)} {by} {f.get('by')}{text}"


def wait_words(value: Any) -> str:
    """`15 min`, `90s`: how long a pair-mode request waits before it is rejected."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return "?"
    return f"{seconds / 60:g} min" if seconds >= 60 and seconds % 60 == 0 else f"{seconds:g}s"


def _first_line(text: Any) -> str:
    s = str(text).strip().splitlines()
    return s[0][:160] if s else ""


def replay(lines: list[str], printer: ProgressPrinter) -> int:
    """Render a saved NDJSON event log; returns the number of events shown."""
    from loopwright.events import Event as _Event

    count = 0
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            event = _Event.from_dict(json.loads(line))
        except (json.JSONDecodeError, KeyError, ValueError) as exc:
            raise ValueError(f"line {number} is not a Loopwright event: {exc}") from None
        printer(event)
        count += 1
    return count
