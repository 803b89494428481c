"""Path rules for the file tools: which model-supplied paths may be read or written.

The rules live in `scripts/resolve_path.py`, one implementation for both backends:
`normalize_relative` is the lexical check every backend shares, `resolve_inside` applies the
symlink rules on the host, and `CONTAINER_RESOLVER` is the same file's text, which the
Docker sandbox runs inside its container, so both refuse the same paths with the same words.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from loopwright.sandbox.base import WORKSPACE, FileToolError
from loopwright.sandbox.scripts.resolve_path import REFUSED, Refusal, normalize, resolve

RESOLVER_REFUSED = REFUSED
"""Exit status of `CONTAINER_RESOLVER` when it refuses a path (its message is on stderr)."""

CONTAINER_RESOLVER: str = (
    files("loopwright.sandbox").joinpath("scripts", "resolve_path.py").read_text(encoding="utf-8")
)
"""The rules' source, run inside a container as `python3 -I -c CONTAINER_RESOLVER ROOT RELPATH
read|write`: it prints the resolved absolute path, or exits `RESOLVER_REFUSED` with the
message on stderr."""


def normalize_relative(path: str) -> str:
    """The path as a normalized POSIX path relative to the workspace root.

    Raises `FileToolError` for empty paths, NUL bytes, absolute paths, `~`, and `..` that
    climbs above the root; `.` (the root itself) is refused too, since it is not a file.
    """
    try:
        return "/".join(normalize(path))
    except Refusal as refusal:
        raise FileToolError(refusal.message) from None


def resolve_inside(root: Path, rel: str, *, for_write: bool) -> Path:
    """The real path `rel` names under `root`, after checking it stays inside `root`.

    Symlinks are resolved and the result is compared with the resolved root component by
    component (a string prefix check would let `/repo-evil` pass for `/repo`). Writes through
    dangling symlinks and existing non-regular files are refused. The file itself need not
    exist.
    """
    try:
        return Path(resolve(str(root), rel, for_write=for_write))
    except Refusal as refusal:
        raise FileToolError(refusal.message) from None


def container_resolver_argv(rel: str, *, for_write: bool, root: str = WORKSPACE) -> list[str]:
    """The argv that resolves `rel` inside a container; the path is checked on the host first.

    Checking first keeps NUL bytes (which argv cannot carry) and other lexical refusals on
    the host, with the same messages.
    """
    return [
        "python3",
        "-c",
        CONTAINER_RESOLVER,
        root,
        normalize_relative(rel),
        "write" if for_write else "read",
    ]
