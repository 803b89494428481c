"""The App's writes to GitHub are spaced as LOOPWRIGHT_GITHUB_WRITE_INTERVAL_S says, in the
runtime every server and worker process opens."""

from __future__ import annotations

import time
from pathlib import Path

from loopwright.app.runtime import open_runtime
from tests.integration.app_harness import INSTALLATION, REPO, app_world
from tests.scenarios import CORRECT


def test_the_runtime_spaces_writes_by_the_setting(tmp_path: Path) -> None:
    with (
        app_world(
            tmp_path, CORRECT, serve=False, env={"LOOPWRIGHT_GITHUB_WRITE_INTERVAL_S": "0.4"}
        ) as world,
        open_runtime(world.settings) as runtime,
    ):
        assert runtime.github.write_interval_s == 0.4
        started = time.monotonic()
        for _ in range(3):  # three token requests (POSTs): the third waits two intervals
            runtime.github.session(INSTALLATION, REPO)
        elapsed = time.monotonic() - started
    assert elapsed >= 0.8, elapsed
