"""The tools refuse the test edits verification would undo, and nothing else.

Each case runs a real tool call through `Toolbox` against a local sandbox of a small tree,
then reads the sandbox back: a refused write must leave the file as it was, an allowed one
must land.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from loopwright.agent.policy import write_targets
from loopwright.agent.testguard import TestEditGuard
from loopwright.agent.tools import Toolbox
from loopwright.config import SandboxLimits
from loopwright.protected_paths import DEFAULT_PROTECTED_PATHS
from loopwright.sandbox.base import Sandbox
from loopwright.sandbox.local import LocalProvider

FILES = {
    "pytest.ini": "[pytest]\naddopts = -q\n",
    "pyproject.toml": '[project]\nname = "calc"\nversion = "1.0"\n\n[tool.pytest.ini_options]\n'
    'addopts = "-q"\n',
    "calc/__init__.py": "def add(a, b):\n    return a - b\n",
    "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n",
    "tests/helpers.py": "ONE = 1\n",
    "tests/conftest.py": "",
}


def _base(root: Path) -> Path:
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "link_to_test.py").symlink_to("tests/test_calc.py")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def _read(root: Path, rel: str) -> str | None:
    path = root / rel
    return path.read_text() if path.is_file() and not path.is_symlink() else None


def _guard(base: Path, allow: tuple[str, ...] = ()) -> TestEditGuard:
    paths = [p.relative_to(base).as_posix() for p in base.rglob("*") if ".git" not in p.parts]
    return TestEditGuard.for_tree(
        [p for p in paths if (base / p).is_file()],
        lambda rel: _read(base, rel),
        test_command="python -m pytest",
        setup_command=None,
        allow_test_edits=allow,
    )


@pytest.fixture()
def base(tmp_path: Path) -> Path:
    return _base(tmp_path / "base")


@pytest.fixture()
def box(base: Path, tmp_path: Path) -> Iterator[Sandbox]:
    provider = LocalProvider(SandboxLimits(output_cap_bytes=65536), base_dir=tmp_path / "boxes")
    sandbox = provider.create("mission-guard", base, network=False)
    try:
        yield sandbox
    finally:
        sandbox.close()


def _tools(box: Sandbox, base: Path, allow: tuple[str, ...] = ()) -> Toolbox:
    return Toolbox(
        box,
        command_timeout_s=30,
        protected_paths=DEFAULT_PROTECTED_PATHS,
        test_command="python -m pytest",
        test_guard=_guard(base, allow),
    )


def _call(tools: Toolbox, name: str, **arguments: object) -> tuple[str, str]:
    outcome = tools.run(name, json.dumps(arguments))
    return outcome.status, outcome.observation


WEAKENED = "def test_add():\n    assert True\n"


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("tests/test_calc.py", "is an existing test file"),
        ("./tests/test_calc.py", "is an existing test file"),
        ("tests/../tests/test_calc.py", "is an existing test file"),
        ("tests/helpers.py", "is an existing test file"),
        ("tests/conftest.py", "conftest.py files configure pytest"),
        ("pytest.ini", "pytest.ini configures pytest"),
        ("conftest.py", "conftest.py files configure pytest"),  # a new one: still configuration
        ("sitecustomize.py", "the interpreter runs it at start-up"),
        ("pytest.py", "it shadows the module `pytest`"),
    ],
)
def test_writing_existing_tests_or_test_configuration_is_refused(
    box: Sandbox, base: Path, path: str, reason: str
) -> None:
    tools = _tools(box, base)
    before = box.exec("cat tests/test_calc.py pytest.ini", timeout_s=30).output
    status, observation = _call(tools, "write_file", path=path, content=WEAKENED)
    assert status == "refused", observation
    assert reason in observation and "Fix the code under test instead" in observation
    assert "allow_test_edits" in observation
    assert box.exec("cat tests/test_calc.py pytest.ini", timeout_s=30).output == before
    gone = "test ! -e conftest.py && test ! -e sitecustomize.py && test ! -e pytest.py"
    assert box.exec(gone, timeout_s=30).exit_code == 0


def test_an_edit_of_a_test_file_is_refused_and_leaves_it_as_it_was(
    box: Sandbox, base: Path
) -> None:
    tools = _tools(box, base)
    status, observation = _call(
        tools, "edit_file", path="tests/test_calc.py", old="== 3", new="== -1"
    )
    assert status == "refused", observation
    assert "tests/test_calc.py is an existing test file" in observation
    assert box.read_file("tests/test_calc.py").decode() == FILES["tests/test_calc.py"]


def test_a_symlink_to_a_test_file_is_judged_by_its_target(box: Sandbox, base: Path) -> None:
    tools = _tools(box, base)
    status, observation = _call(tools, "write_file", path="link_to_test.py", content=WEAKENED)
    assert status == "refused", observation
    assert "tests/test_calc.py is an existing test file" in observation
    assert box.read_file("tests/test_calc.py").decode() == FILES["tests/test_calc.py"]


def test_product_code_new_tests_and_non_test_config_edits_are_allowed(
    box: Sandbox, base: Path
) -> None:
    tools = _tools(box, base)
    fixed = "def add(a, b):\n    return a + b\n"
    assert _call(tools, "write_file", path="calc/__init__.py", content=fixed)[0] == "ok"
    regression = "from calc import add\n\n\ndef test_negative():\n    assert add(-1, 1) == 0\n"
    assert _call(tools, "write_file", path="tests/test_regression.py", content=regression)[0] == (
        "ok"
    )
    # pyproject.toml outside its pytest section is product metadata.
    bumped = FILES["pyproject.toml"].replace('"1.0"', '"1.1"')
    assert _call(tools, "write_file", path="pyproject.toml", content=bumped)[0] == "ok"
    assert box.read_file("calc/__init__.py").decode() == fixed
    assert box.read_file("tests/test_regression.py").decode() == regression
    assert box.read_file("pyproject.toml").decode() == bumped
    # ...but its pytest section is test configuration.
    loosened = FILES["pyproject.toml"].replace('"-q"', '"-q -k not_add"')
    status, observation = _call(tools, "write_file", path="pyproject.toml", content=loosened)
    assert status == "refused" and "pyproject.toml is test configuration" in observation


def test_allow_test_edits_lets_the_covered_paths_through(box: Sandbox, base: Path) -> None:
    tools = _tools(box, base, allow=("tests/test_calc.py",))
    assert _call(tools, "write_file", path="tests/test_calc.py", content=WEAKENED)[0] == "ok"
    assert box.read_file("tests/test_calc.py").decode() == WEAKENED
    assert _call(tools, "write_file", path="tests/helpers.py", content="ONE = 2\n")[0] == "refused"


@pytest.mark.parametrize(
    "command",
    [
        "sed -i 's/== 3/== -1/' tests/test_calc.py",
        "echo 'def test_add(): pass' > tests/test_calc.py",
        "rm tests/test_calc.py",
        "rm -rf tests",
        "rm tests/*.py",
        "mv tests/test_calc.py tests/test_calc.py.off",
        "cd tests && truncate -s 0 test_calc.py",
        "printf '[pytest]\\naddopts = -k nothing\\n' > pytest.ini",
        "echo 'collect_ignore = [\"tests\"]' > conftest.py",
    ],
)
def test_commands_that_change_tests_are_refused_before_they_run(
    box: Sandbox, base: Path, command: str
) -> None:
    tools = _tools(box, base)
    before = box.exec("ls -R; cat tests/test_calc.py pytest.ini", timeout_s=30).output
    status, observation = _call(tools, "run_command", command=command)
    assert status == "refused", observation
    assert observation.startswith("Refused (test_edit): `") and "was not run" in observation
    assert box.exec("ls -R; cat tests/test_calc.py pytest.ini", timeout_s=30).output == before


@pytest.mark.parametrize(
    "command",
    [
        "python -m pytest -q tests/test_calc.py > out.txt; cat out.txt",
        "cat > tests/test_new_case.py <<'EOF'\ndef test_new():\n    assert 1\nEOF",
        "sed -i 's/a - b/a + b/' calc/__init__.py",
        "cp tests/test_calc.py copy_of_the_test.py",
    ],
)
def test_commands_that_leave_existing_tests_alone_run(
    box: Sandbox, base: Path, command: str
) -> None:
    tools = _tools(box, base)
    status, observation = _call(tools, "run_command", command=command)
    assert status in ("ok", "failed"), observation
    assert "test_edit" not in observation
    assert box.read_file("tests/test_calc.py").decode() == FILES["tests/test_calc.py"]


def test_without_a_guard_the_toolbox_writes_tests_as_before(box: Sandbox) -> None:
    # The build mode has no base tests to protect and passes no guard.
    tools = Toolbox(box, command_timeout_s=30, protected_paths=DEFAULT_PROTECTED_PATHS)
    assert _call(tools, "write_file", path="tests/test_calc.py", content=WEAKENED)[0] == "ok"
    assert box.read_file("tests/test_calc.py").decode() == WEAKENED


def _tree_guard(files: dict[str, str]) -> TestEditGuard:
    return TestEditGuard.for_tree(
        files, files.get, test_command="python -m pytest", setup_command=None
    )


def _command(guard: TestEditGuard, command: str) -> str | None:
    reasons = [guard.command_refusal(command, t) for t in write_targets(command)]
    return next((r for r in reasons if r), None)


NESTED = {
    "setup.py": "",
    "src/pkg/core.py": "",
    "src/pkg/tests/test_core.py": "def test_core(): pass\n",
    "tests/fixtures/sample.log": "",
    "tests/test_app.py": "def test_app(): pass\n",
}


@pytest.mark.parametrize(
    "command",
    [
        "sed -i 's/a/b/' *.py",  # a shell `*` never crosses a `/`
        "sed -i 's/a/b/' src/*.py",
        "rm -f *.log",
        "rm -rf node_modules/.cache",  # nothing the base has
        "rm -f src/pkg/__pycache__/core.cpython-311.pyc",
        "echo '{}' > package.json",  # a new package.json is judged by content, elsewhere
        "cat > pyproject.toml <<'EOF'\n[project]\nname = \"x\"\nEOF",
    ],
)
def test_commands_that_reach_no_test_file_are_not_refused(command: str) -> None:
    assert _command(_tree_guard(NESTED), command) is None


@pytest.mark.parametrize(
    ("command", "path"),
    [
        ("sed -i 's/a/b/' src/pkg/tests/*.py", "src/pkg/tests/test_core.py"),
        ("rm -rf src/*", "src/pkg/tests/test_core.py"),
        ("rm -rf .", "src/pkg/tests/test_core.py"),
        ("chmod -R u+w /workspace", "src/pkg/tests/test_core.py"),
        ("rm -r tests", "tests/fixtures/sample.log"),
    ],
)
def test_commands_that_reach_a_test_file_through_a_glob_or_a_tree_are_refused(
    command: str, path: str
) -> None:
    reason = _command(_tree_guard(NESTED), command)
    assert reason is not None and f"{path} is an existing test file" in reason


def test_impossible_paths_are_judged_as_absent_not_raised() -> None:
    def reader(rel: str) -> str | None:
        raise OSError(36, "File name too long")

    guard = TestEditGuard.for_tree([], reader, test_command="pytest", setup_command=None)
    assert guard.refusal("a" * 300, "x") is None
    assert guard.name_refusal("b" * 300) is None


def test_writing_a_test_files_base_text_back_is_allowed() -> None:
    guard = _tree_guard(NESTED)
    assert guard.refusal("tests/test_app.py", NESTED["tests/test_app.py"]) is None
    assert guard.refusal("tests/test_app.py", "def test_app(): assert 0\n") is not None


def test_an_edit_of_a_test_file_is_refused_before_its_text_is_looked_for(
    box: Sandbox, base: Path
) -> None:
    status, observation = _call(
        _tools(box, base), "edit_file", path="tests/test_calc.py", old="not there", new="x"
    )
    assert status == "refused" and "is an existing test file" in observation
    assert "was not found" not in observation


@pytest.mark.parametrize("command", ["echo x >> link_to_test.py", "truncate -s 0 link_to_test.py"])
def test_a_command_writing_through_a_symlink_is_judged_by_the_target(
    box: Sandbox, base: Path, command: str
) -> None:
    status, observation = _call(_tools(box, base), "run_command", command=command)
    assert status == "refused", observation
    assert "tests/test_calc.py is an existing test file" in observation
    assert box.read_file("tests/test_calc.py").decode() == FILES["tests/test_calc.py"]
