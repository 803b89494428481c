"""Ctrl-C on `loopwright fix`: the mission is cancelled, its sandbox removed, and `--json`
still prints the one result object (exit 130)."""

from __future__ import annotations

import glob
import json
import os
import signal
import tempfile
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import step, tool
from tests.scenarios import model_env


def _interrupt_once_a_sandbox_runs(events: Path) -> threading.Thread:
    def watch() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            lines = events.read_text().splitlines() if events.exists() else []
            if any(json.loads(line).get("name") == "sandbox_start" for line in lines):
                os.kill(os.getpid(), signal.SIGINT)
                return
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    return watcher


def test_ctrl_c_cancels_the_mission_and_exits_130(example_repo, scripted, run_cli, tmp_path):
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach only the main thread")
    repo = example_repo("python-invoice")
    server = scripted([step(tool("run_command", command="sleep 120"), repeat=True)])
    before = signal.getsignal(signal.SIGINT)
    watcher = _interrupt_once_a_sandbox_runs(tmp_path / "events-0.ndjson")
    run = run_cli("fix", str(repo), "--sandbox", "local", env=model_env(server))
    watcher.join(5)

    assert run.exit_code == 130, run.stderr
    # Whether in reproduction or the two-minute command, nothing was left to run to its end.
    assert [e for e in run.of_type("tool_result") if e.get("exit_code") == 0] == []
    assert run.result is not None and run.result["status"] == "cancelled"
    assert run.result["summary"] == "Cancelled with Ctrl-C."
    assert run.result["exit_code"] == 130
    assert run.events[-1]["type"] == "done" and run.events[-1]["status"] == "cancelled"
    assert "cancelling (Ctrl-C again to stop at once)" in run.stderr
    mission = run.result["mission"]
    for root in {tempfile.gettempdir(), "/tmp"}:
        assert glob.glob(os.path.join(root, f"loopwright-{mission}-*")) == []
    assert signal.getsignal(signal.SIGINT) is before  # the handler was put back
