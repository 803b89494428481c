"""The verification verdict: compare the test run before the patch with the run after it.

Verified means every originally failing test now passes, no originally passing test fails,
errors, is skipped or disappears, and the test command exits 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from loopwright.verify.reports import SUITE_ID, Outcome, TestReport, TestResult

RowStatus = Literal[
    "fixed",
    "still_failing",
    "broken",
    "vanished",
    "ok",
    "new_pass",
    "new_fail",
    "skipped_now",
]

_BAD: tuple[Outcome, ...] = ("failed", "error")


@dataclass(frozen=True)
class TestRow:
    """One line of the before/after table."""

    __test__ = False  # not a pytest test class despite the name

    id: str
    before: Outcome | None
    after: Outcome | None
    status: RowStatus


@dataclass(frozen=True)
class Verdict:
    verified: bool
    rows: tuple[TestRow, ...]
    reasons: tuple[str, ...]
    """Why the patch is not verified, one sentence per problem; empty when verified."""


def compare(before: TestReport, after: TestReport) -> Verdict:
    """The verdict for `after` (original tree + patch) against `before` (original tree)."""
    if before.source == "exit-code" or after.source == "exit-code":
        # Per-test ids on one side only cannot be matched; compare the runs as a whole.
        before_results = {SUITE_ID: _suite(before)}
        after_results = {SUITE_ID: _suite(after)}
    else:
        before_results = before.by_id()
        after_results = after.by_id()
    rows: list[TestRow] = []
    reasons: list[str] = []
    ids = list(before_results) + [i for i in after_results if i not in before_results]
    for test_id in ids:
        was = before_results[test_id].outcome if test_id in before_results else None
        now = after_results[test_id].outcome if test_id in after_results else None
        status, reason = _classify(test_id, was, now)
        rows.append(TestRow(test_id, was, now, status))
        # The whole-run pseudo-test follows the exit code, which is reported below.
        if reason and test_id != SUITE_ID:
            reasons.append(reason)
    if before.source != "exit-code" and after.source == "exit-code":
        # Something stopped the runner from reporting (a crash at import, an os._exit in a
        # conftest); an exit code alone cannot show the originally failing tests now pass.
        reasons.append(
            "the run after the patch wrote no per-test report although the run before did, "
            "so the originally failing tests cannot be confirmed as passing"
        )
    if after.exit_code != 0:
        reasons.append(f"the test command exited {after.exit_code}")
    return Verdict(not reasons, tuple(rows), tuple(reasons))


def _suite(report: TestReport) -> TestResult:
    if report.source == "exit-code":
        return report.by_id().get(SUITE_ID, TestResult(SUITE_ID, "failed"))
    bad = report.exit_code != 0 or bool(report.failing())
    return TestResult(SUITE_ID, "failed" if bad else "passed")


def _classify(
    test_id: str, was: Outcome | None, now: Outcome | None
) -> tuple[RowStatus, str | None]:
    """The row status and, when it blocks verification, the reason in words."""
    if was in _BAD:
        if now == "passed":
            return "fixed", None
        if now in _BAD:
            verb = "errors" if now == "error" else "fails"
            return "still_failing", f"{test_id} still {verb}"
        if now == "skipped":
            return "skipped_now", f"{test_id} failed before and is now skipped"
        return "vanished", f"{test_id} failed before and disappeared"
    if was == "passed":
        if now == "passed":
            return "ok", None
        if now in _BAD:
            verb = "errors" if now == "error" else "fails"
            return "broken", f"{test_id} passed before and now {verb}"
        if now == "skipped":
            return "skipped_now", f"{test_id} passed before and is now skipped"
        return "vanished", f"{test_id} passed before and disappeared"
    # Skipped before, or new: only a failure now is a problem.
    if now in _BAD:
        return "new_fail", f"{test_id} is new or was skipped before, and now fails"
    if now == "passed":
        return "new_pass", None
    if now is None:
        return "vanished", None
    return "ok", None
