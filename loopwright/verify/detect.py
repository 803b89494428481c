"""Work out how to install a repository's dependencies and run its tests, and explain why.

Detection only reads files in the given tree; it never runs anything.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from loopwright.verify.stream import STREAM_ENV
from loopwright.verify.testfiles.formats import dig

Runner = Literal["pytest", "node", "npm", "go", "cargo", "make", "custom"]
ReportKind = Literal["junit", "node-tap", "node-junit", "go-json"]

VENV = ".venv"
"""Where the setup phase creates a Python virtualenv, relative to the repository root."""

PYTHON_TEST_EXTRAS = ("test", "tests", "testing", "dev")
"""Optional-dependency groups installed for the tests, first match wins."""

# --system-site-packages keeps the image's pytest importable when a project does not list it,
# while the venv keeps the project's pins from fighting the image's packages.
_VENV_CREATE = f"python -m venv --system-site-packages {VENV}"
_NPM_STUB = "no test specified"
_SHELL_SYNTAX = re.compile(r"[;&|<>`$(){}\n]")
# A Makefile rule whose targets include `test` (`test:`, `check test:`), not `test := x`.
_MAKE_TEST_RULE = re.compile(r"^(?:[^\s:#=]+[ \t]+)*test(?:[ \t]+[^\s:#=]+)*[ \t]*::?(?!=)", re.M)


class DetectionError(Exception):
    """No test command could be found; the message tells the user how to configure one."""


@dataclass(frozen=True)
class TestPlan:
    """How to set up and run one repository's test suite."""

    __test__ = False  # not a pytest test class despite the name

    command: str
    """The shell command that runs the whole suite, e.g. `python -m pytest`."""
    runner: Runner
    reason: str
    """Why this command was chosen, for the event log: `found pytest.ini → python -m pytest`."""
    report: ReportKind | None
    """Which machine-readable report `instrumented_command` can add; None: exit code only."""
    setup: str | None
    """The dependency install command for the setup phase (run with network); None: nothing."""
    script: str | None = None
    """For npm: the `scripts.test` value, so a plain `node --test` script can be instrumented."""


def detect_tests(
    tree: Path, explicit: str | None = None, config_setup: str | None = None
) -> TestPlan:
    """The test plan for the repository at `tree`.

    An explicit command (`--test-cmd` or `test_cmd` in .loopwright.yml) wins; an explicit
    setup command (`config_setup`) likewise replaces the detected one.
    """
    if not tree.is_dir():
        raise DetectionError(f"{tree} is not a directory, so there are no tests to detect")
    setup = config_setup.strip() if config_setup and config_setup.strip() else None
    if explicit is None or not explicit.strip():
        return _detect(tree, setup)
    command = explicit.strip()
    detected = _detect(tree, setup, need_command=False)
    if detected.command and detected.command == command:
        # The command detection would pick (as `loopwright init` writes it) runs exactly as
        # detected: `npm test` keeps its script, and so its reporter.
        return replace(detected, reason=f"configured test command, as detected: {detected.reason}")
    runner, report = _classify(command)
    if setup is None:
        setup = detected.setup
        if setup is not None and setup.startswith(_VENV_CREATE):
            # The configured command expects the project's packages, which live in the venv.
            command = f". {VENV}/bin/activate && {command}"
    return TestPlan(command, runner, "configured test command", report, setup)


StreamRunner = Literal["pytest", "node"]
PYTEST_REPORTER = "run_pytest.py"
NODE_REPORTER = "node_reporter.mjs"
_ACTIVATE = f". {VENV}/bin/activate && "


@dataclass(frozen=True)
class StreamSetup:
    """Where Loopwright's reporters are and which workspace file holds this run's key."""

    reporters: str
    """Absolute directory holding `run_pytest.py` and `node_reporter.mjs`."""
    key_file: str
    """The key file's path relative to the workspace; the reporter deletes it at load."""


def stream_runner(plan: TestPlan) -> StreamRunner | None:
    """Which of Loopwright's reporters can run this plan's suite; None: none can.

    pytest, `node --test` and an `npm test` whose script is a plain `node --test` qualify,
    when the command is one plain call (optionally after activating the setup's virtualenv).
    """
    if plan.runner == "pytest" and plan.report == "junit":
        return "pytest" if _pytest_words(plan.command) is not None else None
    if plan.report != "node-junit":
        return None
    command = plan.script if plan.runner == "npm" else plan.command
    if plan.runner in ("node", "npm") and command and _node_words(command) is not None:
        return "node"
    return None


