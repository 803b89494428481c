"""Unified diffs split into files and hunks: git's quoting, renames, binaries, removed lines
that look like headers, malformed input, and headers that try to hide a file."""

from __future__ import annotations

import pytest

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
