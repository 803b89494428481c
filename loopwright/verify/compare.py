"""The verification verdict: compare the test run before the patch with the run after it.

Verified means every originally failing test now passes, no originally passing test fails,
errors, is skipped or disappears, and the test command exits 0. For runs with Loopwright's
reporter it also needs the signed stream to be whole (a start and a completion record, no
forged, replayed or conflicting records) and to agree with the report file and the exit code.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from loopwright.verify.reports import SUITE_ID, Outcome, StreamEvidence, TestReport, TestResult

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


STREAM_BASIS = (
    "per-test results from Loopwright's signed results stream, cross-checked with the "
    "JUnit report and the exit code"
)
FILE_BASIS = (
    "the report file the test run wrote and its exit code only: this test runner has no "
    "Loopwright reporter, so the tested code could have written either"
)
EXIT_BASIS = (
    "the exit code only: this test runner wrote no per-test report and has no Loopwright "
    "reporter, so the tested code could have set it"
)
_SHOWN = 5
"""Disagreeing tests named in one reason; the rest are counted."""


@dataclass(frozen=True)
class Verdict:
    verified: bool
    rows: tuple[TestRow, ...]
    reasons: tuple[str, ...]
    """Why the patch is not verified, one sentence per problem; empty when verified."""
    basis: str = ""
    """What the verdict rests on, in words (the signed stream, or a report file / exit code)."""


def compare(before: TestReport, after: TestReport) -> Verdict:
    """The verdict for `after` (original tree + patch) against `before` (original tree)."""
    if after.stream is not None or before.stream is not None:
        return _compare_streamed(before, after)
    basis = EXIT_BASIS if after.source == "exit-code" else FILE_BASIS
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
    return Verdict(not reasons, tuple(rows), tuple(reasons), basis)


def _compare_streamed(before: TestReport, after: TestReport) -> Verdict:
    """The verdict when the results come from Loopwright's signed stream."""
    stream = after.stream
    if stream is None:
        return Verdict(
            False,
            (),
            (
                "the run after the patch did not use Loopwright's reporter although the run "
                "before it did, so its results cannot be trusted",
            ),
            STREAM_BASIS,
        )
    reasons = _stream_whole(stream)
    before_results = before.by_id()
    after_results = after.by_id() if stream.started else {}
    rows: list[TestRow] = []
    ids = list(before_results) + [i for i in after_results if i not in before_results]
    for test_id in ids:
        was = before_results[test_id].outcome if test_id in before_results else None
        now = after_results[test_id].outcome if test_id in after_results else None
        status, reason = _classify(test_id, was, now, missing="has no result in the stream")
        rows.append(TestRow(test_id, was, now, status))
        if reason and test_id != SUITE_ID:
            reasons.append(reason)
    reasons += _stream_agrees(after, stream)
    if after.exit_code != 0:
        reasons.append(f"the test command exited {after.exit_code}")
    return Verdict(not reasons, tuple(rows), tuple(reasons), STREAM_BASIS)


def run_reasons(report: TestReport) -> tuple[str, ...]:
    """Why one run's results cannot be trusted, or show failures; empty when they can and don't.

    For a single run with nothing to compare against (an app built from a spec): the same
    stream, report-file and exit-code rules as `compare`, plus every failing test.
    """
    reasons: list[str] = []
    if report.stream is not None:
        reasons += _stream_whole(report.stream)
    reasons += [f"{r.id} fails" for r in report.results if r.outcome in _BAD and r.id != SUITE_ID]
    if report.stream is not None:
        reasons += _stream_agrees(report, report.stream)
    if report.exit_code != 0:
        reasons.append(f"the test command exited {report.exit_code}")
    return tuple(reasons)


