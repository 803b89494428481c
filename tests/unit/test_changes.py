"""The Changes panel's data: a patch split into files, hunks and syntax tokens."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pygments.lexer import Lexer

from loopwright.app.changes import MAX_LINE_CHARS, MAX_LINES, render_changes

PATCH = """\
diff --git a/invoice/totals.py b/invoice/totals.py
index 3b18e51..a8c1f2e 100644
--- a/invoice/totals.py
+++ b/invoice/totals.py
@@ -10,3 +10,3 @@ def line_total(line):
     doc = \"\"\"first line
-    old\"\"\"
+    new\"\"\"
     return round(total, 2)
diff --git a/notes/NEW.weird b/notes/NEW.weird
new file mode 100644
--- /dev/null
+++ b/notes/NEW.weird
@@ -0,0 +1,2 @@
+<script>alert(1)</script>
+second
"""


@pytest.fixture
def lexed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text handed to a Pygments lexer during the test."""
    texts: list[str] = []
    original = Lexer.get_tokens

    def counting(self: Lexer, text: str, unfiltered: bool = False) -> Iterator[object]:
        texts.append(text)
        return original(self, text, unfiltered)

    monkeypatch.setattr(Lexer, "get_tokens", counting)
    return texts


def text_of(line):
    return "".join(text for _cls, text in line["tokens"])


def test_files_hunks_and_line_numbers_follow_the_patch():
    data = render_changes(PATCH)
    assert data["stat"] == {"files": 2, "added": 3, "removed": 1}
    first, second = data["files"]
    assert (first["path"], first["status"], first["added"], first["removed"]) == (
        "invoice/totals.py",
        "modified",
        1,
        1,
    )
    lines = first["hunks"][0]["lines"]
    assert [(ln["op"], ln["old"], ln["new"]) for ln in lines] == [
        (" ", 10, 10),
        ("-", 11, None),
        ("+", None, 11),
        (" ", 12, 12),
    ]
    assert [text_of(ln) for ln in lines] == [
        '    doc = """first line',
        '    old"""',
        '    new"""',
        "    return round(total, 2)",
    ]
    assert (second["path"], second["status"]) == ("notes/NEW.weird", "added")
    assert text_of(second["hunks"][0]["lines"][0]) == "<script>alert(1)</script>"  # text, as is


def test_tokens_carry_pygments_classes_and_multi_line_strings_stay_strings():
    lines = render_changes(PATCH)["files"][0]["hunks"][0]["lines"]
    classes = {cls for cls, text in lines[3]["tokens"] if text == "return"}
    assert classes == {"tok-k"}
    # `old"""` closes the string opened on the line above, so it is coloured as a string.
    assert {cls for cls, _t in lines[1]["tokens"] if _t.strip()} <= {"tok-s2", "tok-sd", "tok-s"}


def test_a_long_patch_is_cut_and_says_so():
    body = "".join(f"+line {n}\n" for n in range(50))
    patch = f"--- /dev/null\n+++ b/big.txt\n@@ -0,0 +1,50 @@\n{body}"
    data = render_changes(patch, max_lines=20)
    assert data["truncated"] is True
    assert len(data["files"][0]["hunks"][0]["lines"]) == 20
    assert data["files"][0]["added"] == 50


def test_an_empty_patch_has_no_files():
    assert render_changes("") == {
        "files": [],
        "stat": {"files": 0, "added": 0, "removed": 0},
        "truncated": False,
    }


def test_a_huge_patch_is_cut_before_it_is_lexed(lexed):
    body = "".join(f"+value_{i} = compute({i}, 'alpha')  # {i}\n" for i in range(200_000))
    patch = (
        "diff --git a/big.py b/big.py\nnew file mode 100644\n--- /dev/null\n+++ b/big.py\n"
        f"@@ -0,0 +1,200000 @@\n{body}"
    )
    # Cutting before lexing is a cost bound (lexing all 200,000 lines took ~60 s): what
    # reaches Pygments is counted, not timed, so a busy machine can neither fail the test
    # nor hide a regression.
    data = render_changes(patch)
    assert lexed and sum(text.count("\n") for text in lexed) <= MAX_LINES, len(lexed)
    (file,) = data["files"]
    assert sum(len(h["lines"]) for h in file["hunks"]) == MAX_LINES
    assert file["truncated"] and data["truncated"]
    assert file["added"] == 200_000


def test_a_very_long_line_is_cut_and_marked(lexed):
    patch = (
        "diff --git a/min.js b/min.js\n--- a/min.js\n+++ b/min.js\n@@ -1,2 +1,2 @@\n"
        f" keep();\n-{'a' * 10}\n+{'x = 1;' * 100_000}\n"
    )
    lines = render_changes(patch)["files"][0]["hunks"][0]["lines"]
    # Only the kept part of the 600,000-character line is lexed.
    assert max(len(line) for text in lexed for line in text.split("\n")) <= MAX_LINE_CHARS
    long = lines[2]
    assert text_of(long).startswith("x = 1;" * 10)
    assert text_of(long).endswith("[line cut at 2000 characters]")
    assert len(text_of(long)) < MAX_LINE_CHARS + 50 and long.get("cut") is True
    assert "cut" not in lines[0] and "cut" not in lines[1]
