"""The repository's own instructions for contributors (`AGENTS.md`, `CLAUDE.md`,
`.github/copilot-instructions.md`): which file counts, and the capped text the model gets.

The App and the Action read the file from the default branch (a pull request cannot write
its own instructions); the CLI reads it from the tree its owner asked to fix.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

INSTRUCTION_FILES = ("AGENTS.md", "CLAUDE.md", ".github/copilot-instructions.md")
"""Read in this order; the first one with text is used."""
MAX_INSTRUCTION_BYTES = 8 * 1024


@dataclass(frozen=True)
class RepoInstructions:
    path: str
    """The file's path in the repository, e.g. `AGENTS.md`."""
    text: str
    """What the model is given: the file's text, cut to `MAX_INSTRUCTION_BYTES`."""
    truncated: bool
    """The file was longer than the cap; `text` is its beginning."""

    @property
    def size_bytes(self) -> int:
        return len(self.text.encode("utf-8"))


def cap_instructions(
    path: str, raw: bytes, limit: int = MAX_INSTRUCTION_BYTES
) -> RepoInstructions | None:
    """The first `limit` bytes of a file as text, never cutting a UTF-8 character in half;
    None when the file holds nothing but whitespace."""
    truncated = len(raw) > limit
    # An incremental decoder that is not told the input ended keeps an incomplete trailing
    # character back instead of turning it into a replacement character.
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    text = decoder.decode(raw[:limit], final=not truncated)
    if not text.strip():
        return None
    return RepoInstructions(path, text, truncated)


def first_instructions(read: Callable[[str], bytes | None]) -> RepoInstructions | None:
    """The first instruction file `read` finds (it returns a file's bytes, or None when the
    repository has no such file)."""
    for path in INSTRUCTION_FILES:
        raw = read(path)
        if raw is None:
            continue
        found = cap_instructions(path, raw)
        if found is not None:
            return found
    return None


def read_tree_instructions(root: Path) -> RepoInstructions | None:
    """The instruction file of a working tree. A file that is a symlink leading out of the
    tree, or not a regular file, does not count."""
    top = root.resolve()

    def read(path: str) -> bytes | None:
        candidate = root / path
        try:
            resolved = candidate.resolve()
        except (OSError, RecursionError):  # resolve recurses once per link it follows
            return None
        if not resolved.is_relative_to(top) or not resolved.is_file():
            return None
        try:
            with resolved.open("rb") as handle:
                # One byte past the cap is enough to know the file was cut.
                return handle.read(MAX_INSTRUCTION_BYTES + 1)
        except OSError:
            return None

    return first_instructions(read)


def describe(size_bytes: int, truncated: bool) -> str:
    """`2.1 kB`, or `8.0 kB, cut to the first 8 kB`: how the terminal and live view say it."""
    size = f"{size_bytes / 1024:.1f} kB" if size_bytes >= 1024 else f"{size_bytes} B"
    cap = MAX_INSTRUCTION_BYTES // 1024
    return f"{size}, cut to the first {cap} kB" if truncated else size
