"""Runs a repository's test suite in a sandbox and turns the run into a per-test report."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from loopwright.sandbox.base import ExecResult, FileToolError, OutputCallback, Sandbox
from loopwright.verify.detect import TestPlan, instrumented_command
from loopwright.verify.reports import ReportError, TestReport, build_report

REPORT_DIR = ".loopwright"
REPORT_PATH = f"{REPORT_DIR}/report"


@dataclass(frozen=True)
class SuiteRun:
    report: TestReport
    result: ExecResult
    command: str


def run_suite(
    sandbox: Sandbox,
    plan: TestPlan,
    *,
    timeout_s: float,
    on_output: OutputCallback | None = None,
) -> SuiteRun:
    """Run the whole suite once; per-test results when the runner wrote a report."""
    command = instrumented_command(plan, REPORT_PATH)
    # A report left by an earlier run must not be read as this run's; clearing it rides
    # along with the test command (one sandbox round trip instead of two).
    result = sandbox.exec(
        f"mkdir -p {REPORT_DIR} && rm -f {REPORT_PATH}; {command}",
        timeout_s=timeout_s,
        on_output=on_output,
    )
    raw: str | None = None
    try:
        raw = sandbox.read_file(REPORT_PATH).decode("utf-8", errors="replace")
    except FileToolError:
        raw = None
    try:
        if plan.report == "go-json":
            report = build_report(result.exit_code, go_json=raw)
        else:
            report = build_report(result.exit_code, junit_xml=raw or None)
    except ReportError:
        report = build_report(result.exit_code)
    return SuiteRun(report, result, plan.command)


_MISSING_PY = re.compile(r"(?:ModuleNotFoundError|ImportError): No module named '([\w.]+)'")
_MISSING_NODE = re.compile(r"Cannot find (?:module|package) '([^'./][^']*)'")


def environment_problem(run: SuiteRun, tree: Path) -> str | None:
    """Why the suite could not run at all, when the cause is the environment, not the code.

    Missing commands and missing third-party modules are environment problems; a missing
    module that the repository itself provides (a broken import in the project) is a bug.
    """
    result = run.result
    if result.timed_out:
        return f"the test command did not finish within its timeout: {run.command}"
    if result.exit_code in (126, 127):
        return f"the test command could not be started (exit {result.exit_code}): {run.command}"
    if run.report.failing() and run.report.source != "exit-code":
        return None
    for pattern in (_MISSING_PY, _MISSING_NODE):
        for match in pattern.finditer(result.output):
            name = match.group(1).split(".")[0].split("/")[0]
            if not _provided_by(tree, name):
                return (
                    f"the tests need `{name}`, which is not installed; add it to the "
                    "repository's dependencies or set setup_cmd in .loopwright.yml"
                )
    return None


def _provided_by(tree: Path, name: str) -> bool:
    candidates = [
        tree / name,
        tree / f"{name}.py",
        tree / "src" / name,
        tree / "src" / f"{name}.py",
    ]
    return any(p.exists() for p in candidates)
