"""A pytest launcher that imports pytest once and forks a fresh child for every run.

Validating the corpus runs pytest about a hundred times on suites that take milliseconds, so
importing pytest is most of each run's cost. The server imports it and nothing else of the
tasks; each child changes into its tree, takes the run's environment and calls `pytest.main`,
as `python -m pytest` would, and exits. The server ends a child's process group at its timeout.

Protocol: one JSON request per line on stdin (`args`, `cwd`, `env`, `timeout`), one JSON reply
per line on stdout (`exit_code`, `timed_out`, `output`).

    python -m benchmarks.corpus.warm_pytest
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import tempfile
import time
import traceback
from typing import Any

import pytest


def _child(request: dict[str, Any], out: int) -> None:
    """Runs in the forked process; never returns."""
    code = 3
    try:
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        time.tzset()
        sys.dont_write_bytecode = True
        sys.path.insert(0, request["cwd"])  # what `python -m pytest` puts first
        sys.argv = ["pytest", *request["args"]]
        code = int(pytest.main(request["args"]))
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _wait(pid: int, timeout: float) -> tuple[int, bool]:
    """(exit code, timed out) of child `pid`, killing its process group at the timeout."""
    pidfd = os.pidfd_open(pid)
    try:
        ready, _, _ = select.select([pidfd], [], [], timeout)
    finally:
        os.close(pidfd)
    timed_out = not ready
    if timed_out:
        os.killpg(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), timed_out


def run(request: dict[str, Any]) -> dict[str, Any]:
    with tempfile.TemporaryFile() as out:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(request, out.fileno())
        exit_code, timed_out = _wait(pid, float(request["timeout"]))
        out.seek(0)
        output = out.read().decode("utf-8", errors="replace")
    return {"exit_code": exit_code, "timed_out": timed_out, "output": output}


def main() -> None:
    for line in sys.stdin:
        if line.strip():
            sys.stdout.write(json.dumps(run(json.loads(line))) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
