"""A fix mission's result, and the block that ends a mission in the terminal: its id, the
model's summary, a diffstat of the patch and where the patch is saved."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopwright.missions.base import Outcome
from loopwright.missions.progress import terminal_safe
from loopwright.verify.diff import PatchError, parse_patch

STAT_WIDTH = 40
"""The most `+`/`-` marks a diffstat line gets; larger changes are scaled down, as git does."""


@dataclass
class MissionResult(Outcome):
    """A fix mission's result: the shared outcome, and what only a fix has."""

    applied: bool = False
    flaky: dict[str, Any] | None = None
    title: str = ""
    """The short subject the model gave with `finish` (empty when it gave none)."""
    plan: list[dict[str, str]] = field(default_factory=list)
    """The model's latest plan, `{step, status}` items as in the `plan` event."""
    attempts: list[dict[str, Any]] = field(default_factory=list)
    """Independent attempts, `{tier, attempt, seed, passed, steps}` (LOOPWRIGHT_ATTEMPTS)."""


def diffstat(patch: str) -> list[str]:
    """`git diff --stat` for a unified diff: one line per file, then the totals."""
    files = parse_patch(patch)
    if not files:
        return []
    counts = [
        (f.path, sum(len(h.added) for h in f.hunks), sum(len(h.removed) for h in f.hunks), f)
        for f in files
    ]
    name_width = max(len(path) for path, *_ in counts)
    largest = max(added + removed for _, added, removed, _ in counts)
    number_width = len(str(largest))
    scale = min(1.0, STAT_WIDTH / largest) if largest else 1.0
    lines = []
    for path, added, removed, file in counts:
        if file.binary:
            lines.append(f"{path:<{name_width}} | Bin")
            continue
        plus = max(round(added * scale), 1 if added else 0)
        minus = max(round(removed * scale), 1 if removed else 0)
        lines.append(
            f"{path:<{name_width}} | {added + removed:>{number_width}} {'+' * plus}{'-' * minus}"
        )
    total_added = sum(added for _, added, _, _ in counts)
    total_removed = sum(removed for _, _, removed, _ in counts)
    lines.append(
        f"{_plural(len(files), 'file')} changed, "
        f"{_plural(total_added, 'insertion')}(+), {_plural(total_removed, 'deletion')}(-)"
    )
    return lines


def outcome_block(
    *,
    mission: str,
    summary: str,
    patch: str,
    patch_path: Path | None,
    applied_to: str | None = None,
) -> str:
    """What the terminal shows after the verdict line.

    `patch_path` is the saved `patch.diff` (None when there is no patch); `applied_to` names
    the working tree the patch was applied to, when it was.
    """
    lines = [f"  mission {mission}"]
    if summary:
        first, *rest = summary.strip().splitlines() or [""]
        lines.append(f"  summary: {first}")
        lines.extend(f"           {line}" for line in rest)
    try:
        stat = diffstat(patch) if patch else []
    except PatchError as exc:
        stat = [f"(no diffstat: {exc})"]
    lines.extend(f"    {line}" for line in stat)
    if patch_path is None:
        lines.append("  no patch: the mission changed nothing")
    elif applied_to:
        lines.append(f"  patch: {patch_path} (applied to {applied_to})")
    else:
        lines.append(f"  patch: {patch_path} (not applied)")
    return terminal_safe("\n".join(lines))


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"
