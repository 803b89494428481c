"""Which paths of a repository are tests, test configuration, or dependency and setup inputs.

Verification judges a fix with the original tests, run the original way, on dependencies
installed from the original inputs. This module decides, for each file a patch changes,
which of those it touches. It is pure: the caller hands in the base tree's file list, a
reader for base files, and the old and new text of each changed file.

- Test files: test modules and anything under a test directory (`tests/`, `__tests__/`...).
- Test configuration: conftest.py anywhere, pytest.ini, the pytest sections of
  setup.cfg/tox.ini/pyproject.toml (a change elsewhere in those files is not one), plugin
  modules named by `pytest_plugins` or `-p` in the base configuration, interpreter start-up
  hooks (sitecustomize.py, usercustomize.py, *.pth), package.json's test scripts and the
  node preloads (`--require`/`--import`/`--loader`) the base test script names, mocha, jest
  and vitest configuration, files the test command names, and anything inside an installed
  environment (`.venv/`, `node_modules/`).
- Dependency and setup inputs: requirements and constraints files, lock files, the install
  sections of pyproject.toml/setup.cfg/setup.py, package.json dependencies and install
  scripts, go.mod/go.sum, Cargo.toml/Cargo.lock, and every file the setup command names.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
import sys
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

ALLOW_TEST_EDITS_HINT = "(a repository can allow it with allow_test_edits in .loopwright.yml)"
"""How a repository lets a fix change tests, as every refusal and finding says it."""

Reader = Callable[[str], str | None]
"""Returns the text of a base file by relative path, or None when it does not exist."""

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
_STARTUP_HOOKS = {"sitecustomize.py", "usercustomize.py"}
_PYTEST_INI = {"pytest.ini", ".pytest.ini"}
_JS_TEST_CONFIG = re.compile(
    r"^(?:\.mocharc(?:\.\w+)?|(?:jest|vitest|vite|ava|karma)\.config\.\w+|jest\.setup\.\w+"
    r"|karma\.conf\.\w+|\.taprc|\.c8rc(?:\.json)?|\.nycrc(?:\.json)?)$"
)
_DEPENDENCY_FILES = re.compile(
    r"^(?:requirements[\w.-]*\.(?:txt|in)|constraints[\w.-]*\.txt|Pipfile|Pipfile\.lock"
    r"|poetry\.lock|pdm\.lock|uv\.lock|setup\.py|package-lock\.json|npm-shrinkwrap\.json"
    r"|yarn\.lock|pnpm-lock\.yaml|pnpm-workspace\.yaml|bun\.lockb?|\.npmrc|\.yarnrc(?:\.yml)?"
    r"|go\.mod|go\.sum|go\.work|go\.work\.sum|Cargo\.toml|Cargo\.lock|Gemfile|Gemfile\.lock)$"
)
_DEPENDENCY_DIRS = {"requirements", ".cargo"}
_PACKAGE_TEST_KEYS = ("jest", "mocha", "ava", "vitest", "c8", "nyc", "tap")
_PACKAGE_TEST_SCRIPTS = ("test", "pretest", "posttest")
_PACKAGE_DEPENDENCY_KEYS = (
    "dependencies",
    "devDependencies",
    "optionalDependencies",
    "peerDependencies",
    "bundleDependencies",
    "bundledDependencies",
    "overrides",
    "resolutions",
    "workspaces",
    "packageManager",
)
_PACKAGE_INSTALL_SCRIPTS = (
    "preinstall",
    "install",
    "postinstall",
    "prepare",
    "preprepare",
    "postprepare",
    "prepublish",
)
_PYPROJECT_DEPENDENCY_KEYS = (
    ("build-system",),
    ("project", "dependencies"),
    ("project", "optional-dependencies"),
    ("project", "entry-points"),
    ("project", "scripts"),
    ("dependency-groups",),
    ("tool", "poetry", "dependencies"),
    ("tool", "poetry", "dev-dependencies"),
    ("tool", "poetry", "group"),
    ("tool", "poetry", "source"),
    ("tool", "pdm"),
    ("tool", "uv"),
    ("tool", "hatch", "envs"),
    ("tool", "setuptools"),
)
_NODE_PRELOAD_FLAGS = ("--require", "-r", "--import", "--loader", "--experimental-loader")
_ADDOPTS_PLUGIN = re.compile(r"(?:^|\s)-p\s*(?:=\s*)?([\w.]+)")
_PYTEST_PLUGINS = re.compile(r"\bpytest_plugins\s*=\s*(.+)")
_PLUGIN_NAME = re.compile(r"['\"]([\w.]+)['\"]")
_INI_SECTION = re.compile(r"^\s*\[([^\]]+)\]\s*$")
_COMMAND_WORD = re.compile(r"^[\w./@+-]+$")


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


@dataclass(frozen=True)
class BaseConfig:
    """What the base tree's own configuration names: plugins, preloads, command files."""

    plugin_paths: frozenset[str] = frozenset()
    """Modules loaded as pytest plugins (`pytest_plugins`, `-p`), as file paths."""
    preload_paths: frozenset[str] = frozenset()
    """Files node preloads for the tests (`--require`, `--import`, `--loader`)."""
    test_command_files: frozenset[str] = frozenset()
    """Repository files the test command names (a script, a Makefile)."""
    setup_files: frozenset[str] = frozenset()
    """Repository files the setup command names, and the files those name in turn."""


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


