"""Who a local sandbox's commands run as: the unprivileged sandbox user where it can reach
the workspace and the toolchain, else capability-less root; and the launcher they run under.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import stat
import sys
import tempfile
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Literal

from loopwright.sandbox.base import SANDBOX_UID

PR_SET_DUMPABLE = 4
TOOLCHAIN = ("bash", "sh", "python3", "python", "node", "npm", "npx", "git", "go", "java")
"""Programs a command is likely to need; the sandbox user must reach those on PATH."""

RunAs = Literal["user", "nocaps", "same"]


LAUNCHER = (
    files("loopwright.sandbox").joinpath("scripts", "launcher.py").read_text(encoding="utf-8")
)
"""The launcher's source, run with `python -I -S -c` (see scripts/launcher.py)."""


@dataclass(frozen=True)
class Isolation:
    """Who the local sandbox's commands run as, and why."""

    run_as: RunAs
    uid: int
    gid: int
    note: str
    """Empty when commands run as the unprivileged sandbox user or Loopwright is not root."""


def make_undumpable() -> bool:
    """Make this process non-dumpable: a command of the same user can no longer read its
    /proc environ, mem or fds, nor ptrace it. False where the platform has no prctl."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0


def reachable_by(path: Path, uid: int, gid: int, *, execute: bool) -> bool:
    """Whether `uid`/`gid` (no supplementary groups) can reach `path` following symlinks:
    search permission on every directory on the way, and execute (or read) on the end."""
    try:
        real = Path(os.path.realpath(path))
        end_need = 5 if execute else 4  # read and execute: scripts are read by their interpreter
        for index, part in enumerate([real, *real.parents]):
            info = part.stat()
            need = end_need if index == 0 and not stat.S_ISDIR(info.st_mode) else 1
            if info.st_uid == uid:
                bits = (info.st_mode >> 6) & 7
            elif info.st_gid == gid:
                bits = (info.st_mode >> 3) & 7
            else:
                bits = info.st_mode & 7
            if not bits & need:
                return False
    except OSError:
        return False
    return True


def choose_isolation(path: str, base_dir: Path | None) -> Isolation:
    """Commands run as uid 10001 when Loopwright is root and that user can reach the
    sandbox directory and the toolchain on PATH; as capability-less root when it cannot."""
    uid = gid = SANDBOX_UID
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return Isolation("same", os.getuid(), os.getgid(), "")
    where = base_dir if base_dir is not None else Path(tempfile.gettempdir())
    while not where.exists() and where != where.parent:
        where = where.parent  # created later with the default mode, searchable by all
    blocked: list[str] = []
    if not reachable_by(where, uid, gid, execute=True):
        blocked.append(str(where))
    for name in TOOLCHAIN:
        found = shutil.which(name, path=path)
        if found and not reachable_by(Path(found), uid, gid, execute=True):
            real = os.path.realpath(found)
            blocked.append(found if real == found else f"{found} (-> {real})")
    if not blocked:
        return Isolation("user", uid, gid, "")
    # uid and gid are the launcher's own here (see `scripts/launcher.py`); the command stays root.
    return Isolation(
        "nocaps",
        uid,
        gid,
        f"[sandbox] local commands run as root without capabilities, not as the unprivileged "
        f"uid {uid}: it cannot reach {', '.join(blocked)}. Make those world-readable, run "
        "Loopwright as an unprivileged user, or use the Docker sandbox.",
    )
