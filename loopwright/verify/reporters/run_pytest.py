"""Loopwright's pytest entry point: `python run_pytest.py ARGS` runs pytest ARGS, reported.

Run by path, never imported by name, so no module in the repository can stand in for it. At
load, before pytest, a conftest or any product code is imported, it reads this run's id and
key from the file named by LOOPWRIGHT_STREAM, deletes the file and keeps a private copy of
the original stdout; each test's outcome is then printed there as a signed record the moment
the test ends, with a completion record carrying pytest's exit status at the very end.
Standard library only until pytest itself is imported.
"""

from __future__ import annotations

import hashlib
import hmac
import importlib.util
import json
import os
import re
import sys
import time
from typing import Any

MAGIC = "\x1eLOOPWRIGHT1 "
MESSAGE_LIMIT = 1500
# pytest and what it imports at start: none of these may come from the repository itself.
FRAMEWORK = ("pytest", "_pytest", "pluggy", "iniconfig", "py")
_SEVERITY = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
KEY_WAIT_S = 20.0
# The whole file, so a key read while it is still being written is never taken.
KEY_TEXT = re.compile(rb"\A([0-9a-f]{16})\n([0-9a-f]{64})\n\Z")


class Stream:
    """Signed records on a private duplicate of the original stdout."""

    def __init__(self, fd: int, run_id: str, key: bytes) -> None:
        self._fd = fd
        self._run_id = run_id
        self._key = key
        self._seq = 0
        self.counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}

    def emit(self, body: dict[str, Any]) -> None:
        payload = json.dumps(body, separators=(",", ":"), ensure_ascii=True, sort_keys=True)
        message = f"{self._run_id} {self._seq} {payload}".encode()
        mac = hmac.new(self._key, message, hashlib.sha256).hexdigest()
        data = f"{MAGIC}{self._run_id} {self._seq} {payload} {mac}\n".encode()
        self._seq += 1
        while data:
            written = os.write(self._fd, data)
            data = data[written:]

    def test(self, test_id: str, outcome: str, message: str) -> None:
        self.counts[outcome] += 1
        self.emit({"type": "test", "id": test_id, "outcome": outcome, "message": message})

    def end(self, status: int, error: str = "") -> None:
        body: dict[str, Any] = {"type": "end", "status": status, "counts": self.counts}
        if error:
            body["error"] = error
        self.emit(body)


class Plugin:
    """Turns pytest's per-phase reports into one record per test, sent when the test ends."""

    def __init__(self, stream: Stream) -> None:
        self._stream = stream
        self._pending: dict[str, tuple[str, str]] = {}

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.when == "call":
            outcome = str(report.outcome)
        elif report.failed:
            outcome = "error"
        elif report.skipped:
            outcome = "skipped"
        else:
            outcome = "passed"
        seen = self._pending.get(report.nodeid)
        if seen is None or _SEVERITY[outcome] > _SEVERITY[seen[0]]:
            message = _message(report) if outcome != "passed" else ""
            self._pending[report.nodeid] = (outcome, message)

    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        outcome, message = self._pending.pop(nodeid, ("error", "the test reported no outcome"))
        self._stream.test(nodeid, outcome, message)

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            self._stream.test(report.nodeid, "error", _message(report))
        elif report.skipped:
            self._stream.test(report.nodeid, "skipped", _message(report))


def _message(report: Any) -> str:
    try:
        text = str(report.longreprtext)
    except Exception:  # noqa: BLE001 - a report that cannot render still has an outcome
        text = ""
    if len(text) > MESSAGE_LIMIT:
        return text[: MESSAGE_LIMIT // 3] + "\n…\n" + text[-(MESSAGE_LIMIT * 2 // 3) :]
    return text


def _read_key() -> tuple[str, bytes]:
    """This run's id and key; the host writes them while this process starts, so wait."""
    path = os.environ.pop("LOOPWRIGHT_STREAM", "")
    if not path:
        sys.exit("run_pytest.py: LOOPWRIGHT_STREAM does not name this run's key file")
    deadline = time.monotonic() + KEY_WAIT_S
    while True:
        try:
            with open(path, "rb") as handle:
                found = KEY_TEXT.match(handle.read())
        except FileNotFoundError:
            found = None
        if found is not None:
            os.unlink(path)
            return found.group(1).decode(), bytes.fromhex(found.group(2).decode())
        if time.monotonic() > deadline:
            sys.exit(f"run_pytest.py: this run's key never arrived at {path}")
        time.sleep(0.002)


def _from_repository(root: str) -> str | None:
    """The first framework module the repository would shadow, as `name (path)`."""
    allowed = os.path.join(root, ".venv") + os.sep
    for name in FRAMEWORK:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        origin = spec.origin if spec is not None else None
        places = [origin] if origin else []
        if spec is not None and spec.submodule_search_locations:
            places += list(spec.submodule_search_locations)
        for place in places:
            real = os.path.realpath(place)
            if real.startswith(root + os.sep) and not real.startswith(allowed):
                return f"{name} ({os.path.relpath(real, root)})"
    return None


def main() -> int:
    run_id, key = _read_key()
    stream = Stream(os.dup(1), run_id, key)
    stream.emit({"type": "start", "runner": "pytest"})
    args = sys.argv[1:]
    here = os.path.dirname(os.path.realpath(__file__))
    if sys.path and os.path.realpath(sys.path[0] or ".") == here:
        del sys.path[0]  # nothing in this folder is meant to be imported by the tests
    if args[:1] == ["--as-module"]:
        # Stands in for `python -m pytest`, which puts the working directory on sys.path.
        args = args[1:]
        sys.path.insert(0, os.getcwd())
    shadow = _from_repository(os.path.realpath(os.getcwd()))
    if shadow is not None:
        error = f"the repository provides its own {shadow}, so pytest was not started"
        print(f"loopwright: {error}", file=sys.stderr)
        stream.end(3, error)
        return 3
    import pytest

    status = int(pytest.main(args, plugins=[Plugin(stream)]))
    sys.stdout.flush()
    sys.stderr.flush()
    stream.end(status)
    return status


if __name__ == "__main__":
    sys.exit(main())
