"""A mission's patch as the Changes panel shows it: per file, per hunk, per line, each line
split into syntax tokens by Pygments on the server.

Tokens are (CSS class, text) pairs; the page builds them with `textContent`, so patch text
never becomes markup, and the colours come from app.css (no inline styles, nothing from
another origin).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pygments.lexer import Lexer
from pygments.lexers import get_lexer_for_filename
from pygments.lexers.special import TextLexer
from pygments.token import STANDARD_TYPES, _TokenType
from pygments.util import ClassNotFound

from loopwright.verify.diff import FilePatch, parse_patch

MAX_LINES = 4_000
"""Diff lines rendered in all; a longer patch is cut (the whole one is at `.../patch`)."""
Token = tuple[str, str]
MAX_LINE_CHARS = 2_000
"""Characters of one diff line rendered; a longer line is cut and ends with `CUT_MARK`."""
CUT_MARK: Token = ("tok-cut", " … [line cut at 2000 characters]")


def render_changes(patch: str, max_lines: int = MAX_LINES) -> dict[str, Any]:
    """The patch's files with their hunks and tokenised lines (at most `max_lines` in all),
    and a diffstat of the whole patch."""
    files: list[dict[str, Any]] = []
    budget = max_lines
    for file in parse_patch(patch):
        rendered = _file(file, budget)
        budget -= sum(len(h["lines"]) for h in rendered["hunks"])
        files.append(rendered)
    return {
        "files": files,
        "stat": {
            "files": len(files),
            "added": sum(f["added"] for f in files),
            "removed": sum(f["removed"] for f in files),
        },
        "truncated": any(f["truncated"] for f in files),
    }


def _file(file: FilePatch, budget: int) -> dict[str, Any]:
    lexer = _lexer(file.path)
    hunks: list[dict[str, Any]] = []
    truncated = False
    for hunk in file.hunks:
        if budget <= 0:
            truncated = True
            break
        # Cut before lexing, so the work is bounded by what is returned, not by the patch.
        kept = hunk.lines[:budget]
        truncated = truncated or len(kept) < len(hunk.lines)
        lines = _hunk_lines(kept, hunk.old_start, hunk.new_start, lexer)
        budget -= len(lines)
        hunks.append({"header": f"@@ -{hunk.old_start} +{hunk.new_start} @@", "lines": lines})
    return {
        "path": file.path,
        "old_path": file.old_path,
        "status": file.status,
        "binary": file.binary,
        "added": sum(len(h.added) for h in file.hunks),
        "removed": sum(len(h.removed) for h in file.hunks),
        "hunks": hunks,
        "truncated": truncated,
    }


def _hunk_lines(
    lines: Sequence[tuple[str, str]], old_start: int, new_start: int, lexer: Lexer
) -> list[dict[str, Any]]:
    """Each side of the hunk is lexed as one text, so a line inside a multi-line string
    or comment is coloured as such; the tokens are then dealt back to the diff's lines.
    A line longer than `MAX_LINE_CHARS` is lexed and shown only that far, then marked."""
    original, lines = lines, [(op, text[:MAX_LINE_CHARS]) for op, text in lines]
    old_side = _lex_lines([text for op, text in lines if op != "+"], lexer)
    new_side = _lex_lines([text for op, text in lines if op != "-"], lexer)
    old_no, new_no = old_start, new_start
    old_at = new_at = 0
    out: list[dict[str, Any]] = []
    for op, _text in lines:
        if op == "-":
            out.append({"op": "-", "old": old_no, "new": None, "tokens": old_side[old_at]})
            old_no, old_at = old_no + 1, old_at + 1
        elif op == "+":
            out.append({"op": "+", "old": None, "new": new_no, "tokens": new_side[new_at]})
            new_no, new_at = new_no + 1, new_at + 1
        else:
            out.append({"op": " ", "old": old_no, "new": new_no, "tokens": new_side[new_at]})
            old_no, new_no, old_at, new_at = old_no + 1, new_no + 1, old_at + 1, new_at + 1
    for line, (_op, text) in zip(out, original, strict=True):
        if len(text) > MAX_LINE_CHARS:
            line["tokens"] = [*line["tokens"], CUT_MARK]
            line["cut"] = True
    return out


def _lex_lines(lines: list[str], lexer: Lexer) -> list[list[Token]]:
    result: list[list[Token]] = [[] for _ in lines]
    if not lines:
        return result
    row = 0
    for ttype, value in lexer.get_tokens("\n".join(lines) + "\n"):
        css = _css_class(ttype)
        parts = value.split("\n")
        for n, part in enumerate(parts):
            if n:
                row += 1
            if part and row < len(result):
                line = result[row]
                if line and line[-1][0] == css:
                    line[-1] = (css, line[-1][1] + part)
                else:
                    line.append((css, part))
    return result


def _css_class(ttype: _TokenType) -> str:
    """Pygments' short class ("k", "s2", "c1"), from the nearest type that has one."""
    while ttype not in STANDARD_TYPES and ttype.parent is not None:
        ttype = ttype.parent
    short = STANDARD_TYPES.get(ttype, "")
    return f"tok-{short}" if short else ""


def _lexer(path: str) -> Lexer:
    try:
        return get_lexer_for_filename(path, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return TextLexer(stripnl=False, ensurenl=False)
