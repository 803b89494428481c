"""Path rules for the file tools: which model-supplied paths may be read or written.

`normalize_relative` is the lexical check every backend shares, `resolve_inside` applies the
symlink rules on the host, and `CONTAINER_RESOLVER` is the same rule set as a standalone
script the Docker sandbox runs inside its container, so both backends refuse the same paths.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from loopwright.sandbox.base import WORKSPACE, FileToolError

RESOLVER_REFUSED = 3
"""Exit status of `CONTAINER_RESOLVER` when it refuses a path (its message is on stderr)."""

_SYSTEM_PREFIXES = ("/proc", "/sys", "/dev")

# One table of messages for both implementations, so the model reads the same refusal
# whichever backend it runs on. `{path}` is the path as the model wrote it (repr-quoted).
_MESSAGES = {
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
}


def normalize_relative(path: str) -> str:
    """The path as a normalized POSIX path relative to the workspace root.

    Raises `FileToolError` for empty paths, NUL bytes, absolute paths, `~`, and `..` that
    climbs above the root; `.` (the root itself) is refused too, since it is not a file.
    """
    shown = repr(path)
    if path == "":
        raise FileToolError(_MESSAGES["empty"])
    if "\x00" in path:
        raise FileToolError(_MESSAGES["nul"].format(path=shown))
    if path.startswith("~"):
        raise FileToolError(_MESSAGES["home"].format(path=shown))
    if path.startswith("/"):
        system = any(path == p or path.startswith(p + "/") for p in _SYSTEM_PREFIXES)
        raise FileToolError(_MESSAGES["system" if system else "absolute"].format(path=shown))
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part != "..":
            parts.append(part)
        elif parts:
            parts.pop()
        else:
            raise FileToolError(_MESSAGES["parent"].format(path=shown))
    if not parts:
        raise FileToolError(_MESSAGES["root"].format(path=shown))
    return "/".join(parts)


def resolve_inside(root: Path, rel: str, *, for_write: bool) -> Path:
    """The real path `rel` names under `root`, after checking it stays inside `root`.

    Symlinks are resolved and the result is compared with the resolved root component by
    component (a string prefix check would let `/repo-evil` pass for `/repo`). Writes through
    dangling symlinks and existing non-regular files are refused. The file itself need not
    exist.
    """
    shown = repr(rel)
    relative = normalize_relative(rel)
    real_root = Path(os.path.realpath(root))
    candidate = real_root.joinpath(*relative.split("/"))
    # open(O_CREAT) follows a dangling link to wherever it points, so never write through one.
    if for_write and os.path.islink(candidate) and not os.path.exists(candidate):
        raise FileToolError(_MESSAGES["dangling"].format(path=shown))
    resolved = Path(os.path.realpath(candidate))
    if resolved.parts[: len(real_root.parts)] != real_root.parts:
        raise FileToolError(_MESSAGES["outside"].format(path=shown))
    if resolved == real_root:
        raise FileToolError(_MESSAGES["root"].format(path=shown))
    try:
        mode = resolved.stat().st_mode
    except FileNotFoundError:
        return resolved
    except NotADirectoryError:
        return resolved  # a parent is a file: the read or write reports it
    if stat.S_ISDIR(mode):
        raise FileToolError(_MESSAGES["directory"].format(path=relative))
    if not stat.S_ISREG(mode):
        # Reading a FIFO would block the agent forever; devices are never repository files.
        raise FileToolError(_MESSAGES["special"].format(path=shown))
    return resolved


# The same rules for a container: `python3 -c CONTAINER_RESOLVER ROOT RELPATH read|write`
# prints the resolved absolute path, or exits RESOLVER_REFUSED with the message on stderr.
# It must run on any python3 the sandbox image has, so it sticks to os.path and 3.6 syntax.
_RESOLVER_TEMPLATE = r"""
import os, stat, sys

MESSAGES = __MESSAGES__
SYSTEM_PREFIXES = ("/proc", "/sys", "/dev")


def refuse(key, path):
    sys.stderr.write(MESSAGES[key].format(path=path) + "\n")
    sys.exit(__REFUSED__)


def normalize(path):
    shown = repr(path)
    if path == "":
        refuse("empty", shown)
    if "\x00" in path:
        refuse("nul", shown)
    if path.startswith("~"):
        refuse("home", shown)
    if path.startswith("/"):
        system = any(path == p or path.startswith(p + "/") for p in SYSTEM_PREFIXES)
        refuse("system" if system else "absolute", shown)
    parts = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part != "..":
            parts.append(part)
        elif parts:
            parts.pop()
        else:
            refuse("parent", shown)
    if not parts:
        refuse("root", shown)
    return parts


def components(path):
    return [p for p in path.split("/") if p]


def main(argv):
    if len(argv) != 3 or argv[2] not in ("read", "write"):
        sys.stderr.write("usage: python3 -c RESOLVER ROOT RELPATH read|write\n")
        sys.exit(2)
    root, rel, mode = argv
    shown = repr(rel)
    parts = normalize(rel)
    real_root = os.path.realpath(root)
    candidate = os.path.join(real_root, *parts)
    if mode == "write" and os.path.islink(candidate) and not os.path.exists(candidate):
        refuse("dangling", shown)
    resolved = os.path.realpath(candidate)
    root_parts = components(real_root)
    if components(resolved)[: len(root_parts)] != root_parts:
        refuse("outside", shown)
    if components(resolved) == root_parts:
        refuse("root", shown)
    try:
        st_mode = os.stat(resolved).st_mode
    except (FileNotFoundError, NotADirectoryError):
        st_mode = None
    if st_mode is not None and stat.S_ISDIR(st_mode):
        refuse("directory", "/".join(parts))
    if st_mode is not None and not stat.S_ISREG(st_mode):
        refuse("special", shown)
    sys.stdout.write(resolved + "\n")


main(sys.argv[1:])
"""

CONTAINER_RESOLVER: str = _RESOLVER_TEMPLATE.replace("__MESSAGES__", repr(_MESSAGES)).replace(
    "__REFUSED__", str(RESOLVER_REFUSED)
)
"""Python source applying `resolve_inside`'s rules inside a container (see the comment above)."""


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
