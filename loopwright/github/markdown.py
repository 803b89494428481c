"""Untrusted text as inert Markdown: the building blocks of everything Loopwright posts.

Model-written text is redacted first (token-shaped strings masked), then rendered as plain
text: HTML and Markdown link/image syntax are escaped, `@mentions`, `#123`/`GH-1`
references, bare URLs and closing keywords (`fixes`, `closes`, `resolves`, ...) are broken
with a zero-width joiner so nobody is pinged, nothing is linked and no issue is closed, and
identifiers (test ids, paths, commands) go into code spans. A quote is a blockquote that
every line carries, so no line of it can end the quote and start a heading, table or code
block of its own. Titles and commit subjects get the same neutralising on one plain line.
"""

from __future__ import annotations

import html
import re
from typing import Any

from loopwright.redaction import Redactor

ZWJ = "\u200d"

_LOGIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?")
_MENTION = re.compile(r"@(?=[A-Za-z0-9_])")
_REFERENCE = re.compile(r"(#|GH-)(?=\d)", re.IGNORECASE)
_MARKDOWN = re.compile(r"([\\`*_\[\]{}!|~])")
# GitHub closes an issue for these words followed by a reference (`#1`, `GH-1`, `o/r#1`,
# an issue or pull-request URL), in any case. The references are broken too; the word is
# broken as well whenever anything reference-like follows it (`fix the bug` stays as is).
_CLOSING = re.compile(
    r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\b"
    r"(?=[\s:*_\\]*(?:#|gh-|[\w.\\-]+/|https?:|www\.|\[|&))",
    re.IGNORECASE,
)
_BARE_URL = re.compile(r"\b(https?:|www)(//|\.)", re.IGNORECASE)
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
# Block syntax at the start of a line: headings, quotes, list items, setext underlines,
# thematic breaks, ordered lists.
_BLOCK_START = re.compile(r"^([ \t]*)(?:([#>+=-])|(\d{1,9})([.)]))")
_SAFE_URL = re.compile(r"https?://[^\s()<>\"'`\\]+")


def prose(text: Any, redactor: Redactor, *, limit: int = 10_000, inline: bool = False) -> str:
    """Untrusted text as inert Markdown: shown as written, pinging and linking nobody.

    `inline` folds line breaks into spaces, for table cells and list items.
    """
    value = redactor.text(str(text if text is not None else ""))
    if inline:
        value = " ".join(value.split())
    value = _cut(value, limit)
    value = _MARKDOWN.sub(r"\\\1", value)
    value = html.escape(value, quote=False)
    return _inert(value)


def quote(text: Any, redactor: Redactor, *, limit: int = 10_000) -> str:
    """Untrusted multi-line text as a Markdown blockquote that nothing in it can leave.

    Every line (blank ones too) starts with `>`, and `\r` counts as the line break it is
    in Markdown, so no line is a lazy continuation that could end the quote. Inside it,
    block syntax at a line's start (`#`, `>`, `-`, `+`, `=`, `1.`) is escaped, so the text
    stays one quoted paragraph per line of prose, never a heading, list or table.
    """
    value = redactor.text(str(text if text is not None else ""))
    value = _cut(value.strip("\r\n"), limit)
    lines = [_block_escape(prose(line, redactor, limit=limit)) for line in _LINE_BREAK.split(value)]
    return "\n".join(f"> {line}" if line.strip() else ">" for line in lines)


def plain_title(text: Any, redactor: Redactor, *, limit: int = 90) -> str:
    """Untrusted text as one plain line for a pull-request title or a commit subject.

    Titles are not Markdown, but GitHub links references in them and reads closing
    keywords in commit messages: those, mentions and URLs are broken like in prose.
    """
    return _inert(_cut(_one_line(text, redactor), limit))


TITLE_LIMIT = 71
"""A pull-request title or commit subject stays under 72 characters."""
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")


