"""Selection findings: changes to the files that decide which tests run.

Deselection options, ignore lists, collection hooks and a changed npm test script can make a
suite pass by not running the failing tests.
"""

from __future__ import annotations

import re

from loopwright.verify.diff import FilePatch, squash
from loopwright.verify.findings import Finding

# Files that decide which tests run; additions to them are checked for deselection tricks.
_TEST_CONFIG = re.compile(
    r"^(?:pytest\.ini|tox\.ini|setup\.cfg|pyproject\.toml|conftest\.py|package\.json"
    r"|(?:jest|vitest|vite)\.config\.\w+|\.mocharc(?:\.\w+)?|Makefile)$"
)


def is_test_config(path: str) -> bool:
    """`path` names a file that decides which tests run (pytest.ini, package.json, ...)."""
    return bool(_TEST_CONFIG.match(path.rsplit("/", 1)[-1]))


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


def selection_findings(file: FilePatch) -> list[Finding]:
    removed = {squash(t) for h in file.hunks for t in h.removed}
    findings: list[Finding] = []
    for hunk in file.hunks:
        for text in hunk.added:
            if squash(text) in removed:
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
