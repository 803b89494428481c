"""Git-format (or plain) unified diffs, split into files and hunks.

Each `diff --git` line starts a file's section (a hunk's lines never start that way), and
the section's names are read here with git's rules: from its `---`/`+++` lines (C-quoted
`"a/\\303\\251.py"` is `a/é.py`; a name with a space ends at the tab git adds), from its
rename or copy lines, or else from the `diff --git` line, whose two halves are equal when
the name did not change; a name holding ` b/` makes the split of that line ambiguous, so it
only ever confirms names, or is read at its middle. Hunks are `unidiff`'s: a removed line
`-- x` (shown as `--- x`) is told from a header by counting hunk lines, so a hunk whose
counts are wrong is an error, never a guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal

from unidiff.errors import UnidiffParseError
from unidiff.patch import PatchedFile, PatchSet

FileStatus = Literal["added", "deleted", "renamed", "modified"]


@dataclass(frozen=True)
class Hunk:
    old_start: int
    new_start: int
    lines: tuple[tuple[str, str], ...]
    """(op, text) pairs: op is " " for context, "-" for removed, "+" for added."""

    @property
    def removed(self) -> tuple[str, ...]:
        return tuple(text for op, text in self.lines if op == "-")

    @property
    def added(self) -> tuple[str, ...]:
        return tuple(text for op, text in self.lines if op == "+")


@dataclass(frozen=True)
class FilePatch:
    old_path: str | None
    """None for an added file."""
    new_path: str | None
    """None for a deleted file."""
    status: FileStatus
    hunks: tuple[Hunk, ...] = ()
    binary: bool = False

    @property
    def path(self) -> str:
        return self.new_path or self.old_path or ""

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p for p in (self.old_path, self.new_path) if p))


class PatchError(ValueError):
    """The text is not a well-formed unified diff, or its headers disagree about a file."""


def parse_patch(patch: str) -> list[FilePatch]:
    """Split a git-format (or plain) unified diff into its files and hunks.

    Raises `PatchError` for a malformed diff (a hunk whose lines do not match its header's
    counts) and for one whose headers disagree about which file a section changes, or do
    not say it for sure: this parse decides which files a patch touches, so a name git
    would see is never dropped or guessed.
    """
    lines = [line.removesuffix("\r") for line in patch.split("\n")]
    if lines[-1] == "":
        lines.pop()
    # A line that starts with `diff --git ` is always a header: a hunk's lines start with
    # " ", "-", "+" or "\\", and a hunk cut short by one is malformed (its counts say so).
    starts = [i for i, line in enumerate(lines) if line.startswith("diff --git ")]
    first = starts[0] if starts else len(lines)
    files = _plain_files(lines[:first])
    for start, end in pairwise([*starts, len(lines)]):
        files.append(_git_file(lines[start:end], start + 1))
    return files


def _plain_files(lines: list[str]) -> list[FilePatch]:
    """The files of a diff without `diff --git` headers, named by their `---`/`+++` lines."""
    if not any(lines):
        return []
    parsed = _unidiff(lines)
    files = []
    for patched in parsed:
        old, new = _markers(lines, (patched.diff_line_no or 0) - 2, 1)
        status: FileStatus = "added" if old is None else "deleted" if new is None else "modified"
        files.append(FilePatch(old, new, status, _hunks(patched)))
    listed = {path for f in files for path in f.paths}
    for number, line in _outside_hunks(lines, parsed, 1):
        name = _header_name(line) if line.startswith(_HEADER_PREFIXES) else None
        if name is not None and name not in listed:
            raise PatchError(
                f"the diff's line {number} names {name!r}, which its other headers do not: {line!r}"
            )
    return files


def _git_file(lines: list[str], number: int) -> FilePatch:
    """One `diff --git` section: its names from the `---`/`+++` markers, the rename or copy
    lines, or else the header itself, whose halves are equal when the name did not change.
    """
    body_at = next((i for i, line in enumerate(lines) if line.startswith(_BODY)), len(lines))
    header, body = lines[1:body_at], lines[body_at:]
    named: dict[str, str] = {}
    status: FileStatus = "modified"
    for line in header:
        kind = next((k for k in _NAMING if line.startswith(k)), None)
        if kind is not None:
            name = _unquote(line[len(kind) :])
            if named.setdefault(kind, name) != name:
                raise PatchError(f"the diff's section at line {number} has two {kind!r} lines")
        elif line.startswith("new file mode"):
            status = "added"
        elif line.startswith("deleted file mode"):
            status = "deleted"
    binary = bool(body) and body[0].startswith(("GIT binary patch", "Binary files "))
    hunks: tuple[Hunk, ...] = ()
    old = named.get("rename from ") or named.get("copy from ")
    new = named.get("rename to ") or named.get("copy to ")
    if body and not binary:
        parsed = _unidiff(body)
        if len(parsed) != 1:
            raise PatchError(f"the diff's section at line {number} has more than one file")
        marked_old, marked_new = _markers(body, 0, number + body_at)
        if (old or new) and (marked_old or old, marked_new or new) != (old, new):
            raise PatchError(
                f"the diff's line {number + body_at} names another file than its rename "
                f"or copy lines: {body[0]!r}"
            )
        old, new = marked_old or old, marked_new or new
        if marked_old is None:
            status = "added"
        elif marked_new is None:
            status = "deleted"
        hunks = _hunks(parsed[0])
        skip = 2  # the markers, read above
    else:
        parsed, skip = PatchSet(""), 1 if binary else 0
    rest = lines[0][len("diff --git ") :]
    readings = _header_readings(rest)
    if old is None and new is None:
        same = {a for a, b in readings if a == b}
        if len(same) != 1:
            raise PatchError(f"the diff's line {number} does not say which file: {lines[0]!r}")
        old = new = same.pop()
    elif (old or new, new or old) not in readings:
        unread = [n for n in (old, new) if n and all(n not in pair for pair in readings)]
        raise PatchError(
            f"the diff's section at line {number} names {unread[0] if unread else old or new!r}"
            f", which its `diff --git` line does not: {lines[0]!r}"
        )
    for at, line in _outside_hunks(body[skip:], parsed, skip + 1):
        if line.startswith((*_HEADER_PREFIXES, *_NAMING)):
            raise PatchError(
                f"the diff's line {number + body_at + at - 1} names a file outside its "
                f"section's header: {line!r}"
            )
    if "copy to " in named:
        status, old = "added", None
    elif "rename to " in named:
        status = "renamed"
    return FilePatch(
        None if status == "added" else old,
        None if status == "deleted" else new,
        status,
        hunks,
        binary,
    )


_BODY = ("--- ", "+++ ", "@@ ", "GIT binary patch", "Binary files ")
"""How the part of a `diff --git` section after its header starts."""
_NAMING = ("rename from ", "rename to ", "copy from ", "copy to ")
_HEADER_PREFIXES = ("--- ", "+++ ", "rename from ", "rename to ", "copy to ")
"""Lines that name a file the patch changes (a copy's source is only read)."""


def _unidiff(lines: list[str]) -> PatchSet:
    try:
        return PatchSet("".join(line + "\n" for line in lines))
    except UnidiffParseError as exc:
        raise PatchError(f"malformed diff: {exc}") from None


def _markers(lines: list[str], at: int, number: int) -> tuple[str | None, str | None]:
    """The names of the `---` line `lines[at]` and of the `+++` line after it (`number` is
    the diff's line number of `lines[0]`)."""
    if not (0 <= at < len(lines) - 1 and lines[at].startswith("--- ")):
        raise PatchError(f"the diff's file at line {number + max(at, 0)} has no `---` line")
    if not lines[at + 1].startswith("+++ "):
        raise PatchError(f"the diff's line {number + at} is not followed by a `+++` line")
    return _marker_path(lines[at][4:]), _marker_path(lines[at + 1][4:])


def _hunks(patched: PatchedFile) -> tuple[Hunk, ...]:
    return tuple(
        Hunk(
            hunk.source_start,
            hunk.target_start,
            tuple(
                (line.line_type, line.value.removesuffix("\n"))
                for line in hunk
                if line.line_type in (" ", "-", "+")
            ),
        )
        for hunk in patched
    )


def _outside_hunks(lines: list[str], parsed: PatchSet, first: int) -> list[tuple[int, str]]:
    """(number, line) for each of `lines` (numbered from `first`) that no hunk holds: a
    hunk's lines are content, whatever they look like."""
    held = {line.diff_line_no for patched in parsed for hunk in patched for line in hunk}
    return [(n, line) for n, line in enumerate(lines, start=first) if n not in held]


def _header_name(line: str) -> str | None:
    """The file a header line names, read as git would (None for `/dev/null`)."""
    if line.startswith(("--- ", "+++ ")):
        return _marker_path(line[4:])
    return _unquote(line.split(" ", 2)[2])


def _header_readings(rest: str) -> set[tuple[str, str]]:
    """Every (old, new) pair git's `a/OLD b/NEW` (each name C-quoted or not) can be read
    as: which ` b/` separates the names is ambiguous when a name holds one."""
    readings: set[tuple[str, str]] = set()
    for split in re.finditer(r' (?="?b/)', rest):
        old = _prefixed(rest[: split.start()], "a/")
        new = _prefixed(rest[split.end() :], "b/")
        if old is not None and new is not None:
            readings.add((old, new))
    return readings


def _prefixed(text: str, prefix: str) -> str | None:
    """`text` (C-quoted or not) without `prefix`; None unless it is one name with it."""
    if text.startswith('"'):
        value, quote, tail = _split_quoted(text)
        if not quote or tail:
            return None
        text = value
    return text[len(prefix) :] if text.startswith(prefix) else None


def _marker_path(value: str) -> str | None:
    # git ends the line with a tab when the name holds a space; the name is all before it.
    value, tab, _ = value.partition("\t")
    value = _unquote(value) if value.startswith('"') else value if tab else value.rstrip()
    if value == "/dev/null":
        return None
    for prefix in ("a/", "b/"):
        if value.startswith(prefix):
            return value[2:]
    return value


def _split_quoted(text: str) -> tuple[str, str, str]:
    """Split a leading C-quoted string (git's quoting of unusual names) off `text`."""
    i = 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == '"':
            return _unquote(text[: i + 1]), '"', text[i + 1 :]
        i += 1
    return _unquote(text), "", ""


_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def _unquote(value: str) -> str:
    if not (len(value) >= 2 and value.startswith('"') and value.endswith('"')):
        return value
    body = value[1:-1]
    out = bytearray()
    i = 0
    while i < len(body):
        char = body[i]
        if char == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in "01234567" and re.match(r"[0-7]{3}", body[i + 1 : i + 4]):
                out.append(int(body[i + 1 : i + 4], 8))
                i += 4
                continue
            out.append(_ESCAPES.get(nxt, ord(nxt)))
            i += 2
            continue
        # A byte that is not UTF-8 arrives as a lone surrogate (`surrogateescape`): git
        # leaves a name's bytes raw inside quotes when `core.quotePath` is off.
        try:
            out.extend(char.encode("utf-8", "surrogateescape"))
        except UnicodeEncodeError:  # a surrogate that stands for no byte
            out.extend("\ufffd".encode())
        i += 1
    return out.decode("utf-8", errors="replace")


def squash(text: str) -> str:
    """`text` without any whitespace, to compare lines that differ only in spacing."""
    return re.sub(r"\s+", "", text)
