"""Where a reader sees a `/loopwright` command in a comment, and what it says.

A command counts only as typed on a line of its own: not quoted, not in a code block or an
HTML comment, so a quoted reply or a pasted log can never start a mission.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Literal

CommandName = Literal["fix", "help", "cancel", "retry", "approve", "reject", "redirect", "unknown"]


COMMANDS: tuple[CommandName, ...] = (
    "fix",
    "help",
    "cancel",
    "retry",
    "approve",
    "reject",
    "redirect",
)
WITH_TEXT: frozenset[str] = frozenset({"fix", "reject", "redirect"})
"""Commands whose text runs on past their line, up to a blank line (guidance, a reason)."""


@dataclass(frozen=True)
class Command:
    """A `/loopwright <name>` command as a reader sees it in a comment.

    `argument` is what follows the name (for `fix`, `reject` and `redirect`, the guidance or
    reason: the rest of the line and the lines after it up to a blank line; for the others,
    the rest of the line). An
    unknown name is kept in `argument` with the nearest known command in `suggestion`.
    """

    name: CommandName
    argument: str = ""
    suggestion: str | None = None


def parse_comment_command(body: str) -> Command | None:
    """The first `/loopwright` command in a comment, or None.

    Visible only where `parse_command` sees `/loopwright fix`: at the start of a line, not
    quoted, not in code or an HTML comment. `/loopwright` alone, or with a word that is no
    command, is `unknown` (with the nearest command, when one is close).
    """
    found = _first_match(body, _ANY_COMMAND)
    if found is None:
        return None
    match, after = found
    word = (match.group("name") or "").lower()
    rest = match.group("rest").strip()
    if word in WITH_TEXT:
        return Command(word, _guidance(rest, after))  # type: ignore[arg-type]
    if word in COMMANDS:
        return Command(word, rest)
    nearest = difflib.get_close_matches(word, COMMANDS, n=1, cutoff=0.6) if word else []
    typed = " ".join(p for p in (match.group("name") or "", rest) if p)
    return Command("unknown", typed, nearest[0] if nearest else None)


def parse_command(body: str) -> str | None:
    """The guidance of the first `/loopwright fix` command in a comment, or None.

    The command counts only where a reader sees it as typed: at the start of a line (up
    to three spaces of indentation; four make a Markdown code block), not in a `>` quote,
    a fenced code block or an HTML comment. The rest of its line and the lines after it,
    up to a blank line, are the guidance ("" when there is none).
    """
    found = _first_match(body, _COMMAND)
    return None if found is None else _guidance(found[0].group("rest").strip(), found[1])


def _first_match(
    body: str, pattern: re.Pattern[str]
) -> tuple[re.Match[str], list[tuple[str, bool]]] | None:
    """The first visible line `pattern` matches, with the lines after it; None for none (or
    for a body that is not text)."""
    if not isinstance(body, str):
        return None
    lines = _visible_lines(body)
    for index, (line, visible) in enumerate(lines):
        match = pattern.match(line) if visible else None
        if match is not None:
            return match, lines[index + 1 :]
    return None


def _guidance(first: str, following: list[tuple[str, bool]]) -> str:
    """The rest of the command's line and the visible lines after it, up to a blank line."""
    guidance = [first]
    for line, shown in following:
        if not shown or not line.strip():
            break
        guidance.append(line.strip())
    return "\n".join(g for g in guidance if g)


_COMMAND = re.compile(r" {0,3}/loopwright[ \t]+fix(?P<rest>(?:[ \t].*)?)$", re.IGNORECASE)


_ANY_COMMAND = re.compile(
    r" {0,3}/loopwright(?:[ \t]+(?P<name>[^\s]+))?(?P<rest>(?:[ \t].*)?)$", re.IGNORECASE
)


_FENCE = re.compile(r" {0,3}(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


_QUOTE = re.compile(r" {0,3}>")


_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def _visible_lines(body: str) -> list[tuple[str, bool]]:
    """Each line of `body` with whether a reader sees it as ordinary text.

    HTML comments are blanked out first (keeping their line breaks, so a command hidden in
    one never lands at the start of a visible line); fenced code blocks and `>` quotes are
    marked invisible. A fence closes only with the same character, at least as long.
    """
    body = _HTML_COMMENT.sub(lambda m: "\n" * m.group(0).count("\n") + "\u0000", body)
    result: list[tuple[str, bool]] = []
    fence: str | None = None
    # Only CR/LF break lines in GitHub's Markdown; str.splitlines would also split at
    # U+2028, U+0085 and friends, which a reader sees inside the same (quoted) line.
    for raw in _LINE_BREAK.split(body):
        hidden_comment = "\u0000" in raw
        line = raw.replace("\u0000", "")
        opened = _FENCE.match(line)
        if fence is not None:
            if (
                opened
                and opened.group("fence")[0] == fence[0]
                and len(opened.group("fence")) >= len(fence)
                and not opened.group("info").strip()
            ):
                fence = None
            result.append((line, False))
            continue
        if opened and not (opened.group("fence")[0] == "`" and "`" in opened.group("info")):
            fence = opened.group("fence")
            result.append((line, False))
            continue
        visible = not _QUOTE.match(line) and not (hidden_comment and line.strip() == "")
        result.append((line, visible))
    return result


_HTML_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
