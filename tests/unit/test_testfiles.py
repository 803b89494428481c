"""Which changed files are tests, test configuration, or dependency and setup inputs."""

from __future__ import annotations

import pytest

from loopwright.config import ConfigError, Settings, effective_network
from loopwright.verify.testfiles import (
    BaseConfig,
    classify,
    is_test_module,
    is_test_path,
    new_tests_command,
    read_base_config,
    route,
    shadowed_module,
)

BASE_FILES = {
    "pytest.ini": "[pytest]\ntestpaths = tests\naddopts = -p shop_testing -q\n",
    "tests/conftest.py": 'pytest_plugins = ["tests.helpers_plugin", "fixtures.db"]\n',
    "tests/helpers_plugin.py": "",
    "fixtures/db.py": "",
    "shop_testing.py": "",
    "shop/__init__.py": "",
    "package.json": '{"scripts": {"test": "node --require ./test/setup.js --import=./hooks.mjs '
    '--test"}}',
    "test/setup.js": "",
    "hooks.mjs": "",
    "scripts/setup.sh": "pip install -r requirements-dev.txt\nsh scripts/lib.sh\n",
    "scripts/lib.sh": "",
    "requirements-dev.txt": "-r requirements.txt\n-c constraints/pins.txt\n",
    "constraints/pins.txt": "",
    "scripts/run-tests.sh": "",
}


def base_config(
    test_command: str = "bash scripts/run-tests.sh", setup: str = "bash scripts/setup.sh"
) -> BaseConfig:
    return read_base_config(
        BASE_FILES, BASE_FILES.get, test_command=test_command, setup_command=setup
    )


def test_base_config_names_plugins_preloads_and_command_files() -> None:
    config = base_config()
    assert config.plugin_paths == {"tests/helpers_plugin.py", "fixtures/db.py", "shop_testing.py"}
    assert config.preload_paths == {"test/setup.js", "hooks.mjs"}
    assert config.test_command_files == {"scripts/run-tests.sh"}
    assert config.setup_files == {"scripts/setup.sh", "requirements-dev.txt", "scripts/lib.sh"}


@pytest.mark.parametrize(
    ("path", "old", "new", "test", "config_words", "dependency_words", "product"),
    [
        ("tests/test_x.py", "a", "b", True, None, None, False),
        ("conftest.py", None, "x", False, "conftest", None, False),
        ("src/pkg/deep/conftest.py", "a", "b", False, "conftest", None, False),
        ("pytest.ini", "[pytest]\n", "[pytest]\naddopts=-p x\n", False, "pytest", None, False),
        ("sitecustomize.py", None, "import os\n", False, "start-up", None, False),
        ("lib/usercustomize.py", None, "x", False, "start-up", None, False),
        ("evil.pth", None, "import x\n", False, "start-up", None, False),
        ("shop/__pycache__/totals.cpython-311.pyc", None, "x", False, "compiled", None, False),
        ("shop/totals.pyc", None, "x", False, "compiled", None, False),
        ("shop/totals.cpython-311-x86_64-linux-gnu.so", None, "x", False, "compiled", None, False),
        ("src/slugify.node", None, "x", False, "compiled", None, False),
        ("pytest.py", None, "x", False, "shadows the module `pytest`", None, False),
        ("src/json/__init__.py", None, "x", False, "shadows the module `json`", None, False),
        (".venv/lib/python3.11/site-packages/x.py", None, "x", False, "environment", None, False),
        ("node_modules/chai/index.js", "a", "b", False, "environment", None, False),
        ("fixtures/db.py", "", "x = 1\n", False, "plugin", None, False),
        ("shop_testing.py", "", "x = 1\n", False, "plugin", None, False),
        ("test/setup.js", "", "x", True, "preloads", None, False),
        ("hooks.mjs", "", "x", False, "preloads", None, False),
        (".mocharc.yml", None, "require: x", False, "JavaScript test runner", None, False),
        ("jest.config.js", "a", "b", False, "JavaScript test runner", None, False),
        ("scripts/run-tests.sh", "a", "b", False, "test command runs it", None, False),
        ("shop/cart.py", "a", "b", False, None, None, True),
        ("requirements.txt", "a", "b", False, None, "installs", False),
        ("requirements/dev.txt", "a", "b", False, None, "installs", False),
        ("poetry.lock", "a", "b", False, None, "installs", False),
        ("package-lock.json", "{}", "{ }", False, None, "installs", False),
        ("go.sum", "a", "b", False, None, "installs", False),
        ("Cargo.toml", "a", "b", False, None, "installs", False),
        ("scripts/setup.sh", "a", "b", False, None, "setup command", False),
        ("scripts/lib.sh", "a", "b", False, None, "setup command", False),
        ("setup.py", "a", "b", False, None, "installs", False),
    ],
)
def test_classify(path, old, new, test, config_words, dependency_words, product) -> None:
    change = classify(path, old, new, base_config())
    assert change.test is test
    if config_words is None:
        assert change.test_config == ()
    else:
        assert config_words in " ".join(change.test_config)
    if dependency_words is None:
        assert change.dependency == ()
    else:
        assert dependency_words in " ".join(change.dependency)
    assert change.product is product


