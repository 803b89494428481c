"""What the base tree's own configuration names: pytest plugins, node preloads, and the
files the test and setup commands use."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from loopwright.verify.testfiles.commands import command_files, node_preloads
from loopwright.verify.testfiles.formats import (
    Reader,
    dig,
    ini_sections,
    package_test_script,
    toml_table,
)

_ADDOPTS_PLUGIN = re.compile(r"(?:^|\s)-p\s*(?:=\s*)?([\w.]+)")
_PYTEST_PLUGINS = re.compile(r"\bpytest_plugins\s*=\s*(.+)")
_PLUGIN_NAME = re.compile(r"['\"]([\w.]+)['\"]")


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
            body = "\n".join(ini_sections(text).get(section, []))
            plugins.update(_ADDOPTS_PLUGIN.findall(body))
    pyproject = toml_table(read("pyproject.toml"))
    options = dig(pyproject, ("tool", "pytest", "ini_options"))
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
    script = test_script if test_script is not None else package_test_script(read)
    preloads = {
        path
        for command in (script, test_command)
        if command
        for path in node_preloads(command)
        if path in known
    }
    return BaseConfig(
        plugin_paths=frozenset(plugin_paths),
        preload_paths=frozenset(preloads),
        test_command_files=frozenset(command_files(test_command, known, read, depth=0)),
        setup_files=frozenset(command_files(setup_command, known, read, depth=1)),
    )


def _module_files(dotted: str) -> list[str]:
    """The files a dotted module name can be, at the root or under src/."""
    rel = dotted.replace(".", "/")
    return [f"{rel}.py", f"{rel}/__init__.py", f"src/{rel}.py", f"src/{rel}/__init__.py"]