def instrumented_command(
    plan: TestPlan, report_path: str, stream: StreamSetup | None = None
) -> str:
    """`plan.command`, changed so it also writes a machine-readable report at `report_path`.

    Output stays human-readable on stdout where the runner allows it, and the exit code is
    the suite's. Runners without a report format, and commands too complex to rewrite safely,
    are returned unchanged (the verdict then falls back to the exit code). With `stream`,
    pytest and node run under Loopwright's reporter (see `stream_runner`), which also prints
    the signed per-test records the verdict rests on.
    """
    runner = stream_runner(plan) if stream is not None else None
    if stream is not None and runner == "pytest":
        return _pytest_streamed(plan.command, report_path, stream)
    if stream is not None and runner == "node":
        command = plan.script if plan.runner == "npm" and plan.script else plan.command
        return _node_streamed(command, report_path, stream)
    if plan.report == "junit" and plan.runner == "pytest":
        # pytest creates the report's directory itself.
        return f"{plan.command} {shlex.quote('--junitxml=' + report_path)} -o junit_family=xunit2"
    rewritten: str | None = None
    if plan.report == "node-junit" and plan.runner == "node":
        rewritten = _with_node_reporters(plan.command, report_path)
    elif plan.report == "node-junit" and plan.runner == "npm" and plan.script:
        rewritten = _with_node_reporters(plan.script, report_path)
    elif plan.report == "go-json" and plan.runner == "go":
        words = _simple_words(plan.command)
        if words and words[:2] == ["go", "test"]:
            go = shlex.join(["go", "test", "-json", *words[2:]])
            # pipefail keeps go's exit status through tee; the subshell keeps it contained.
            rewritten = f"(set -o pipefail; {go} | tee {shlex.quote(report_path)})"
    if rewritten is None:
        return plan.command
    # node and tee fail when the report's directory does not exist yet.
    directory = posixpath.dirname(report_path)
    return f"mkdir -p {shlex.quote(directory)} && {rewritten}" if directory else rewritten


def _classify(command: str) -> tuple[Runner, ReportKind | None]:
    """Recognise a configured command that is a plain runner call, so it can be instrumented."""
    words = _simple_words(command)
    if not words:
        return "custom", None
    exe = words[0].rsplit("/", 1)[-1]
    if exe in ("pytest", "py.test") or (
        exe.startswith("python") and words[1:3] in (["-m", "pytest"], ["-m", "py.test"])
    ):
        return "pytest", "junit"
    if exe == "node" and "--test" in words:
        return "node", "node-junit"
    if exe == "go" and words[1:2] == ["test"]:
        return "go", "go-json"
    return "custom", None


def _detect(tree: Path, setup_override: str | None, need_command: bool = True) -> TestPlan:
    """Detection proper; `need_command=False` returns a command-less plan instead of raising."""
    package = _package_json(tree)
    python = _pytest_signal(tree)
    if python:
        setup = setup_override or _python_setup(tree)
        venv = setup is not None and setup.startswith(_VENV_CREATE)
        command = f"{VENV}/bin/python -m pytest" if venv else "python -m pytest"
        return TestPlan(command, "pytest", f"found {python} → {command}", "junit", setup)
    npm_setup = setup_override or _npm_setup(tree, package)
    script = _npm_test_script(package)
    if script is not None:
        words = _simple_words(script) or []
        # Running the script's node command directly would skip npm's pretest/posttest hooks.
        hooks = isinstance(package.get("scripts"), dict) and any(
            k in package["scripts"] for k in ("pretest", "posttest")
        )
        node_script = words[:1] == ["node"] and "--test" in words and not hooks
        return TestPlan(
            "npm test",
            "npm",
            f"found scripts.test in package.json ({script}) → npm test",
            "node-junit" if node_script else None,
            npm_setup,
            script,
        )
    node_test = _node_test_file(tree)
    if node_test:
        return TestPlan(
            "node --test",
            "node",
            f"found {node_test} and no scripts.test in package.json → node --test",
            "node-junit",
            npm_setup,
        )
    if (tree / "go.mod").is_file():
        go_setup = "go mod download" if (tree / "go.sum").is_file() else None
        return TestPlan(
            "go test ./...",
            "go",
            "found go.mod → go test ./...",
            "go-json",
            setup_override or go_setup,
        )
    if (tree / "Cargo.toml").is_file():
        return TestPlan(
            "cargo test",
            "cargo",
            "found Cargo.toml → cargo test",
            None,
            setup_override or _cargo_setup(tree),
        )
    makefile = _makefile_with_test(tree)
    if makefile:
        return TestPlan(
            "make test",
            "make",
            f"found a test target in {makefile} → make test",
            None,
            setup_override,
        )
    if not need_command:
        return TestPlan("", "custom", "", None, setup_override or npm_setup or _python_setup(tree))
    raise DetectionError(
        f"could not find how to run the tests in {tree} (looked for pytest configuration or "
        "test_*.py files, a scripts.test in package.json, *.test.js files, go.mod, Cargo.toml "
        "and a Makefile with a test target); pass --test-cmd CMD or set test_cmd in "
        ".loopwright.yml"
    )


