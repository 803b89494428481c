"""The path rules of the file tools, one implementation for the host and the container.

`loopwright.sandbox.paths` imports it on the host; the Docker sandbox runs this file's text
inside its container as `python3 -I -c SOURCE ROOT RELPATH read|write`, which prints the
resolved absolute path, or exits `REFUSED` with the refusal on stderr. So both backends
refuse the same paths with the same words. It uses the standard library only and nothing
newer than Python 3.7, since it runs on whatever python3 the sandbox image has.
"""

from __future__ import annotations

import errno
import os
import stat
import sys

REFUSED = 3
"""Exit status of the script when it refuses a path (its message is on stderr)."""

SYSTEM_PREFIXES = ("/proc", "/sys", "/dev")

# `{path}` is the path as the model wrote it (repr-quoted).
MESSAGES = {
    "empty": (
        "Refused: the path is empty. Give a file path relative to the repository root, "
        "e.g. src/app.py."
    ),
    "nul": (
        "Refused: {path} contains a NUL byte. Give a plain path relative to the repository root."
    ),
    "home": (
        "Refused: {path} starts with '~'; home directories are outside the repository. "
        "The path must stay inside the repository: give it relative to the repository root."
    ),
    "system": (
        "Refused: {path} is a system path; file tools only reach files inside the repository. "
        "The path must stay inside the repository: give it relative to the repository root."
    ),
    "absolute": (
        "Refused: {path} is an absolute path. The path must stay inside the repository: give "
        "it relative to the repository root (e.g. src/app.py, not /workspace/src/app.py)."
    ),
    "parent": (
        "Refused: {path} climbs out of the repository with '..'. The path must stay inside "
        "the repository."
    ),
    "root": (
        "Refused: {path} names the repository root, not a file. Give a file path such as "
        "src/app.py."
    ),
    "dangling": (
        "Refused: {path} is a symlink whose target does not exist; writing through it could "
        "create a file anywhere. The path must stay inside the repository: write to the real "
        "file path instead (or remove the link with run_command first)."
    ),
    "outside": (
        "Refused: {path} resolves, through a symlink, to a location outside the repository. "
        "The path must stay inside the repository."
    ),
    "directory": "{path} is a directory, not a file. List it with run_command (e.g. `ls {path}`).",
    "special": (
        "Refused: {path} is not a regular file (a device, pipe or socket); only regular "
        "files can be read or written."
    ),
    "long": (
        "Refused: {path} is too long for the file system (a name over 255 bytes, or a path "
        "over 4,096 in all). Give a shorter path."
    ),
    "loop": (
        "Refused: {path} goes through a loop of symlinks, or through more links than can be "
        "followed. Give the real file path instead."
    ),
}


class Refusal(Exception):
    """A path the file tools refuse; `message` says why and what to give instead."""

    def __init__(self, key: str, path: str) -> None:
        self.message = MESSAGES[key].format(path=path)
        super().__init__(self.message)


def normalize(path: str) -> list[str]:
    """The components of `path` relative to the workspace root, `.` and `..` applied.

    Refuses empty paths, NUL bytes, absolute paths, `~`, `..` that climbs above the root,
    and the root itself (it is not a file).
    """
    shown = repr(path)
    if path == "":
        raise Refusal("empty", shown)
    if "\x00" in path:
        raise Refusal("nul", shown)
    if path.startswith("~"):
        raise Refusal("home", shown)
    if path.startswith("/"):
        system = any(path == p or path.startswith(p + "/") for p in SYSTEM_PREFIXES)
        raise Refusal("system" if system else "absolute", shown)
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part != "..":
            parts.append(part)
        elif parts:
            parts.pop()
        else:
            raise Refusal("parent", shown)
    if not parts:
        raise Refusal("root", shown)
    return parts


def _components(path: str) -> list[str]:
    return [p for p in path.split("/") if p]


def resolve(root: str, rel: str, *, for_write: bool) -> str:
    """The real path `rel` names under `root`, after checking it stays inside `root`.

    Symlinks are resolved and the result is compared with the resolved root component by
    component (a string prefix check would let `/repo-evil` pass for `/repo`). Writes through
    dangling symlinks and existing non-regular files are refused. The file need not exist.
    """
    shown = repr(rel)
    parts = normalize(rel)
    real_root = os.path.realpath(root)
    candidate = os.path.join(real_root, *parts)
    # open(O_CREAT) follows a dangling link to wherever it points, so never write through one.
    if for_write and os.path.islink(candidate) and not os.path.exists(candidate):
        raise Refusal("dangling", shown)
    try:
        resolved = os.path.realpath(candidate)
    except RecursionError:  # realpath recurses once per link it follows
        raise Refusal("loop", shown) from None
    root_parts = _components(real_root)
    if _components(resolved)[: len(root_parts)] != root_parts:
        raise Refusal("outside", shown)
    if _components(resolved) == root_parts:
        raise Refusal("root", shown)
    try:
        mode = os.stat(resolved).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return resolved  # missing, or a parent is a file: the read or write reports it
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            raise Refusal("long", shown) from None
        if exc.errno == errno.ELOOP:
            raise Refusal("loop", shown) from None
        return resolved  # not readable, say: the read or write reports it
    if stat.S_ISDIR(mode):
        raise Refusal("directory", "/".join(parts))
    if not stat.S_ISREG(mode):
        # Reading a FIFO would block the agent forever; devices are never repository files.
        raise Refusal("special", shown)
    return resolved


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[2] not in ("read", "write"):
        sys.stderr.write("usage: python3 -c RESOLVER ROOT RELPATH read|write\n")
        return 2
    root, rel, mode = argv
    try:
        resolved = resolve(root, rel, for_write=mode == "write")
    except Refusal as refusal:
        sys.stderr.write(refusal.message + "\n")
        return REFUSED
    sys.stdout.write(resolved + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
