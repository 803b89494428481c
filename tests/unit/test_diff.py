"""Unified diffs split into files and hunks: git's quoting, renames, binaries, removed lines
that look like headers, malformed input, and headers that try to hide a file."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from loopwright import git as host_git
from loopwright.verify.diff import FilePatch, PatchError, parse_patch


def test_a_modified_file_with_its_hunks():
    (file,) = parse_patch(
        "diff --git a/app.py b/app.py\nindex 1..2 100644\n--- a/app.py\n+++ b/app.py\n"
        "@@ -3,2 +3,2 @@ def f():\n     x = 1\n-    return x\n+    return x + 1\n"
    )
    assert (file.old_path, file.new_path, file.status) == ("app.py", "app.py", "modified")
    (hunk,) = file.hunks
    assert (hunk.old_start, hunk.new_start) == (3, 3)
    assert hunk.lines == ((" ", "    x = 1"), ("-", "    return x"), ("+", "    return x + 1"))


def test_git_c_quoted_names_are_unquoted():
    (file,) = parse_patch(
        'diff --git "a/caf\\303\\251 \\"x\\".py" "b/caf\\303\\251 \\"x\\".py"\n'
        "new file mode 100644\n--- /dev/null\n"
        '+++ "b/caf\\303\\251 \\"x\\".py"\n@@ -0,0 +1 @@\n+a\n'
    )
    assert file.status == "added" and file.old_path is None
    assert file.new_path == 'café "x".py'


def test_names_with_spaces_split_where_git_put_the_separator():
    (file,) = parse_patch(
        "diff --git a/my dir/b c.py b/my dir/b c.py\n--- a/my dir/b c.py\n+++ b/my dir/b c.py\n"
        "@@ -1 +1 @@\n-a\n+b\n"
    )
    assert file.paths == ("my dir/b c.py",)


def test_a_removed_line_that_looks_like_a_header_stays_in_its_hunk():
    files = parse_patch(
        "diff --git a/notes.md b/notes.md\n--- a/notes.md\n+++ b/notes.md\n"
        "@@ -1 +1 @@\n--- a/other.md\n+++ b/other.md\n"
    )
    assert [f.path for f in files] == ["notes.md"]
    assert files[0].hunks[0].lines == (("-", "-- a/other.md"), ("+", "++ b/other.md"))


def test_rename_copy_delete_and_binary_sections():
    files = parse_patch(
        "diff --git a/old.py b/new.py\nsimilarity index 100%\nrename from old.py\n"
        "rename to new.py\n"
        "diff --git a/gone.py b/gone.py\ndeleted file mode 100644\n--- a/gone.py\n"
        "+++ /dev/null\n@@ -1 +0,0 @@\n-x\n\\ No newline at end of file\n"
        "diff --git a/logo.png b/logo.png\nnew file mode 100644\n"
        "Binary files /dev/null and b/logo.png differ\n"
    )
    assert files == [
        FilePatch("old.py", "new.py", "renamed"),
        FilePatch("gone.py", None, "deleted", files[1].hunks),
        FilePatch(None, "logo.png", "added", binary=True),
    ]
    assert files[1].hunks[0].lines == (("-", "x"),)


def test_a_copy_is_an_added_file():
    (file,) = parse_patch(
        "diff --git a/a.py b/b.py\nsimilarity index 100%\ncopy from a.py\ncopy to b.py\n"
    )
    assert file == FilePatch(None, "b.py", "added")


def test_a_plain_diff_without_git_headers():
    (file,) = parse_patch("--- a/x.txt\t2024-01-01\n+++ b/x.txt\t2024-01-02\n@@ -1 +1 @@\n-a\n+b\n")
    assert file.paths == ("x.txt",)
    assert file.hunks[0].added == ("b",)


def test_crlf_line_ends_are_read_as_lines():
    (file,) = parse_patch("--- a/x.txt\r\n+++ b/x.txt\r\n@@ -1 +1 @@\r\n-a\r\n+b\r\n")
    assert file.hunks[0].lines == (("-", "a"), ("+", "b"))


def test_an_empty_patch_has_no_files():
    assert parse_patch("") == []


@pytest.mark.parametrize(
    "patch",
    [
        # fewer lines than the header counts
        "--- a/x.py\n+++ b/x.py\n@@ -1,3 +1,3 @@\n-a\n+b\n",
        # a line that is no hunk line inside a hunk
        "--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n-a\nplain text\n+b\n",
    ],
)
def test_a_malformed_diff_is_a_clear_error(patch: str):
    with pytest.raises(PatchError, match=r"^malformed diff: "):
        parse_patch(patch)


def test_a_source_marker_that_names_another_file_than_the_git_header_is_refused():
    # `unidiff` reads the names from the `diff --git` line and passes over this `---`
    # line; git and `patch` would read it. The file it names must not vanish.
    patch = (
        "diff --git a/README.md b/README.md\n--- a/.github/workflows/ci.yml\n"
        "+++ b/README.md\n@@ -1 +1 @@\n-on: push\n+on: pull_request_target\n"
    )
    with pytest.raises(PatchError, match=r"names '\.github/workflows/ci\.yml'"):
        parse_patch(patch)


def test_markers_that_name_another_file_than_the_git_header_are_refused():
    # The `diff --git` line names a harmless file; the markers, which decide what a plain
    # `patch` writes, name a workflow. Believing either one alone would miss the other.
    patch = (
        "diff --git a/README.md b/README.md\n--- a/.github/workflows/ci.yml\n"
        "+++ b/.github/workflows/ci.yml\n@@ -1 +1 @@\n-on: push\n+on: pull_request_target\n"
    )
    with pytest.raises(PatchError, match=r"\.github/workflows/ci\.yml"):
        parse_patch(patch)


def test_a_git_header_the_parse_would_not_list_is_an_error():
    # A hunk whose counts cover fewer lines than follow it, with a `diff --git` header
    # written after the last counted line: git reads a second file there. The parse must
    # list that file or fail, never drop it.
    patch = (
        "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x\n+y\n"
        "diff --git a/.github/workflows/ci.yml b/.github/workflows/ci.yml\n"
    )
    try:
        files = parse_patch(patch)
    except PatchError:
        return
    assert ".github/workflows/ci.yml" in {p for f in files for p in f.paths}


def test_every_file_of_a_multi_file_patch_is_listed():
    patch = "".join(
        f"diff --git a/{name} b/{name}\n--- a/{name}\n+++ b/{name}\n@@ -1 +1 @@\n-a\n+b\n"
        for name in ("src/a.py", ".github/workflows/ci.yml", "tests/test_a.py")
    )
    assert [f.path for f in parse_patch(patch)] == [
        "src/a.py",
        ".github/workflows/ci.yml",
        "tests/test_a.py",
    ]


# The exact text `git diff --cached --binary --no-renames HEAD` writes (the export's
# command) when a test file in a directory named `x b` is edited: git does not quote a
# name that holds only spaces, and ends its `---`/`+++` lines with a tab.
_GIT_SPACE_B_MODIFIED = (
    "diff --git a/tests/x b/test_y.py b/tests/x b/test_y.py\n"
    "index 33110c7..06a99d3 100644\n"
    "--- a/tests/x b/test_y.py\t\n"
    "+++ b/tests/x b/test_y.py\t\n"
    "@@ -1,2 +1,2 @@\n"
    " def test_a():\n"
    "-    assert 1 == 1\n"
    "+    pass\n"
)


def test_git_output_for_a_name_holding_space_b_slash_parses():
    """A path with ` b/` inside (directory `x b`) is one git writes unquoted; the parse of
    git's own export must list it, not refuse the patch (the refusal is a `ValueError` no
    mission stage catches, so the mission crashes instead of ending with a verdict)."""
    (file,) = parse_patch(_GIT_SPACE_B_MODIFIED)
    assert file.paths == ("tests/x b/test_y.py",)
    assert file.status == "modified"
    assert file.hunks[0].removed == ("    assert 1 == 1",)


def test_git_output_deleting_a_file_under_a_space_b_directory_parses():
    (file,) = parse_patch(
        "diff --git a/tests/x b/test_e.py b/tests/x b/test_e.py\n"
        "deleted file mode 100644\n"
        "index 33110c7..0000000\n"
        "--- a/tests/x b/test_e.py\t\n"
        "+++ /dev/null\n"
        "@@ -1,2 +0,0 @@\n"
        "-def test_a():\n"
        "-    assert 1 == 1\n"
    )
    assert (file.old_path, file.status) == ("tests/x b/test_e.py", "deleted")


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def _write(path: Path, content: bytes, *, executable: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    path.chmod(0o755 if executable else 0o644)


def _export(root: Path, *config: str) -> str:
    """The patch export's own command, on what is staged in `root`."""
    _git(root, "add", "-A")
    return _git(root, *config, "diff", "--cached", "--binary", "--no-color", "--no-renames", "HEAD")