def _pytest_signal(tree: Path) -> str | None:
    """The first file that marks the tree as a pytest project, or None."""
    if (tree / "pytest.ini").is_file():
        return "pytest.ini"
    if _has_section(tree / "tox.ini", "pytest"):
        return "[pytest] in tox.ini"
    if _has_section(tree / "setup.cfg", "tool:pytest"):
        return "[tool:pytest] in setup.cfg"
    if isinstance(dig(_toml(tree / "pyproject.toml"), ("tool", "pytest")), dict):
        return "[tool.pytest.ini_options] in pyproject.toml"
    for conftest in ("conftest.py", "tests/conftest.py", "test/conftest.py"):
        if (tree / conftest).is_file():
            return conftest
    for pattern in ("tests/**/test_*.py", "test/**/test_*.py", "tests/**/*_test.py", "test_*.py"):
        found = next(iter(sorted(tree.glob(pattern))), None)
        if found is not None and found.is_file():
            return found.relative_to(tree).as_posix()
    return None


def _python_setup(tree: Path) -> str | None:
    """A virtualenv plus the project's requirements files and the project itself, if any."""
    installs: list[list[str]] = [
        ["-r", p.name] for p in sorted(tree.glob("requirements*.txt")) if p.is_file()
    ]
    pyproject = _toml(tree / "pyproject.toml")
    if "project" in pyproject or (tree / "setup.py").is_file():
        extras = dig(pyproject, ("project", "optional-dependencies"))
        extras = extras if isinstance(extras, dict) else {}
        group = next((g for g in PYTHON_TEST_EXTRAS if g in extras), None)
        installs.append(["-e", f".[{group}]" if group else "."])
    if not installs:
        return None
    python = f"{VENV}/bin/python"
    steps = [_VENV_CREATE]
    steps += [shlex.join([python, "-m", "pip", "install", *args]) for args in installs]
    return " && ".join(steps)


def _package_json(tree: Path) -> dict[str, Any]:
    path = tree / "package.json"
    if not path.is_file():
        return {}
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _npm_test_script(package: dict[str, Any]) -> str | None:
    scripts = package.get("scripts")
    script = scripts.get("test") if isinstance(scripts, dict) else None
    if not isinstance(script, str) or not script.strip() or _NPM_STUB in script:
        return None
    return script.strip()


def _npm_setup(tree: Path, package: dict[str, Any]) -> str | None:
    if not package:
        return None
    if (tree / "package-lock.json").is_file() or (tree / "npm-shrinkwrap.json").is_file():
        return "npm ci"
    if any(package.get(key) for key in ("dependencies", "devDependencies")):
        return "npm install"
    return None


def _node_test_file(tree: Path) -> str | None:
    # A subset of node --test's own default patterns that needs no walk of node_modules.
    for pattern in ("test/**/*.*js", "tests/**/*.test.*js", "*.test.*js", "src/**/*.test.*js"):
        for found in sorted(tree.glob(pattern)):
            if found.is_file() and found.suffix in (".js", ".mjs", ".cjs"):
                return found.relative_to(tree).as_posix()
    return None


