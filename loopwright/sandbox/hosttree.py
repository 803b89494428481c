"""How deep the trees Loopwright keeps on the host may be, and the operations on them that
must work at any depth.

In this Python, `shutil.copytree`, `shutil.rmtree`, `os.walk`, `Path.glob("**/...")`,
`tarfile.add` and `Path.mkdir(parents=True)` recurse once per directory level. A path nested
deeper than the interpreter's recursion limit (1,000 frames, fewer below a deep call stack)
makes them raise `RecursionError`, which is not an `OSError` and escapes the handling built
for file errors. Git stores such paths without complaint, and a sandboxed command can make
them. Two rules keep them out of the code that walks trees:

- No path deeper than `MAX_DEPTH` directories enters a tree the host copies or walks: the
  snapshot refuses such a repository, and verification refuses such a patch
  (`depth_problem` finds the path).
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

_COREUTILS = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}


def depth(path: str) -> int:
    """How many directories `path` (relative, slash-separated) is nested in."""
    return path.strip("/").count("/")


def depth_problem(paths: Iterable[str]) -> tuple[str, int] | None:
    """The deepest of `paths` with its depth, when it is deeper than `MAX_DEPTH`."""
    deepest = max(paths, key=depth, default=None)
    if deepest is None or depth(deepest) <= MAX_DEPTH:
        return None
    return deepest, depth(deepest)


def shorten(path: str, keep: int = 3) -> str:
    """`path` with the middle of a long run of directories elided, for a message."""
    parts = path.strip("/").split("/")
    if len(parts) <= 2 * keep + 1:
        return path
    return "/".join([*parts[:keep], f"…({len(parts) - 2 * keep} more)…", *parts[-keep:]])


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