PYPROJECT = """\
[project]
name = "shop"
version = "1.0"
dependencies = ["requests"]

[tool.pytest.ini_options]
addopts = "-q"

[tool.ruff]
line-length = 100
"""


@pytest.mark.parametrize(
    ("old", "new", "config", "dependency", "product"),
    [
        (
            PYPROJECT,
            PYPROJECT.replace('addopts = "-q"', 'addopts = "-q -p evil"'),
            ["tool.pytest"],
            [],
            False,
        ),
        (
            PYPROJECT,
            PYPROJECT.replace('["requests"]', '["requests", "evil"]'),
            [],
            ["project.dependencies"],
            False,
        ),
        (PYPROJECT, PYPROJECT.replace("100", "120"), [], [], True),
        (PYPROJECT, PYPROJECT.replace('"1.0"', '"1.1"'), [], [], True),
        (
            None,
            '[tool.pytest.ini_options]\naddopts = "-o addopts=-pevil"\n',
            ["tool.pytest"],
            [],
            False,
        ),
        (PYPROJECT, PYPROJECT + "[build-system]\nrequires = ['x']\n", [], ["build-system"], False),
        (
            PYPROJECT,
            PYPROJECT + '[project.entry-points.pytest11]\nevil = "shop.evil"\n',
            [],
            ["project.entry-points"],
            False,
        ),
        (PYPROJECT, "not toml [", ["not valid TOML"], ["not valid TOML"], False),
    ],
    ids=[
        "pytest-section",
        "dependencies",
        "ruff-section",
        "version",
        "new-file-with-addopts",
        "build-system",
        "pytest11-entry-point",
        "unreadable",
    ],
)
def test_pyproject_sections(old, new, config, dependency, product) -> None:
    change = classify("pyproject.toml", old, new, BaseConfig())
    assert [w for w in config if w not in " ".join(change.test_config)] == []
    assert bool(change.test_config) is bool(config)
    assert [w for w in dependency if w not in " ".join(change.dependency)] == []
    assert bool(change.dependency) is bool(dependency)
    assert change.product is product


SETUP_CFG = "[metadata]\nname = shop\n\n[tool:pytest]\naddopts = -q\n\n[flake8]\nmax-line = 99\n"
TOX_INI = "[tox]\nenvlist = py311\n\n[pytest]\naddopts = -q\n\n[isort]\nprofile = black\n"


