"""The tamper check: find the ways a patch can make tests pass without fixing anything.

It reads a git-format unified diff and reports deleted, renamed or disabled tests, removed or
weakened assertions, edited expected values and changes to protected paths. Verification
also withholds test and test-configuration changes the repository does not allow
(`loopwright.verify.testfiles`); these findings say what the withheld change would have done,
and still apply to the paths `allow_test_edits` lets through.
"""

from __future__ import annotations

from collections.abc import Sequence

from loopwright.protected_paths import is_protected
from loopwright.verify.assertions import TestFileDiff, language, test_names
from loopwright.verify.diff import FilePatch, parse_patch
from loopwright.verify.findings import Finding
from loopwright.verify.selection import is_test_config, selection_findings
from loopwright.verify.testfiles import is_test_path


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
        for name in test_names(text, language(f.new_path))
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
    if is_test_config(path):
        findings.extend(selection_findings(file))
    if file.status != "added" and (old_is_test or new_is_test):
        findings.extend(TestFileDiff(file, added_test_names).findings())
    return findings
