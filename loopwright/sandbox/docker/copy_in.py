"""The repository copied into a sandbox as a tar stream, written as it is read.

The same members, owner and modes as `provider.workspace_tar` (regular files, directories,
symbolic and hard links, owned by the sandbox user, set-id bits dropped, special files left
out), but packed straight into a writer, so the container unpacks while the host still
packs, and without the user and group lookups `tarfile.add` makes for every file.
"""

from __future__ import annotations

import os
import stat
import tarfile
from pathlib import Path
from typing import IO, Protocol

from loopwright.sandbox.base import SANDBOX_UID


class Sink(Protocol):
    def write(self, data: bytes) -> int: ...


def write_tree_tar(tree: Path, sink: Sink) -> None:
    """Write `tree`'s contents (not the directory itself) to `sink` as a tar stream."""
    links: dict[tuple[int, int], str] = {}
    with tarfile.open(fileobj=sink, mode="w|", format=tarfile.GNU_FORMAT) as tar:  # type: ignore[call-overload]
        for name in sorted(os.listdir(tree)):
            _add(tar, tree / name, name, links)


def _add(tar: tarfile.TarFile, path: Path, arcname: str, links: dict[tuple[int, int], str]) -> None:
    st = os.lstat(path)
    info = tarfile.TarInfo(arcname)
    info.uid = info.gid = SANDBOX_UID
    info.uname = info.gname = "sandbox"
    info.mode = stat.S_IMODE(st.st_mode) & 0o1777
    info.mtime = int(st.st_mtime)
    data: IO[bytes] | None = None
    if stat.S_ISREG(st.st_mode):
        inode = (st.st_dev, st.st_ino)
        if st.st_nlink > 1 and inode in links:
            info.type = tarfile.LNKTYPE
            info.linkname = links[inode]
        else:
            if st.st_nlink > 1:
                links[inode] = arcname
            info.size = st.st_size
            data = open(path, "rb")  # noqa: SIM115 - closed below
    elif stat.S_ISDIR(st.st_mode):
        info.type = tarfile.DIRTYPE
    elif stat.S_ISLNK(st.st_mode):
        info.type = tarfile.SYMTYPE
        info.linkname = os.readlink(path)
    else:
        return  # devices, fifos and sockets are not part of a repository copy
    try:
        tar.addfile(info, data)
    finally:
        if data is not None:
            data.close()
    if info.type == tarfile.DIRTYPE:
        for name in sorted(os.listdir(path)):
            _add(tar, path / name, f"{arcname}/{name}", links)
