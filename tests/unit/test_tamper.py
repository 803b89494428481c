"""The tamper check on real `git diff` output: each case commits a tree, changes it, diffs it."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from loopwright.verify.diff import parse_patch
from loopwright.verify.tamper import tamper_findings
from loopwright.verify.testfiles import is_test_path

PROTECTED = (".github/workflows/**", ".github/actions/**", "CODEOWNERS", ".loopwright.yml")

CALC_PY = "def add(a, b):\n    return a - b\n"
TEST_CALC_PY = """\
import pytest

from calc import add


def test_add():
    assert add(2, 2) == 4


def test_add_negative():
    assert add(-1, -1) == -2
    assert add(-1, 1) == 0
"""
TEST_CALC_JS = """\
const test = require("node:test");
const assert = require("node:assert");
const { add } = require("../calc");

test("adds", () => {
  assert.strictEqual(add(2, 2), 4);
});

test("adds negatives", () => {
  assert.strictEqual(add(-1, -1), -2);
});
"""
CALC_TEST_JEST = """\
const { add } = require("./calc");

describe("add", () => {
  it("adds", () => {
    expect(add(2, 2)).toBe(4);
  });
});
"""
CALC_TEST_GO = """\
package calc

import "testing"

func TestAdd(t *testing.T) {
\tif got := Add(2, 2); got != 4 {
\t\tt.Errorf("Add(2, 2) = %d, want 4", got)
\t}
}

func TestSub(t *testing.T) {
\tif got := Sub(2, 2); got != 0 {
\t\tt.Errorf("Sub(2, 2) = %d, want 0", got)
\t}
}
"""
TABLE_TEST_GO = """\
package calc

import "testing"

func TestAddTable(t *testing.T) {
\tcases := []struct{ a, b, want int }{
\t\t{1, 1, 2},
\t\t{2, 2, 4},
\t}
\tfor _, c := range cases {
\t\tif got := Add(c.a, c.b); got != c.want {
\t\t\tt.Errorf("Add(%d, %d) = %d", c.a, c.b, got)
\t\t}
\t}
}
"""
UNITTEST_PY = """\
import unittest

from calc import add


class AddTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 2), 4)
"""


SKIPPED_NEW_TEST = "import pytest\n\n@pytest.mark.skip\ndef test_later():\n    assert True\n"
DIV_RAISES = """\
import pytest


def test_div_zero():
    with pytest.raises(ZeroDivisionError):
        div(1, 0)
"""
AVG_APPROX = """\
import pytest


def test_avg():
    assert avg([1, 2]) == pytest.approx(1.5, rel=1e-6)
"""
PACKAGE_JSON = '{\n  "scripts": {\n    "test": "node --test"\n  }\n}\n'


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def git_diff(root: Path, before: dict[str, str], after: dict[str, str | None]) -> str:
    """Commit `before`, apply `after` (None deletes a file) and return `git diff` of the change."""
    git(root, "init", "-q")
    for path, text in before.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "before")
    for path, maybe_text in after.items():
        if maybe_text is None:
            (root / path).unlink()
        else:
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(maybe_text)
    git(root, "add", "-A")
    return git(root, "diff", "--cached", "-M")


@dataclass(frozen=True)
class Case:
    before: dict[str, str]
    after: dict[str, str | None]
    expected: list[tuple[str, str]]
    """(kind, path) of every finding, in order."""
    allow: tuple[str, ...] = ()
    detail: str = ""
    """A phrase the first finding's detail must contain."""


def replace(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new)


