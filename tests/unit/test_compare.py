"""The verdict on before/after scenarios, one table row per scenario."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from loopwright.verify.compare import TestRow, compare
from loopwright.verify.reports import SUITE_ID, Outcome, TestReport, TestResult, build_report

A = "tests/test_calc.py::test_add"
B = "tests/test_calc.py::test_sub"
C = "tests/test_calc.py::test_mul"
NO_REPORT = (
    "the run after the patch wrote no per-test report although the run before did, "
    "so the originally failing tests cannot be confirmed as passing"
)


def junit(exit_code: int, **outcomes: Outcome) -> TestReport:
    """A per-test report; keyword names map a, b, c to the ids above."""
    ids = {"a": A, "b": B, "c": C}
    results = tuple(TestResult(ids.get(k, k), v) for k, v in outcomes.items())
    return TestReport(results, exit_code, "junit")


@dataclass(frozen=True)
class Case:
    before: TestReport
    after: TestReport
    verified: bool
    statuses: dict[str, str]
    reasons: tuple[str, ...] = ()


CASES = {
    "fix-verified": Case(
        junit(1, a="failed", b="passed"),
        junit(0, a="passed", b="passed"),
        True,
        {A: "fixed", B: "ok"},
    ),
    "error-fixed": Case(
        junit(1, a="error"),
        junit(0, a="passed"),
        True,
        {A: "fixed"},
    ),
    "still-failing": Case(
        junit(1, a="failed", b="passed"),
        junit(1, a="failed", b="passed"),
        False,
        {A: "still_failing", B: "ok"},
        (f"{A} still fails", "the test command exited 1"),
    ),
    "still-failing-as-error": Case(
        junit(1, a="failed"),
        junit(1, a="error"),
        False,
        {A: "still_failing"},
        (f"{A} still errors", "the test command exited 1"),
    ),
    "fix-breaks-another-test": Case(
        junit(1, a="failed", b="passed"),
        junit(1, a="passed", b="failed"),
        False,
        {A: "fixed", B: "broken"},
        (f"{B} passed before and now fails", "the test command exited 1"),
    ),
    "failing-test-skipped": Case(
        junit(1, a="failed"),
        junit(0, a="skipped"),
        False,
        {A: "skipped_now"},
        (f"{A} failed before and is now skipped",),
    ),
    "passing-test-skipped": Case(
        junit(1, a="failed", b="passed"),
        junit(0, a="passed", b="skipped"),
        False,
        {A: "fixed", B: "skipped_now"},
        (f"{B} passed before and is now skipped",),
    ),
    "failing-test-deleted": Case(
        junit(1, a="failed", b="passed"),
        junit(0, b="passed"),
        False,
        {A: "vanished", B: "ok"},
        (f"{A} failed before and disappeared",),
    ),
    "passing-test-deleted": Case(
        junit(1, a="failed", b="passed"),
        junit(0, a="passed"),
        False,
        {A: "fixed", B: "vanished"},
        (f"{B} passed before and disappeared",),
    ),
    "new-test-passes": Case(
        junit(1, a="failed"),
        junit(0, a="passed", c="passed"),
        True,
        {A: "fixed", C: "new_pass"},
    ),
    "new-test-fails": Case(
        junit(1, a="failed"),
        junit(1, a="passed", c="failed"),
        False,
        {A: "fixed", C: "new_fail"},
        (f"{C} is new or was skipped before, and now fails", "the test command exited 1"),
    ),
    "skipped-before-and-after": Case(
        junit(1, a="failed", c="skipped"),
        junit(0, a="passed", c="skipped"),
        True,
        {A: "fixed", C: "ok"},
    ),
    "all-pass-but-exit-code-nonzero": Case(
        junit(1, a="failed"),
        junit(2, a="passed"),
        False,
        {A: "fixed"},
        ("the test command exited 2",),
    ),
    "exit-code-only-fixed": Case(
        build_report(1),
        build_report(0),
        True,
        {SUITE_ID: "fixed"},
    ),
    "exit-code-only-still-failing": Case(
        build_report(1),
        build_report(1),
        False,
        {SUITE_ID: "still_failing"},
        ("the test command exited 1",),
    ),
    "report-lost-after-patch": Case(
        junit(1, a="failed", b="passed"),
        build_report(0),
        False,
        {SUITE_ID: "fixed"},
        (NO_REPORT,),
    ),
    "report-lost-after-patch-and-failing": Case(
        junit(1, a="failed"),
        build_report(1),
        False,
        {SUITE_ID: "still_failing"},
        (NO_REPORT, "the test command exited 1"),
    ),
    "report-appears-after-patch": Case(
        build_report(2),
        junit(0, a="passed", b="passed"),
        True,
        {SUITE_ID: "fixed"},
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_compare(case: Case) -> None:
    verdict = compare(case.before, case.after)
    assert verdict.verified is case.verified
    assert {row.id: row.status for row in verdict.rows} == case.statuses
    assert verdict.reasons == case.reasons


def test_rows_keep_before_order_then_new_tests() -> None:
    verdict = compare(
        junit(1, b="passed", a="failed"), junit(0, c="passed", a="passed", b="passed")
    )
    assert verdict.rows == (
        TestRow(B, "passed", "passed", "ok"),
        TestRow(A, "failed", "passed", "fixed"),
        TestRow(C, None, "passed", "new_pass"),
    )
