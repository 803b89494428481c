"""Runs a repository's test suite in a sandbox and turns the run into a per-test report.

For pytest and node's test runner the per-test results come from Loopwright's own reporter,
which signs one record per test as it ends; every byte of the command's output is checked as
it arrives, and the JUnit report the run also writes is only a cross-check. Other runners
are judged by their report file and exit code alone.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from loopwright.sandbox.base import ExecResult, FileToolError, OutputCallback, Sandbox
from loopwright.sandbox.local import LocalSandbox
from loopwright.verify.detect import StreamSetup, TestPlan, instrumented_command, stream_runner
from loopwright.verify.report_frame import (
    FrameFilter,
    ReportFrame,
    new_frame_id,
    strip_frames,
    trailer,
)
from loopwright.verify.reports import (
    SUITE_ID,
    Outcome,
    ReportError,
    StreamEvidence,
    TestReport,
    TestResult,
    build_report,
    parse_junit,
)
from loopwright.verify.stream import RecordFilter, StreamKey, StreamParser, strip_records

REPORT_DIR = ".loopwright"
REPORT_PATH = f"{REPORT_DIR}/report"
IMAGE_REPORTERS = "/opt/loopwright/reporters"
"""Where the sandbox image holds the reporters (root-owned, on the read-only root)."""
PACKAGE_REPORTERS = Path(__file__).resolve().parent / "reporters"
"""The same reporters in the installed package, for the local backend."""


@dataclass(frozen=True)
class SuiteRun:
    report: TestReport
    result: ExecResult
    """The command's result, with the reporter's records taken out of its output."""
    command: str


def needs_key(plan: TestPlan) -> bool:
    """Whether `run_suite` runs `plan` under a Loopwright reporter, which needs a run key."""
    return stream_runner(plan) is not None


def key_file(key: StreamKey) -> str:
    """Where in the workspace the reporter of `key`'s run finds it."""
    return f"{REPORT_DIR}/stream-{key.run_id}"


def place_key(sandbox: Sandbox) -> StreamKey:
    """A new run key written into `sandbox` ahead of the `run_suite` that will use it (so the
    write is off the path to the verdict); raises `FileToolError`."""
    key = StreamKey.new()
    sandbox.write_file(key_file(key), key.file_bytes())
    return key


def place_key_in_tree(tree: Path) -> StreamKey | None:
    """A new run key written into a host tree a sandbox is about to be created from: the key
    travels with the tree's copy instead of in a write of its own. Only for a sandbox in which
    nothing runs before the suite (no setup), since the key must never meet other code.
    None when the tree's `.loopwright` is not a plain directory (a symlink is never followed
    on the host): the run then writes its key in the sandbox."""
    key = StreamKey.new()
    directory = tree / REPORT_DIR
    try:
        if directory.is_symlink() or (directory.exists() and not directory.is_dir()):
            return None
        directory.mkdir(exist_ok=True)
        fd = os.open(
            tree / key_file(key), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600
        )
    except OSError:
        return None
    with os.fdopen(fd, "wb") as out:
        out.write(key.file_bytes())
    return key