CASES = {
    # Changes that must pass untouched.
    "source-fix": Case(
        {"calc.py": CALC_PY, "tests/test_calc.py": TEST_CALC_PY},
        {"calc.py": "def add(a, b):\n    return a + b\n"},
        [],
    ),
    "new-test-added": Case(
        {"calc.py": CALC_PY, "tests/test_calc.py": TEST_CALC_PY},
        {
            "tests/test_calc.py": TEST_CALC_PY
            + "\n\ndef test_add_zero():\n    assert add(0, 0) == 0\n"
        },
        [],
    ),
    "assertion-strengthened": Case(
        {"tests/test_calc.py": replace(TEST_CALC_PY, "assert add(2, 2) == 4", "assert add(2, 2)")},
        {"tests/test_calc.py": TEST_CALC_PY},
        [],
    ),
    "assertTrue-to-assertEqual-is-stronger": Case(
        {
            "tests/test_calc.py": replace(
                UNITTEST_PY, "assertEqual(add(2, 2), 4)", "assertTrue(add(2, 2))"
            )
        },
        {"tests/test_calc.py": UNITTEST_PY},
        [],
    ),
    "assertions-reordered-and-requoted": Case(
        {"tests/test_calc.js": TEST_CALC_JS},
        {
            "tests/test_calc.js": replace(
                TEST_CALC_JS,
                'test("adds", () => {\n  assert.strictEqual(add(2, 2), 4);',
                "test('adds', () => {\n    assert.strictEqual( add(2, 2), 4 );  // spacing",
            )
        },
        [],
    ),
    "api-rename-in-assertion": Case(
        {"tests/test_calc.py": TEST_CALC_PY},
        {
            "tests/test_calc.py": TEST_CALC_PY.replace("assert add(", "assert calc.add(").replace(
                "from calc import add", "import calc"
            )
        },
        [],
    ),
    "new-test-file-with-skip-is-not-tampering": Case(
        {"calc.py": CALC_PY},
        {"tests/test_new.py": SKIPPED_NEW_TEST},
        [],
    ),
    # Deleting or hiding tests.
    "test-file-deleted": Case(
        {"calc.py": CALC_PY, "tests/test_calc.py": TEST_CALC_PY},
        {"tests/test_calc.py": None},
        [("deleted_test_file", "tests/test_calc.py")],
    ),
    "test-file-renamed-out-of-collection": Case(
        {"tests/test_calc.py": TEST_CALC_PY},
        {"tests/test_calc.py": None, "tests/calc_checks.py": TEST_CALC_PY},
        [("renamed_test_file", "tests/test_calc.py")],
        detail="renamed to tests/calc_checks.py",
    ),
    "python-test-function-removed": Case(
        {"tests/test_calc.py": TEST_CALC_PY},
        {"tests/test_calc.py": TEST_CALC_PY.split("\n\ndef test_add_negative")[0] + "\n"},
        [("removed_test", "tests/test_calc.py")],
        detail="'test_add_negative'",
    ),
    "python-test-renamed-to-private": Case(
        {"tests/test_calc.py": TEST_CALC_PY},
        {"tests/test_calc.py": replace(TEST_CALC_PY, "def test_add():", "def _test_add():")},
        [("removed_test", "tests/test_calc.py")],
    ),
    "node-test-removed": Case(
        {"test/calc.test.js": TEST_CALC_JS},
        {"test/calc.test.js": TEST_CALC_JS.split('\ntest("adds negatives"')[0]},
        [("removed_test", "test/calc.test.js")],
        detail="'adds negatives'",
    ),
    "go-test-removed": Case(
        {"calc_test.go": CALC_TEST_GO},
        {"calc_test.go": CALC_TEST_GO.split("\nfunc TestSub")[0]},
        [("removed_test", "calc_test.go")],
        detail="'TestSub'",
    ),
    # Assertions removed.
    "python-assertion-removed": Case(
        {"tests/test_calc.py": TEST_CALC_PY},
        {"tests/test_calc.py": replace(TEST_CALC_PY, "    assert add(-1, 1) == 0\n", "")},
        [("removed_assertion", "tests/test_calc.py")],
        detail="assert add(-1, 1) == 0",
    ),
    "python-assertion-commented-out": Case(
        {"tests/test_calc.py": TEST_CALC_PY},
        {
            "tests/test_calc.py": replace(
                TEST_CALC_PY, "    assert add(2, 2) == 4", "    # assert add(2, 2) == 4\n    pass"
            )
        },
        [("removed_assertion", "tests/test_calc.py")],
    ),
    "go-error-call-removed": Case(
        {"calc_test.go": CALC_TEST_GO},
        {
            "calc_test.go": replace(
                CALC_TEST_GO, '\t\tt.Errorf("Add(2, 2) = %d, want 4", got)\n', "\t\t_ = got\n"
            )
        },
        [("removed_assertion", "calc_test.go")],
    ),
    "pytest-raises-removed": Case(
        {"tests/test_div.py": DIV_RAISES},
        {
            "tests/test_div.py": replace(
                DIV_RAISES, "    with pytest.raises(ZeroDivisionError):\n    ", ""
            )
        },
        [("removed_assertion", "tests/test_div.py")],
    ),
    # Assertions loosened.
    "python-comparison-dropped": Case(
        {"tests/test_calc.py": TEST_CALC_PY},
        {"tests/test_calc.py": replace(TEST_CALC_PY, "assert add(2, 2) == 4", "assert add(2, 2)")},
        [("loosened_assertion", "tests/test_calc.py")],
        detail="`==` was replaced by a truthiness check",
    ),
    "python-equality-to-bound": Case(
        {"tests/test_calc.py": TEST_CALC_PY},
        {
            "tests/test_calc.py": replace(
                TEST_CALC_PY, "assert add(2, 2) == 4", "assert add(2, 2) >= 0"
            )
        },
        [("loosened_assertion", "tests/test_calc.py")],
    ),
    "python-equality-to-membership": Case(
        {"tests/test_calc.py": TEST_CALC_PY},
        {
            "tests/test_calc.py": replace(
                TEST_CALC_PY, "assert add(2, 2) == 4", "assert add(2, 2) in (0, 4)"
            )
        },
        [("loosened_assertion", "tests/test_calc.py")],
    ),
    "python-or-true": Case(
        {"tests/test_calc.py": TEST_CALC_PY},
        {
            "tests/test_calc.py": replace(
                TEST_CALC_PY, "assert add(2, 2) == 4", "assert add(2, 2) == 4 or True"
            )
        },
        [("loosened_assertion", "tests/test_calc.py")],
        detail="`or`",
    ),
    "unittest-assertEqual-to-assertTrue": Case(
        {"tests/test_calc.py": UNITTEST_PY},
        {
            "tests/test_calc.py": replace(
                UNITTEST_PY, "assertEqual(add(2, 2), 4)", "assertTrue(add(2, 2))"
            )
        },
        [("loosened_assertion", "tests/test_calc.py")],
    ),
    "jest-toBe-to-toBeTruthy": Case(
        {"calc.test.js": CALC_TEST_JEST},
        {"calc.test.js": replace(CALC_TEST_JEST, "toBe(4)", "toBeTruthy()")},
        [("loosened_assertion", "calc.test.js")],
    ),
    "node-strictEqual-to-ok": Case(
        {"test/calc.test.js": TEST_CALC_JS},
        {
            "test/calc.test.js": replace(
                TEST_CALC_JS, "assert.strictEqual(add(2, 2), 4)", "assert.ok(add(2, 2))"
            )
        },
        [("loosened_assertion", "test/calc.test.js")],
    ),
    "node-strictEqual-to-equal": Case(
        {"test/calc.test.js": TEST_CALC_JS},
        {
            "test/calc.test.js": replace(
                TEST_CALC_JS, "assert.strictEqual(add(2, 2), 4)", "assert.equal(add(2, 2), '4')"
            )
        },
        [("loosened_assertion", "test/calc.test.js")],
        detail="looser `equal`",
    ),
    "approx-tolerance-widened": Case(
        {"tests/test_avg.py": AVG_APPROX},
        {"tests/test_avg.py": replace(AVG_APPROX, "rel=1e-6", "rel=0.5")},
        [("loosened_assertion", "tests/test_avg.py")],
        detail="rel=",
    ),
    "assertion-negated": Case(
        {"calc.test.js": CALC_TEST_JEST},
        {
            "calc.test.js": replace(
                CALC_TEST_JEST, "expect(add(2, 2)).toBe(4)", "expect(add(2, 2)).not.toBe(5)"
            )
        },
        [("loosened_assertion", "calc.test.js")],
        detail="negated",
    ),
    "python-compares-with-itself": Case(
        {"tests/test_calc.py": TEST_CALC_PY},
        {"tests/test_calc.py": replace(TEST_CALC_PY, "== 4", "== add(2, 2)")},
        [("loosened_assertion", "tests/test_calc.py")],
        detail="with itself",
    ),
    "jest-compares-with-itself": Case(
        {"calc.test.js": CALC_TEST_JEST},
        {"calc.test.js": replace(CALC_TEST_JEST, "toBe(4)", "toEqual(add(2, 2))")},
        [("loosened_assertion", "calc.test.js")],
        detail="with itself",
    ),
    # Skips, xfails and focus markers.
    "pytest-skip-marker": Case(
        {"tests/test_calc.py": TEST_CALC_PY},
        {
            "tests/test_calc.py": replace(
                TEST_CALC_PY,
                "def test_add():",
                "@pytest.mark.skip(reason='flaky')\ndef test_add():",
            )
        },
        [("added_skip", "tests/test_calc.py")],
    ),
    "pytest-xfail-marker": Case(
        {"tests/test_calc.py": TEST_CALC_PY},
        {
            "tests/test_calc.py": replace(
                TEST_CALC_PY, "def test_add():", "@pytest.mark.xfail\ndef test_add():"
            )
        },
        [("added_skip", "tests/test_calc.py")],
    ),
    "pytest-skip-call": Case(
        {"tests/test_calc.py": TEST_CALC_PY},
        {
            "tests/test_calc.py": replace(
                TEST_CALC_PY, "def test_add():\n", "def test_add():\n    pytest.skip('later')\n"
            )
        },
        [("added_skip", "tests/test_calc.py")],
    ),
    "unittest-skip-decorator": Case(
        {"tests/test_calc.py": UNITTEST_PY},
        {
            "tests/test_calc.py": replace(
                UNITTEST_PY, "    def test_add", "    @unittest.skip('broken')\n    def test_add"
            )
        },
        [("added_skip", "tests/test_calc.py")],
    ),
    "jest-it-skip": Case(
        {"calc.test.js": CALC_TEST_JEST},
        {"calc.test.js": replace(CALC_TEST_JEST, 'it("adds"', 'it.skip("adds"')},
        [("added_skip", "calc.test.js")],
    ),
    "node-skip-option": Case(
        {"test/calc.test.js": TEST_CALC_JS},
        {
            "test/calc.test.js": replace(
                TEST_CALC_JS, 'test("adds", () => {', 'test("adds", { skip: true }, () => {'
            )
        },
        [("added_skip", "test/calc.test.js")],
    ),
    "node-test-only": Case(
        {"test/calc.test.js": TEST_CALC_JS},
        {
            "test/calc.test.js": replace(
                TEST_CALC_JS, 'test("adds negatives"', 'test.only("adds negatives"'
            )
        },
        [("added_skip", "test/calc.test.js")],
    ),
    "go-t-skip": Case(
        {"calc_test.go": CALC_TEST_GO},
        {
            "calc_test.go": replace(
                CALC_TEST_GO,
                "func TestAdd(t *testing.T) {\n",
                'func TestAdd(t *testing.T) {\n\tt.Skip("later")\n',
            )
        },
        [("added_skip", "calc_test.go")],
    ),
    "early-return-before-assertions": Case(
        {"tests/test_calc.py": TEST_CALC_PY},
        {
            "tests/test_calc.py": replace(
                TEST_CALC_PY, "def test_add_negative():\n", "def test_add_negative():\n    return\n"
            )
        },
        [("added_skip", "tests/test_calc.py")],
        detail="early `return`",
    ),
    "conftest-collection-hook": Case(
        {"tests/test_calc.py": TEST_CALC_PY},
        {"conftest.py": "def pytest_collection_modifyitems(config, items):\n    items.clear()\n"},
        [("added_skip", "conftest.py")],
        detail="pytest_collection_modifyitems",
    ),
    "pytest-ini-deselect": Case(
        {"pytest.ini": "[pytest]\naddopts = -q\n", "tests/test_calc.py": TEST_CALC_PY},
        {"pytest.ini": "[pytest]\naddopts = -q --deselect tests/test_calc.py::test_add\n"},
        [("added_skip", "pytest.ini")],
    ),
    "npm-test-script-changed": Case(
        {"package.json": PACKAGE_JSON},
        {"package.json": replace(PACKAGE_JSON, "node --test", "node --test test/other.test.js")},
        [("added_skip", "package.json")],
        detail="test script",
    ),
    # Expected values edited.
    "python-expected-value-edited": Case(
        {"tests/test_calc.py": TEST_CALC_PY},
        {
            "tests/test_calc.py": replace(
                TEST_CALC_PY, "assert add(2, 2) == 4", "assert add(2, 2) == 0"
            )
        },
        [("edited_expected_value", "tests/test_calc.py")],
        detail="changes only the expected value",
    ),
    "node-assert-equal-value-edited": Case(
        {"test/calc.test.js": TEST_CALC_JS.replace("strictEqual", "equal")},
        {
            "test/calc.test.js": TEST_CALC_JS.replace("strictEqual", "equal").replace(
                "add(2, 2), 4", "add(2, 2), 0"
            )
        },
        [("edited_expected_value", "test/calc.test.js")],
    ),
    "jest-toBe-value-edited": Case(
        {"calc.test.js": CALC_TEST_JEST},
        {"calc.test.js": replace(CALC_TEST_JEST, "toBe(4)", "toBe(0)")},
        [("edited_expected_value", "calc.test.js")],
    ),
    "jest-split-expect-value-edited": Case(
        {
            "calc.test.js": replace(
                CALC_TEST_JEST,
                "expect(add(2, 2)).toBe(4)",
                "expect(\n      add(2, 2),\n    ).toBe(4)",
            )
        },
        {
            "calc.test.js": replace(
                CALC_TEST_JEST,
                "expect(add(2, 2)).toBe(4)",
                "expect(\n      add(2, 2),\n    ).toBe(5)",
            )
        },
        [("edited_expected_value", "calc.test.js")],
    ),
    "go-table-row-edited": Case(
        {"calc_test.go": TABLE_TEST_GO},
        {"calc_test.go": replace(TABLE_TEST_GO, "{2, 2, 4}", "{2, 2, 0}")},
        [("edited_expected_value", "calc_test.go")],
    ),
    # Protected paths and the allow-list.
    "workflow-edited": Case(
        {".github/workflows/ci.yml": "on: push\n", "calc.py": CALC_PY},
        {".github/workflows/ci.yml": "on: [push, pull_request]\n"},
        [("protected_path", ".github/workflows/ci.yml")],
    ),
    "codeowners-anywhere": Case(
        {"docs/CODEOWNERS": "* @owner\n"},
        {"docs/CODEOWNERS": "* @someone-else\n"},
        [("protected_path", "docs/CODEOWNERS")],
    ),
    "allow-list-permits-test-edits": Case(
        {"tests/test_calc.py": TEST_CALC_PY},
        {"tests/test_calc.py": None},
        [],
        allow=("tests/**",),
    ),
    "allow-list-does-not-cover-protected": Case(
        {".github/workflows/ci.yml": "on: push\n", "tests/test_calc.py": TEST_CALC_PY},
        {".github/workflows/ci.yml": None, "tests/test_calc.py": None},
        [("protected_path", ".github/workflows/ci.yml")],
        allow=("**",),
    ),
    "allow-list-is-per-path": Case(
        {"tests/test_calc.py": TEST_CALC_PY, "tests/test_other.py": TEST_CALC_PY},
        {"tests/test_calc.py": None, "tests/test_other.py": None},
        [("deleted_test_file", "tests/test_other.py")],
        allow=("tests/test_calc.py",),
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_tamper_findings(tmp_path: Path, case: Case) -> None:
    patch = git_diff(tmp_path, case.before, case.after)
    assert patch, "the case must produce a diff"
    findings = tamper_findings(patch, allow_test_edits=case.allow, protected=PROTECTED)
    assert [(f.kind, f.path) for f in findings] == case.expected, findings
    if case.detail:
        assert case.detail in findings[0].detail


def test_finding_detail_quotes_both_lines(tmp_path: Path) -> None:
    patch = git_diff(
        tmp_path,
        {"tests/test_calc.py": TEST_CALC_PY},
        {"tests/test_calc.py": replace(TEST_CALC_PY, "== 4", "== 5")},
    )
    [finding] = tamper_findings(patch, protected=PROTECTED)
    assert "`assert add(2, 2) == 4` → `assert add(2, 2) == 5`" in finding.detail


def test_parse_patch_statuses_and_hunks(tmp_path: Path) -> None:
    patch = git_diff(
        tmp_path,
        {"a.py": "x = 1\n", "gone.py": "y = 2\n", "old name.py": "z = 3\n" * 5},
        {
            "a.py": "x = 2\n",
            "gone.py": None,
            "old name.py": None,
            "new name.py": "z = 3\n" * 5,
            "fresh.py": "w = 4\n",
        },
    )
    files = {f.path: f for f in parse_patch(patch)}
    assert files["a.py"].status == "modified"
    assert files["a.py"].hunks[0].removed == ("x = 1",)
    assert files["a.py"].hunks[0].added == ("x = 2",)
    assert files["gone.py"].status == "deleted" and files["gone.py"].new_path is None
    assert files["fresh.py"].status == "added" and files["fresh.py"].old_path is None
    renamed = files["new name.py"]
    assert (renamed.status, renamed.old_path) == ("renamed", "old name.py")


def test_parse_patch_counts_lines_so_a_removed_sql_comment_is_not_a_header() -> None:
    patch = (
        "diff --git a/q.sql b/q.sql\n"
        "--- a/q.sql\n"
        "+++ b/q.sql\n"
        "@@ -1,2 +1,1 @@\n"
        "--- a comment\n"
        " select 1;\n"
        "diff --git a/r.sql b/r.sql\n"
        "--- a/r.sql\n"
        "+++ b/r.sql\n"
        "@@ -1 +1 @@\n"
        "-select 2;\n"
        "+select 3;\n"
    )
    files = parse_patch(patch)
    assert [f.path for f in files] == ["q.sql", "r.sql"]
    assert files[0].hunks[0].removed == ("-- a comment",)


def test_parse_patch_unquotes_unusual_names(tmp_path: Path) -> None:
    patch = git_diff(tmp_path, {"tests/tést.py": "a = 1\n"}, {"tests/tést.py": None})
    assert '"' in patch.splitlines()[0]  # git C-quotes non-ASCII names
    [file] = parse_patch(patch)
    assert file.old_path == "tests/tést.py"


def test_binary_test_fixture_deleted(tmp_path: Path) -> None:
    root = tmp_path
    git(root, "init", "-q")
    (root / "testdata").mkdir()
    (root / "testdata" / "golden.bin").write_bytes(b"\x00\x01\x02")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "before")
    (root / "testdata" / "golden.bin").unlink()
    git(root, "add", "-A")
    patch = git(root, "diff", "--cached", "--binary")
    assert "GIT binary patch" in patch
    findings = tamper_findings(patch, protected=PROTECTED)
    assert [(f.kind, f.path) for f in findings] == [("deleted_test_file", "testdata/golden.bin")]


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("tests/test_calc.py", True),
        ("test/helpers.js", True),
        ("src/__tests__/calc.js", True),
        ("spec/models/user_spec.rb", True),
        ("test_calc.py", True),
        ("pkg/calc_test.py", True),
        ("src/calc.test.ts", True),
        ("web/calc.spec.js", True),
        ("lib/calc.test.mjs", True),
        ("calc_test.go", True),
        ("conftest.py", True),
        ("src/calc.py", False),
        ("src/testing_utils.py", False),
        ("contest.py", False),
        ("latest/calc.js", False),
        ("calc.go", False),
    ],
    ids=lambda value: str(value),
)
def test_is_test_path(path: str, expected: bool) -> None:
    assert is_test_path(path) is expected


def test_rename_exported_without_rename_detection_is_still_a_removed_test_file(
    tmp_path: Path,
) -> None:
    git_diff(tmp_path, {"tests/test_calc.py": TEST_CALC_PY}, {})
    git(tmp_path, "mv", "tests/test_calc.py", "tests/calc_checks.py")
    patch = git(tmp_path, "diff", "--cached", "--no-renames")
    findings = tamper_findings(patch, protected=PROTECTED)
    assert [(f.kind, f.path) for f in findings] == [("deleted_test_file", "tests/test_calc.py")]