# Names git writes unquoted though they hold ` b/` (at the start, in the middle, twice, at
# the end) or `a/`, and names it C-quotes (a tab, a quote, a backslash, a newline, non-ASCII).
_NAMES = [
    " b/start.py",
    "tests/x b/test_y.py",
    "a b/c b/d.py",
    "tests/ends with b",
    "tests/a/b/test_a.py",
    "x a/y b/z.py",
    "trailing space /x b/y ",
    "tests/tab\there.py",
    'tests/say "hi" b/q.py',
    "tests/back\\slash b/s.py",
    "tests/new\nline.py",
    "tests/é b/ü z.py",
]
_OPS = ["modified", "added", "deleted", "mode", "added empty", "deleted empty", "binary"]


def _change(root: Path, name: str, op: str) -> tuple[str, bool]:
    """Commit the file `name` as `op` needs it, change it so, return (status, binary)."""
    _git(root, "init", "-q")
    path = root / name
    _write(root / "keep.txt", b"keep\n")
    if op in ("modified", "deleted", "mode"):
        _write(path, b"def test_a():\n    assert 1 == 1\n")
    elif op == "deleted empty":
        _write(path, b"")
    elif op == "binary":
        _write(path, b"\x00\x01old")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "before")
    if op == "modified":
        _write(path, b"def test_a():\n    pass\n")
    elif op == "added":
        _write(path, b"--- a/other.py\n+++ b/other.py\n")
    elif op == "added empty":
        _write(path, b"")
    elif op in ("deleted", "deleted empty"):
        path.unlink()
    elif op == "mode":
        path.chmod(0o755)
    elif op == "binary":
        _write(path, b"\x00\x02new")
    status = {"added empty": "added", "deleted empty": "deleted", "mode": "modified"}
    return status.get(op, "added" if op == "added" else op.replace("binary", "modified")), (
        op == "binary"
    )


