"""Test and setup detection on fixture trees, and the instrumented commands it leads to."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from loopwright.verify.detect import (
    DetectionError,
    StreamSetup,
    TestPlan,
    detect_tests,
    instrumented_command,
    stream_runner,
)
from loopwright.verify.reports import parse_junit

NPM_STUB = 'echo "Error: no test specified" && exit 1'
VENV_PY = ".venv/bin/python"
MAKE_VENV = "python -m venv --system-site-packages .venv"


@dataclass(frozen=True)
class Case:
    files: dict[str, str]
    command: str
    runner: str
    reason: str
    """A phrase the reason must contain."""
    report: str | None = None
    setup: str | None = None


def package(scripts: dict[str, str] | None = None, **fields: object) -> str:
    return json.dumps({"name": "app", "version": "1.0.0", "scripts": scripts or {}, **fields})


CASES = {
    "pytest-ini": Case(
        {"pytest.ini": "[pytest]\n", "tests/test_a.py": ""},
        "python -m pytest",
        "pytest",
        "found pytest.ini → python -m pytest",
        "junit",
    ),
    "tox-ini-section": Case(
        {"tox.ini": "[tox]\nenvlist = py311\n\n[pytest]\naddopts = -q\n"},
        "python -m pytest",
        "pytest",
        "[pytest] in tox.ini",
        "junit",
    ),
    "tox-ini-without-pytest-is-not-enough": Case(
        {"tox.ini": "[tox]\nenvlist = py311\n", "Makefile": "test:\n\ttox\n"},
        "make test",
        "make",
        "test target in Makefile",
    ),
    "setup-cfg-section": Case(
        {"setup.cfg": "[metadata]\nname = x\n\n[tool:pytest]\ntestpaths = tests\n"},
        "python -m pytest",
        "pytest",
        "[tool:pytest] in setup.cfg",
        "junit",
    ),
    "pyproject-with-test-extras": Case(
        {
            "pyproject.toml": (
                '[project]\nname = "x"\nversion = "0"\n'
                '[project.optional-dependencies]\ntest = ["pytest"]\n'
                "[tool.pytest.ini_options]\n"
            )
        },
        ".venv/bin/python -m pytest",
        "pytest",
        "[tool.pytest.ini_options] in pyproject.toml",
        "junit",
        f"{MAKE_VENV} && {VENV_PY} -m pip install -e '.[test]'",
    ),
    "requirements-files": Case(
        {
            "requirements.txt": "requests\n",
            "requirements-dev.txt": "pytest\n",
            "tests/test_api.py": "",
        },
        ".venv/bin/python -m pytest",
        "pytest",
        "found tests/test_api.py",
        "junit",
        f"{MAKE_VENV} && {VENV_PY} -m pip install -r requirements-dev.txt"
        f" && {VENV_PY} -m pip install -r requirements.txt",
    ),
    "conftest-only": Case(
        {"conftest.py": ""}, "python -m pytest", "pytest", "found conftest.py", "junit"
    ),
    "nested-test-module": Case(
        {"tests/unit/test_deep.py": ""},
        "python -m pytest",
        "pytest",
        "tests/unit/test_deep.py",
        "junit",
    ),
    "npm-test-script-with-lockfile": Case(
        {
            "package.json": package({"test": "jest"}, devDependencies={"jest": "^29"}),
            "package-lock.json": "{}",
        },
        "npm test",
        "npm",
        "scripts.test in package.json (jest) → npm test",
        None,
        "npm ci",
    ),
    "npm-script-running-node-test": Case(
        {"package.json": package({"test": "node --test test/"}, dependencies={"express": "^4"})},
        "npm test",
        "npm",
        "npm test",
        "node-junit",
        "npm install",
    ),
    "npm-node-test-script-with-pretest-hook": Case(
        {"package.json": package({"pretest": "npm run build", "test": "node --test"})},
        "npm test",
        "npm",
        "npm test",
        None,
    ),
    "npm-stub-falls-through-to-node-test": Case(
        {"package.json": package({"test": NPM_STUB}), "test/app.test.js": ""},
        "node --test",
        "node",
        "found test/app.test.js and no scripts.test in package.json → node --test",
        "node-junit",
    ),
    "node-test-mjs-without-package-json": Case(
        {"math.test.mjs": ""}, "node --test", "node", "found math.test.mjs", "node-junit"
    ),
    "go-module": Case(
        {"go.mod": "module example.com/calc\n", "go.sum": ""},
        "go test ./...",
        "go",
        "found go.mod → go test ./...",
        "go-json",
        "go mod download",
    ),
    "cargo": Case(
        {"Cargo.toml": '[package]\nname = "calc"\n\n[dependencies]\nserde = "1"\n'},
        "cargo test",
        "cargo",
        "found Cargo.toml → cargo test",
        None,
        "cargo fetch",
    ),
    "makefile-test-target": Case(
        {"Makefile": "CC := cc\n\nbuild:\n\t$(CC) main.c\n\ncheck test: build\n\t./run\n"},
        "make test",
        "make",
        "found a test target in Makefile → make test",
    ),
    "pytest-wins-over-package-json": Case(
        {"pytest.ini": "[pytest]\n", "package.json": package({"test": "jest"})},
        "python -m pytest",
        "pytest",
        "pytest.ini",
        "junit",
    ),
}


def write_tree(root: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_detect(tmp_path: Path, case: Case) -> None:
    write_tree(tmp_path, case.files)
    plan = detect_tests(tmp_path)
    assert (plan.command, plan.runner, plan.report, plan.setup) == (
        case.command,
        case.runner,
        case.report,
        case.setup,
    )
    assert case.reason in plan.reason


@pytest.mark.parametrize(
    "files",
    [
        pytest.param({}, id="empty"),
        pytest.param({"README.md": "# hi\n", "src/app.py": ""}, id="no-tests"),
        pytest.param({"package.json": package({"test": NPM_STUB})}, id="npm-stub-only"),
        pytest.param({"Makefile": "TEST := 1\nbuild:\n\tcc x.c\n"}, id="makefile-without-test"),
        pytest.param({"package.json": "{not json"}, id="broken-package-json"),
    ],
)
def test_nothing_found_says_how_to_configure(tmp_path: Path, files: dict[str, str]) -> None:
    write_tree(tmp_path, files)
    with pytest.raises(DetectionError, match=r"--test-cmd .* test_cmd in \.loopwright\.yml"):
        detect_tests(tmp_path)


def test_missing_tree_is_a_detection_error(tmp_path: Path) -> None:
    with pytest.raises(DetectionError, match="not a directory"):
        detect_tests(tmp_path / "nope")


def test_explicit_command_wins(tmp_path: Path) -> None:
    write_tree(tmp_path, {"pytest.ini": "[pytest]\n", "package.json": package({"test": "jest"})})
    plan = detect_tests(tmp_path, explicit="  ./run-tests.sh --all ")
    assert plan == TestPlan("./run-tests.sh --all", "custom", "configured test command", None, None)


def test_explicit_pytest_command_can_still_be_instrumented(tmp_path: Path) -> None:
    plan = detect_tests(tmp_path, explicit="pytest -x tests/unit")
    assert (plan.runner, plan.report, plan.reason) == ("pytest", "junit", "configured test command")


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_configuring_the_detected_commands_changes_nothing(tmp_path: Path, case: Case) -> None:
    # `loopwright init` writes what detection found; the mission must then run exactly as
    # it would have without the config (same runner, report and reporter script).
    write_tree(tmp_path, case.files)
    detected = detect_tests(tmp_path)
    configured = detect_tests(tmp_path, explicit=detected.command, config_setup=detected.setup)
    assert configured.reason.startswith("configured test command, as detected: ")
    assert configured == replace(detected, reason=configured.reason)
    assert stream_runner(configured) == stream_runner(detected)


def test_explicit_command_runs_inside_the_detected_venv(tmp_path: Path) -> None:
    write_tree(tmp_path, {"requirements.txt": "requests\n", "tests/test_a.py": ""})
    plan = detect_tests(tmp_path, explicit="pytest -q")
    assert plan.command == ". .venv/bin/activate && pytest -q"
    assert plan.setup is not None and plan.setup.startswith(MAKE_VENV)


def test_configured_setup_replaces_the_detected_one(tmp_path: Path) -> None:
    write_tree(tmp_path, {"requirements.txt": "requests\n", "tests/test_a.py": ""})
    plan = detect_tests(tmp_path, config_setup="pip install --user -r requirements.txt")
    assert plan.setup == "pip install --user -r requirements.txt"
    assert plan.command == "python -m pytest"  # no venv is created, so none is used


@pytest.mark.parametrize(
    ("plan", "expected"),
    [
        pytest.param(
            TestPlan("python -m pytest", "pytest", "", "junit", None),
            "python -m pytest '--junitxml=out dir/r.xml' -o junit_family=xunit2",
            id="pytest",
        ),
        pytest.param(
            TestPlan("node --test test/", "node", "", "node-junit", None),
            "mkdir -p 'out dir' && node --test --test-reporter=junit "
            "'--test-reporter-destination=out dir/r.xml' --test-reporter=spec "
            "--test-reporter-destination=stdout test/",
            id="node-test",
        ),
        pytest.param(
            TestPlan("npm test", "npm", "", "node-junit", None, "node --test"),
            "mkdir -p 'out dir' && node --test --test-reporter=junit "
            "'--test-reporter-destination=out dir/r.xml' --test-reporter=spec "
            "--test-reporter-destination=stdout",
            id="npm-node-test-script",
        ),
        pytest.param(
            TestPlan("npm test", "npm", "", None, None, "jest --ci"),
            "npm test",
            id="npm-other-script",
        ),
        pytest.param(
            TestPlan("go test ./...", "go", "", "go-json", None),
            "mkdir -p 'out dir' && (set -o pipefail; go test -json ./... | tee 'out dir/r.xml')",
            id="go",
        ),
        pytest.param(
            TestPlan("cargo test", "cargo", "", None, None), "cargo test", id="cargo-unchanged"
        ),
        pytest.param(
            TestPlan("cd app && node --test", "node", "", "node-junit", None),
            "cd app && node --test",
            id="complex-command-unchanged",
        ),
    ],
)
def test_instrumented_command(plan: TestPlan, expected: str) -> None:
    assert instrumented_command(plan, "out dir/r.xml") == expected


def test_instrumented_pytest_writes_a_report(tmp_path: Path) -> None:
    write_tree(tmp_path, {"tests/test_a.py": "def test_ok():\n    assert True\n"})
    plan = detect_tests(tmp_path)
    command = instrumented_command(plan, ".loopwright/report.xml").replace(
        "python", shlex.quote(sys.executable), 1
    )
    subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, timeout=120)
    results = parse_junit((tmp_path / ".loopwright/report.xml").read_text())
    assert [(r.id, r.outcome) for r in results] == [("tests/test_a.py::test_ok", "passed")]


def test_instrumented_npm_node_script_writes_a_report_and_keeps_the_exit_code(
    tmp_path: Path,
) -> None:
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    write_tree(
        tmp_path,
        {
            "package.json": package({"test": "node --test"}),
            "test/a.test.js": (
                'const test = require("node:test");\n'
                'test("fails", () => { throw new Error("no"); });\n'
            ),
        },
    )
    plan = detect_tests(tmp_path)
    command = instrumented_command(plan, ".loopwright/report.xml")
    run = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 1
    assert "fails" in run.stdout  # the spec reporter still prints to stdout
    results = parse_junit((tmp_path / ".loopwright/report.xml").read_text())
    assert [(r.id, r.outcome) for r in results] == [("fails", "failed")]


STREAM = StreamSetup("/opt/lw reporters", ".loopwright/stream-1")
RUN_PYTEST = "'/opt/lw reporters/run_pytest.py'"
JUNIT_ARGS = "'--junitxml=out dir/r.xml' -o junit_family=xunit2"
NODE_REPORTERS = (
    "'--test-reporter=/opt/lw reporters/node_reporter.mjs' --test-reporter-destination=stdout "
    "--test-reporter=junit '--test-reporter-destination=out dir/r.xml' --test-reporter=spec "
    "--test-reporter-destination=stdout"
)
KEY_ENV = "LOOPWRIGHT_STREAM=.loopwright/stream-1"


@pytest.mark.parametrize(
    ("plan", "expected"),
    [
        pytest.param(
            TestPlan("python -m pytest", "pytest", "", "junit", None),
            f"{KEY_ENV} python {RUN_PYTEST} --as-module {JUNIT_ARGS}",
            id="python-m-pytest",
        ),
        pytest.param(
            TestPlan(".venv/bin/python -m pytest -q tests", "pytest", "", "junit", None),
            f"{KEY_ENV} .venv/bin/python {RUN_PYTEST} --as-module -q tests {JUNIT_ARGS}",
            id="venv-python",
        ),
        pytest.param(
            TestPlan("pytest -x", "pytest", "", "junit", None),
            f"{KEY_ENV} python {RUN_PYTEST} -x {JUNIT_ARGS}",
            id="pytest-script",
        ),
        pytest.param(
            TestPlan(".venv/bin/pytest", "pytest", "", "junit", None),
            f"{KEY_ENV} .venv/bin/python {RUN_PYTEST} {JUNIT_ARGS}",
            id="venv-pytest-script",
        ),
        pytest.param(
            TestPlan(". .venv/bin/activate && pytest -q", "pytest", "", "junit", None),
            f". .venv/bin/activate && {KEY_ENV} python {RUN_PYTEST} -q {JUNIT_ARGS}",
            id="activated-venv",
        ),
        pytest.param(
            TestPlan("node --test test/", "node", "", "node-junit", None),
            f"mkdir -p 'out dir' && {KEY_ENV} node --test {NODE_REPORTERS} test/",
            id="node-test",
        ),
        pytest.param(
            TestPlan("npm test", "npm", "", "node-junit", None, "node --test"),
            f"mkdir -p 'out dir' && {KEY_ENV} node --test {NODE_REPORTERS}",
            id="npm-node-test-script",
        ),
    ],
)
def test_streamed_command(plan: TestPlan, expected: str) -> None:
    assert stream_runner(plan) is not None
    assert instrumented_command(plan, "out dir/r.xml", STREAM) == expected


@pytest.mark.parametrize(
    "plan",
    [
        pytest.param(TestPlan("go test ./...", "go", "", "go-json", None), id="go"),
        pytest.param(TestPlan("cargo test", "cargo", "", None, None), id="cargo"),
        pytest.param(TestPlan("make test", "make", "", None, None), id="make"),
        pytest.param(TestPlan("npm test", "npm", "", None, None, "jest --ci"), id="npm-jest"),
        pytest.param(
            TestPlan("cd app && python -m pytest", "pytest", "", "junit", None), id="compound"
        ),
        pytest.param(TestPlan("./run-tests.sh", "custom", "", None, None), id="custom"),
    ],
)
def test_runners_without_a_reporter_keep_todays_command(plan: TestPlan) -> None:
    assert stream_runner(plan) is None
    assert instrumented_command(plan, "out dir/r.xml", STREAM) == instrumented_command(
        plan, "out dir/r.xml"
    )
