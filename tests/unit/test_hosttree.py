"""Host trees and depth: the limit every walker of a host tree relies on, and the
operations that must work on trees nobody checked (a local sandbox's workspace, a clone)."""

from __future__ import annotations

import io
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from loopwright.config import SandboxLimits
from loopwright.missions.trees import patch_path_problem, tree_files
from loopwright.sandbox.base import SandboxError
from loopwright.sandbox.docker.copy_in import write_tree_tar
from loopwright.sandbox.docker.provider import workspace_tar
from loopwright.sandbox.hosttree import (
    MAX_DEPTH,
    MAX_PATH_BYTES,
    NAME_MAX,
    discard_tree,
    make_dirs,
    path_problem,
    remove_tree,
    shorten,
)
from loopwright.sandbox.local import LocalProvider
from loopwright.sandbox.workspace import WorkspaceError, copy_tree, patched_copy, snapshot
from loopwright.verify.detect import detect_tests

T = TypeVar("T")

DEEP = 1_500
"""Deeper than the interpreter's recursion limit (a 3,000-byte path: within PATH_MAX)."""


def chain(levels: int) -> str:
    return "/".join(["d"] * levels)


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    """A directory removed by the test itself, whatever fails: pytest's own clean-up of old
    temporary directories recurses, and a deep tree left behind would break a later run."""
    root = tmp_path / "scratch"
    root.mkdir()
    try:
        yield root
    finally:
        remove_tree(root)


def deep_file(root: Path, levels: int, name: str = "leaf.txt", under: str = "") -> str:
    """A file nested `levels` directories below `root` (the first of them `under`, if
    given), made by coreutils (no recursion)."""
    folder = chain(levels) if not under else f"{under}/{chain(levels - 1)}"
    subprocess.run(["mkdir", "-p", "--", str(root / folder)], check=True)
    (root / folder / name).write_text("deep\n")
    return f"{folder}/{name}"


LONG = "/".join(["n" * 200] * 11)  # 2,210 bytes, 10 deep
NAMED = "src/" + "x" * (NAME_MAX + 1) + ".py"


@pytest.mark.parametrize(
    ("paths", "expected"),
    [
        ([], None),
        (["a.txt", "src/b.py"], None),
        ([f"{chain(MAX_DEPTH)}/f"], None),
        ([f"{chain(MAX_DEPTH)}/"], None),
        (["/".join(["n" * 200] * 10) + "/" + "m" * 38], None),  # 2,048 bytes
        (["x" * NAME_MAX], None),
        (
            ["a.txt", f"{chain(MAX_DEPTH + 1)}/f"],
            f"d/d/d/…({MAX_DEPTH - 4} more)…/d/d/f, a path nested {MAX_DEPTH + 1} directories "
            f"deep (the limit is {MAX_DEPTH})",
        ),
        (
            [f"{chain(MAX_DEPTH + 1)}/f", f"{chain(400)}/g", LONG, NAMED],
            f"d/d/d/…(395 more)…/d/d/g, a path nested 400 directories deep (the limit is "
            f"{MAX_DEPTH})",
        ),
        (
            ["a.txt", "/".join(["n" * 200] * 10) + "/" + "m" * 39, LONG, NAMED],
            f"{'n' * 20}…{'n' * 20}/" * 3
            + f"…(5 more)…/{'n' * 20}…{'n' * 20}" * 1
            + f"/{'n' * 20}…{'n' * 20}" * 2
            + f", a path of {len(LONG)} bytes (the limit is {MAX_PATH_BYTES})",
        ),
        (
            ["a.txt", NAMED],
            f"src/{'x' * 20}…{'x' * 17}.py, with a name of {NAME_MAX + 4} bytes (the limit is "
            f"{NAME_MAX})",
        ),
        (
            ["é" * 128],  # 256 bytes in UTF-8
            f"{'é' * 20}…{'é' * 20}, with a name of 256 bytes (the limit is {NAME_MAX})",
        ),
    ],
)
def test_path_problem_names_the_worst_path_and_what_is_wrong_with_it(
    paths: list[str], expected: str | None
) -> None:
    assert path_problem(paths) == expected


