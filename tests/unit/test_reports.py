"""Report parsing on real runner output: pytest's and node's JUnit XML, `go test -json` lines."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from loopwright.verify.reports import (
    SUITE_ID,
    ReportError,
    TestResult,
    build_report,
    parse_go_json,
    parse_junit,
)

PYTEST_PROJECT = {
    "tests/test_calc.py": """\
import pytest


def test_add():
    assert 1 + 1 == 2


def test_sub():
    assert 1 - 1 == 2


@pytest.mark.skip(reason="later")
def test_skipped():
    pass


@pytest.mark.xfail
def test_expected_failure():
    assert False


@pytest.fixture
def broken():
    raise RuntimeError("fixture boom")


def test_setup_error(broken):
    pass


class TestThing:
    @pytest.mark.parametrize("x", [1, 2])
    def test_param(self, x):
        assert x == 1
""",
    "test_root.py": "def test_at_root():\n    assert True\n",
}

NODE_TEST = """\
const test = require("node:test");
const assert = require("node:assert");

test("top level passes", () => {
  assert.strictEqual(1, 1);
});

test.describe("calc", () => {
  test.it("adds", () => assert.strictEqual(1 + 1, 2));
  test.it("subtracts & <escapes>", () => assert.strictEqual(1 - 1, 2));
  test.it("is skipped", { skip: true }, () => {});
  test.it("is todo", { todo: true }, () => {});
  test.describe("nested", () => {
    test.it("deep", () => {
      throw new Error("boom");
    });
  });
});
"""

GO_EVENTS: list[str | dict[str, object]] = [
    {"Action": "start", "Package": "example.com/calc"},
    {"Action": "run", "Package": "example.com/calc", "Test": "TestAdd"},
    {"Action": "output", "Package": "example.com/calc", "Test": "TestAdd", "Output": "=== RUN\n"},
    {
        "Action": "output",
        "Package": "example.com/calc",
        "Test": "TestAdd",
        "Output": "    calc_test.go:8: Add(2, 2) = 0, want 4\n",
    },
    {"Action": "fail", "Package": "example.com/calc", "Test": "TestAdd", "Elapsed": 0},
    {"Action": "run", "Package": "example.com/calc", "Test": "TestSub"},
    {"Action": "run", "Package": "example.com/calc", "Test": "TestSub/zero"},
    {"Action": "pass", "Package": "example.com/calc", "Test": "TestSub/zero", "Elapsed": 0},
    {"Action": "pass", "Package": "example.com/calc", "Test": "TestSub", "Elapsed": 0},
    {"Action": "run", "Package": "example.com/calc", "Test": "TestLater"},
    {"Action": "skip", "Package": "example.com/calc", "Test": "TestLater", "Elapsed": 0},
    {"Action": "fail", "Package": "example.com/calc", "Elapsed": 0.01},
    "not json: a line go printed to stdout",
    {
        "Action": "output",
        "Package": "example.com/broken",
        "Output": "FAIL\texample.com/broken [build failed]\n",
    },
    {"Action": "fail", "Package": "example.com/broken", "Elapsed": 0},
    {"Action": "skip", "Package": "example.com/empty", "Elapsed": 0},
]
GO_JSON = "\n".join(
    e if isinstance(e, str) else json.dumps({"Time": "2024-05-01T10:00:00Z", **e})
    for e in GO_EVENTS
)


def write_tree(root: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)


@pytest.fixture(scope="module")
def pytest_junit(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("pytest-project")
    write_tree(root, PYTEST_PROJECT)
    run = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q"),
            *("-o", "junit_family=xunit2", "--junitxml=report.xml"),
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    return (root / "report.xml").read_text()


@pytest.fixture(scope="module")
def node_junit(tmp_path_factory: pytest.TempPathFactory) -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    root = tmp_path_factory.mktemp("node-project")
    write_tree(root, {"test/calc.test.js": NODE_TEST})
    run = subprocess.run(
        [node, "--test", "--test-reporter=junit", "--test-reporter-destination=report.xml"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    return (root / "report.xml").read_text()


def outcomes(results: list[TestResult]) -> dict[str, str]:
    return {r.id: r.outcome for r in results}


def test_pytest_junit_ids_and_outcomes(pytest_junit: str) -> None:
    assert outcomes(parse_junit(pytest_junit)) == {
        "tests/test_calc.py::test_add": "passed",
        "tests/test_calc.py::test_sub": "failed",
        "tests/test_calc.py::test_skipped": "skipped",
        "tests/test_calc.py::test_expected_failure": "skipped",
        "tests/test_calc.py::test_setup_error": "error",
        "tests/test_calc.py::TestThing::test_param[1]": "passed",
        "tests/test_calc.py::TestThing::test_param[2]": "failed",
        "test_root.py::test_at_root": "passed",
    }


def test_pytest_junit_keeps_the_failure_text(pytest_junit: str) -> None:
    by_id = {r.id: r for r in parse_junit(pytest_junit)}
    assert "assert (1 - 1) == 2" in by_id["tests/test_calc.py::test_sub"].message
    assert "fixture boom" in by_id["tests/test_calc.py::test_setup_error"].message


def test_pytest_collection_error_is_an_error_on_the_module(tmp_path: Path) -> None:
    write_tree(tmp_path, {"tests/test_broken.py": "import not_a_module_anywhere\n"})
    subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--junitxml=r.xml", "-q"],
        cwd=tmp_path,
        capture_output=True,
        timeout=120,
    )
    results = parse_junit((tmp_path / "r.xml").read_text())
    assert outcomes(results) == {"tests/test_broken.py": "error"}
    assert "not_a_module_anywhere" in results[0].message


def test_pytest_xunit1_file_attribute_is_used() -> None:
    xml = (
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.v1.test_api.TestGet" name="test_ok" '
        'file="tests/v1/test_api.py" line="3"/>'
        "</testsuite></testsuites>"
    )
    assert outcomes(parse_junit(xml)) == {"tests/v1/test_api.py::TestGet::test_ok": "passed"}


def test_node_junit_ids_and_outcomes(node_junit: str) -> None:
    assert outcomes(parse_junit(node_junit)) == {
        "top level passes": "passed",
        "calc > adds": "passed",
        "calc > subtracts & <escapes>": "failed",
        "calc > is skipped": "skipped",
        "calc > is todo": "skipped",
        "calc > nested > deep": "failed",
    }
    deep = {r.id: r for r in parse_junit(node_junit)}["calc > nested > deep"]
    assert "boom" in deep.message


def test_a_plain_testsuite_root_is_read() -> None:
    xml = (
        '<?xml version="1.0"?><testsuite name="jest tests">'
        '<testcase classname="calc adds" name="calc adds"/>'
        '<testcase classname="calc subtracts" name="calc subtracts">'
        '<failure message="expected 0">stack</failure></testcase>'
        "</testsuite>"
    )
    assert outcomes(parse_junit(xml)) == {
        "calc adds::calc adds": "passed",
        "calc subtracts::calc subtracts": "failed",
    }


def test_the_worse_outcome_wins_for_a_repeated_id() -> None:
    xml = (
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.test_a" name="test_x"/>'
        '<testcase classname="tests.test_a" name="test_x"><error message="teardown"/></testcase>'
        "</testsuite></testsuites>"
    )
    assert outcomes(parse_junit(xml)) == {"tests/test_a.py::test_x": "error"}


BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
]>
<testsuites><testsuite><testcase classname="a" name="&lol3;"/></testsuite></testsuites>
"""
EXTERNAL_ENTITY = """<?xml version="1.0"?>
<!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]>
<testsuites><testcase classname="a" name="&x;"/></testsuites>
"""