def pr_title(summary: Any, redactor: Redactor | None = None, *, title: Any = None) -> str:
    """The fix's pull-request title and commit subject, inert and under 72 characters: the
    model's `title` when it gave one, else the summary's first sentence, shortened at a word
    boundary (with an ellipsis) rather than cut mid-word."""
    redactor = redactor or Redactor()
    for text in (title, summary):
        line = _one_line(text, redactor)
        if line:
            return _inert(short_subject(line))
    return "Fix failing tests"


def short_subject(line: str, limit: int = TITLE_LIMIT) -> str:
    """`line`'s first sentence in at most `limit` characters, without cutting a word: when
    it is longer, whole words up to the limit and an ellipsis."""
    sentence = _SENTENCE_END.split(line, maxsplit=1)[0].strip()
    if len(sentence) <= limit:
        return sentence.rstrip(".").strip() or sentence
    words: list[str] = []
    for word in sentence.split(" "):
        if len(" ".join([*words, word])) + 1 > limit:
            break
        words.append(word)
    if not words:
        # One word longer than a title: nothing but a cut can shorten it.
        return sentence[: limit - 1] + "…"
    return " ".join(words).rstrip(",;:-\u2013\u2014") + "…"


def _one_line(text: Any, redactor: Redactor) -> str:
    value = redactor.text(str(text if text is not None else ""))
    first = next((line for line in _LINE_BREAK.split(value) if line.strip()), "")
    first = "".join(ch if ch.isprintable() else " " for ch in first)
    return " ".join(first.split())


def _inert(value: str) -> str:
    """Break mentions, references, bare URLs and closing keywords with a zero-width joiner."""
    value = _MENTION.sub("@" + ZWJ, value)
    value = _REFERENCE.sub(lambda m: m.group(1) + ZWJ, value)
    value = _BARE_URL.sub(lambda m: m.group(1) + ZWJ + m.group(2), value)
    return _CLOSING.sub(lambda m: m.group(0)[0] + ZWJ + m.group(0)[1:], value)


def _block_escape(line: str) -> str:
    match = _BLOCK_START.match(line)
    if match is None:
        return line
    indent, marker, number, delimiter = match.groups()
    if marker:
        return f"{indent}\\{marker}{line[match.end() :]}"
    return f"{indent}{number}\\{delimiter}{line[match.end() :]}"


def code(text: Any, redactor: Redactor, *, limit: int = 300, in_table: bool = False) -> str:
    """An identifier as an inline code span (literal: no HTML, no mentions, no links)."""
    value = redactor.text(str(text if text is not None else ""))
    value = _cut(" ".join(value.split()), limit)
    if not value:
        return ""
    if in_table:
        value = value.replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", value)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{ticks}{pad}{value}{pad}{ticks}"


def mention(login: str) -> str:
    """`@login` for a real GitHub login (meant to notify); anything else as inert code."""
    if _LOGIN.fullmatch(login):
        return f"@{login}"
    return code(login, Redactor())


def fenced(text: str, info: str = "") -> str:
    """A fenced code block no line of `text` can close early.

    GitHub ends a line at `\r` as well as `\n`, so line breaks are made `\n` before the
    fence is chosen: a backtick run after a lone `\r` is at a line's start too.
    """
    text = _LINE_BREAK.sub("\n", text).rstrip("\n")
    longest = max((len(run) for run in re.findall(r"^ {0,3}(`{3,})", text, re.M)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}"


def truncate(text: str, limit: int, note: str = "\n\n… truncated to fit GitHub's limit") -> str:
    """`text` cut to at most `limit` characters, ending on a line break where one is near."""
    if len(text) <= limit:
        return text
    keep = max(limit - len(note), 0)
    head = text[:keep]
    newline = head.rfind("\n")
    if newline >= keep - 2_000 and newline > 0:
        head = head[:newline]
    return (head + note)[:limit]


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def safe_url(value: str | None) -> str | None:
    """`value` when it is a plain http(s) URL that is safe inside a Markdown link."""
    if value and _SAFE_URL.fullmatch(value):
        return value
    return None
