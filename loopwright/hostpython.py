"""The one way Loopwright starts a Python of its own on the host.

Loopwright's commands often run in a repository's checkout (the Action always can, in the
runner's workspace; the CLI does when a person runs it there). A plain `python -m x` puts
that working directory first on the module path, so a `loopwright/`, `pip/` or `venv/`
directory of the checkout would be what runs, on the host, next to the secrets. `-P` keeps
the working directory off the path. Every launch goes through `own_python`, and a test
holds that `sys.executable` appears nowhere else in the package.
"""

from __future__ import annotations

import sys


def own_python(*args: str) -> list[str]:
    """The command line that runs this interpreter on `args` (`-m module ...`) with the
    working directory off its module path."""
    return [sys.executable, "-P", *args]
