"""Twenty simultaneous triggers against a limit of two sandboxes (SECURITY.md check 31).

The App runs behind a real uvicorn server; twenty `/loopwright fix` comments arrive at
once, each a separate mission. The sandbox provider is the real local one, remembering
every sandbox it made, so the test can tell at each new sandbox how many missions hold one.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from loopwright.app.server import create_app
from loopwright.config import Settings
from loopwright.github.ratelimit import WriteSpacer
from loopwright.sandbox.base import Sandbox
from loopwright.sandbox.local import LocalProvider, LocalSandbox
from tests.conftest import SUITE_PATH, step, tool
from tests.integration.app_harness import FINAL, app_world, post_webhook, uvicorn_in_thread

TRIGGERS = 20
LIMIT = 2
GIVES_UP = [step(tool("finish", summary="I looked at it"), repeat=True)]


class CountingProvider(LocalProvider):
    """The local provider; at each new sandbox it counts the missions holding an open one."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings.sandbox_limits)
        self.boxes: list[tuple[str, LocalSandbox]] = []
        self.peak = 0
        self._lock = threading.Lock()

    def create(self, mission_id: str, tree: Path, *, network: bool) -> Sandbox:
        box = super().create(mission_id, tree, network=network)
        with self._lock:
            self.boxes.append((mission_id, box))
            holding = {mid for mid, b in self.boxes if not b.closed}
            self.peak = max(self.peak, len(holding))
        return box


@pytest.fixture
def on_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # The local sandbox runs the example's tests with the python on PATH.
    monkeypatch.setenv("PATH", f"{SUITE_PATH}:/usr/local/bin:/usr/bin:/bin")
    yield


@pytest.mark.slow
def test_twenty_triggers_run_at_most_the_configured_sandboxes_and_all_finish(tmp_path, on_path):
    # A few steps a mission: what is measured is how many hold a sandbox at once, not how
    # long each one tries.
    env = {
        "LOOPWRIGHT_MAX_CONCURRENT_MISSIONS": str(LIMIT),
        "LOOPWRIGHT_MAX_ATTEMPTS": "100",
        "LOOPWRIGHT_MAX_STEPS": "4",
    }
    with app_world(tmp_path, GIVES_UP, env=env, serve=False) as world:
        providers: list[CountingProvider] = []

        def factory(settings: Settings) -> CountingProvider:
            providers.append(CountingProvider(settings))
            return providers[-1]

        # GitHub's one second between writes is not what this test measures: each mission
        # writes about six times (token, 👀, tracking comment and its edits, check run).
        app = create_app(world.settings, provider_factory=factory, write_spacer=WriteSpacer(0.05))
        with uvicorn_in_thread(app) as url:
            barrier = threading.Barrier(TRIGGERS)

            def comment(n: int) -> dict[str, Any]:
                payload = world.comment_payload(f"/loopwright fix attempt {n}")
                payload["comment"]["id"] = 880000 + n  # each comment is its own request
                return payload

            def send(n: int) -> httpx.Response:
                body = json.dumps(comment(n)).encode()
                with httpx.Client(timeout=60) as client:
                    barrier.wait()
                    return post_webhook(client, url, "issue_comment", body)

            with ThreadPoolExecutor(TRIGGERS) as pool:
                answers = list(pool.map(send, range(TRIGGERS)))
            assert [a.status_code for a in answers] == [202] * TRIGGERS, [a.text for a in answers]
            ids = {a.json()["mission"] for a in answers}
            assert len(ids) == TRIGGERS

            # Right after the burst: no more than LIMIT running, the others waiting.
            snapshot = [m["status"] for m in httpx.get(f"{url}/api/missions").json()]
            assert snapshot.count("running") <= LIMIT, snapshot
            assert snapshot.count("queued") >= 1, snapshot

            deadline = time.monotonic() + 600
            while time.monotonic() < deadline:
                missions = httpx.get(f"{url}/api/missions", params={"limit": 100}).json()
                if len(missions) == TRIGGERS and all(m["status"] in FINAL for m in missions):
                    break
                time.sleep(0.5)
            else:
                raise AssertionError(f"not all missions finished: {missions}")

        (provider,) = providers
        assert provider.peak == LIMIT, provider.peak
        assert {mid for mid, _ in provider.boxes} == ids
        assert all(box.closed for _, box in provider.boxes)
        assert {m["status"] for m in missions} == {"unverified"}, missions
        assert len(world.model.requests) == TRIGGERS