@pytest.mark.parametrize(
    ("name", "old", "new", "config", "dependency", "product"),
    [
        ("setup.cfg", SETUP_CFG, SETUP_CFG.replace("-q", "-q -p evil"), True, False, False),
        ("setup.cfg", SETUP_CFG, SETUP_CFG.replace("99", "100"), False, False, True),
        (
            "setup.cfg",
            SETUP_CFG,
            SETUP_CFG + "[options]\ninstall_requires = evil\n",
            False,
            True,
            False,
        ),
        (
            "setup.cfg",
            SETUP_CFG,
            SETUP_CFG.replace("# x", "") + "# a comment\n",
            False,
            False,
            False,
        ),
        ("tox.ini", TOX_INI, TOX_INI.replace("-q", "-q --deselect x"), True, False, False),
        ("tox.ini", TOX_INI, TOX_INI.replace("py311", "py312"), True, False, False),
        ("tox.ini", TOX_INI, TOX_INI.replace("black", "google"), False, False, True),
    ],
    ids=[
        "setup-cfg-tool-pytest",
        "setup-cfg-flake8",
        "setup-cfg-options",
        "setup-cfg-comment-only",
        "tox-pytest",
        "tox-envlist",
        "tox-isort",
    ],
)
def test_ini_sections(name, old, new, config, dependency, product) -> None:
    change = classify(name, old, new, BaseConfig())
    assert bool(change.test_config) is config
    assert bool(change.dependency) is dependency
    assert change.product is product


PACKAGE = '{"name": "x", "scripts": {"test": "node --test", "start": "node server.js"}}'
PRELOAD = PACKAGE.replace('"node --test"', '"node -r ./f.js --test"')
PRETEST = PACKAGE.replace('"start"', '"pretest": "x", "start"')


@pytest.mark.parametrize(
    ("new", "config", "dependency", "product"),
    [
        (
            PRELOAD,
            "scripts.test",
            None,
            False,
        ),
        (
            PRETEST,
            "scripts.pretest",
            None,
            False,
        ),
        (
            '{"name": "x", "scripts": {"test": "node --test", "start": "node app.js"}}',
            None,
            None,
            True,
        ),
        (
            '{"name": "x", "scripts": {"test": "node --test", "start": "node server.js"}, '
            '"dependencies": {"left-pad": "1"}}',
            None,
            "dependencies",
            False,
        ),
        (
            '{"name": "x", "scripts": {"test": "node --test", "start": "node server.js", '
            '"postinstall": "curl x"}}',
            None,
            "postinstall",
            False,
        ),
        (
            '{"name": "x", "scripts": {"test": "node --test", "start": "node server.js"}, '
            '"mocha": {"require": "x"}}',
            "mocha",
            None,
            False,
        ),
        (
            '{"name": "x", "scripts": {"test": "node --test", "start": "node server.js"}, '
            '"devDependencies": {"x": "1"}, "optionalDependencies": {"y": "1"}}',
            None,
            "optionalDependencies",
            False,
        ),
        ("[1, 2]", "not a valid JSON object", "not a valid JSON object", False),
    ],
    ids=[
        "require-preload-in-test-script",
        "pretest",
        "start-script",
        "dependencies",
        "install-script",
        "mocha-config",
        "optional-dependencies",
        "not-an-object",
    ],
)
def test_package_json_keys(new, config, dependency, product) -> None:
    change = classify("package.json", PACKAGE, new, BaseConfig())
    if config is None:
        assert change.test_config == ()
    else:
        assert config in " ".join(change.test_config)
    if dependency is None:
        assert change.dependency == ()
    else:
        assert dependency in " ".join(change.dependency)
    assert change.product is product


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("tests/test_x.py", True),
        ("tests/helpers.py", False),
        ("tests/conftest.py", False),
        ("pkg/x_test.py", True),
        ("src/a.test.js", True),
        ("test/anything.js", True),
        ("test/.hidden.js", False),
        ("tests/data/x.json", False),
        ("src/app.py", False),
    ],
)
def test_is_test_module(path: str, expected: bool) -> None:
    assert is_test_module(path) is expected
    if expected:
        assert is_test_path(path)


