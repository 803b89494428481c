"""`loopwright worker`: queued App missions run from the shared store, without the server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

from loopwright.config import Settings
from loopwright.request import MissionRequest
from loopwright.store.repository import open_store
from tests.conftest import VENV_BIN
from tests.integration.app_harness import INSTALLATION, REPO, app_world
from tests.scenarios import CORRECT


def test_worker_runs_a_queued_mission_once_and_stops_on_sigterm(tmp_path):
    with app_world(tmp_path, CORRECT, serve=False) as world:
        store = open_store(Settings.from_env(world.env))
        request = MissionRequest(
            trigger="comment",
            repo=REPO,
            clone_url=world.git.repo_url(REPO),
            head_sha="",
            pr_number=world.pr_number,
            installation_id=INSTALLATION,
            actor="maintainer",
            comment_id=77,
        )
        mission, created = store.create_mission(request)
        assert created
        log = (tmp_path / "worker.log").open("wb")
        # A worker receives no webhooks, so it runs without the webhook secret.
        env = {k: v for k, v in world.env.items() if k != "LOOPWRIGHT_WEBHOOK_SECRET"}
        worker = subprocess.Popen(
            [f"{VENV_BIN}/loopwright", "worker", "--poll", "0.2"],
            env={**env, "HOME": os.environ.get("HOME", "/tmp")},
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline:
                current = store.get_mission(mission.id)
                assert current is not None
                if current.status not in ("queued", "running"):
                    break
                time.sleep(0.3)
            assert current.status == "verified", (tmp_path / "worker.log").read_text()[-3000:]
            assert current.attempts == 1
            assert current.head_sha == world.head_sha  # pinned at admission
            pulls = [
                p for p in world.github.pulls(REPO) if p["head"]["ref"].startswith("loopwright/")
            ]
            assert len(pulls) == 1
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(timeout=60) == 0
            started = (tmp_path / "worker.log").read_text().splitlines()
            assert any(
                "worker running up to" in json.loads(line)["event"]
                for line in started
                if line.startswith("{")
            )
        finally:
            if worker.poll() is None:
                worker.kill()
            log.close()
            store.close()
        world.github.assert_no_rejections()
