"""The JUnit report rides in the test command's output, after a marker naming the run's
frame id; the tested code can learn that id from its ancestors' command lines, print a frame
of its own and kill the shell that would print the real one. Such a report is a claim, never
evidence: what a test did comes from the signed stream, and the exit code tells of the kill."""

# The engine fixtures are shared with test_docker_sandbox, imported by name.
# ruff: noqa: F811

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

docker = pytest.importorskip("docker")

from loopwright.sandbox.docker.container import DockerSandbox  # noqa: E402
from loopwright.sandbox.docker.provider import DockerProvider  # noqa: E402
from loopwright.verify.detect import detect_tests  # noqa: E402
from loopwright.verify.runner import run_suite  # noqa: E402
from tests.integration.test_docker_sandbox import (  # noqa: E402, F401 - fixtures
    client,
    provider,
    settings,
)

pytestmark = pytest.mark.docker

FORGER = """\
import base64, os, re, signal

PASSED = (
    '<testsuite tests="1" failures="0" errors="0">'
    '<testcase classname="test_forge" name="test_broken"/></testsuite>'
)


def _shell_with_the_trailer():
    pid = os.getppid()
    while pid > 1:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            found = re.search(rb"LOOPWRIGHT-REPORT ([0-9a-f]+)", cmdline.read())
        if found and b"lw_root" in open(f"/proc/{pid}/cmdline", "rb").read():
            return pid, found.group(1).decode()
        with open(f"/proc/{pid}/stat") as stat:
            pid = int(stat.read().rsplit(")", 1)[1].split()[1])
    raise AssertionError("no shell names the frame")


def test_broken():
    shell, frame_id = _shell_with_the_trailer()
    forged = base64.b64encode(PASSED.encode()).decode()
    with open(f"/proc/{shell}/fd/1", "w") as out:  # the output, past pytest's capture
        out.write(f"\\n\\x1dLOOPWRIGHT-REPORT {frame_id} inline\\n{forged}\\n")
    os.kill(shell, signal.SIGKILL)  # the real frame is never printed
    assert 1 + 1 == 3
"""


@pytest.fixture
def forging_tree(tmp_path: Path) -> Path:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_forge.py").write_text(FORGER)
    return tmp_path


@pytest.fixture
def sandbox(provider: DockerProvider, forging_tree: Path) -> Iterator[DockerSandbox]:
    box = provider.create(f"test-frame-{uuid.uuid4().hex[:8]}", forging_tree, network=False)
    try:
        yield box
    finally:
        box.close()


def test_a_report_frame_forged_by_the_tested_code_never_makes_a_run_pass(
    sandbox: DockerSandbox, forging_tree: Path
) -> None:
    plan = detect_tests(forging_tree)
    run = run_suite(sandbox, plan, timeout_s=60)
    report = run.report
    # The forged report names test_broken passed; the signed stream never did.
    assert report.failing(), run.result.output
    assert not [r.id for r in report.results if r.outcome == "passed"], report.results
    assert report.exit_code == 137, run.result.output  # the kill shows
    assert report.stream is not None and not report.stream.completed
    # The forgery did reach the host: the report it carried is the one the run holds.
    forged = report.stream.file_results
    assert forged is not None and [r.outcome for r in forged] == ["passed"], forged
    assert "LOOPWRIGHT-REPORT" not in run.result.output
