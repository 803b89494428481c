"""What a path alone says: a test file, a test module a runner collects, compiled code, an
installed environment, a dependency or setup input, or a module the test run imports."""

from __future__ import annotations

import re
import sys

_TEST_DIRS = {"tests", "test", "__tests__", "spec", "testdata"}
_TEST_NAME = re.compile(
    r"^(?:test_.*\.py|.*_test\.py|tests\.py|conftest\.py|.*_test\.go"
    r"|.*\.(?:test|spec)\.(?:js|jsx|ts|tsx|mjs|cjs|mts|cts))$"
)
# Test modules a runner collects by name (the rest of a test directory is support files).
_TEST_MODULE = re.compile(
    r"^(?:test_.*\.py|.*_test\.py|.*\.(?:test|spec)\.(?:js|mjs|cjs)|test\.(?:js|mjs|cjs))$"
)
_NODE_TEST_DIR_MODULE = re.compile(r"^[^.].*\.(?:js|mjs|cjs)$")
_ENVIRONMENT_DIRS = {".venv", "venv", "node_modules", "site-packages", "dist-packages", ".tox"}
_COMPILED_SUFFIXES = (".pyc", ".pyo", ".so", ".pyd", ".node", ".dylib")
_DEPENDENCY_FILES = re.compile(
    r"^(?:requirements[\w.-]*\.(?:txt|in)|constraints[\w.-]*\.txt|Pipfile|Pipfile\.lock"
    r"|poetry\.lock|pdm\.lock|uv\.lock|setup\.py|package-lock\.json|npm-shrinkwrap\.json"
    r"|yarn\.lock|pnpm-lock\.yaml|pnpm-workspace\.yaml|bun\.lockb?|\.npmrc|\.yarnrc(?:\.yml)?"
    r"|go\.mod|go\.sum|go\.work|go\.work\.sum|Cargo\.toml|Cargo\.lock|Gemfile|Gemfile\.lock)$"
)
_DEPENDENCY_DIRS = {"requirements", ".cargo"}
_RUNNER_MODULES = {"pytest", "_pytest", "pluggy", "py", "iniconfig", "packaging", "conftest"}


def is_test_path(path: str) -> bool:
    """Whether `path` (relative, slash-separated) holds tests or test fixtures."""
    parts = path.strip("/").split("/")
    return any(part in _TEST_DIRS for part in parts[:-1]) or bool(_TEST_NAME.match(parts[-1]))


def is_test_module(path: str) -> bool:
    """Whether `path` is a test module a runner collects (not a helper or fixture file)."""
    parts = path.strip("/").split("/")
    name = parts[-1]
    if name == "conftest.py":
        return False
    if _TEST_MODULE.match(name):
        return True
    # node --test runs every .js file under a `test` directory.
    return any(p == "test" for p in parts[:-1]) and bool(_NODE_TEST_DIR_MODULE.match(name))


def is_compiled(path: str) -> bool:
    """Whether `path` is bytecode or a native module an import would load (a `.pyc` under
    `__pycache__` is used in place of its source when it is marked as not to be checked)."""
    parts = path.strip("/").split("/")
    return "__pycache__" in parts[:-1] or parts[-1].endswith(_COMPILED_SUFFIXES)


def in_environment(path: str) -> bool:
    """Whether `path` lies inside an installed environment (a virtualenv, node_modules)."""
    return any(part in _ENVIRONMENT_DIRS for part in path.strip("/").split("/")[:-1])


def is_dependency_file(path: str) -> bool:
    """Whether `path` is a requirements, lock or manifest file the setup phase installs from."""
    parts = path.strip("/").split("/")
    if len(parts) == 1:
        return bool(_DEPENDENCY_FILES.match(parts[0]))
    return parts[0] in _DEPENDENCY_DIRS and len(parts) == 2


def shadowed_module(path: str) -> str | None:
    """The module of the test run (the standard library, pytest and what it imports) that a
    top-level Python file at `path` would shadow, or None."""
    parts = path.strip("/").split("/")
    if parts[0] == "src":
        parts = parts[1:]
    if len(parts) == 1 and parts[0].endswith(".py"):
        name = parts[0][:-3]
    elif len(parts) == 2 and parts[1] == "__init__.py":
        name = parts[0]
    else:
        return None
    if name in _RUNNER_MODULES or name in sys.stdlib_module_names:
        return name
    return None
