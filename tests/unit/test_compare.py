"""The verdict on before/after scenarios, one table row per scenario."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from loopwright.verify.compare import (
    EXIT_BASIS,
    FILE_BASIS,
    STREAM_BASIS,
    TestRow,
    compare,
    run_reasons,
)
from loopwright.verify.reports import (
    SUITE_ID,
    Outcome,
    StreamEvidence,
    TestReport,
    TestResult,
    build_report,
)

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


# -- verdicts on Loopwright's signed results stream ---------------------------------------

NEVER_STARTED = (
    "Loopwright's test reporter never started in the run after the patch (no signed start "
    "record), so none of the results can be trusted"
)
NO_COMPLETION = (
    "the test run ended without its completion record: the process exited before the suite finished"
)


def streamed(
    exit_code: int,
    *,
    status: int | None = None,
    started: bool = True,
    completed: bool = True,
    problems: tuple[str, ...] = (),
    file: dict[str, Outcome] | str | None = "same",
    **outcomes: Outcome,
) -> TestReport:
    """A report from the stream; `file` is the JUnit cross-check ("same": agrees with it)."""
    ids = {"a": A, "b": B, "c": C}
    results = tuple(TestResult(ids.get(k, k), v) for k, v in outcomes.items())
    if file == "same":
        file_results: tuple[TestResult, ...] | None = results
    elif file is None or isinstance(file, str):
        file_results = None
    else:
        file_results = tuple(TestResult(ids.get(k, k), v) for k, v in file.items())
    evidence = StreamEvidence(
        started=started,
        completed=completed,
        status=exit_code if status is None and completed else status,
        problems=problems,
        file_results=file_results,
        file_problem="" if file_results is not None else "the run wrote no JUnit report",
    )
    return TestReport(results or (TestResult(SUITE_ID, "failed"),), exit_code, "stream", evidence)


BEFORE = streamed(1, a="failed", b="passed")
STREAM_CASES = {
    "fix-verified": Case(BEFORE, streamed(0, a="passed", b="passed"), True, {A: "fixed", B: "ok"}),
    "reporter-never-started": Case(
        BEFORE,
        streamed(0, started=False, completed=False, file=None),
        False,
        {A: "vanished", B: "vanished"},
        (
            NEVER_STARTED,
            f"{A} failed before and has no result in the stream",
            f"{B} passed before and has no result in the stream",
        ),
    ),
    "killed-mid-suite": Case(
        BEFORE,
        streamed(0, completed=False, file=None, b="passed"),
        False,
        {A: "vanished", B: "ok"},
        (NO_COMPLETION, f"{A} failed before and has no result in the stream"),
    ),
    "forged-lines": Case(
        BEFORE,
        streamed(0, problems=("1 line ... forged results",), a="passed", b="passed"),
        False,
        {A: "fixed", B: "ok"},
        ("the results stream after the patch: 1 line ... forged results",),
    ),
    "report-file-missing": Case(
        BEFORE,
        streamed(0, file=None, a="passed", b="passed"),
        False,
        {A: "fixed", B: "ok"},
        (
            "the report file disagrees with the results stream: the run wrote no JUnit "
            "report, although the stream shows the suite completed",
        ),
    ),
    "report-file-rewritten": Case(
        BEFORE,
        streamed(1, file={"a": "passed", "b": "passed"}, a="failed", b="passed"),
        False,
        {A: "still_failing", B: "ok"},
        (
            f"{A} still fails",
            f"the report file disagrees with the results stream: {A} is passed in the report "
            "file but failed in the stream",
            "the report file disagrees with the results stream: it counts 2 passed, 0 failed, "
            "0 error, 0 skipped where the stream has 1 passed, 1 failed, 0 error, 0 skipped",
            "the test command exited 1",
        ),
    ),
    "report-file-with-other-ids": Case(
        BEFORE,
        streamed(0, file={"a": "passed", "b": "passed", "c": "passed"}, a="passed", b="passed"),
        False,
        {A: "fixed", B: "ok"},
        (
            "the report file disagrees with the results stream: it counts 3 passed, 0 failed, "
            "0 error, 0 skipped where the stream has 2 passed, 0 failed, 0 error, 0 skipped",
        ),
    ),
    "exit-code-forced-to-zero": Case(
        BEFORE,
        streamed(0, status=1, a="failed", b="passed"),
        False,
        {A: "still_failing", B: "ok"},
        (
            f"{A} still fails",
            "the test command exited 0 but the test runner finished with status 1: something "
            "changed the exit code after the tests ran",
            f"the test command exited 0 although the results stream has 1 failing test ({A})",
        ),
    ),
    "runner-status-also-forged": Case(
        BEFORE,
        streamed(0, status=0, a="failed", b="passed"),
        False,
        {A: "still_failing", B: "ok"},
        (
            f"{A} still fails",
            f"the test command exited 0 although the results stream has 1 failing test ({A})",
        ),
    ),
    "failing-exit-with-a-green-stream": Case(
        BEFORE,
        streamed(1, status=0, a="passed", b="passed"),
        False,
        {A: "fixed", B: "ok"},
        (
            "the test command exited 1 but the test runner finished with status 0: something "
            "changed the exit code after the tests ran",
            "the test command exited 1",
        ),
    ),
    "before-run-reported-nothing": Case(
        streamed(2, completed=False, file=None),
        streamed(0, a="passed", b="passed"),
        True,
        {SUITE_ID: "vanished", A: "new_pass", B: "new_pass"},
    ),
    "after-run-without-the-stream": Case(
        BEFORE,
        junit(0, a="passed", b="passed"),
        False,
        {},
        (
            "the run after the patch did not use Loopwright's reporter although the run before "
            "it did, so its results cannot be trusted",
        ),
    ),
}


@pytest.mark.parametrize("case", STREAM_CASES.values(), ids=STREAM_CASES.keys())
def test_compare_streamed(case: Case) -> None:
    verdict = compare(case.before, case.after)
    assert verdict.verified is case.verified
    assert {row.id: row.status for row in verdict.rows} == case.statuses
    assert verdict.reasons == case.reasons
    assert verdict.basis == STREAM_BASIS


@pytest.mark.parametrize(
    ("after", "basis"),
    [(junit(0, a="passed"), FILE_BASIS), (build_report(0), EXIT_BASIS)],
    ids=["report-file", "exit-code"],
)
def test_runners_without_a_reporter_say_what_the_verdict_rests_on(
    after: TestReport, basis: str
) -> None:
    assert compare(junit(1, a="failed"), after).basis == basis


@pytest.mark.parametrize(
    ("report", "reasons"),
    [
        pytest.param(streamed(0, a="passed"), (), id="trusted-green"),
        pytest.param(
            streamed(0, completed=False, file=None, a="passed"), (NO_COMPLETION,), id="cut-short"
        ),
        pytest.param(
            streamed(0, status=1, a="failed"),
            (
                f"{A} fails",
                "the test command exited 0 but the test runner finished with status 1: "
                "something changed the exit code after the tests ran",
                f"the test command exited 0 although the results stream has 1 failing test ({A})",
            ),
            id="exit-forced",
        ),
        pytest.param(junit(1, a="failed"), (f"{A} fails", "the test command exited 1"), id="junit"),
    ],
)
def test_run_reasons_judge_a_single_run(report: TestReport, reasons: tuple[str, ...]) -> None:
    assert run_reasons(report) == reasons