def read_base_config(
    paths: Iterable[str],
    read: Reader,
    *,
    test_command: str | None,
    setup_command: str | None,
    test_script: str | None = None,
) -> BaseConfig:
    """The plugins, preloads and command files the base tree's configuration names."""
    known = set(paths)
    plugins: set[str] = set()
    for ini, section in (
        ("pytest.ini", "pytest"),
        (".pytest.ini", "pytest"),
        ("tox.ini", "pytest"),
        ("setup.cfg", "tool:pytest"),
    ):
        text = read(ini)
        if text:
            body = "\n".join(_ini_sections(text).get(section, []))
            plugins.update(_ADDOPTS_PLUGIN.findall(body))
    pyproject = _toml(read("pyproject.toml"))
    options = pyproject.get("tool", {}).get("pytest", {}).get("ini_options", {})
    addopts = options.get("addopts", "") if isinstance(options, dict) else ""
    if isinstance(addopts, list):
        addopts = " ".join(str(a) for a in addopts)
    plugins.update(_ADDOPTS_PLUGIN.findall(str(addopts)))
    for path in known:
        if path.rsplit("/", 1)[-1] == "conftest.py":
            for match in _PYTEST_PLUGINS.finditer(read(path) or ""):
                plugins.update(_PLUGIN_NAME.findall(match.group(1)))
    if test_command:
        plugins.update(_ADDOPTS_PLUGIN.findall(test_command))
    plugin_paths = {c for name in plugins for c in _module_files(name) if c in known}
    script = test_script if test_script is not None else _package_test_script(read)
    preloads = {
        path
        for command in (script, test_command)
        if command
        for path in _node_preloads(command)
        if path in known
    }
    return BaseConfig(
        plugin_paths=frozenset(plugin_paths),
        preload_paths=frozenset(preloads),
        test_command_files=frozenset(_command_files(test_command, known, read, depth=0)),
        setup_files=frozenset(_command_files(setup_command, known, read, depth=1)),
    )


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
        test_config, dependency, product = _ini_change(name, old, new)
    elif "/" not in path and name == "pyproject.toml":
        test_config, dependency, product = _pyproject_change(old, new)
    elif "/" not in path and name == "package.json":
        test_config, dependency, product = _package_change(old, new)
    else:
        product = not test
    if path in base.setup_files:
        dependency.append("the setup command runs or reads it")
        product = False
    elif not dependency and _is_dependency_file(path):
        dependency.append("the setup phase installs from it")
        product = False
    return Change(path, test, tuple(test_config), tuple(dependency), product and not test)


def _is_dependency_file(path: str) -> bool:
    parts = path.strip("/").split("/")
    if len(parts) == 1:
        return bool(_DEPENDENCY_FILES.match(parts[0]))
    return parts[0] in _DEPENDENCY_DIRS and len(parts) == 2


# --- file formats ----------------------------------------------------------------------------


def _ini_sections(text: str) -> dict[str, list[str]]:
    """Section name → its non-blank, non-comment lines (lenient: duplicates merge)."""
    sections: dict[str, list[str]] = {"": []}
    current = ""
    for line in text.splitlines():
        match = _INI_SECTION.match(line)
        if match:
            current = match.group(1).strip()
            sections.setdefault(current, [])
            continue
        stripped = line.rstrip()
        if stripped.strip() and not stripped.lstrip().startswith(("#", ";")):
            sections[current].append(stripped)
    return sections


