"""Git-format (or plain) unified diffs, split into files and hunks.

Parsing is `unidiff`'s; paths keep git's C quoting rules (`"a/\\303\\251.py"` is
`a/é.py`), read here from the raw headers. A removed line `-- x` (shown as `--- x`) is told
from the next file's header by counting hunk lines, so a hunk whose counts are wrong is an
error, never a guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
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
    counts) and for one whose headers disagree about which file a section changes: this
    parse decides which files a patch touches, so a name git would see is never dropped.
    """
    text = "\n".join(line.removesuffix("\r") for line in patch.split("\n"))
    try:
        parsed = PatchSet(text)
    except UnidiffParseError as exc:
        raise PatchError(f"malformed diff: {exc}") from None
    files = [_file_patch(patched) for patched in parsed]
    _check_headers(text, parsed, files)
    return files


def _file_patch(patched: PatchedFile) -> FilePatch:
    old: str | None = None
    new: str | None = None
    status: FileStatus = "modified"
    binary = patched.is_binary_file
    header = [line.rstrip("\n") for line in patched.patch_info or ()]
    for line in header:
        if line.startswith("diff --git "):
            old, new = _git_header_paths(line[len("diff --git ") :])
        elif line.startswith("new file mode"):
            status = "added"
        elif line.startswith("deleted file mode"):
            status = "deleted"
        elif line.startswith(("rename from ", "copy from ")):
            old = _unquote(line.split(" ", 2)[2])
            status = "renamed" if line.startswith("rename") else "added"
        elif line.startswith(("rename to ", "copy to ")):
            new = _unquote(line.split(" ", 2)[2])
        elif line.startswith("Binary files ") or line == "GIT binary patch":
            binary = True
    if patched.source_file is not None and patched.target_file is not None and patched:
        marked_old = _marker_path(patched.source_file)
        marked_new = _marker_path(patched.target_file)
        old = marked_old if marked_old is not None else old
        new = marked_new if marked_new is not None else new
        if marked_old is None:
            status = "added"
        elif marked_new is None:
            status = "deleted"
    hunks = tuple(
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
    return FilePatch(
        None if status == "added" else old,
        None if status == "deleted" else new,
        status,
        hunks,
        binary,
    )


_HEADER_PREFIXES = (
    "diff --git ",
    "--- ",
    "+++ ",
    "rename from ",
    "rename to ",
    "copy to ",
)
"""Lines that name a file the patch changes (a copy's source is only read)."""


def _check_headers(text: str, parsed: PatchSet, files: list[FilePatch]) -> None:
    """Every file a header line names is one `files` lists.

    Lines inside hunks are content, whatever they look like; every other line that starts
    like a file header (`diff --git`, `---`, `+++`, rename and copy lines) is read here
    with git's rules. A name the parse did not list (`unidiff` believes the `diff --git`
    line over a `---` line naming another file, say) is an error, never dropped.
    """
    in_hunks = {line.diff_line_no for patched in parsed for hunk in patched for line in hunk}
    lines = text.split("\n")
    # A copy's source is named by its `diff --git` line but only read, never changed.
    listed = {path for f in files for path in f.paths} | {
        _unquote(line.split(" ", 2)[2])
        for number, line in enumerate(lines, start=1)
        if number not in in_hunks and line.startswith("copy from ")
    }
    for number, line in enumerate(lines, start=1):
        if number in in_hunks or not line.startswith(_HEADER_PREFIXES):
            continue
        if line.startswith("diff --git "):
            old, new = _git_header_paths(line[len("diff --git ") :])
            names = [old, new] if old is not None or new is not None else [line]
        elif line.startswith(("--- ", "+++ ")):
            names = [_marker_path(line[4:])]
        else:
            names = [_unquote(line.split(" ", 2)[2])]
        missing = [name for name in names if name is not None and name not in listed]
        if missing:
            raise PatchError(
                f"the diff's line {number} names {missing[0]!r}, which its other headers "
                f"do not: {line!r}"
            )


def _git_header_paths(rest: str) -> tuple[str | None, str | None]:
    if rest.startswith('"'):
        first, _, tail = _split_quoted(rest)
        second = _unquote(tail.strip())
        return _strip_prefix(first, "a/"), _strip_prefix(second, "b/")
    # `a/X b/X`: with identical names (the usual case) the split point is unambiguous even
    # when X contains spaces.
    half = (len(rest) - 1) // 2
    if len(rest) % 2 == 1 and rest[half] == " " and rest[2:half] == rest[half + 3 :]:
        return _strip_prefix(rest[:half], "a/"), _strip_prefix(rest[half + 1 :], "b/")
    old, sep, new = rest.partition(" b/")
    if sep:
        return _strip_prefix(old, "a/"), new
    return None, None


def _marker_path(value: str) -> str | None:
    value = value.split("\t", 1)[0]
    value = _unquote(value.strip()) if value.startswith('"') else value.rstrip()
    if value == "/dev/null":
        return None
    for prefix in ("a/", "b/"):
        if value.startswith(prefix):
            return value[2:]
    return value


def _strip_prefix(value: str, prefix: str) -> str:
    return value[len(prefix) :] if value.startswith(prefix) else value


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
        out.extend(char.encode("utf-8"))
        i += 1
    return out.decode("utf-8", errors="replace")


def squash(text: str) -> str:
    """`text` without any whitespace, to compare lines that differ only in spacing."""
    return re.sub(r"\s+", "", text)