@pytest.mark.parametrize("quote_path", ["true", "false"], ids=["quoted", "quotepath-off"])
@pytest.mark.parametrize("op", _OPS)
@pytest.mark.parametrize("name", _NAMES, ids=range(len(_NAMES)))
def test_git_export_of_an_unusual_name_parses_to_that_name(
    tmp_path: Path, name: str, op: str, quote_path: str
):
    status, binary = _change(tmp_path, name, op)
    patch = _export(tmp_path, "-c", f"core.quotePath={quote_path}")
    (file,) = parse_patch(patch)
    assert file.paths == (name,)
    assert (file.status, file.binary) == (status, binary)
    if op == "modified":
        assert file.hunks[0].removed == ("    assert 1 == 1",)
        assert file.hunks[0].added == ("    pass",)
    if op == "added":
        # The new file's lines look like the headers of another file; they stay content.
        assert file.hunks[0].added == ("--- a/other.py", "+++ b/other.py")


def test_every_name_of_a_git_export_is_one_git_lists(tmp_path: Path):
    _git(tmp_path, "init", "-q")
    for i, name in enumerate(_NAMES):
        _write(tmp_path / name, f"{i}\n".encode())
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "before")
    for i, name in enumerate(_NAMES):
        path = tmp_path / name
        if i % 4 == 0:
            path.unlink()
        elif i % 4 == 1:
            path.chmod(0o755)
        elif i % 4 == 2:
            _write(path, f"{i} changed\n".encode())
        _write(tmp_path / f"new/{name}", b"")
    patch = _export(tmp_path)
    listed = _git(tmp_path, "diff", "--cached", "--name-only", "-z", "--no-renames", "HEAD")
    assert sorted(p for f in parse_patch(patch) for p in f.paths) == sorted(listed.split("\0")[:-1])