def _ini_change(name: str, old: str | None, new: str | None) -> tuple[list[str], list[str], bool]:
    before, after = _ini_sections(old or ""), _ini_sections(new or "")
    changed = sorted(s for s in set(before) | set(after) if before.get(s) != after.get(s))
    test_config, dependency = [], []
    product = False
    for section in changed:
        if section in ("pytest", "tool:pytest") or section.startswith(("tox", "testenv")):
            test_config.append(f"the [{section}] section of {name} configures the tests")
        elif name == "setup.cfg" and (section.startswith("options") or section == "metadata"):
            dependency.append(f"the [{section}] section of setup.cfg is read by the install")
        else:
            product = True
    return test_config, dependency, product


def _pyproject_change(old: str | None, new: str | None) -> tuple[list[str], list[str], bool]:
    before, after = _toml(old), _toml(new)
    if (old and not before) or (new and not after):
        # Unreadable TOML cannot be split into sections; assume the worst of both.
        why = (
            "pyproject.toml is not valid TOML, so its test and install sections cannot be "
            "told apart"
        )
        return [why], [why], False
    test_config, dependency = [], []
    if _dig(before, ("tool", "pytest")) != _dig(after, ("tool", "pytest")):
        test_config.append("the [tool.pytest] section of pyproject.toml configures pytest")
    seen: set[tuple[str, ...]] = set()
    for key in _PYPROJECT_DEPENDENCY_KEYS:
        if _dig(before, key) != _dig(after, key):
            seen.add(key)
            dependency.append(
                f"the [{'.'.join(key)}] section of pyproject.toml is read by the install"
            )
    covered = [("tool", "pytest"), *_PYPROJECT_DEPENDENCY_KEYS]
    product = _strip(before, covered) != _strip(after, covered)
    return test_config, dependency, product


def _package_change(old: str | None, new: str | None) -> tuple[list[str], list[str], bool]:
    before, after = _json(old), _json(new)
    if before is None or after is None:
        why = "package.json is not a valid JSON object, so its scripts cannot be told apart"
        return [why], [why], False
    test_config, dependency = [], []
    old_scripts, new_scripts = _scripts(before), _scripts(after)
    for script in _PACKAGE_TEST_SCRIPTS:
        if old_scripts.get(script) != new_scripts.get(script):
            test_config.append(f"package.json's scripts.{script} decides how the tests run")
    for key in _PACKAGE_TEST_KEYS:
        if before.get(key) != after.get(key):
            test_config.append(f"package.json's `{key}` configures the test runner")
    for key in _PACKAGE_DEPENDENCY_KEYS:
        if before.get(key) != after.get(key):
            dependency.append(f"package.json's `{key}` is read by the install")
    for script in _PACKAGE_INSTALL_SCRIPTS:
        if old_scripts.get(script) != new_scripts.get(script):
            dependency.append(f"package.json's scripts.{script} runs during the install")
    covered_scripts = set(_PACKAGE_TEST_SCRIPTS) | set(_PACKAGE_INSTALL_SCRIPTS)
    rest = {k for k in set(before) | set(after)} - {"scripts", *_PACKAGE_TEST_KEYS}
    rest -= set(_PACKAGE_DEPENDENCY_KEYS)
    product = any(before.get(k) != after.get(k) for k in rest) or any(
        old_scripts.get(k) != new_scripts.get(k)
        for k in set(old_scripts) | set(new_scripts)
        if k not in covered_scripts
    )
    return test_config, dependency, product


def _scripts(package: Mapping[str, Any]) -> dict[str, Any]:
    scripts = package.get("scripts")
    return dict(scripts) if isinstance(scripts, dict) else {}


def _package_test_script(read: Reader) -> str | None:
    package = _json(read("package.json"))
    script = _scripts(package or {}).get("test")
    return script if isinstance(script, str) else None