def _cargo_setup(tree: Path) -> str | None:
    cargo = _toml(tree / "Cargo.toml")
    has_deps = (tree / "Cargo.lock").is_file() or any(
        cargo.get(key) for key in ("dependencies", "dev-dependencies", "workspace")
    )
    return "cargo fetch" if has_deps else None


def _makefile_with_test(tree: Path) -> str | None:
    for name in ("GNUmakefile", "makefile", "Makefile"):
        path = tree / name
        if path.is_file() and _MAKE_TEST_RULE.search(_read(path)):
            return name
    return None


def _has_section(path: Path, section: str) -> bool:
    return bool(re.search(rf"^\[{re.escape(section)}\]", _read(path), re.M))


def _toml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        return tomllib.loads(_read(path))
    except (tomllib.TOMLDecodeError, RecursionError):
        return {}


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _simple_words(command: str) -> list[str] | None:
    """The command's words when it is one plain command (no pipes, lists or substitutions)."""
    if _SHELL_SYNTAX.search(command):
        return None
    try:
        return shlex.split(command)
    except ValueError:
        return None


def _with_node_reporters(command: str, report_path: str) -> str | None:
    words = _simple_words(command)
    if not words or words[0] != "node" or "--test" not in words:
        return None
    at = words.index("--test") + 1
    # Node treats everything after the first file argument as test files, so the reporter
    # flags go right after --test.
    reporters = [
        "--test-reporter=junit",
        f"--test-reporter-destination={report_path}",
        "--test-reporter=spec",
        "--test-reporter-destination=stdout",
    ]
    return shlex.join([*words[:at], *reporters, *words[at:]])


def _pytest_words(command: str) -> tuple[str, list[str], bool] | None:
    """(prefix, [python, *args], as_module) for a plain pytest call; None for anything else.

    `as_module` is true for `python -m pytest`, which puts the working directory on sys.path.
    """
    prefix = _ACTIVATE if command.startswith(_ACTIVATE) else ""
    words = _simple_words(command.removeprefix(prefix))
    if not words:
        return None
    exe = words[0].rsplit("/", 1)[-1]
    if exe.startswith("python") and words[1:3] in (["-m", "pytest"], ["-m", "py.test"]):
        return prefix, [words[0], *words[3:]], True
    if exe in ("pytest", "py.test"):
        folder = words[0].rsplit("/", 1)[0] if "/" in words[0] else ""
        python = f"{folder}/python" if folder else "python"
        return prefix, [python, *words[1:]], False
    return None


def _pytest_streamed(command: str, report_path: str, stream: StreamSetup) -> str:
    parts = _pytest_words(command)
    if parts is None:  # pragma: no cover - stream_runner checked it
        return command
    prefix, (python, *args), as_module = parts
    argv = [python, posixpath.join(stream.reporters, PYTEST_REPORTER)]
    if as_module:
        argv.append("--as-module")
    argv += [*args, "--junitxml=" + report_path, "-o", "junit_family=xunit2"]
    return f"{prefix}{STREAM_ENV}={shlex.quote(stream.key_file)} {shlex.join(argv)}"


def _node_words(command: str) -> list[str] | None:
    words = _simple_words(command)
    if not words or words[0] != "node" or "--test" not in words:
        return None
    return words


def _node_streamed(command: str, report_path: str, stream: StreamSetup) -> str:
    words = _node_words(command)
    if words is None:  # pragma: no cover - stream_runner checked it
        return command
    at = words.index("--test") + 1
    reporters = [
        "--test-reporter=" + posixpath.join(stream.reporters, NODE_REPORTER),
        "--test-reporter-destination=stdout",
        "--test-reporter=junit",
        f"--test-reporter-destination={report_path}",
        "--test-reporter=spec",
        "--test-reporter-destination=stdout",
    ]
    node = shlex.join([*words[:at], *reporters, *words[at:]])
    directory = posixpath.dirname(report_path)
    mkdir = f"mkdir -p {shlex.quote(directory)} && " if directory else ""
    return f"{mkdir}{STREAM_ENV}={shlex.quote(stream.key_file)} {node}"