def run_suite(
    sandbox: Sandbox,
    plan: TestPlan,
    *,
    timeout_s: float,
    on_output: OutputCallback | None = None,
    key: StreamKey | None = None,
) -> SuiteRun:
    """Run the whole suite once; per-test results from the signed stream or the report.

    `key` is a run key already placed in the sandbox (`place_key`, `place_key_in_tree`) and
    not used by any run yet; without one, a new key is written first.
    """
    if not needs_key(plan):
        return _run_reported(sandbox, plan, timeout_s, on_output)
    # The key travels as a file, never on a command line or in the environment, where the
    # tested code could read it from /proc. It is written before the command starts (the
    # reporter reads and deletes it before a conftest, test file or product code runs):
    # written alongside the command, the sandbox's sweep of leftover processes at the
    # command's start could kill the write and leave the reporter without its key.
    if key is None:
        try:
            key = place_key(sandbox)
        except FileToolError as exc:
            return _unkeyed(plan, f"the run's key could not be placed in the sandbox ({exc})")
    setup = StreamSetup(_reporters_dir(sandbox), key_file(key))
    command = instrumented_command(plan, REPORT_PATH, setup)
    parser = StreamParser(key)
    frame = ReportFrame(new_frame_id())
    shown = _Shown(on_output) if on_output is not None else None
    quoted = shlex.quote(key_file(key))

    def feed(data: bytes) -> None:
        parser.feed(data)
        frame.feed(data)

    # The report comes back on the command's own output once the suite has ended (see
    # `report_frame`), from the workspace root whatever directory the command left.
    result = sandbox.exec(
        f'lw_root=$PWD; rm -f {REPORT_PATH}; {command}; lw_status=$?; cd -- "$lw_root"; '
        f"rm -f -- {quoted}; {trailer(frame.frame_id, REPORT_PATH)}; exit $lw_status",
        timeout_s=timeout_s,
        on_output=shown,
        on_raw=feed,
    )
    if shown is not None:
        shown.flush()
    stream = parser.result()
    if not stream.started and (result.timed_out or result.exit_code > 128):
        # The reporter never took the key, and the command was ended before the `rm` after
        # it could run (a timeout, a signal): remove the key now. Any other end ran that rm.
        sandbox.exec(f"rm -f -- {quoted}", timeout_s=30)
    result = dataclasses.replace(result, output=strip_frames(strip_records(result.output)))
    file_results: tuple[TestResult, ...] | None = None
    file_problem = ""
    raw = _report(sandbox, frame)
    if raw is None or not raw.strip():
        file_problem = "the run wrote no JUnit report"
    else:
        try:
            file_results = tuple(parse_junit(raw))
        except ReportError as exc:
            file_problem = str(exc)
    evidence = StreamEvidence(
        started=stream.started,
        completed=stream.completed,
        status=stream.status,
        problems=stream.problems,
        file_results=file_results,
        file_problem=file_problem,
    )
    results = stream.results
    if not results:
        # Nothing ran far enough to report a test: the run as a whole stands in for it.
        outcome: Outcome = "passed" if result.exit_code == 0 and stream.completed else "failed"
        message = "" if outcome == "passed" else f"the test command exited {result.exit_code}"
        results = (TestResult(SUITE_ID, outcome, message),)
    return SuiteRun(TestReport(results, result.exit_code, "stream", evidence), result, plan.command)


def _unkeyed(plan: TestPlan, problem: str) -> SuiteRun:
    """A run that could not be started under the reporter: nothing it printed could count."""
    result = ExecResult(output=f"[loopwright] {problem}; the tests were not run\n", exit_code=1)
    evidence = StreamEvidence(started=False, completed=False, status=None, problems=(problem,))
    report = TestReport((TestResult(SUITE_ID, "failed", problem),), 1, "stream", evidence)
    return SuiteRun(report, result, plan.command)


def _run_reported(
    sandbox: Sandbox, plan: TestPlan, timeout_s: float, on_output: OutputCallback | None
) -> SuiteRun:
    """A runner without a Loopwright reporter: its own report file, else its exit code."""
    command = instrumented_command(plan, REPORT_PATH)
    frame = ReportFrame(new_frame_id())
    shown = FrameFilter(on_output) if on_output is not None else None
    # A report left by an earlier run must not be read as this run's; clearing it, the
    # run and printing the report back are one sandbox round trip.
    result = sandbox.exec(
        f"lw_root=$PWD; mkdir -p {REPORT_DIR} && rm -f {REPORT_PATH}; {command}; "
        f'lw_status=$?; cd -- "$lw_root"; {trailer(frame.frame_id, REPORT_PATH)}; '
        "exit $lw_status",
        timeout_s=timeout_s,
        on_output=shown,
        on_raw=frame.feed,
    )
    if shown is not None:
        shown.flush()
    result = dataclasses.replace(result, output=strip_frames(result.output))
    raw = _report(sandbox, frame)
    try:
        if plan.report == "go-json":
            report = build_report(result.exit_code, go_json=raw)
        else:
            report = build_report(result.exit_code, junit_xml=raw or None)
    except ReportError:
        report = build_report(result.exit_code)
    return SuiteRun(report, result, plan.command)


class _Shown:
    """What people see of the run: its output without records and report frames."""

    def __init__(self, sink: OutputCallback) -> None:
        self._frames = FrameFilter(sink)
        self._records = RecordFilter(self._frames)

    def __call__(self, text: str) -> None:
        self._records(text)

    def flush(self) -> None:
        self._records.flush()
        self._frames.flush()


def _report(sandbox: Sandbox, frame: ReportFrame) -> str | None:
    """The run's report: from its frame, else (too large, or no frame) from the file."""
    found = frame.result()
    if found is not None and found[0] == "inline":
        return found[1]
    if found is not None and found[0] == "none":
        return None
    return _read_report(sandbox)


def _read_report(sandbox: Sandbox) -> str | None:
    try:
        return sandbox.read_file(REPORT_PATH).decode("utf-8", errors="replace")
    except FileToolError:
        return None


def _reporters_dir(sandbox: Sandbox) -> str:
    if isinstance(sandbox, LocalSandbox):
        return str(PACKAGE_REPORTERS)
    return IMAGE_REPORTERS


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
    if run.report.failing() - {SUITE_ID} and run.report.source != "exit-code":
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
