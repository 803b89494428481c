"""How deep the trees Loopwright keeps on the host may be, and the operations on them that
must work at any depth.

In this Python, `shutil.copytree`, `shutil.rmtree`, `os.walk`, `Path.glob("**/...")`,
`tarfile.add` and `Path.mkdir(parents=True)` recurse once per directory level. A path nested
deeper than the interpreter's recursion limit (1,000 frames, fewer below a deep call stack)
makes them raise `RecursionError`, which is not an `OSError` and escapes the handling built
for file errors. Git stores such paths without complaint, and a sandboxed command can make
them. Two rules keep them out of the code that walks trees:

- No path deeper than `MAX_DEPTH` directories (or too long for the system's calls: over
  `MAX_PATH_BYTES`, or a name over `NAME_MAX`) enters a tree the host copies or walks: the
  snapshot refuses such a repository, and verification refuses such a patch
  (`path_problem` finds the path).
- The few operations that meet trees nobody has checked (a local sandbox's workspace,
  which its commands fill; a clone, removed whether or not its snapshot was refused) work
  at any depth: `make_dirs`, `remove_tree`, `discard_tree`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

MAX_DEPTH = 256
"""The most directories a file's path in a host tree may be nested in (`a/b/c.txt` is 2
deep). The walkers above use at most two frames a level, so a tree this deep stays well
inside the recursion limit even below a server's call stack."""

MAX_PATH_BYTES = 2048
"""The longest relative path a host tree may hold. Its absolute path (a data or temporary
directory, a mission's folders, then this) must stay under the system's 4,096 bytes, or
every call on it fails with `ENAMETOOLONG`."""

NAME_MAX = 255
"""The longest name of one file or directory the file systems take."""

_COREUTILS = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}


def depth(path: str) -> int:
    """How many directories `path` (relative, slash-separated) is nested in."""
    return path.strip("/").count("/")


def path_problem(paths: Iterable[str]) -> str | None:
    """Why one of `paths` (relative, slash-separated) cannot be in a host tree: nested
    deeper than `MAX_DEPTH`, longer than `MAX_PATH_BYTES`, or with a name longer than
    `NAME_MAX`; said as the path and what is wrong with it. None when all of them can."""
    deepest: tuple[int, str] | None = None
    longest: tuple[int, str] | None = None
    named: tuple[int, str, str] | None = None
    for path in paths:
        levels = depth(path)
        if levels > MAX_DEPTH and (deepest is None or levels > deepest[0]):
            deepest = (levels, path)
        size = len(os.fsencode(path))
        if size > MAX_PATH_BYTES and (longest is None or size > longest[0]):
            longest = (size, path)
        if named is None and size > NAME_MAX:
            for name in path.split("/"):
                if len(os.fsencode(name)) > NAME_MAX:
                    named = (len(os.fsencode(name)), name, path)
                    break
    if deepest is not None:
        levels, path = deepest
        return (
            f"{shorten(path)}, a path nested {levels} directories deep (the limit is {MAX_DEPTH})"
        )
    if longest is not None:
        size, path = longest
        return f"{shorten(path)}, a path of {size} bytes (the limit is {MAX_PATH_BYTES})"
    if named is not None:
        size, _name, path = named
        return f"{shorten(path)}, with a name of {size} bytes (the limit is {NAME_MAX})"
    return None


def shorten(path: str, keep: int = 3, width: int = 40) -> str:
    """`path` for a message: the middle of a long run of directories elided, and the middle
    of each long name."""
    parts = path.strip("/").split("/")
    if len(parts) > 2 * keep + 1:
        parts = [*parts[:keep], f"…({len(parts) - 2 * keep} more)…", *parts[-keep:]]
    half = width // 2
    return "/".join(p if len(p) <= width else f"{p[:half]}…{p[-half:]}" for p in parts)


def make_dirs(path: Path) -> list[Path]:
    """Create the directory `path` and whatever parents it lacks, one level at a time (no
    recursion); returns the directories created, outermost first. A parent that exists and
    is not a directory raises `FileExistsError` or `NotADirectoryError`, as `mkdir` does."""
    missing: list[Path] = []
    current = path
    while not current.is_dir():
        if current.is_symlink() or current.exists():
            raise FileExistsError(errno.EEXIST, "exists and is not a directory", str(current))
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    made: list[Path] = []
    for directory in reversed(missing):
        try:
            directory.mkdir()
        except FileExistsError:
            if not directory.is_dir():
                raise
            continue  # made by someone else meanwhile
        made.append(directory)
    return made


def remove_tree(root: Path) -> None:
    """Delete a directory, whatever is in it: read-only or unreadable directories (Go's
    module cache), and trees deeper than Python's recursion limit, which `shutil.rmtree`
    cannot walk. For those, coreutils' `chmod -R` and `rm -rf` walk any depth without
    recursion and never follow a link inside the tree; nothing from the tree runs. Raises
    `OSError` when the tree is still there."""
    try:
        shutil.rmtree(root)
        return
    except FileNotFoundError:
        return
    except (OSError, RecursionError):
        if root.is_symlink() or not root.is_dir():
            raise
    problems = []
    for argv in (
        ["chmod", "-R", "u+rwx", "--", str(root)],
        ["rm", "-rf", "--one-file-system", "--", str(root)],
    ):
        done = subprocess.run(argv, capture_output=True, text=True, check=False, env=_COREUTILS)
        if done.returncode != 0:
            problems.append(done.stderr.strip()[-300:])
    if os.path.lexists(root):
        raise OSError(errno.ENOTEMPTY, f"{root} is still there ({'; '.join(problems)})")


def discard_tree(root: Path) -> None:
    """`remove_tree` for clean-up that must not fail its caller: a tree that cannot be
    removed is left where it is (in a temporary or data directory)."""
    with contextlib.suppress(OSError):
        remove_tree(root)
