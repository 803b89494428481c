"""The streamed repository copy packs the same members, owners and modes as `workspace_tar`."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

from loopwright.sandbox.docker.copy_in import write_tree_tar
from loopwright.sandbox.docker.provider import workspace_tar


def members(data: bytes) -> list[tuple[str, bytes, int, int, int, str, str, bytes]]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        rows = []
        for info in tar.getmembers():
            content = b""
            if info.isreg():
                extracted = tar.extractfile(info)
                assert extracted is not None
                content = extracted.read()
            rows.append(
                (info.name, info.type, info.mode, info.uid, info.gid, info.uname,
                 info.linkname, content)
            )  # fmt: skip
        return rows


def test_the_stream_matches_workspace_tar(tmp_path: Path) -> None:
    (tmp_path / "b.txt").write_text("bee\n")
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "deep").mkdir()
    (tmp_path / "a" / "deep" / ("long-" * 30 + ".py")).write_text("x = 1\n")
    (tmp_path / "a" / "tool").write_text("#!/bin/sh\n")
    (tmp_path / "a" / "tool").chmod(0o6755)
    (tmp_path / "a" / "sticky").mkdir()
    (tmp_path / "a" / "sticky").chmod(0o1777)
    os.link(tmp_path / "b.txt", tmp_path / "a" / "hard.txt")
    (tmp_path / "link").symlink_to("../outside")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "caf\xe9.txt").write_text("accent\n")
    streamed = io.BytesIO()
    write_tree_tar(tmp_path, streamed)
    expected = members(workspace_tar(tmp_path).read())
    got = members(streamed.getvalue())
    assert got == expected
    by_name = {row[0]: row for row in got}
    assert by_name["a/tool"][2] == 0o755  # set-id bits dropped
    assert by_name["a/sticky"][2] == 0o1777
    assert by_name["b.txt"][1] == tarfile.LNKTYPE and by_name["b.txt"][6] == "a/hard.txt"
    assert "fifo" not in by_name
    assert {row[3] for row in got} == {10001}
