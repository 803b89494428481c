"""What Loopwright posts on GitHub: pull-request bodies, check-run output and comments.

Pure functions from a mission result (`MissionResult.to_dict()`) to Markdown, built from
the inert blocks in `markdown` (re-exported here for the callers that render with them):
model-written text is redacted and can ping, link or close nothing. The model's summary
and plan sit in a blockquote that no line of them can leave. Sizes respect GitHub's limits
and are cut with a note rather than at an arbitrary byte.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from loopwright.events import encodable
from loopwright.github.markdown import (
    TITLE_LIMIT,
    ZWJ,
    code,
    fenced,
    mention,
    plain_title,
    pr_title,
    prose,
    quote,
    safe_url,
    short_subject,
    truncate,
)
from loopwright.redaction import Redactor
from loopwright.verify.diff import PatchError, parse_patch

__all__ = [
    "CHECK_TEXT_LIMIT",
    "CHECK_TITLE_LIMIT",
    "COMMENT_LIMIT",
    "PR_BODY_LIMIT",
    "TITLE_LIMIT",
    "ZWJ",
    "check_run_output",
    "code",
    "diffstat",
    "explain_command_comment",
    "fenced",
    "fork_patch_comment",
    "mention",
    "plain_title",
    "pr_body",
    "pr_title",
    "prose",
    "quote",
    "refusal_comment",
    "safe_url",
    "short_subject",
    "status_title",
    "truncate",
]

PR_BODY_LIMIT = 65_536
CHECK_TEXT_LIMIT = 65_535
"""GitHub's limit for a check run's `output.summary` and `output.text`, each."""
CHECK_TITLE_LIMIT = 255
COMMENT_LIMIT = 65_536

_TITLES = {
    "verified": "Verified fix",
    "unverified": "Fix not verified",
    "flaky": "The failure is flaky",
    "nothing_to_fix": "Nothing to fix",
    "budget_exceeded": "Budget exceeded",
    "error": "Mission failed",
    "refused": "Refused",
    "interrupted": "Interrupted",
    "cancelled": "Cancelled",
}
_ROW_ICONS = {
    "fixed": "✅ fixed",
    "ok": "✅ ok",
    "new_pass": "✅ new, passes",
    "still_failing": "❌ still failing",
    "broken": "❌ broken",
    "new_fail": "❌ new, fails",
    "vanished": "⚠️ vanished",
    "skipped_now": "⚠️ skipped now",
}
_PLAN_MARKS = {"done": "[x]", "in_progress": "[ ]", "pending": "[ ]"}
_MISSION_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def status_title(status: str) -> str | None:
    """The words for a mission status (`Verified fix`, `Budget exceeded`, ...)."""
    return _TITLES.get(status)


# -- sections ------------------------------------------------------------------------------


def _heading(result: Mapping[str, Any], redactor: Redactor) -> list[str]:
    status = str(result.get("status") or "error")
    icon = "✅" if status == "verified" else "⚠️"
    lines = [f"## {icon} {_TITLES.get(status) or prose(status, redactor, limit=60, inline=True)}"]
    summary = result.get("summary")
    if summary:
        lines += ["", "The model's summary, as it wrote it:", "", quote(summary, redactor), ""]
    message = result.get("message")
    if message and status != "verified":
        lines += ["", f"**Outcome:** {prose(message, redactor, limit=2_000)}"]
    return lines


def _plan(items: Sequence[Any], redactor: Redactor) -> list[str]:
    lines: list[str] = []
    for item in items:
        if isinstance(item, Mapping):
            step, status = item.get("step", ""), str(item.get("status", "pending"))
        else:
            step, status = item, "pending"
        mark = _PLAN_MARKS.get(status, "[ ]")
        lines.append(f"> - {mark} {prose(step, redactor, limit=500, inline=True)}")
        if len(lines) >= 30:
            lines.append(f"> - … {len(items) - 30} more steps")
            break
    return ["", "### Plan", "", "The model's plan:", "", *lines, ""] if lines else []


def _verification(verification: Mapping[str, Any] | None, redactor: Redactor) -> list[str]:
    if not isinstance(verification, Mapping):
        return []
    rows = [r for r in verification.get("rows") or [] if isinstance(r, Mapping)]
    lines = ["", "### Verification", ""]
    verified = bool(verification.get("verified"))
    lines.append(
        "An independent run on a clean checkout with the patch applied "
        + ("passed." if verified else "did not pass.")
    )
    shown = [r for r in rows if r.get("status") != "ok"]
    unchanged = len(rows) - len(shown)
    if shown:
        lines += ["", "| test | before | after | status |", "| --- | --- | --- | --- |"]
        for row in shown[:200]:
            status = str(row.get("status", ""))
            lines.append(
                "| "
                + " | ".join(
                    (
                        code(row.get("id"), redactor, in_table=True),
                        prose(row.get("before") or "—", redactor, limit=20, inline=True),
                        prose(row.get("after") or "—", redactor, limit=20, inline=True),
                        _ROW_ICONS.get(status, prose(status, redactor, limit=20, inline=True)),
                    )
                )
                + " |"
            )
        if len(shown) > 200:
            lines.append(f"\n… and {len(shown) - 200} more rows.")
    if unchanged:
        lines += ["", f"{unchanged} other test(s) passed before and after."]
    for command in verification.get("commands") or []:
        if isinstance(command, Mapping):
            lines.append(
                f"\n{prose(command.get('phase', ''), redactor, limit=20, inline=True)}: "
                f"{code(command.get('command'), redactor)} exited "
                f"{prose(command.get('exit_code'), redactor, limit=10, inline=True)}"
            )
    reasons = [r for r in verification.get("reasons") or [] if r]
    if reasons and not verified:
        lines += ["", "Why it is not verified:", ""]
        lines += [f"- {prose(r, redactor, limit=500, inline=True)}" for r in reasons[:50]]
    return lines


def _tamper(verification: Mapping[str, Any] | None, redactor: Redactor) -> list[str]:
    if not isinstance(verification, Mapping):
        return []
    findings = [f for f in verification.get("tamper") or [] if isinstance(f, Mapping)]
    if not findings:
        return []
    lines = ["", "### ⚠️ Test tampering", ""]
    for finding in findings[:50]:
        lines.append(
            f"- {code(finding.get('path'), redactor)} "
            f"({prose(finding.get('kind'), redactor, limit=40, inline=True)}): "
            f"{prose(finding.get('detail'), redactor, limit=500, inline=True)}"
        )
    return lines


def _costs(result: Mapping[str, Any], redactor: Redactor) -> list[str]:
    usage = result.get("usage")
    if not isinstance(usage, Mapping) or not usage:
        return []
    lines = ["", "### Cost", "", "| tier | calls | tokens | USD |", "| --- | ---: | ---: | ---: |"]
    total_calls = total_tokens = 0
    total_usd = 0.0
    for tier, raw in usage.items():
        counts = raw if isinstance(raw, Mapping) else {}
        calls = _as_int(counts.get("calls"))
        tokens = _as_int(counts.get("prompt_tokens")) + _as_int(counts.get("completion_tokens"))
        usd = _as_float(counts.get("cost_usd"))
        total_calls, total_tokens, total_usd = (
            total_calls + calls,
            total_tokens + tokens,
            total_usd + usd,
        )
        lines.append(f"| {prose(tier, redactor, limit=40)} | {calls} | {tokens:,} | ${usd:.4f} |")
    lines.append(f"| **total** | {total_calls} | {total_tokens:,} | {_usd(total_usd)} |")
    return lines


def _usd(amount: float) -> str:
    return f"${amount:.2f}" if amount >= 1 else f"${amount:.4f}"


def _as_int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _as_float(value: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool) and value == value:
        return float(value)
    return 0.0


def diffstat(patch: str) -> list[tuple[str, int, int]]:
    """`(path, added, removed)` per file of a unified diff, in the diff's order; a binary
    file counts -1 lines each way. Paths are as the patch parser reads them, so one git
    quotes (`"b/caf\\303\\251.py"`) is listed by its name (`café.py`)."""
    stat = []
    for file in parse_patch(patch):
        if file.binary:
            stat.append((file.path, -1, -1))
        else:
            added = sum(len(h.added) for h in file.hunks)
            stat.append((file.path, added, sum(len(h.removed) for h in file.hunks)))
    return stat


def _changes(patch: str, redactor: Redactor) -> list[str]:
    try:
        stat = diffstat(patch)
    except PatchError as exc:
        listing = prose(str(exc), redactor, limit=500, inline=True)
        return ["", "### Changes", "", f"The patch's files could not be listed: {listing}", ""]
    if not stat:
        return []
    rows = []
    for path, added, removed in stat[:50]:
        counts = "binary" if added < 0 else f"+{added} -{removed}"
        rows.append(f"- {code(path, redactor)} ({counts})")
    if len(stat) > 50:
        rows.append(f"- … {len(stat) - 50} more files")
    added = sum(max(a, 0) for _, a, _ in stat)
    removed = sum(max(r, 0) for _, _, r in stat)
    files = f"{len(stat)} file{'s' if len(stat) != 1 else ''}"
    return ["", "### Changes", "", f"{files} changed, +{added} -{removed}:", "", *rows, ""]


def _footer(result: Mapping[str, Any], mission_url: str | None) -> list[str]:
    mission = str(result.get("mission") or "")
    label = f" `{mission}`" if _MISSION_ID.fullmatch(mission) else ""
    link = safe_url(mission_url)
    live = f" · [live view]({link})" if link else ""
    return ["", "---", f"<sub>Opened by Loopwright · mission{label}{live}</sub>"]


# -- public renderers ----------------------------------------------------------------------


def pr_body(
    result: Mapping[str, Any],
    *,
    mission_url: str | None,
    screenshot_url: str | None,
    redactor: Redactor,
    plan: Sequence[Any] | None = None,
) -> str:
    """The pull request's description. `plan` defaults to `result["plan"]` (a list of
    `{step, status}` as in the `plan` event)."""
    verification = result.get("verification")
    steps = plan if plan is not None else result.get("plan") or []
    lines = _heading(result, redactor)
    link = safe_url(mission_url)
    if link:
        lines += ["", f"[Watch the mission live]({link})"]
    lines += _plan(steps if isinstance(steps, Sequence) else [], redactor)
    lines += _changes(str(result.get("patch") or ""), redactor)
    lines += _verification(verification if isinstance(verification, Mapping) else None, redactor)
    lines += _tamper(verification if isinstance(verification, Mapping) else None, redactor)
    shot = safe_url(screenshot_url)
    if shot:
        lines += ["", "### Screenshot", "", f"![The app after the fix]({shot})"]
    lines += _costs(result, redactor)
    footer = "\n".join(_footer(result, mission_url))
    body = truncate(redactor.text("\n".join(lines)), PR_BODY_LIMIT - len(footer) - 1)
    return body + "\n" + footer


def check_run_output(
    result: Mapping[str, Any], *, redactor: Redactor | None = None
) -> dict[str, str]:
    """`output` for the "Loopwright" check run: title, summary and text within GitHub's limits."""
    redactor = redactor or Redactor()
    status = str(result.get("status") or "error")
    title = _TITLES.get(status, status)
    cost = _as_float(result.get("cost_usd"))
    if cost:
        title += f" · {_usd(cost)}"
    summary_lines = _heading(result, redactor)
    verification = result.get("verification")
    verification = verification if isinstance(verification, Mapping) else None
    text_lines = _verification(verification, redactor) + _tamper(verification, redactor)
    text_lines += _costs(result, redactor)
    return {
        "title": truncate(redactor.text(title), CHECK_TITLE_LIMIT, "…"),
        "summary": truncate(redactor.text("\n".join(summary_lines)), CHECK_TEXT_LIMIT),
        "text": truncate(redactor.text("\n".join(text_lines).strip()), CHECK_TEXT_LIMIT),
    }