def _toml(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return {}


def _json(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _dig(data: Mapping[str, Any], key: tuple[str, ...]) -> Any:
    value: Any = data
    for part in key:
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _strip(data: Mapping[str, Any], keys: Iterable[tuple[str, ...]]) -> dict[str, Any]:
    """A deep copy of `data` without the given key paths (and the tables they emptied)."""
    copy: dict[str, Any] = json.loads(json.dumps(data, default=str))
    for key in keys:
        node: Any = copy
        for part in key[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(key[-1], None)
    return _prune(copy)


def _prune(data: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            value = _prune(value)
            if not value:
                continue
        out[key] = value
    return out


# --- commands --------------------------------------------------------------------------------


def _module_files(dotted: str) -> list[str]:
    """The files a dotted module name can be, at the root or under src/."""
    rel = dotted.replace(".", "/")
    return [f"{rel}.py", f"{rel}/__init__.py", f"src/{rel}.py", f"src/{rel}/__init__.py"]


def _words(command: str) -> list[str]:
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|()<>")
        lexer.whitespace_split = True
        return list(lexer)
    except ValueError:
        return command.split()


def _node_preloads(command: str) -> list[str]:
    words = _words(command)
    found: list[str] = []
    for index, word in enumerate(words):
        for flag in _NODE_PRELOAD_FLAGS:
            value = None
            if word == flag and index + 1 < len(words):
                value = words[index + 1]
            elif word.startswith(flag + "=") and flag.startswith("--"):
                value = word[len(flag) + 1 :]
            if value:
                found.append(_relative(value))
    for word in words:
        if word.startswith("NODE_OPTIONS="):
            found.extend(_node_preloads(word.split("=", 1)[1]))
    return found


def _relative(value: str) -> str:
    value = value.removeprefix("file:")
    return posixpath.normpath(value.removeprefix("./")) if value else value


def _command_files(command: str | None, known: set[str], read: Reader, *, depth: int) -> set[str]:
    """Repository files a shell command names (and, to `depth`, the files they name)."""
    if not command:
        return set()
    found: set[str] = set()
    words = _words(command)
    for index, word in enumerate(words):
        if word == "make" or word.endswith("/make"):
            found.update(n for n in ("GNUmakefile", "makefile", "Makefile") if n in known)
        if word in ("-f", "--file", "-C") and index + 1 < len(words) and words[index + 1] in known:
            found.add(words[index + 1])
        for candidate in (word, word.split("=", 1)[-1]):
            if not _COMMAND_WORD.match(candidate):
                continue
            rel = _relative(candidate)
            if rel in known and not rel.startswith(".."):
                found.add(rel)
    if depth > 0:
        for path in list(found):
            text = read(path) or ""
            if path.endswith(".txt"):
                # requirements files include others with -r/-c lines
                text = " ".join(
                    line for line in text.splitlines() if line.strip().startswith(("-r", "-c"))
                )
            found |= _command_files(text.replace("\n", " ; "), known, read, depth=depth - 1)
    return found


# --- shadowing -------------------------------------------------------------------------------

_RUNNER_MODULES = {"pytest", "_pytest", "pluggy", "py", "iniconfig", "packaging", "conftest"}


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


# --- the verification tree -------------------------------------------------------------------

Status = Literal["added", "deleted", "modified"]


@dataclass(frozen=True)
class Routed:
    """One changed file and where verification puts it."""

    path: str
    status: Status
    change: Change
    phase: Literal["main", "dependency", "new_tests", "base"]
    """main: applied before the original tests run; dependency: applied before setup (when
    dependency changes are allowed); new_tests: applied only for the separate pass of new
    tests; base: withheld, the base version stays."""
    allowed: bool = False
    """Whether the repository's allow_test_edits covers the path."""


def route(
    path: str,
    status: Status,
    change: Change,
    *,
    test_edit_allowed: bool,
    dependency_allowed: bool,
) -> Routed:
    """Where the changed file `path` goes in verification (see `Routed.phase`)."""
    if change.touches_tests:
        if status == "added" and change.test and not change.test_config:
            if is_test_module(path) or not test_edit_allowed:
                return Routed(path, status, change, "new_tests", test_edit_allowed)
            return Routed(path, status, change, "main", True)
        return Routed(
            path, status, change, "main" if test_edit_allowed else "base", test_edit_allowed
        )
    if change.dependency and dependency_allowed:
        return Routed(path, status, change, "dependency")
    return Routed(path, status, change, "main")


def new_tests_command(
    command: str, runner: str, files: Sequence[str], preloads: Sequence[str]
) -> str | None:
    """A command that runs only `files` with the suite's runner, in a process of their own;
    None when the runner cannot be pointed at single files."""
    py = [f for f in files if f.endswith(".py")]
    js = [f for f in files if f.endswith((".js", ".mjs", ".cjs"))]
    if runner == "pytest" and py:
        match = _PYTEST_INVOCATION.match(command)
        if match:
            return f"{match.group(1)} {shlex.join(py)}"
        return None
    if runner in ("node", "npm") and js:
        flags = [
            word
            for p in preloads
            for word in (
                "--import" if p.endswith(".mjs") else "--require",
                p if p.startswith("/") else "./" + p,
            )
        ]
        return shlex.join(["node", "--test", *flags, *js])
    return None


_PYTEST_INVOCATION = re.compile(r"^(.*?(?:-m\s+pytest|(?:^|[\s/])(?:pytest|py\.test)))(?=\s|$)")
