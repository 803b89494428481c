"""The tamper check: find the ways a patch can make tests pass without fixing anything.

It reads a git-format unified diff and reports deleted, renamed or disabled tests, removed or
weakened assertions, edited expected values and changes to protected paths. Verification
also withholds test and test-configuration changes the repository does not allow
(`loopwright.verify.testfiles`); these findings say what the withheld change would have done,
and still apply to the paths `allow_test_edits` lets through.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Literal

from loopwright.protected_paths import is_protected
from loopwright.verify.testfiles import is_test_path

FindingKind = Literal[
    "deleted_test_file",
    "renamed_test_file",
    "removed_test",
    "removed_assertion",
    "loosened_assertion",
    "added_skip",
    "edited_expected_value",
    "protected_path",
    "changed_test_file",
    "test_config",
    "dependency_change",
    "reach",
]
FileStatus = Literal["added", "deleted", "renamed", "modified"]


@dataclass(frozen=True)
class Finding:
    path: str
    kind: FindingKind
    detail: str


@dataclass(frozen=True)
class Hunk:
    old_start: int
    new_start: int
    lines: tuple[tuple[str, str], ...]
    """(op, text) pairs: op is " " for context, "-" for removed, "+" for added."""

    @property
    def removed(self) -> tuple[str, ...]:
        return tuple(text for op, text in self.lines if op == "-")

    @property
    def added(self) -> tuple[str, ...]:
        return tuple(text for op, text in self.lines if op == "+")


@dataclass(frozen=True)
class FilePatch:
    old_path: str | None
    """None for an added file."""
    new_path: str | None
    """None for a deleted file."""
    status: FileStatus
    hunks: tuple[Hunk, ...] = ()
    binary: bool = False

    @property
    def path(self) -> str:
        return self.new_path or self.old_path or ""

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p for p in (self.old_path, self.new_path) if p))


# --- paths -----------------------------------------------------------------------------------

# Files that decide which tests run; additions to them are checked for deselection tricks.
_TEST_CONFIG = re.compile(
    r"^(?:pytest\.ini|tox\.ini|setup\.cfg|pyproject\.toml|conftest\.py|package\.json"
    r"|(?:jest|vitest|vite)\.config\.\w+|\.mocharc(?:\.\w+)?|Makefile)$"
)


# --- parsing ---------------------------------------------------------------------------------

_HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def parse_patch(patch: str) -> list[FilePatch]:
    """Split a git-format (or plain) unified diff into its files and hunks."""
    lines = [line.removesuffix("\r") for line in patch.split("\n")]
    files: list[FilePatch] = []
    builder: _FileBuilder | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("diff --git "):
            if builder:
                files.append(builder.build())
            builder = _FileBuilder()
            builder.old_path, builder.new_path = _git_header_paths(line[len("diff --git ") :])
        elif line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            if builder is None or builder.hunks or builder.saw_markers:
                if builder:
                    files.append(builder.build())
                builder = _FileBuilder()
            builder.old_path = _marker_path(line[4:])
            builder.new_path = _marker_path(lines[i + 1][4:])
            builder.saw_markers = True
            if builder.old_path is None:
                builder.status = "added"
            elif builder.new_path is None:
                builder.status = "deleted"
            i += 1
        elif line.startswith("@@") and builder is not None:
            i = _read_hunk(lines, i, builder)
            continue
        elif builder is not None:
            _read_extended_header(line, builder)
        i += 1
    if builder:
        files.append(builder.build())
    return files


class _FileBuilder:
    def __init__(self) -> None:
        self.old_path: str | None = None
        self.new_path: str | None = None
        self.status: FileStatus = "modified"
        self.hunks: list[Hunk] = []
        self.binary = False
        self.saw_markers = False

    def build(self) -> FilePatch:
        old = None if self.status == "added" else self.old_path
        new = None if self.status == "deleted" else self.new_path
        return FilePatch(old, new, self.status, tuple(self.hunks), self.binary)


def _read_extended_header(line: str, builder: _FileBuilder) -> None:
    if line.startswith("new file mode"):
        builder.status = "added"
    elif line.startswith("deleted file mode"):
        builder.status = "deleted"
    elif line.startswith(("rename from ", "copy from ")):
        builder.old_path = _unquote(line.split(" ", 2)[2])
        builder.status = "renamed" if line.startswith("rename") else "added"
    elif line.startswith(("rename to ", "copy to ")):
        builder.new_path = _unquote(line.split(" ", 2)[2])
    elif line.startswith("Binary files ") or line == "GIT binary patch":
        builder.binary = True


def _read_hunk(lines: list[str], i: int, builder: _FileBuilder) -> int:
    """Read the hunk starting at `lines[i]`; return the index after it.

    Counting lines against the header is what tells a removed line `-- x` (shown as `--- x`)
    from the next file's header.
    """
    match = _HUNK_HEADER.match(lines[i])
    if not match:
        return i + 1
    old_left = int(match.group(2) or "1")
    new_left = int(match.group(4) or "1")
    body: list[tuple[str, str]] = []
    i += 1
    while i < len(lines) and (old_left > 0 or new_left > 0):
        line = lines[i]
        op, text = (line[:1] or " "), line[1:]
        if op == "\\":  # "\ No newline at end of file"
            i += 1
            continue
        if op == "-":
            old_left -= 1
        elif op == "+":
            new_left -= 1
        elif op == " ":
            old_left -= 1
            new_left -= 1
        else:
            break
        body.append((op, text))
        i += 1
    while i < len(lines) and lines[i].startswith("\\"):
        i += 1
    builder.hunks.append(Hunk(int(match.group(1)), int(match.group(3)), tuple(body)))
    return i


def _git_header_paths(rest: str) -> tuple[str | None, str | None]:
    if rest.startswith('"'):
        first, _, tail = _split_quoted(rest)
        second = _unquote(tail.strip())
        return _strip_prefix(first, "a/"), _strip_prefix(second, "b/")
    # `a/X b/X`: with identical names (the usual case) the split point is unambiguous even
    # when X contains spaces.
    half = (len(rest) - 1) // 2
    if len(rest) % 2 == 1 and rest[half] == " " and rest[2:half] == rest[half + 3 :]:
        return _strip_prefix(rest[:half], "a/"), _strip_prefix(rest[half + 1 :], "b/")
    old, sep, new = rest.partition(" b/")
    if sep:
        return _strip_prefix(old, "a/"), new
    return None, None


def _marker_path(value: str) -> str | None:
    value = value.split("\t", 1)[0]
    value = _unquote(value.strip()) if value.startswith('"') else value.rstrip()
    if value == "/dev/null":
        return None
    for prefix in ("a/", "b/"):
        if value.startswith(prefix):
            return value[2:]
    return value


def _strip_prefix(value: str, prefix: str) -> str:
    return value[len(prefix) :] if value.startswith(prefix) else value


def _split_quoted(text: str) -> tuple[str, str, str]:
    """Split a leading C-quoted string (git's quoting of unusual names) off `text`."""
    i = 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == '"':
            return _unquote(text[: i + 1]), '"', text[i + 1 :]
        i += 1
    return _unquote(text), "", ""


_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def _unquote(value: str) -> str:
    if not (len(value) >= 2 and value.startswith('"') and value.endswith('"')):
        return value
    body = value[1:-1]
    out = bytearray()
    i = 0
    while i < len(body):
        char = body[i]
        if char == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in "01234567" and re.match(r"[0-7]{3}", body[i + 1 : i + 4]):
                out.append(int(body[i + 1 : i + 4], 8))
                i += 4
                continue
            out.append(_ESCAPES.get(nxt, ord(nxt)))
            i += 2
            continue
        out.extend(char.encode("utf-8"))
        i += 1
    return out.decode("utf-8", errors="replace")


# --- the check -------------------------------------------------------------------------------


def tamper_findings(
    patch: str, *, allow_test_edits: Sequence[str] = (), protected: Sequence[str]
) -> list[Finding]:
    """Everything in `patch` that weakens the tests or touches a protected path.

    Files matching an `allow_test_edits` glob get no test findings; protected paths are
    reported whatever `allow_test_edits` says.
    """
    files = parse_patch(patch)
    findings: list[Finding] = []
    added_test_names = {
        name
        for f in files
        if f.new_path and is_test_path(f.new_path)
        for hunk in f.hunks
        for text in hunk.added
        for name in _test_names(text, _language(f.new_path))
    }
    for file in files:
        protected_hit = next((p for p in file.paths if is_protected(p, protected)), None)
        if protected_hit:
            findings.append(
                Finding(
                    protected_hit,
                    "protected_path",
                    f"{protected_hit} is a protected path; changes to it are refused "
                    "(the protected list is set in .loopwright.yml)",
                )
            )
        if any(is_protected(p, allow_test_edits) for p in file.paths):
            continue
        findings.extend(_file_findings(file, added_test_names))
    return findings


def _file_findings(file: FilePatch, added_test_names: set[str]) -> list[Finding]:
    old_is_test = file.old_path is not None and is_test_path(file.old_path)
    new_is_test = file.new_path is not None and is_test_path(file.new_path)
    path = file.path
    findings: list[Finding] = []
    if file.status == "deleted" and old_is_test:
        return [Finding(path, "deleted_test_file", f"the test file {path} was deleted")]
    if file.status == "renamed" and old_is_test:
        findings.append(
            Finding(
                file.old_path or path,
                "renamed_test_file",
                f"the test file {file.old_path} was renamed to {file.new_path}, which can stop "
                "the runner from collecting it",
            )
        )
    if _TEST_CONFIG.match(path.rsplit("/", 1)[-1]):
        findings.extend(_selection_findings(file))
    if file.status != "added" and (old_is_test or new_is_test):
        findings.extend(_TestFileDiff(file, added_test_names).findings())
    return findings


# A patch may not change which tests run: deselection options, ignore lists, collection hooks.
_SELECTION_TRICKS = [
    (re.compile(r"--deselect\b"), "adds --deselect"),
    (re.compile(r"--ignore(?:-glob)?(?:=|\s)"), "adds --ignore"),
    (re.compile(r"(?:^|\s)-k\s+['\"]?not\b"), "deselects tests with -k 'not …'"),
    (re.compile(r"\bcollect_ignore(?:_glob)?\b"), "adds collect_ignore"),
    (re.compile(r"\b(?:testPathIgnorePatterns|modulePathIgnorePatterns)\b"), "ignores test paths"),
    (
        re.compile(
            r"\bdef\s+(pytest_(?:collection_modifyitems|ignore_collect|runtest_\w+|pyfunc_call"
            r"|report_teststatus|collect_file))\b"
        ),
        "adds the pytest hook {0}, which can change which tests run or how they are reported",
    ),
]
_NPM_TEST_SCRIPT = re.compile(r'^\s*"test"\s*:\s*"')


def _selection_findings(file: FilePatch) -> list[Finding]:
    removed = {_squash(t) for h in file.hunks for t in h.removed}
    findings: list[Finding] = []
    for hunk in file.hunks:
        for text in hunk.added:
            if _squash(text) in removed:
                continue
            for pattern, detail in _SELECTION_TRICKS:
                match = pattern.search(text)
                if match:
                    what = detail.format(*match.groups())
                    findings.append(Finding(file.path, "added_skip", f"{what}: {text.strip()}"))
                    break
            if (
                file.status != "added"
                and file.path.rsplit("/", 1)[-1] == "package.json"
                and _NPM_TEST_SCRIPT.match(text)
            ):
                findings.append(
                    Finding(
                        file.path,
                        "added_skip",
                        f"changes the test script, which decides what runs: {text.strip()}",
                    )
                )
    return findings


# --- line analysis of one changed test file --------------------------------------------------

Language = Literal["python", "c-like"]

_PY_TEST_DEF = re.compile(r"^\s*(?:async\s+)?def\s+(test\w*)\s*\(")
_GO_TEST_DEF = re.compile(r"^\s*func\s+(Test\w*)\s*\(")
# `test.only(...)` and `it.skip(...)` still define the test; the skip check reports them.
_JS_TEST_DEF = re.compile(
    r"(?<![\w.$])(?:it|test)(?:\.(?:skip|only|todo))?\s*\(\s*(['\"`])((?:\\.|(?!\1).)*)\1"
)

_ASSERTION = re.compile(
    r"^\s*assert\b"  # Python's statement
    r"|\bself\.(?:assert\w*|fail\w*)\s*\("  # unittest
    r"|(?<![\w.$])expect\s*\("  # jest, vitest, chai
    r"|^\s*\)*\s*\.(?:not\.|resolves\.|rejects\.)*to[A-Z]\w*\s*\("  # `).toBe(4)` of a split expect
    r"|(?<![\w.$])assert(?:\.\w+)?\s*\("  # node:assert, chai.assert
    r"|\bassert_\w+!?\s*\(|\bassert!\s*\("  # rust
    r"|\bt\.(?:Error|Errorf|Fatal|Fatalf|Fail|FailNow)\s*\("  # go testing
    r"|\b(?:require|assert)\.[A-Z]\w*\s*\("  # testify
    r"|\bpytest\.raises\s*\(|\bassertRaises\w*\s*\("
)
# Lines that hold an expectation without asserting it themselves: `expected = 4`,
# `want := 4`, table rows like `(2, 2, 4),` or `{"add", 2, 2, 4},`, parametrize lists.
_EXPECTATION = re.compile(
    r"^\s*(?:const\s+|let\s+|var\s+)?(?:expected|expect|want|exp|wanted)\w*\s*:?=[^=]"
    r"|^\s*[\[{(]|^\s*pytest\.param\s*\(|\bpytest\.mark\.parametrize\b"
    r"|^\s*if\b.*(?:==|!=|\bDeepEqual\b)"
)
_SKIP_MARKERS = [
    re.compile(r"\bpytest\.mark\.(?:skip|skipif|xfail)\b"),
    re.compile(r"\bpytest\.(?:skip|xfail|importorskip)\s*\("),
    re.compile(r"@(?:unittest\.)?(?:skip|skipIf|skipUnless|expectedFailure)\b"),
    re.compile(r"\bself\.skipTest\s*\(|\braise\s+(?:unittest\.)?SkipTest\b"),
    re.compile(r"(?<![\w$])(?:it|test|describe|context|suite)\.(?:skip|only|todo)\b"),
    re.compile(r"(?<![\w.$])(?:xit|xtest|xdescribe|xcontext|fit|fdescribe)\s*\("),
    re.compile(
        r"(?<![\w.$])(?:it|test|describe|suite)\s*\(.*[{,]\s*(?:skip|todo|only)\s*:\s*(?!false\b)"
    ),
    re.compile(r"\bt\.(?:Skip|Skipf|SkipNow)\s*\("),
    re.compile(r"#\[ignore\]"),
]
_BARE_RETURN = re.compile(r"^\s*return\s*;?\s*$")

_TOKEN = re.compile(
    r"""(?P<str>[rbuf]*(?:'(?:\\.|[^'\\])*'|"(?:\\.|[^"\\])*"|`(?:\\.|[^`\\])*`))"""
    r"|(?P<num>\d[\w.]*(?:[eE][+-]?\d+)?|\.\d+)"
    r"|(?P<name>[A-Za-z_$][\w$]*)"
    r"|(?P<op>===|!==|==|!=|<=|>=|&&|\|\||:=|\*\*|//|->|=>|\S)"
)
_LITERAL_NAMES = {"True", "False", "None", "true", "false", "null", "undefined", "nil", "NaN"}
_NEGATIONS = {"not", "!", "Not", "NotEqual", "NotEqualValues"}
_ALTERNATIVES = {"or", "||"}

# How much an assertion pins down: 3 exact equality, 2 strict bound or exclusion,
# 1 loose bound or membership, 0 truthiness. Lower after the patch means loosened.
_LEVEL_OPS = (
    dict.fromkeys(("==", "===", "is"), 3)
    | dict.fromkeys(("!=", "!==", "<", ">"), 2)
    | dict.fromkeys(("<=", ">=", "in"), 1)
)
_EXACT_MATCHERS = """
    toBe toEqual toStrictEqual toMatchObject toHaveLength toThrow toThrowError toHaveProperty
    toHaveBeenCalledWith toHaveBeenCalledTimes toMatch toMatchSnapshot
    assertEqual assertEquals assertListEqual assertDictEqual assertTupleEqual assertSetEqual
    assertSequenceEqual assertMultiLineEqual assertCountEqual assertIs assertIsNone
    assertRaises assertRaisesRegex assertAlmostEqual assertRegex raises
    strictEqual deepStrictEqual equal deepEqual equals eql throws rejects match
    assert_eq assert_ne Equal EqualValues Exactly ErrorIs JSONEq DeepEqual
"""
_BOUND_MATCHERS = """
    toBeGreaterThan toBeLessThan assertGreater assertLess assertNotEqual
    notEqual notStrictEqual notDeepStrictEqual Greater Less NotEqual
"""
_LOOSE_MATCHERS = """
    toBeGreaterThanOrEqual toBeLessThanOrEqual toContain toContainEqual toBeInstanceOf
    assertIn assertGreaterEqual assertLessEqual assertIsInstance include includes
    Contains GreaterOrEqual LessOrEqual Subset ElementsMatch
"""
_LEVEL_NAMES = {
    **dict.fromkeys(_EXACT_MATCHERS.split(), 3),
    **dict.fromkeys(_BOUND_MATCHERS.split(), 2),
    **dict.fromkeys(_LOOSE_MATCHERS.split(), 1),
}
# Same strength class, but the second of each pair compares more loosely.
_LOOSER = {
    ("strictEqual", "equal"),
    ("deepStrictEqual", "deepEqual"),
    ("toStrictEqual", "toEqual"),
    ("===", "=="),
    ("!==", "!="),
}
_TOLERANCE = re.compile(r"\b(rel|abs|delta|atol|rtol|tol|tolerance|epsilon)\s*=\s*([-+\d.eE]+)")
_PRECISION = re.compile(r"\bplaces\s*=\s*(\d+)|\btoBeCloseTo\s*\([^,]+,\s*(\d+)")


@dataclass(frozen=True)
class _Line:
    text: str
    block: int
    kind: Literal["assertion", "expectation"]
    tokens: tuple[str, ...]


class _TestFileDiff:
    """The findings inside one modified (or renamed) test file."""

    def __init__(self, file: FilePatch, added_test_names: set[str]) -> None:
        self.file = file
        self.path = file.path
        self.language = _language(self.path)
        self.added_test_names = added_test_names

    def findings(self) -> list[Finding]:
        removed: list[_Line] = []
        added: list[_Line] = []
        findings = self._removed_tests()
        covered = self._lines_of_removed_tests()
        block = 0
        for hunk_index, hunk in enumerate(self.file.hunks):
            previous = " "
            for index, (op, text) in enumerate(hunk.lines):
                if op != " " and previous == " ":
                    block += 1
                previous = op
                if op == " " or self._is_comment(text):
                    continue
                if op == "+" and _BARE_RETURN.match(text) and self._asserts_after(hunk, index):
                    findings.append(
                        Finding(
                            self.path,
                            "added_skip",
                            "adds an early `return` before the assertions that follow it",
                        )
                    )
                kind = self._kind(text)
                if kind is None or (op == "-" and (hunk_index, index) in covered):
                    continue
                line = _Line(text.strip(), block, kind, _tokens(text, self.language))
                (removed if op == "-" else added).append(line)
        findings += self._added_skips()
        findings += self._compare_assertions(removed, added)
        return findings

    def _kind(self, text: str) -> Literal["assertion", "expectation"] | None:
        if _ASSERTION.search(text):
            return "assertion"
        if _EXPECTATION.search(text):
            return "expectation"
        return None

    def _is_comment(self, text: str) -> bool:
        stripped = text.strip()
        if self.language == "python":
            return stripped.startswith("#")
        return stripped.startswith(("//", "/*", "*"))

    def _removed_tests(self) -> list[Finding]:
        findings: list[Finding] = []
        for hunk in self.file.hunks:
            for text in hunk.removed:
                if self._is_comment(text):
                    continue
                for name in _test_names(text, self.language):
                    if name not in self.added_test_names:
                        findings.append(
                            Finding(self.path, "removed_test", f"the test {name!r} was removed")
                        )
        return findings

    def _lines_of_removed_tests(self) -> set[tuple[int, int]]:
        """Removed lines that belong to a removed test, so its assertions are not reported too."""
        covered: set[tuple[int, int]] = set()
        for hunk_index, hunk in enumerate(self.file.hunks):
            inside = False
            for index, (op, text) in enumerate(hunk.lines):
                if op != "-":
                    inside = False
                    continue
                names = _test_names(text, self.language)
                if names and not self._is_comment(text):
                    inside = any(n not in self.added_test_names for n in names)
                if inside:
                    covered.add((hunk_index, index))
        return covered

    def _asserts_after(self, hunk: Hunk, index: int) -> bool:
        indent = _indent(hunk.lines[index][1])
        for op, text in hunk.lines[index + 1 :]:
            if op == "-" or not text.strip():
                continue
            if _indent(text) < indent:
                return False
            if _ASSERTION.search(text):
                return True
        return False

    def _added_skips(self) -> list[Finding]:
        removed = Counter(_squash(t) for h in self.file.hunks for t in h.removed)
        findings: list[Finding] = []
        for hunk in self.file.hunks:
            for text in hunk.added:
                if self._is_comment(text):
                    continue
                if any(p.search(text) for p in _SKIP_MARKERS):
                    key = _squash(text)
                    if removed[key] > 0:
                        removed[key] -= 1  # the marker was only moved or re-indented
                        continue
                    findings.append(
                        Finding(self.path, "added_skip", f"adds a skip marker: {text.strip()}")
                    )
        return findings

    def _compare_assertions(self, removed: list[_Line], added: list[_Line]) -> list[Finding]:
        # Unchanged assertions that only moved or were re-indented are not changes.
        pool = Counter(line.tokens for line in added)
        kept_removed: list[_Line] = []
        for line in removed:
            if pool[line.tokens] > 0:
                pool[line.tokens] -= 1
            else:
                kept_removed.append(line)
        unmatched = Counter(line.tokens for line in removed)
        kept_added: list[_Line] = []
        for line in added:
            if unmatched[line.tokens] > 0:
                unmatched[line.tokens] -= 1
            else:
                kept_added.append(line)

        findings: list[Finding] = []
        for line in kept_removed:
            partner = self._partner(line, kept_added)
            if partner is None:
                if line.kind == "assertion":
                    findings.append(
                        Finding(
                            self.path,
                            "removed_assertion",
                            f"the assertion `{line.text}` was removed and not replaced",
                        )
                    )
                continue
            kept_added.remove(partner)
            findings.extend(self._judge(line, partner))
        return findings

    @staticmethod
    def _partner(line: _Line, candidates: list[_Line]) -> _Line | None:
        best: _Line | None = None
        best_ratio = -1.0
        for other in candidates:
            if other.block != line.block:
                continue
            if line.kind == "assertion" and other.kind != "assertion":
                continue
            ratio = SequenceMatcher(None, line.tokens, other.tokens).ratio()
            if line.kind == "expectation" and ratio < 0.5:
                continue
            if ratio > best_ratio:
                best, best_ratio = other, ratio
        return best

    def _judge(self, before: _Line, after: _Line) -> list[Finding]:
        change = f"`{before.text}` → `{after.text}`"
        loosened = _loosening(before, after)
        if loosened:
            return [Finding(self.path, "loosened_assertion", f"{change}: {loosened}")]
        if _only_literals_differ(before.tokens, after.tokens):
            return [
                Finding(
                    self.path,
                    "edited_expected_value",
                    f"{change} changes only the expected value",
                )
            ]
        return []


def _loosening(before: _Line, after: _Line) -> str | None:
    """Why `after` checks less than `before`, or None when it checks as much or more."""
    widened = _widened_tolerance(before.text, after.text)
    if widened:
        return widened
    if before.kind != "assertion" or after.kind != "assertion":
        return None
    old, new = before.tokens, after.tokens
    if _count(new, _ALTERNATIVES) > _count(old, _ALTERNATIVES):
        return "an `or` alternative lets it pass in more cases"
    if _count(new, _NEGATIONS) > _count(old, _NEGATIONS):
        return "the assertion was negated"
    if _compares_with_itself(new) and not _compares_with_itself(old):
        return "it now compares a value with itself"
    old_level, old_how = _level(old)
    new_level, new_how = _level(new)
    if new_level < old_level:
        now = f"`{new_how}`" if new_how else "a truthiness check"
        return f"`{old_how}` was replaced by {now}"
    for strict, loose in _LOOSER:
        if strict in old and strict not in new and loose in new:
            return f"`{strict}` was replaced by the looser `{loose}`"
    return None


def _compares_with_itself(tokens: Sequence[str]) -> bool:
    """`assert x == x`, `expect(x).toBe(x)`, `assertEqual(x, x)`: always true, checks nothing."""
    for op in ("==", "===", "is"):
        sides = _split_top_level(_assert_expression(tokens), op)
        if len(sides) == 2 and sides[0] and sides[0] == sides[1]:
            return True
    if "expect" in tokens:
        start = tokens.index("expect")
        actual, end = _call_arguments(tokens, start + 1)
        for name in _LEVEL_NAMES:
            if name in tokens[end:]:
                expected, _ = _call_arguments(tokens, tokens.index(name, end) + 1)
                if actual and actual == expected:
                    return True
    for index, token in enumerate(tokens):
        if _LEVEL_NAMES.get(token) == 3 and index + 1 < len(tokens) and tokens[index + 1] == "(":
            arguments = _split_top_level(_call_arguments(tokens, index + 1)[0], ",")
            if len(arguments) >= 2 and arguments[0] and arguments[0] == arguments[1]:
                return True
    return False


def _assert_expression(tokens: Sequence[str]) -> tuple[str, ...]:
    """The expression of a Python `assert` statement, without its message."""
    if not tokens or tokens[0] != "assert":
        return ()
    return _split_top_level(tokens[1:], ",")[0]


def _call_arguments(tokens: Sequence[str], open_at: int) -> tuple[tuple[str, ...], int]:
    """The tokens between the parenthesis at `open_at` and its partner, and the index after it."""
    if open_at >= len(tokens) or tokens[open_at] != "(":
        return (), open_at
    depth = 0
    for index in range(open_at, len(tokens)):
        if tokens[index] in ("(", "[", "{"):
            depth += 1
        elif tokens[index] in (")", "]", "}"):
            depth -= 1
            if depth == 0:
                return tuple(tokens[open_at + 1 : index]), index + 1
    return tuple(tokens[open_at + 1 :]), len(tokens)


def _split_top_level(tokens: Sequence[str], separator: str) -> list[tuple[str, ...]]:
    parts: list[tuple[str, ...]] = []
    current: list[str] = []
    depth = 0
    for token in tokens:
        if token in ("(", "[", "{"):
            depth += 1
        elif token in (")", "]", "}"):
            depth -= 1
        if token == separator and depth == 0:
            parts.append(tuple(current))
            current = []
        else:
            current.append(token)
    parts.append(tuple(current))
    return parts


def _widened_tolerance(before: str, after: str) -> str | None:
    old = {k: _number(v) for k, v in _TOLERANCE.findall(before)}
    for key, value in _TOLERANCE.findall(after):
        new_value = _number(value)
        if new_value is None:
            continue
        old_value = old.get(key)
        if old_value is None or new_value > old_value:
            return f"the tolerance {key}= was widened to {value}"
    old_precision = [int(a or b) for a, b in _PRECISION.findall(before)]
    new_precision = [int(a or b) for a, b in _PRECISION.findall(after)]
    if old_precision and new_precision and min(new_precision) < min(old_precision):
        return "the precision was lowered"
    return None


def _level(tokens: Sequence[str]) -> tuple[int, str]:
    best, how = 0, ""
    for token in tokens:
        level = _LEVEL_OPS.get(token, _LEVEL_NAMES.get(token, 0))
        if level > best:
            best, how = level, token
    return best, how


def _only_literals_differ(old: Sequence[str], new: Sequence[str]) -> bool:
    old, new = _signed(old), _signed(new)
    if len(old) != len(new) or old == new:
        return False
    return all(a == b or (_is_literal(a) and _is_literal(b)) for a, b in zip(old, new, strict=True))


def _signed(tokens: Sequence[str]) -> list[str]:
    """Fold a unary sign into the number after it, so `900` → `-8999` is one literal change."""
    out: list[str] = []
    for token in tokens:
        sign = out[-1] if out else ""
        before = out[-2] if len(out) > 1 else ""
        unary = sign in ("-", "+") and (
            not before or not (before[-1:].isalnum() or before in ")]_")
        )
        if unary and token[:1].isdigit():
            out[-1] = sign + token
        else:
            out.append(token)
    return out


def _is_literal(lexeme: str) -> bool:
    if lexeme[:1] in "-+" and lexeme[1:2].isdigit():
        return True
    if lexeme in _LITERAL_NAMES:
        return True
    return lexeme != "." and lexeme[:1] in "'\"`0123456789."


def _tokens(text: str, language: Language) -> tuple[str, ...]:
    out: list[str] = []
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup
        value = match.group()
        if kind == "op" and (
            (language == "python" and value == "#") or (language == "c-like" and value == "//")
        ):
            break  # a trailing comment
        if kind == "str":
            # Quote style is not a change in meaning.
            value = '"' + value.lstrip("rbufRBUF")[1:-1] + '"'
        out.append(value)
    # A trailing comma or semicolon is punctuation, not part of the assertion.
    while out and out[-1] in (",", ";"):
        out.pop()
    return tuple(out)


def _test_names(text: str, language: Language) -> list[str]:
    if language == "python":
        match = _PY_TEST_DEF.match(text)
        return [match.group(1)] if match else []
    go = _GO_TEST_DEF.match(text)
    if go:
        return [go.group(1)]
    return [m.group(2) for m in _JS_TEST_DEF.finditer(text)]


def _language(path: str) -> Language:
    return "python" if path.endswith(".py") else "c-like"


def _count(tokens: Sequence[str], words: set[str]) -> int:
    return sum(1 for t in tokens if t in words)


def _number(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip())


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text)