@pytest.mark.parametrize(
    ("path", "status", "allowed", "dependency_allowed", "phase"),
    [
        ("tests/test_new.py", "added", False, False, "new_tests"),
        ("tests/test_new.py", "added", True, False, "new_tests"),
        ("tests/helpers.py", "added", False, False, "new_tests"),
        ("tests/snapshots/a.snap", "added", True, False, "main"),
        ("tests/test_totals.py", "modified", False, False, "base"),
        ("tests/test_totals.py", "modified", True, False, "main"),
        ("tests/test_totals.py", "deleted", False, False, "base"),
        ("tests/conftest.py", "added", False, False, "base"),
        ("tests/conftest.py", "added", True, False, "main"),
        ("requirements.txt", "modified", False, False, "main"),
        ("requirements.txt", "modified", False, True, "dependency"),
        ("shop/cart.py", "modified", False, True, "main"),
    ],
)
def test_route(path, status, allowed, dependency_allowed, phase) -> None:
    change = classify(path, "a" if status != "added" else None, "b", BaseConfig())
    routed = route(
        path, status, change, test_edit_allowed=allowed, dependency_allowed=dependency_allowed
    )
    assert routed.phase == phase


@pytest.mark.parametrize(
    ("command", "runner", "files", "expected"),
    [
        ("python -m pytest", "pytest", ["tests/test_a.py"], "python -m pytest tests/test_a.py"),
        (
            ".venv/bin/python -m pytest",
            "pytest",
            ["t/test_a.py"],
            ".venv/bin/python -m pytest t/test_a.py",
        ),
        (
            ". .venv/bin/activate && python -m pytest -q tests/unit",
            "pytest",
            ["tests/test_new.py"],
            ". .venv/bin/activate && python -m pytest tests/test_new.py",
        ),
        ("pytest -k slow", "pytest", ["test_b.py"], "pytest test_b.py"),
        ("npm test", "npm", ["test/new.test.js"], "node --test test/new.test.js"),
        ("go test ./...", "go", ["pkg/a_test.go"], None),
        ("python -m pytest", "pytest", ["test/new.test.js"], None),
    ],
)
def test_new_tests_command(command, runner, files, expected) -> None:
    assert new_tests_command(command, runner, files, []) == expected


def test_new_tests_command_keeps_the_base_preloads() -> None:
    preloads = ["test/setup.js", "hooks.mjs"]
    command = new_tests_command("npm test", "npm", ["test/b.test.js"], preloads)
    assert command == "node --test --require ./test/setup.js --import ./hooks.mjs test/b.test.js"


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("pytest.py", "pytest"),
        ("_pytest/__init__.py", "_pytest"),
        ("src/pluggy/__init__.py", "pluggy"),
        ("json.py", "json"),
        ("shop/json.py", None),
        ("invoice/__init__.py", None),
    ],
)
def test_shadowed_module(path: str, expected: str | None) -> None:
    assert shadowed_module(path) == expected


# --- the network a repository may ask for (SECURITY 41) --------------------------------------


@pytest.mark.parametrize(
    ("operator", "repo", "expected"),
    [
        ("setup", "always", "setup"),
        ("none", "always", "none"),
        ("none", "setup", "none"),
        ("always", "none", "none"),
        ("always", "setup", "setup"),
        ("setup", None, "setup"),
        ("always", None, "always"),
    ],
)
def test_repository_network_only_narrows(operator, repo, expected) -> None:
    assert effective_network(operator, repo) == expected


def test_allow_dependency_changes_setting() -> None:
    assert Settings.from_env({}).allow_dependency_changes is False
    on = {"LOOPWRIGHT_ALLOW_DEPENDENCY_CHANGES": "1"}
    assert Settings.from_env(on).allow_dependency_changes is True
    with pytest.raises(ConfigError, match="LOOPWRIGHT_ALLOW_DEPENDENCY_CHANGES='maybe'"):
        Settings.from_env({"LOOPWRIGHT_ALLOW_DEPENDENCY_CHANGES": "maybe"})