@pytest.mark.parametrize(
    "xml",
    [
        pytest.param(BILLION_LAUGHS, id="billion-laughs"),
        pytest.param(EXTERNAL_ENTITY, id="external-entity"),
        pytest.param(BILLION_LAUGHS.replace("DOCTYPE", "doctype"), id="lowercase-doctype"),
        pytest.param("<testsuites><testcase", id="truncated"),
        pytest.param("not xml at all", id="not-xml"),
    ],
)
def test_hostile_or_broken_junit_is_refused(xml: str) -> None:
    with pytest.raises(ReportError):
        parse_junit(xml)


def test_go_json() -> None:
    results = {r.id: r for r in parse_go_json(GO_JSON)}
    assert {i: r.outcome for i, r in results.items()} == {
        "example.com/calc::TestAdd": "failed",
        "example.com/calc::TestSub": "passed",
        "example.com/calc::TestSub/zero": "passed",
        "example.com/calc::TestLater": "skipped",
        "example.com/broken": "error",
    }
    assert "want 4" in results["example.com/calc::TestAdd"].message
    assert "build failed" in results["example.com/broken"].message


def test_build_report_prefers_junit(pytest_junit: str) -> None:
    report = build_report(1, junit_xml=pytest_junit)
    assert report.source == "junit"
    assert report.failing() == {
        "tests/test_calc.py::test_sub",
        "tests/test_calc.py::test_setup_error",
        "tests/test_calc.py::TestThing::test_param[2]",
    }
    assert "tests/test_calc.py::test_add" in report.passing()
    assert report.by_id()["tests/test_calc.py::test_skipped"].outcome == "skipped"


def test_build_report_reads_go_json() -> None:
    report = build_report(1, go_json=GO_JSON)
    assert report.source == "go-json"
    assert report.failing() == {"example.com/calc::TestAdd", "example.com/broken"}


@pytest.mark.parametrize(
    ("exit_code", "junit", "outcome", "message"),
    [
        pytest.param(0, None, "passed", "", id="no-report-exit-0"),
        pytest.param(2, None, "failed", "exited 2", id="no-report-exit-2"),
        pytest.param(1, "", "failed", "exited 1", id="empty-report"),
        pytest.param(1, "<testsuites/>", "failed", "lists no tests", id="report-without-tests"),
        pytest.param(1, BILLION_LAUGHS, "failed", "DOCTYPE", id="hostile-report"),
        pytest.param(0, "<testsuites><testcase", "passed", "not well-formed", id="truncated"),
    ],
)
def test_build_report_falls_back_to_the_exit_code(
    exit_code: int, junit: str | None, outcome: str, message: str
) -> None:
    report = build_report(exit_code, junit_xml=junit)
    assert report.source == "exit-code"
    [result] = report.results
    assert (result.id, result.outcome) == (SUITE_ID, outcome)
    assert message in result.message


def test_node_todo_tests_are_skipped_even_when_they_fail() -> None:
    xml = (
        '<?xml version="1.0" encoding="utf-8"?><testsuites>'
        '<testcase name="todo fails" classname="test" failure="x">'
        '<skipped type="todo" message="true"/><failure type="testCodeFailure" message="x"/>'
        "</testcase>"
        '<testcase name="plain" classname="test"><failure message="no"/></testcase>'
        "</testsuites>"
    )
    assert [(r.id, r.outcome) for r in parse_junit(xml)] == [
        ("todo fails", "skipped"),
        ("plain", "failed"),
    ]
