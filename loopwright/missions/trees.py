"""The host-side trees of a mission and the one way a tree's files reach a sandbox.

Files are written, linked or removed through the Sandbox protocol: no patch tool runs in
the sandbox's tree, and nothing in either tree runs on the host.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple, Protocol

from loopwright.sandbox.base import Sandbox, SandboxError
from loopwright.sandbox.hosttree import path_problem
from loopwright.verify.diff import parse_patch
from loopwright.verify.testfiles import Status as ChangeStatus


class Changed(Protocol):
    """A changed path and how it changed (a `testfiles.Routed` is one)."""

    @property
    def path(self) -> str: ...

    @property
    def status(self) -> ChangeStatus: ...


class Change(NamedTuple):
    path: str
    status: ChangeStatus


def changed_files(patch: str) -> list[tuple[str, ChangeStatus]]:
    """Each path `patch` touches, with how (a rename is a deletion plus an addition)."""
    out: list[tuple[str, ChangeStatus]] = []
    for file in parse_patch(patch):
        if file.status == "renamed" and file.old_path and file.new_path:
            out += [(file.old_path, "deleted"), (file.new_path, "added")]
        elif file.path:
            status: ChangeStatus = "modified" if file.status == "renamed" else file.status
            out.append((file.path, status))
    return list(dict.fromkeys(out))


def patch_path_problem(patch: str) -> str | None:
    """Why `patch` cannot be verified or delivered: a path it writes is too deep or too long
    for a tree on the host (`hosttree.path_problem`); None when every path can be."""
    problem = path_problem(path for path, _status in changed_files(patch))
    if problem is None:
        return None
    return f"the patch writes {problem}, which Loopwright cannot verify or deliver"


def tree_files(root: Path) -> list[str]:
    """Every file under `root` outside `.git`, relative and slash-separated."""
    found: list[str] = []
    for directory, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        rel = Path(directory).relative_to(root)
        found += [(rel / name).as_posix() for name in files]
    return found


def read_text(root: Path, rel: str) -> str | None:
    """The text of a regular file under `root` (never through a symlink), or None."""
    path = root / rel
    try:
        if path.is_symlink() or not path.is_file():
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except (OSError, ValueError):  # a name too long, a NUL byte: no such base file
        return None


def write_into_sandbox(
    sandbox: Sandbox,
    source: Path,
    files: Sequence[Changed],
    *,
    base: Path | None,
    timeout_s: float,
) -> None:
    """Give the sandbox the `source` version of `files`. `base` is the host copy of what
    the sandbox holds; None when its versions are unknown, and every path is cleared first.
    A regular file is one write; a shell round trip is spent only on removals, links and
    new modes."""
    before: list[str] = []
    after: list[str] = []
    removed: list[str] = []
    executable: list[str] = []
    writes: list[str] = []
    for changed in files:
        path = changed.path
        new = source / path
        old = base / path if base is not None else None
        if old is None or changed.status == "deleted" or new.is_symlink() or old.is_symlink():
            removed.append(path)
        if new.is_symlink():
            parent = shlex.quote(os.path.dirname(path) or ".")
            before.append(
                f"mkdir -p -- {parent} && ln -s -- {shlex.quote(os.readlink(new))} "
                f"{shlex.quote(path)}"
            )
        elif changed.status != "deleted" and new.is_file():
            writes.append(path)
            old_mode = 0
            if old is not None and old.is_file() and not old.is_symlink():
                old_mode = old.stat().st_mode
            if new.stat().st_mode & 0o111 and not old_mode & 0o111:
                executable.append(path)
    if removed:
        clear = "rm -f" if base is not None else "rm -rf"
        before.insert(0, f"{clear} -- {shlex.join(removed)}")
    if executable:
        after.append(f"chmod +x -- {shlex.join(executable)}")
    _sandbox_steps(sandbox, before, timeout_s=timeout_s)
    for path in writes:
        sandbox.write_file(path, (source / path).read_bytes())
    _sandbox_steps(sandbox, after, timeout_s=timeout_s)


def write_into_tree(tree: Path, patched: Path, files: Sequence[Changed]) -> None:
    """Give a host copy of the base tree the patched version of `files` (plain file
    operations: nothing in either tree runs)."""
    for routed in files:
        source, target = patched / routed.path, tree / routed.path
        if target.is_symlink() or target.is_file():
            target.unlink()
        if routed.status == "deleted" or not (source.is_symlink() or source.is_file()):
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            os.symlink(os.readlink(source), target)
        else:
            shutil.copy2(source, target)


def restore_base(sandbox: Sandbox, base: Path, changed: Iterable[str], *, timeout_s: float) -> None:
    """Put every `changed` path back to its version in `base` (removing it where `base`
    has none), so the next independent attempt starts from the reproduction's tree."""
    paths = sorted(set(changed))
    if not paths:
        return
    files = [Change(path, "modified" if _present(base / path) else "deleted") for path in paths]
    write_into_sandbox(sandbox, base, files, base=None, timeout_s=timeout_s)


def _present(path: Path) -> bool:
    return path.is_symlink() or path.is_file()


def _sandbox_steps(sandbox: Sandbox, steps: list[str], *, timeout_s: float) -> None:
    if not steps:
        return
    result = sandbox.exec(" && ".join(steps), timeout_s=timeout_s)
    if not result.ok:
        raise SandboxError(f"could not prepare the verification tree: {result.output.strip()}")
