"""The signed results stream: the parser's table, the output filter, and the real reporters."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from loopwright.verify.reports import parse_junit
from loopwright.verify.runner import PACKAGE_REPORTERS
from loopwright.verify.stream import (
    MAGIC,
    STREAM_ENV,
    RecordFilter,
    StreamKey,
    StreamParser,
    StreamResult,
    strip_records,
)

KEY = StreamKey("0123456789abcdef", b"k" * 32)
OTHER = StreamKey("fedcba9876543210", b"o" * 32)
GUESSED = StreamKey(KEY.run_id, b"g" * 32)  # the right run id, a guessed key
A = "tests/test_a.py::test_one"
B = "tests/test_a.py::test_two"


def start(key: StreamKey = KEY, seq: int = 0) -> bytes:
    return key.record(seq, {"type": "start", "runner": "pytest"})


def result_line(seq: int, test_id: str, outcome: str, key: StreamKey = KEY) -> bytes:
    return key.record(seq, {"type": "test", "id": test_id, "outcome": outcome, "message": ""})


def end(seq: int, status: int, key: StreamKey = KEY, **counts: int) -> bytes:
    tally = {"passed": 0, "failed": 0, "error": 0, "skipped": 0, **counts}
    return key.record(seq, {"type": "end", "status": status, "counts": tally})


WHOLE = (
    start()
    + result_line(1, A, "failed")
    + result_line(2, B, "passed")
    + end(3, 1, passed=1, failed=1)
)


@dataclass(frozen=True)
class Case:
    data: bytes
    started: bool = True
    completed: bool = True
    status: int | None = 1
    outcomes: dict[str, str] = field(default_factory=lambda: {A: "failed", B: "passed"})
    problems: tuple[str, ...] = ()


FORGED_ONE = (
    "1 line in the test output imitate Loopwright's result records but are not signed with "
    "this run's key: something in the test run printed forged results"
)
FOREIGN_ONE = (
    "1 line in the test output are result records of another run (a different run id): "
    "results replayed from an earlier run"
)

CASES = {
    "whole-stream": Case(WHOLE),
    "records-amid-human-output": Case(
        b"collecting ... tests/test_a.py ."
        + start()
        + b"F\n"
        + result_line(1, A, "failed")
        + b"=== 1 failed ===\n"
        + result_line(2, B, "passed")
        + end(3, 1, passed=1, failed=1)
        + b"trailing text without newline"
    ),
    "bad-hmac": Case(
        WHOLE.replace(b'"outcome":"failed"', b'"outcome":"passed"'),
        outcomes={B: "passed"},
        problems=(
            FORGED_ONE,
            "record 2 arrived where record 1 was expected: records were lost, reordered or "
            "replayed",
            "the completion record counts 2 test results but 1 arrived: results were lost on "
            "the way",
        ),
    ),
    "guessed-run-id-wrong-key": Case(
        WHOLE + result_line(4, A, "passed", key=GUESSED), problems=(FORGED_ONE,)
    ),
    "wrong-run-id": Case(WHOLE + result_line(4, A, "passed", key=OTHER), problems=(FOREIGN_ONE,)),
    "replayed-earlier-run-only": Case(
        start(OTHER) + result_line(1, A, "passed", OTHER) + end(2, 0, OTHER, passed=1),
        started=False,
        completed=False,
        status=None,
        outcomes={},
        problems=(
            "3 lines in the test output are result records of another run (a different run "
            "id): results replayed from an earlier run",
        ),
    ),
    "duplicated-record": Case(
        start()
        + result_line(1, A, "failed")
        + result_line(1, A, "failed")
        + result_line(2, B, "passed")
        + end(3, 1, passed=1, failed=1),
        problems=("record 1 arrived twice: the results stream was replayed",),
    ),
    "same-seq-changed": Case(
        start()
        + result_line(1, A, "failed")
        + result_line(1, A, "passed")
        + result_line(2, B, "passed")
        + end(3, 1, passed=1, failed=1),
        problems=("record 1 arrived twice, changed: the results stream was replayed",),
    ),
    "out-of-order": Case(
        start()
        + result_line(2, B, "passed")
        + result_line(1, A, "failed")
        + end(3, 1, passed=1, failed=1),
        problems=(
            "record 2 arrived where record 1 was expected: records were lost, reordered or "
            "replayed",
            "record 1 arrived where record 3 was expected: records were lost, reordered or "
            "replayed",
        ),
    ),
    "conflicting-results-for-one-id": Case(
        start()
        + result_line(1, A, "failed")
        + result_line(2, A, "passed")
        + result_line(3, B, "passed")
        + end(4, 1, passed=2, failed=1),
        problems=(f"{A} was reported both failed and passed: conflicting results for one test",),
    ),
    "missing-end": Case(
        start() + result_line(1, A, "failed") + result_line(2, B, "passed"),
        completed=False,
        status=None,
    ),
    "record-cut-off-by-the-end": Case(
        start() + result_line(1, A, "failed") + result_line(2, B, "passed") + end(3, 1)[:40],
        completed=False,
        status=None,
    ),
    "counts-disagree": Case(
        start()
        + result_line(1, A, "failed")
        + result_line(2, B, "passed")
        + end(3, 1, passed=5, failed=1),
        problems=(
            "the completion record counts 6 test results but 2 arrived: results were lost on "
            "the way",
        ),
    ),
    "record-after-end": Case(
        WHOLE + result_line(4, A, "passed"),
        problems=("record 4 arrived after the completion record",),
    ),
    "test-before-start": Case(
        result_line(0, A, "failed") + result_line(1, B, "passed") + end(2, 1, passed=1, failed=1),
        started=False,
        problems=(
            "record 0 arrived before the start record",
            "record 1 arrived before the start record",
            "record 2 arrived before the start record",
        ),
    ),
    "garbage-lines": Case(
        MAGIC + b"not a record\n" + WHOLE + MAGIC + b"x y\n" + b"\x1e stray separator\n",
        problems=(
            "2 lines in the test output imitate Loopwright's result records but are not "
            "signed with this run's key: something in the test run printed forged results",
        ),
    ),
    "overlong-unterminated-line": Case(
        WHOLE + MAGIC + b"x" * 70_000,
        problems=(FORGED_ONE,),
    ),
    "no-stream-at-all": Case(
        b"============ 2 failed ============\n",
        started=False,
        completed=False,
        status=None,
        outcomes={},
    ),
    "reporter-stopped-the-run": Case(
        start() + KEY.record(1, {"type": "end", "status": 3, "counts": {}, "error": "no pytest"}),
        status=3,
        outcomes={},
        problems=("Loopwright's reporter stopped the run: no pytest",),
    ),
}


def parse(data: bytes, chunk: int | None = None) -> StreamResult:
    parser = StreamParser(KEY)
    if chunk is None:
        parser.feed(data)
    else:
        for at in range(0, len(data), chunk):
            parser.feed(data[at : at + chunk])
    return parser.result()


@pytest.mark.parametrize("chunk", [None, 1, 7, 4096], ids=["whole", "bytewise", "7", "4k"])
@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_parser(case: Case, chunk: int | None) -> None:
    result = parse(case.data, chunk)
    assert (result.started, result.completed, result.status) == (
        case.started,
        case.completed,
        case.status,
    )
    assert {r.id: r.outcome for r in result.results} == case.outcomes
    assert result.problems == case.problems


def test_conflicting_results_keep_the_worse_outcome() -> None:
    result = parse(start() + result_line(1, A, "passed") + result_line(2, A, "error"))
    assert [(r.id, r.outcome) for r in result.results] == [(A, "error")]


def test_strip_records_leaves_the_human_output() -> None:
    text = (
        b"tests/test_a.py ." + start() + b"F\n" + result_line(1, A, "failed") + b"done\n"
    ).decode()
    assert strip_records(text) == "tests/test_a.py .F\ndone\n"


@pytest.mark.parametrize("chunk", [1, 5, 200])
def test_record_filter_holds_back_records_split_across_chunks(chunk: int) -> None:
    text = (b"a\x1eb\n tests ." + start() + b"F\n" + result_line(1, A, "failed") + b"end").decode()
    shown: list[str] = []
    keep = RecordFilter(shown.append)
    for at in range(0, len(text), chunk):
        keep(text[at : at + chunk])
    keep.flush()
    assert "".join(shown) == "a\x1eb\n tests .F\nend"


def test_a_record_never_contains_the_key() -> None:
    line = result_line(1, A, "failed")
    assert KEY.key not in line and KEY.key.hex().encode() not in line


# -- the reporters, run for real ------------------------------------------------------------


def write_tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def run_reporter(
    tmp_path: Path, argv: list[str]
) -> tuple[subprocess.CompletedProcess[bytes], Path]:
    key_file = tmp_path / ".loopwright" / "stream-key"
    key_file.parent.mkdir(exist_ok=True)
    key_file.write_bytes(KEY.file_bytes())
    env = {"PATH": os.environ["PATH"], STREAM_ENV: ".loopwright/stream-key"}
    run = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, timeout=120)
    return run, key_file


PY_TESTS = {
    "tests/test_a.py": (
        "import pytest\n"
        "def test_one():\n    assert 1 == 2\n"
        "def test_two():\n    pass\n"
        "@pytest.mark.skip(reason='later')\ndef test_three():\n    pass\n"
        "@pytest.fixture\ndef broken():\n    raise RuntimeError('setup')\n"
        "def test_four(broken):\n    pass\n"
    ),
}


def test_pytest_reporter_streams_each_test_and_deletes_the_key(tmp_path: Path) -> None:
    write_tree(tmp_path, PY_TESTS)
    script = str(PACKAGE_REPORTERS / "run_pytest.py")
    argv = [sys.executable, script, "--as-module", "-q", "--junitxml=junit.xml"]
    run, key_file = run_reporter(tmp_path, [*argv, "-o", "junit_family=xunit2"])
    result = parse(run.stdout)
    junit = parse_junit((tmp_path / "junit.xml").read_text())
    assert {r.id: r.outcome for r in junit} == {r.id: r.outcome for r in result.results}
    assert run.returncode == 1
    assert not key_file.exists()
    assert (result.started, result.completed, result.status, result.problems) == (
        True,
        True,
        1,
        (),
    )
    assert {r.id: r.outcome for r in result.results} == {
        A: "failed",
        B: "passed",
        "tests/test_a.py::test_three": "skipped",
        "tests/test_a.py::test_four": "error",
    }
    assert "1 failed, 1 passed, 1 skipped, 1 error" in strip_records(run.stdout.decode())


def test_pytest_reporter_refuses_a_repository_pytest(tmp_path: Path) -> None:
    write_tree(tmp_path, {**PY_TESTS, "pytest.py": "raise SystemExit(0)\n"})
    script = str(PACKAGE_REPORTERS / "run_pytest.py")
    run, _ = run_reporter(tmp_path, [sys.executable, script, "--as-module"])
    result = parse(run.stdout)
    assert run.returncode == 3
    assert result.problems == (
        "Loopwright's reporter stopped the run: the repository provides its own pytest "
        "(pytest.py), so pytest was not started",
    )


def test_node_reporter_streams_leaf_tests_with_junit_ids(tmp_path: Path) -> None:
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    write_tree(
        tmp_path,
        {
            "test/a.test.js": (
                "const test = require('node:test');\n"
                "test('top', () => { throw new Error('no'); });\n"
                "test('parent', async (t) => { await t.test('child', () => {}); });\n"
                "test.describe('suite', () => { test.it('inner ✓', () => {}); });\n"
                "test('later', { skip: true }, () => {});\n"
                "test('someday', { todo: true }, () => { throw new Error('not yet'); });\n"
            )
        },
    )
    reporter = str(PACKAGE_REPORTERS / "node_reporter.mjs")
    argv = [
        "node",
        "--test",
        f"--test-reporter={reporter}",
        "--test-reporter-destination=stdout",
        "--test-reporter=junit",
        "--test-reporter-destination=junit.xml",
    ]
    run, key_file = run_reporter(tmp_path, argv)
    junit = parse_junit((tmp_path / "junit.xml").read_text())
    result = parse(run.stdout)
    assert run.returncode == 1
    assert not key_file.exists()
    assert (result.started, result.completed, result.status, result.problems) == (
        True,
        True,
        1,
        (),
    )
    assert {r.id: r.outcome for r in result.results} == {
        "top": "failed",
        "parent > child": "passed",
        "suite > inner ✓": "passed",
        "later": "skipped",
        "someday": "skipped",
    }
    # The same ids and outcomes as node's JUnit reporter, which the verdict cross-checks.
    assert {r.id: r.outcome for r in junit} == {r.id: r.outcome for r in result.results}


def test_pytest_tests_cannot_see_the_key(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "tests/test_key.py": (
                "import os\n"
                "def test_key_is_gone():\n"
                "    assert 'LOOPWRIGHT_STREAM' not in os.environ\n"
                "    assert os.listdir('.loopwright') == []\n"
            )
        },
    )
    script = str(PACKAGE_REPORTERS / "run_pytest.py")
    run, _ = run_reporter(tmp_path, [sys.executable, script, "--as-module"])
    result = parse(run.stdout)
    assert [(r.id, r.outcome) for r in result.results] == [
        ("tests/test_key.py::test_key_is_gone", "passed")
    ]
    assert run.returncode == 0 and result.status == 0


def test_node_test_files_cannot_see_the_key(tmp_path: Path) -> None:
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    write_tree(
        tmp_path,
        {
            "test/key.test.js": (
                "const test = require('node:test');\n"
                "const assert = require('node:assert');\n"
                "const fs = require('node:fs');\n"
                "test('key is gone', () => {\n"
                "  assert.equal(process.env.LOOPWRIGHT_STREAM, undefined);\n"
                "  assert.deepEqual(fs.readdirSync('.loopwright'), []);\n"
                "});\n"
            )
        },
    )
    reporter = str(PACKAGE_REPORTERS / "node_reporter.mjs")
    argv = ["node", "--test", f"--test-reporter={reporter}", "--test-reporter-destination=stdout"]
    run, _ = run_reporter(tmp_path, argv)
    result = parse(run.stdout)
    assert [(r.id, r.outcome) for r in result.results] == [("key is gone", "passed")]
    assert run.returncode == 0 and result.status == 0


# -- run_suite on the local backend ---------------------------------------------------------


@pytest.fixture
def local_sandbox(tmp_path: Path):
    from loopwright.config import SandboxLimits
    from loopwright.sandbox.local import LocalProvider

    provider = LocalProvider(SandboxLimits(), base_dir=tmp_path / "sandboxes")
    (tmp_path / "sandboxes").mkdir()

    def make(files: dict[str, str]):
        tree = tmp_path / f"tree-{len(list(tmp_path.iterdir()))}"
        write_tree(tree, files)
        return provider.create("stream-test", tree, network=False)

    yield make
    provider.close()


def test_run_suite_strips_records_from_what_people_see(local_sandbox) -> None:
    from loopwright.verify.detect import TestPlan
    from loopwright.verify.runner import run_suite

    sandbox = local_sandbox(PY_TESTS)
    plan = TestPlan(f"{shlex_quote(sys.executable)} -m pytest", "pytest", "", "junit", None)
    shown: list[str] = []
    run = run_suite(sandbox, plan, timeout_s=120, on_output=shown.append)
    assert run.report.source == "stream" and run.report.stream is not None
    assert run.report.stream.completed and run.report.stream.problems == ()
    assert run.report.failing() == {A, "tests/test_a.py::test_four"}
    assert "\x1e" not in run.result.output and "\x1e" not in "".join(shown)
    assert "1 failed, 1 passed, 1 skipped, 1 error" in run.result.output
    assert "1 failed, 1 passed, 1 skipped, 1 error" in "".join(shown)
    assert sorted(p.name for p in (sandbox.workspace / ".loopwright").iterdir()) == ["report"]


def test_run_suite_where_the_key_cannot_be_placed_is_not_trusted(local_sandbox) -> None:
    from loopwright.verify.compare import compare
    from loopwright.verify.detect import TestPlan
    from loopwright.verify.runner import run_suite

    sandbox = local_sandbox({**PY_TESTS, ".loopwright": "a file where a folder should be\n"})
    plan = TestPlan(f"{shlex_quote(sys.executable)} -m pytest", "pytest", "", "junit", None)
    run = run_suite(sandbox, plan, timeout_s=120)
    assert run.report.stream is not None and not run.report.stream.started
    verdict = compare(run.report, run.report)
    assert not verdict.verified
    assert verdict.reasons[0].startswith(
        "Loopwright's test reporter never started in the run after the patch"
    )
    assert verdict.reasons[1].startswith(
        "the results stream after the patch: the run's key could not be placed in the sandbox"
    )


def shlex_quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


# -- the reporters in the sandbox image's inputs --------------------------------------------


def test_reporters_are_image_inputs(tmp_path: Path) -> None:
    import tarfile

    from loopwright.sandbox.image import CONTEXT_DIR, _build_context, image_inputs_hash

    copy = tmp_path / "reporters"
    shutil.copytree(PACKAGE_REPORTERS, copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = image_inputs_hash(reporters_dir=copy)
    assert before == image_inputs_hash()
    (copy / "node_reporter.mjs").write_text("export default async function* r() {}\n")
    assert image_inputs_hash(reporters_dir=copy) != before
    with tarfile.open(fileobj=_build_context(CONTEXT_DIR, tmp_path / "no-cas")) as tar:
        names = set(tar.getnames())
        reporter = tar.extractfile("reporters/run_pytest.py")
        assert reporter is not None
        assert reporter.read() == (PACKAGE_REPORTERS / "run_pytest.py").read_bytes()
    assert {"reporters/run_pytest.py", "reporters/node_reporter.mjs"} <= names


def test_local_on_raw_sees_every_byte_past_the_output_cap(tmp_path: Path) -> None:
    from loopwright.config import SandboxLimits
    from loopwright.sandbox.local import LocalProvider

    tree = tmp_path / "tree"
    write_tree(tree, {"README": "x\n"})
    provider = LocalProvider(SandboxLimits(output_cap_bytes=10_000), base_dir=tmp_path)
    sandbox = provider.create("raw", tree, network=False)
    raw: list[bytes] = []
    try:
        result = sandbox.exec(
            "head -c 300000 /dev/zero | tr '\\0' a; printf 'LAST\\n'",
            timeout_s=60,
            on_raw=raw.append,
        )
    finally:
        provider.close()
    data = b"".join(raw)
    assert result.truncated and len(result.output) < 20_000
    assert data == b"a" * 300_000 + b"LAST\n"


def test_a_streamed_run_that_never_reached_a_test_can_be_an_environment_problem(
    tmp_path: Path,
) -> None:
    from loopwright.sandbox.base import ExecResult
    from loopwright.verify.reports import SUITE_ID, StreamEvidence, TestReport, TestResult
    from loopwright.verify.runner import SuiteRun, environment_problem

    evidence = StreamEvidence(started=True, completed=False, status=None)
    report = TestReport((TestResult(SUITE_ID, "failed"),), 1, "stream", evidence)
    output = "ModuleNotFoundError: No module named 'pytest'\n"
    run = SuiteRun(report, ExecResult(output, 1), "python -m pytest")
    assert environment_problem(run, tmp_path) == (
        "the tests need `pytest`, which is not installed; add it to the repository's "
        "dependencies or set setup_cmd in .loopwright.yml"
    )
    failing = TestReport((TestResult(A, "failed"),), 1, "stream", evidence)
    assert environment_problem(SuiteRun(failing, ExecResult(output, 1), "pytest"), tmp_path) is None