def test_shorten_elides_the_middle_of_a_long_path_and_of_long_names_only() -> None:
    assert shorten("a/b/c.txt") == "a/b/c.txt"
    assert shorten("a/b/c/d/e/f/g.txt") == "a/b/c/d/e/f/g.txt"
    assert shorten("a/b/c/d/e/f/g/h.txt") == "a/b/c/…(2 more)…/f/g/h.txt"
    assert shorten("a/" + "0123456789" * 4 + ".py") == "a/01234567890123456789…34567890123456789.py"


def test_make_dirs_creates_a_chain_deeper_than_the_recursion_limit(scratch: Path) -> None:
    target = scratch / chain(DEEP)
    made = make_dirs(target)
    assert len(made) == DEEP
    assert made[0] == scratch / "d" and made[-1] == target
    assert target.is_dir()
    assert make_dirs(target) == []


def test_make_dirs_refuses_a_parent_that_is_a_file_and_goes_through_a_linked_directory(
    scratch: Path,
) -> None:
    (scratch / "file").write_text("kept")
    with pytest.raises(FileExistsError):
        make_dirs(scratch / "file" / "a" / "b")
    assert (scratch / "file").read_text() == "kept"
    assert not (scratch / "a").exists()
    (scratch / "real").mkdir()
    (scratch / "link").symlink_to("real")
    assert make_dirs(scratch / "link" / "a") == [scratch / "link" / "a"]
    assert (scratch / "real" / "a").is_dir()