def refusal_comment(user: str, permission: str) -> str:
    """The polite answer to `/loopwright fix` from someone without write access."""
    level = permission if re.fullmatch(r"[a-z_]{1,20}", permission or "") else "unknown"
    return (
        f"{mention(user)}, only people with write access can ask Loopwright to fix a pull "
        f"request; your permission is {level}. A maintainer can comment `/loopwright fix` "
        "to start it."
    )


def fork_patch_comment(
    result: Mapping[str, Any],
    patch: str,
    *,
    mission_url: str | None = None,
    redactor: Redactor | None = None,
) -> str:
    """The fix for a pull request from a fork, offered as a diff instead of a push."""
    redactor = redactor or Redactor()
    head = _heading(result, redactor)
    intro = [
        *head,
        "",
        "This pull request comes from a fork, so Loopwright does not push to it. "
        "To apply the fix, save the diff below and run `git apply fix.diff`.",
    ]
    link = safe_url(mission_url)
    if link:
        intro += ["", f"[Watch the mission live]({link})"]
    diff = redactor.text(patch)
    shown_diff = encodable(diff)
    if shown_diff != diff:
        view = f"[live view]({link})" if link else "live view"
        intro += [
            "",
            "Some changed lines are not UTF-8 (a file in another encoding): a comment cannot "
            "hold those bytes, so they show as \ufffd below, and `git apply` refuses "
            f"those lines. The exact patch is the `patch.diff` link of the mission's {view}.",
        ]
        diff = shown_diff
    text = "\n".join(intro) + "\n\n"
    note = ""
    room = COMMENT_LIMIT - len(text) - 200
    if len(diff) > room:
        total = len(diff.splitlines())
        diff = truncate(diff, max(room, 0), "")
        shown = len(diff.splitlines())
        where = f" at {link}" if link else " in the mission's live view"
        note = (
            f"\n\nThe diff is too long for a comment: showing {shown} of {total} lines. "
            f"The full patch is{where}."
        )
    return truncate(redactor.text(text + fenced(diff, "diff") + note), COMMENT_LIMIT)


def explain_command_comment() -> str:
    """The reply to `/loopwright fix` on an issue, where there is no failing head to fix."""
    return (
        "`/loopwright fix` works on pull requests, not issues. Comment it on a pull request "
        "whose checks fail: Loopwright reproduces the failure in a sandbox, fixes it, proves "
        "the fix with an independent test run, and opens a pull request with the patch and "
        "the verification log.\n\n"
        "Text after the command, up to the first blank line, is passed on as guidance, "
        "e.g. `/loopwright fix the date parsing in utils/dates.py`. Only people with write "
        "access to the repository can start a fix."
    )