def _stream_whole(stream: StreamEvidence) -> list[str]:
    """A start record, no forged or replayed records, and a completion record."""
    reasons: list[str] = []
    if not stream.started:
        reasons.append(
            "Loopwright's test reporter never started in the run after the patch (no signed "
            "start record), so none of the results can be trusted"
        )
    reasons += [f"the results stream after the patch: {p}" for p in stream.problems]
    if stream.started and not stream.completed:
        reasons.append(
            "the test run ended without its completion record: the process exited before "
            "the suite finished"
        )
    return reasons


def _stream_agrees(report: TestReport, stream: StreamEvidence) -> list[str]:
    """The report file and the exit code tell the stream's story."""
    if not stream.completed:
        return []
    return [
        *_file_disagreements(report, stream.file_results, stream.file_problem),
        *_exit_disagreements(report, stream.status),
    ]


def _file_disagreements(
    after: TestReport, file_results: tuple[TestResult, ...] | None, problem: str
) -> list[str]:
    """Where the report file the run wrote tells a different story from the stream."""
    if file_results is None:
        return [
            f"the report file disagrees with the results stream: {problem or 'it is missing'}, "
            "although the stream shows the suite completed"
        ]
    streamed = {r.id: r.outcome for r in after.results if r.id != SUITE_ID}
    filed = {r.id: r.outcome for r in file_results}
    reasons: list[str] = []
    differ = [
        f"{i} is {filed[i]} in the report file but {streamed[i]} in the stream"
        for i in streamed
        if i in filed and filed[i] != streamed[i]
    ]
    if differ:
        more = f" (and {len(differ) - _SHOWN} more)" if len(differ) > _SHOWN else ""
        shown = "; ".join(differ[:_SHOWN])
        reasons.append(f"the report file disagrees with the results stream: {shown}{more}")
    stream_counts, file_counts = _counts(streamed.values()), _counts(filed.values())
    if stream_counts != file_counts:
        reasons.append(
            f"the report file disagrees with the results stream: it counts {file_counts} "
            f"where the stream has {stream_counts}"
        )
    return reasons


def _exit_disagreements(after: TestReport, status: int | None) -> list[str]:
    """Exit 0 exactly when the stream has no failures and the runner's own status was 0."""
    reasons: list[str] = []
    if status is not None and after.exit_code != status:
        reasons.append(
            f"the test command exited {after.exit_code} but the test runner finished with "
            f"status {status}: something changed the exit code after the tests ran"
        )
    failing = sorted(r.id for r in after.results if r.outcome in _BAD and r.id != SUITE_ID)
    if after.exit_code == 0 and failing:
        reasons.append(
            f"the test command exited 0 although the results stream has {len(failing)} "
            f"failing test{'s' if len(failing) != 1 else ''} ({', '.join(failing[:_SHOWN])})"
        )
    return reasons


def _counts(outcomes: Iterable[Outcome]) -> str:
    tally = Counter(outcomes)
    return ", ".join(f"{tally[o]} {o}" for o in ("passed", "failed", "error", "skipped"))


def _suite(report: TestReport) -> TestResult:
    if report.source == "exit-code":
        return report.by_id().get(SUITE_ID, TestResult(SUITE_ID, "failed"))
    bad = report.exit_code != 0 or bool(report.failing())
    return TestResult(SUITE_ID, "failed" if bad else "passed")


def _classify(
    test_id: str, was: Outcome | None, now: Outcome | None, missing: str = "disappeared"
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
        return "vanished", f"{test_id} failed before and {missing}"
    if was == "passed":
        if now == "passed":
            return "ok", None
        if now in _BAD:
            verb = "errors" if now == "error" else "fails"
            return "broken", f"{test_id} passed before and now {verb}"
        if now == "skipped":
            return "skipped_now", f"{test_id} passed before and is now skipped"
        return "vanished", f"{test_id} passed before and {missing}"
    # Skipped before, or new: only a failure now is a problem.
    if now in _BAD:
        return "new_fail", f"{test_id} is new or was skipped before, and now fails"
    if now == "passed":
        return "new_pass", None
    if now is None:
        return "vanished", None
    return "ok", None