@pytest.mark.parametrize(
    "header",
    [
        # unequal halves and no rename lines: which file changes mode is not sure
        "diff --git a/x b/y b/x b/z\nold mode 100644\nnew mode 100755\n",
        # no `a/`/`b/` names at all
        "diff --git x\nold mode 100644\nnew mode 100755\n",
    ],
)
def test_a_git_header_whose_file_is_not_sure_is_refused(header: str):
    with pytest.raises(PatchError, match="does not say which file"):
        parse_patch(header)


def test_markers_the_ambiguous_git_header_cannot_be_read_as_are_refused():
    # Both names are readings of parts of the `diff --git` line, but no single split of it.
    patch = "diff --git a/x b/y b/x b/y\n--- a/x\n+++ b/x b/y\n@@ -1 +1 @@\n-a\n+b\n"
    with pytest.raises(PatchError, match="'x'"):
        parse_patch(patch)


def test_a_second_file_inside_a_git_section_is_refused():
    # `git apply` reads the second `---`/`+++` pair, after the counted hunk, as another file.
    patch = (
        "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x\n+y\n"
        "--- a/.github/workflows/ci.yml\n+++ b/.github/workflows/ci.yml\n@@ -1 +1 @@\n-a\n+b\n"
    )
    with pytest.raises(PatchError):
        parse_patch(patch)


def test_a_quoted_name_holding_a_byte_that_is_not_utf8_parses(tmp_path: Path):
    """With `core.quotePath` off git leaves a name's bytes raw, yet still C-quotes a name
    holding a quote: a Latin-1 byte then reaches the unquoting as a lone surrogate."""
    _git(tmp_path, "init", "-q")
    _write(tmp_path / "keep.txt", b"keep\n")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "before")
    (tmp_path / os.fsdecode(b'say "caf\xe9".txt')).write_bytes(b"caf\xe9\n")
    _git(tmp_path, "add", "-A")
    diff = ["diff", "--cached", "--binary", "--no-color", "--no-renames", "HEAD"]
    raw = subprocess.run(["git", "-c", "core.quotePath=false", *diff], cwd=tmp_path,
                         check=True, capture_output=True).stdout  # fmt: skip
    assert b'"b/say \\"caf\xe9\\".txt"' in raw
    (file,) = parse_patch(raw.decode("utf-8", "surrogateescape"))
    assert file.paths == ('say "caf\ufffd".txt',)


def test_host_git_writes_the_headers_the_reader_takes_whatever_the_repository_says(
    tmp_path: Path,
):
    """A repository's own config could drop the `a/` and `b/` prefixes or leave names
    unquoted; Loopwright's git pins them for every diff it reads."""
    _git(tmp_path, "init", "-q")
    for key, value in [("diff.noprefix", "true"), ("diff.mnemonicPrefix", "true"),
                       ("core.quotePath", "false")]:  # fmt: skip
        _git(tmp_path, "config", key, value)
    _write(tmp_path / "keep.txt", b"keep\n")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "before")
    _write(tmp_path / "tests/é b/new.py", b"x = 1\n")
    _git(tmp_path, "add", "-A")
    assert "diff --git tests/" in _git(tmp_path, "diff", "--cached", "HEAD")  # as configured
    proc = host_git.run(["diff", "--cached", "--binary", "--no-color", "--no-renames", "HEAD"],
                        tmp_path)  # fmt: skip
    assert proc.stdout.startswith('diff --git "a/tests/\\303\\251 b/new.py"')
    (file,) = parse_patch(proc.stdout)
    assert file.paths == ("tests/é b/new.py",)