def test_discard_tree_removes_a_tree_deeper_than_the_recursion_limit(scratch: Path) -> None:
    """What every mission's clean-up of its clone and copies now uses;
    `shutil.rmtree(..., ignore_errors=True)` raised `RecursionError` here."""
    deep_file(scratch / "clone", DEEP)
    (scratch / "clone" / chain(DEEP // 2)).chmod(0o500)
    discard_tree(scratch / "clone")
    assert not (scratch / "clone").exists()


def test_discard_tree_never_raises_and_keeps_a_linked_root(scratch: Path) -> None:
    (scratch / "real").mkdir()
    (scratch / "real" / "kept.txt").write_text("kept")
    (scratch / "link").symlink_to("real")
    discard_tree(scratch / "link")
    discard_tree(scratch / "missing")
    assert (scratch / "real" / "kept.txt").read_text() == "kept"


def test_patch_path_problem_names_the_path_the_patch_writes() -> None:
    shallow = _new_file_patch("src/app.py")
    deep = _new_file_patch(f"{chain(MAX_DEPTH + 1)}/x.py")
    assert patch_path_problem(shallow) is None
    assert patch_path_problem(shallow + deep) == (
        f"the patch writes d/d/d/…({MAX_DEPTH - 4} more)…/d/d/x.py, a path nested "
        f"{MAX_DEPTH + 1} directories deep (the limit is {MAX_DEPTH}), which Loopwright "
        "cannot verify or deliver"
    )


def test_snapshot_refuses_a_tree_over_the_limit_before_copying_anything(scratch: Path) -> None:
    repo = _repository(scratch / "repo", {"a.txt": "a\n"})
    rel = deep_file(repo, MAX_DEPTH + 1)
    _git(repo, "add", "-A")
    with pytest.raises(WorkspaceError) as refused:
        snapshot(repo, scratch / "snap")
    assert str(refused.value) == (
        f"the repository holds d/d/d/…({MAX_DEPTH - 4} more)…/d/d/leaf.txt, a path nested "
        f"{MAX_DEPTH + 1} directories deep (the limit is {MAX_DEPTH}), which Loopwright cannot "
        "copy. Move or remove it (an untracked file can also be listed in .gitignore) and run "
        "again"
    )
    assert not (scratch / "snap").exists()
    assert (repo / rel).read_text() == "deep\n"


def test_a_tree_at_the_limit_passes_every_host_walker_below_a_deep_call_stack(
    scratch: Path,
) -> None:
    """The limit is safe: a path `MAX_DEPTH` deep goes through each host operation that
    recurses once or twice a level (copies, walks, tar streams, test detection's globs),
    called from below 300 extra frames, more than a server's worker adds."""
    repo = _repository(scratch / "repo", {"README.md": "deep\n"})
    rel = deep_file(repo, MAX_DEPTH, "test_deep.py", under="tests")
    (repo / rel).write_text("def test_deep():\n    pass\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "deep")
    base = scratch / "base"
    below(300, lambda: snapshot(repo, base))
    assert (base / rel).is_file()
    assert rel in below(300, lambda: tree_files(base))
    copied = below(300, lambda: copy_tree(base, scratch / "copy"))
    assert (copied / rel).is_file()
    patch = _new_file_patch(f"{chain(MAX_DEPTH)}/new.py")
    patched = below(300, lambda: patched_copy(base, scratch / "patched", patch))
    assert (patched / chain(MAX_DEPTH) / "new.py").read_text() == "x = 1\n"
    sink = io.BytesIO()
    below(300, lambda: write_tree_tar(base, sink))
    assert rel.encode() in sink.getvalue()
    below(300, lambda: workspace_tar(base)).close()
    # No pytest configuration: detection globs `tests/**/test_*.py` all the way down.
    assert below(300, lambda: detect_tests(base)).reason == f"found {rel} → python -m pytest"
    provider = LocalProvider(SandboxLimits(), base_dir=scratch / "sandboxes")
    sandbox = below(300, lambda: provider.create("deep", base, network=False))
    try:
        assert sandbox.read_file(rel) == b"def test_deep():\n    pass\n"
        sandbox.write_file(f"{chain(MAX_DEPTH)}/made/by/the/tool.py", b"y = 2\n")
        assert (sandbox.workspace / chain(MAX_DEPTH) / "made/by/the/tool.py").is_file()
    finally:
        below(300, sandbox.close)
    assert list((scratch / "sandboxes").iterdir()) == []


def test_a_local_sandbox_writes_a_file_deeper_than_the_recursion_limit(scratch: Path) -> None:
    """The write tool creates missing parents one level at a time: `mkdir(parents=True)`
    raised `RecursionError`, which is no tool error and ended the mission."""
    (scratch / "tree").mkdir()
    provider = LocalProvider(SandboxLimits(), base_dir=scratch / "sandboxes")
    sandbox = provider.create("deep-write", scratch / "tree", network=False)
    try:
        sandbox.write_file(f"{chain(DEEP)}/leaf.txt", b"deep\n")
        assert sandbox.read_file(f"{chain(DEEP)}/leaf.txt") == b"deep\n"
    finally:
        sandbox.close()
    assert list((scratch / "sandboxes").iterdir()) == []


def test_a_local_sandbox_copy_that_fails_leaves_no_directory_behind(scratch: Path) -> None:
    """A tree the copy cannot walk (no snapshot holds one) is a `SandboxError` that says so,
    and the sandbox's directory is removed; before, only an `OSError` removed it, and the
    `RecursionError` escaped as it was."""
    deep_file(scratch / "tree", DEEP)
    provider = LocalProvider(SandboxLimits(), base_dir=scratch / "sandboxes")
    with pytest.raises(SandboxError, match="nested deeper than the copy can walk"):
        provider.create("too-deep", scratch / "tree", network=False)
    assert list((scratch / "sandboxes").iterdir()) == []


def below(frames: int, call: Callable[[], T]) -> T:
    """`call()` run under `frames` more Python frames than the caller's."""
    if frames == 0:
        return call()
    return below(frames - 1, call)


def _new_file_patch(path: str) -> str:
    return (
        f"diff --git a/{path} b/{path}\nnew file mode 100644\nindex 0000000..1111111\n"
        f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+x = 1\n"
    )


def _repository(path: Path, files: dict[str, str]) -> Path:
    path.mkdir()
    for rel, text in files.items():
        (path / rel).write_text(text)
    _git(path, "init", "-q")
    _git(path, "add", "-A")
    _git(path, "commit", "-qm", "init")
    return path


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        cwd=repo,
        check=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(repo), "GIT_CONFIG_NOSYSTEM": "1"},
    )
