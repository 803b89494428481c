"""Path rules for the file tools, on the host and as the in-container resolver script.

Both implementations run against the same table on the same temporary trees, so the Docker
sandbox refuses exactly what the local one does.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from loopwright.sandbox.base import FileToolError
from loopwright.sandbox.paths import (
    CONTAINER_RESOLVER,
    RESOLVER_REFUSED,
    container_resolver_argv,
    normalize_relative,
    resolve_inside,
)

SENTINEL_TEXT = b"host sentinel: must never change\n"


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("src/a.py", "src/a.py"),
        ("./src//a.py", "src/a.py"),
        ("src/./pkg/../a.py", "src/a.py"),
        ("a/b/../../c", "c"),
        ("proc/self/environ", "proc/self/environ"),
        ("dir/", "dir"),
    ],
)
def test_normalize_relative(path: str, expected: str) -> None:
    assert normalize_relative(path) == expected


@pytest.mark.parametrize(
    "path",
    ["", ".", "./", "a/..", "../x", "a/../../b", "~/.ssh/id_rsa", "~root", "/etc/passwd",
     "/proc/self/environ", "/sys/kernel", "/dev/null", "a\x00b"],
)  # fmt: skip
def test_normalize_relative_refuses(path: str) -> None:
    with pytest.raises(FileToolError, match=r"^Refused"):
        normalize_relative(path)


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """A repository root plus an outside directory holding a sentinel file."""
    root = tmp_path / "repo"
    outside = tmp_path / "outside"
    (root / "src" / "pkg").mkdir(parents=True)
    outside.mkdir()
    (outside / "sentinel.txt").write_bytes(SENTINEL_TEXT)
    (root / "src" / "pkg" / "mod.py").write_text("x = 1\n")
    (root / "README.md").write_text("hello\n")
    (root / "to_root").symlink_to("/")
    (root / "to_outside").symlink_to(outside)
    (root / "to_sentinel").symlink_to(outside / "sentinel.txt")
    (root / "dangling_out").symlink_to(outside / "missing.txt")
    (root / "dangling_in").symlink_to("not_there_yet.txt")
    (root / "readme_link").symlink_to("README.md")
    (root / "pkg_link").symlink_to("src/pkg")
    (root / "up_and_back").symlink_to("../repo/src")
    # A sibling whose name shares the root's prefix: a string-prefix check would let it pass.
    (tmp_path / "repo-evil").mkdir()
    (tmp_path / "repo-evil" / "x.txt").write_text("evil\n")
    (root / "to_prefix_sibling").symlink_to(tmp_path / "repo-evil")
    os.mkfifo(root / "fifo")
    return root, outside


# (relative path, mode, expected): expected is a path under the root or "refused".
CASES = [
    ("dotdot-etc-passwd", "../../etc/passwd", "read", "refused"),
    ("absolute-etc-passwd", "/etc/passwd", "read", "refused"),
    ("proc-self-environ", "/proc/self/environ", "read", "refused"),
    ("escaping-dotdot-in-middle", "a/../../b", "write", "refused"),
    ("nul-byte", "src/a\x00.py", "write", "refused"),
    ("home-ssh", "~/.ssh/authorized_keys", "write", "refused"),
    ("root-itself", ".", "read", "refused"),
    ("symlink-to-slash", "to_root/etc/passwd", "read", "refused"),
    ("symlink-to-slash-write", "to_root/tmp/pwned", "write", "refused"),
    ("symlink-to-outside-dir", "to_outside/sentinel.txt", "read", "refused"),
    ("symlink-to-outside-dir-write", "to_outside/new.txt", "write", "refused"),
    ("symlink-to-outside-file-write", "to_sentinel", "write", "refused"),
    ("dangling-symlink-out-write", "dangling_out", "write", "refused"),
    ("dangling-symlink-in-write", "dangling_in", "write", "refused"),
    ("prefix-sibling", "to_prefix_sibling/x.txt", "read", "refused"),
    ("directory", "src/pkg", "read", "refused"),
    ("fifo", "fifo", "read", "refused"),
    ("normal-nested-read", "src/pkg/mod.py", "read", "src/pkg/mod.py"),
    ("normal-nested-new-file", "src/pkg/new/deep.py", "write", "src/pkg/new/deep.py"),
    ("normalized-spelling", "./src//pkg/../pkg/mod.py", "read", "src/pkg/mod.py"),
    ("symlink-inside-file", "readme_link", "read", "README.md"),
    ("symlink-inside-file-write", "readme_link", "write", "README.md"),
    ("symlink-inside-dir", "pkg_link/mod.py", "write", "src/pkg/mod.py"),
    ("symlink-out-and-back", "up_and_back/pkg/mod.py", "read", "src/pkg/mod.py"),
    ("dangling-symlink-read", "dangling_in", "read", "not_there_yet.txt"),
]
IDS = [case[0] for case in CASES]
TABLE = [case[1:] for case in CASES]


def _host(root: Path, rel: str, mode: str) -> str:
    try:
        return str(resolve_inside(root, rel, for_write=mode == "write"))
    except FileToolError as exc:
        return f"refused: {exc}"


def _container(root: Path, rel: str, mode: str) -> str:
    if "\x00" in rel:  # argv cannot carry NUL; the Docker sandbox checks on the host first
        with pytest.raises(FileToolError, match="NUL"):
            container_resolver_argv(rel, for_write=mode == "write")
        return "refused: NUL"
    proc = subprocess.run(
        [sys.executable, "-c", CONTAINER_RESOLVER, str(root), rel, mode],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    if proc.returncode == RESOLVER_REFUSED:
        assert proc.stdout == ""
        return f"refused: {proc.stderr.strip()}"
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


Resolver = Callable[[Path, str, str], str]


@pytest.mark.parametrize("resolver", [_host, _container], ids=["host", "container"])
@pytest.mark.parametrize(("rel", "mode", "expected"), TABLE, ids=IDS)
def test_path_table(
    layout: tuple[Path, Path], resolver: Resolver, rel: str, mode: str, expected: str
) -> None:
    root, outside = layout
    result = resolver(root, rel, mode)
    if expected == "refused":
        assert result.startswith("refused: ")
    else:
        assert result == str((root / expected).resolve(strict=False))
        assert Path(result).parts[: len(root.resolve().parts)] == root.resolve().parts
    assert (outside / "sentinel.txt").read_bytes() == SENTINEL_TEXT
    assert sorted(p.name for p in outside.iterdir()) == ["sentinel.txt"]


# NUL bytes never reach the container resolver (argv cannot carry them).
ARGV_SAFE = [case for case in CASES if "\x00" not in case[1]]


@pytest.mark.parametrize(
    ("rel", "mode"), [case[1:3] for case in ARGV_SAFE], ids=[case[0] for case in ARGV_SAFE]
)
def test_host_and_container_give_the_same_answer(
    layout: tuple[Path, Path], rel: str, mode: str
) -> None:
    root, _ = layout
    assert _host(root, rel, mode) == _container(root, rel, mode)


def test_refusals_tell_the_model_to_stay_inside(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    for rel in ("/etc/passwd", "../x", "to_outside/sentinel.txt"):
        with pytest.raises(FileToolError, match="must stay inside the repository"):
            resolve_inside(root, rel, for_write=False)


def test_resolver_argv_normalizes_on_the_host() -> None:
    argv = container_resolver_argv("./src//a.py", for_write=True)
    assert argv[:2] == ["python3", "-c"]
    assert argv[3:] == ["/workspace", "src/a.py", "write"]
    with pytest.raises(FileToolError):
        container_resolver_argv("../etc/passwd", for_write=False)


def test_resolver_rejects_bad_usage(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", CONTAINER_RESOLVER, str(tmp_path), "a.txt", "delete"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "usage" in proc.stderr
