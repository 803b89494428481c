"""Which paths of a repository are tests, test configuration, or dependency and setup inputs.

Verification judges a fix with the original tests, run the original way, on dependencies
installed from the original inputs. This package decides, for each file a patch changes,
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

from loopwright.verify.testfiles.base import BaseConfig, read_base_config
from loopwright.verify.testfiles.changes import Change, classify
from loopwright.verify.testfiles.formats import Reader
from loopwright.verify.testfiles.paths import (
    in_environment,
    is_compiled,
    is_test_module,
    is_test_path,
    shadowed_module,
)
from loopwright.verify.testfiles.routing import (
    ALLOW_TEST_EDITS_HINT,
    Routed,
    Status,
    new_tests_command,
    route,
)

__all__ = [
    "ALLOW_TEST_EDITS_HINT",
    "BaseConfig",
    "Change",
    "Reader",
    "Routed",
    "Status",
    "classify",
    "in_environment",
    "is_compiled",
    "is_test_module",
    "is_test_path",
    "new_tests_command",
    "read_base_config",
    "route",
    "shadowed_module",
]
