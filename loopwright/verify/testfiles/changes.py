"""What one changed file touches: tests, test configuration, dependency and setup inputs,
or product code only."""

from __future__ import annotations

import re
from dataclasses import dataclass

from loopwright.verify.testfiles.base import BaseConfig
from loopwright.verify.testfiles.paths import (
    in_environment,
    is_compiled,
    is_dependency_file,
    is_test_path,
    shadowed_module,
)
from loopwright.verify.testfiles.sections import ini_change, package_change, pyproject_change

_STARTUP_HOOKS = {"sitecustomize.py", "usercustomize.py"}
_PYTEST_INI = {"pytest.ini", ".pytest.ini"}
_JS_TEST_CONFIG = re.compile(
    r"^(?:\.mocharc(?:\.\w+)?|(?:jest|vitest|vite|ava|karma)\.config\.\w+|jest\.setup\.\w+"
    r"|karma\.conf\.\w+|\.taprc|\.c8rc(?:\.json)?|\.nycrc(?:\.json)?)$"
)


@dataclass(frozen=True)
class Change:
    """What one changed file touches; an empty change is product code only."""

    path: str
    test: bool = False
    """A test file (module, helper or fixture under a test directory)."""
    test_config: tuple[str, ...] = ()
    """Why the change alters how the tests are collected or run, one phrase each."""
    dependency: tuple[str, ...] = ()
    """Why the change alters what the setup phase installs or runs, one phrase each."""
    product: bool = False
    """Whether anything outside test files and test configuration changed."""

    @property
    def touches_tests(self) -> bool:
        return self.test or bool(self.test_config)


def classify(path: str, old: str | None, new: str | None, base: BaseConfig) -> Change:
    """What the change of `path` from `old` to `new` (None: absent) touches."""
    name = path.rsplit("/", 1)[-1]
    test_config: list[str] = []
    dependency: list[str] = []
    product = False
    test = is_test_path(path) and name != "conftest.py"
    if in_environment(path):
        test_config.append("it lies inside an installed environment the tests load")
    elif is_compiled(path):
        test_config.append(
            "it is compiled code, which the interpreter loads in place of the source and a "
            "review cannot read"
        )
    elif name == "conftest.py":
        test_config.append("conftest.py files configure pytest")
    elif name in _PYTEST_INI and "/" not in path:
        test_config.append(f"{name} configures pytest")
    elif name in _STARTUP_HOOKS or name.endswith(".pth"):
        test_config.append("the interpreter runs it at start-up, before the tests")
    elif shadowed_module(path):
        test_config.append(
            f"it shadows the module `{shadowed_module(path)}` that the test run imports"
        )
    elif path in base.plugin_paths:
        test_config.append("the base configuration loads it as a pytest plugin")
    elif path in base.preload_paths:
        test_config.append("the base test script preloads it")
    elif _JS_TEST_CONFIG.match(name):
        test_config.append(f"{name} configures the JavaScript test runner")
    elif path in base.test_command_files:
        test_config.append("the test command runs it")
    elif "/" not in path and name in ("setup.cfg", "tox.ini"):
        test_config, dependency, product = ini_change(name, old, new)
    elif "/" not in path and name == "pyproject.toml":
        test_config, dependency, product = pyproject_change(old, new)
    elif "/" not in path and name == "package.json":
        test_config, dependency, product = package_change(old, new)
    else:
        product = not test
    if path in base.setup_files:
        dependency.append("the setup command runs or reads it")
        product = False
    elif not dependency and is_dependency_file(path):
        dependency.append("the setup phase installs from it")
        product = False
    return Change(path, test, tuple(test_config), tuple(dependency), product and not test)
