"""A mission run by a `loopwright worker` process, watched through a separate `loopwright
serve` process: its events reach the server's SSE stream live, through the queue's
backend (Redis pub/sub, or PostgreSQL LISTEN/NOTIFY), not when the mission ends."""

from __future__ import annotations

import statistics

import httpx
import pytest

from tests.conftest import step
from tests.integration.app_harness import app_world
from tests.integration.test_live_fanout import SseClient
from tests.integration.test_saq_workers import (
    WorkerProcess,
    _backend_env,
    _deliver,
    _logs,
    _server_without_docker,
)
from tests.scenarios import CORRECT

SLOW_START = [step(CORRECT[0]["tool_calls"][0], delay_s=6), *CORRECT[1:]]
"""The first model call waits: the prepare stage's events are out while the mission runs."""


@pytest.mark.parametrize("backend", ["redis", "postgres"])
def test_a_workers_events_reach_a_separate_servers_stream_live(tmp_path, request, backend):
    env = _backend_env(request, backend)
    logs = [tmp_path / "serve.log", tmp_path / "worker.log"]
    with app_world(tmp_path, SLOW_START, serve=False, env=env) as world:
        server = _server_without_docker(world, logs[0])
        worker: WorkerProcess | None = None
        client: SseClient | None = None
        try:
            mission_id = _deliver(server, world)
            client = SseClient(f"{server.url}/missions/{mission_id}/events")
            worker = WorkerProcess(world, logs[1])
            first = client.next_event(timeout=120)
            # Live: the worker is still in the mission (its first model call waits).
            assert server.mission(mission_id)["status"] == "running", _logs(*logs)
            rest, ended = client.until_end(timeout=240)
            assert ended, _logs(*logs)
            done = server.mission(mission_id)
            assert done["status"] == "verified", _logs(*logs)
            streamed = [first, *(event for event, _ in rest)]
            stored = httpx.get(f"{server.url}/api/missions/{mission_id}/events", timeout=10)
            # Every event once, in order, the same as the store's log.
            assert streamed == stored.json()
            # Through the backend, an event arrives within milliseconds of its emission; the
            # stream's own poll of the store (every 2 s) would make that a second on average.
            latencies = [arrived - event["ts"] for event, arrived in rest]
            assert statistics.median(latencies) < 0.75, sorted(latencies)
            assert worker.stop() == 0
        finally:
            if client is not None:
                client.close()
            if worker is not None:
                worker.kill()
            server.stop()
        world.github.assert_no_rejections()
