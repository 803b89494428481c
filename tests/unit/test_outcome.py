from pathlib import Path

from loopwright.missions.result import diffstat, outcome_block

PATCH = """diff --git a/invoice/totals.py b/invoice/totals.py
--- a/invoice/totals.py
+++ b/invoice/totals.py
@@ -1,2 +1,2 @@
 def f():
-    return 1
+    return 2
diff --git a/docs/new.md b/docs/new.md
new file mode 100644
--- /dev/null
+++ b/docs/new.md
@@ -0,0 +1,3 @@
+a
+b
+c
"""


def test_diffstat_counts_lines_per_file_like_git():
    assert diffstat(PATCH) == [
        "invoice/totals.py | 2 +-",
        "docs/new.md       | 3 +++",
        "2 files changed, 4 insertions(+), 1 deletion(-)",
    ]
    assert diffstat("") == []


def test_diffstat_scales_large_changes_to_forty_marks():
    big = "--- a/x.txt\n+++ b/x.txt\n@@ -1,0 +1,400 @@\n" + "+line\n" * 400
    first, total = diffstat(big)
    assert first == "x.txt | 400 " + "+" * 40
    assert total == "1 file changed, 400 insertions(+), 0 deletions(-)"


def test_outcome_block_names_mission_summary_and_patch():
    block = outcome_block(
        mission="abc123",
        summary="Divide by 100.\nVAT as before.",
        patch=PATCH,
        patch_path=Path("/data/missions/abc123/patch.diff"),
    )
    assert block.splitlines() == [
        "  mission abc123",
        "  summary: Divide by 100.",
        "           VAT as before.",
        "    invoice/totals.py | 2 +-",
        "    docs/new.md       | 3 +++",
        "    2 files changed, 4 insertions(+), 1 deletion(-)",
        "  patch: /data/missions/abc123/patch.diff (not applied)",
    ]
    applied = outcome_block(
        mission="m", summary="", patch=PATCH, patch_path=Path("/p.diff"), applied_to="/repo"
    )
    assert applied.splitlines()[-1] == "  patch: /p.diff (applied to /repo)"
    assert outcome_block(mission="m", summary="", patch="", patch_path=None).splitlines() == [
        "  mission m",
        "  no patch: the mission changed nothing",
    ]


def test_outcome_block_shows_control_characters_as_escapes():
    block = outcome_block(
        mission="m1",
        summary="done \x1b]0;owned-title\x07",
        patch="",
        patch_path=None,
    )
    assert "\x1b" not in block and "\x07" not in block
    assert "summary: done \\x1b]0;owned-title\\x07" in block


def test_outcome_block_of_a_patch_that_cannot_be_parsed_says_so():
    # A mission that ended with the parse's error still ends in the terminal with its block.
    patch = "--- a/x.py\n+++ b/x.py\n@@ -1,3 +1,3 @@\n-a\n+b\n"
    block = outcome_block(mission="m", summary="", patch=patch, patch_path=Path("/p.diff"))
    assert block.splitlines() == [
        "  mission m",
        "    (no diffstat: malformed diff: Hunk is shorter than expected)",
        "  patch: /p.diff (not applied)",
    ]
