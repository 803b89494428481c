"""Scale-out on a real engine: two `loopwright serve` and three `loopwright worker` processes
over one PostgreSQL store and one Redis queue, all started by the test on loopback.

Sixty signed deliveries spread over both servers (twenty red commits on twenty pull
requests, plus a second delivery about each commit and a replay of each delivery id) make
exactly twenty missions; each runs once, on whichever worker took it, and ends in one
verified pull request. A live-view client of one server sees every event of a mission that a
worker ran, in order. A server killed mid-burst loses no answered delivery. The global
concurrency cap holds across the workers, counted from the Docker engine's own containers.
"""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from loopwright.sandbox.base import MISSION_LABEL
from tests.integration.app_harness import post_webhook
from tests.integration.scale_world import RedPull, ScaleWorld, scale_world

PULLS = 20
SSE_TIMEOUT_S = 240.0


def _sse(url: str, stop: threading.Event, into: list[dict[str, Any]]) -> None:
    """Reads one mission's live stream until its `end` message (or `stop`)."""
    timeout = httpx.Timeout(30, read=SSE_TIMEOUT_S)
    with httpx.Client(timeout=timeout) as client, client.stream("GET", url) as response:
        response.raise_for_status()
        message: dict[str, Any] = {}
        for line in response.iter_lines():
            if stop.is_set():
                return
            if not line:
                if message:
                    message["received"] = str(time.time())
                    into.append(message)
                    if message.get("event") == "end":
                        return
                message = {}
                continue
            field, _, value = line.partition(":")
            message[field] = value.removeprefix(" ")


def _deliveries(scale: ScaleWorld, pulls: list[RedPull]) -> list[tuple[int, str, bytes]]:
    """(server index, delivery id, body): for each commit its delivery, a second delivery
    about it (another check failing on it), and a replay of the first delivery's id on
    the other server, shuffled."""
    items: list[tuple[int, str, bytes]] = []
    for n, pull in enumerate(pulls):
        first = str(uuid.uuid4())
        body = scale.check_run(pull)
        items.append((n % 2, first, body))
        items.append(((n + 1) % 2, str(uuid.uuid4()), scale.check_run(pull)))
        items.append(((n + 1) % 2, first, body))
    random.Random(7).shuffle(items)
    return items


@pytest.mark.slow
def test_sixty_deliveries_on_two_servers_make_twenty_missions_run_once_by_three_workers(
    tmp_path, redis_service, postgres_url
):
    env = {"LOOPWRIGHT_MAX_CONCURRENT_MISSIONS": "3", "LOOPWRIGHT_SANDBOX": "local"}
    with scale_world(tmp_path, redis_url=redis_service.url, database_url=postgres_url,
                     env=env) as scale:  # fmt: skip
        pulls = scale.red_pulls(PULLS)
        servers = [scale.start_server(), scale.start_server()]
        items = _deliveries(scale, pulls)
        barrier = threading.Barrier(20)

        def send(chunk: list[tuple[int, str, bytes]]) -> list[tuple[str, httpx.Response]]:
            out = []
            with httpx.Client(timeout=60) as client:
                barrier.wait()
                for server, delivery, body in chunk:
                    answer = post_webhook(
                        client, servers[server].url, "check_run", body, delivery=delivery
                    )
                    out.append((delivery, answer))
            return out

        with ThreadPoolExecutor(20) as pool:
            answers = [
                a for part in pool.map(send, [items[i::20] for i in range(20)]) for a in part
            ]
        assert len(answers) == 60
        assert all(200 <= a.status_code < 300 for _, a in answers), [
            (a.status_code, a.text) for _, a in answers if not 200 <= a.status_code < 300
        ]
        missions = {a.json()["mission"] for _, a in answers if a.json().get("mission")}
        assert len(missions) == PULLS, sorted(a.json() for _, a in answers)
        # No mission runs until a worker exists: the servers only queue them.
        time.sleep(1.0)
        assert {m.status for m in scale.missions()} == {"queued"}

        # A live view on server 0 of a mission delivered to server 1 (and run by a worker).
        watched = next(a.json()["mission"] for _, a in answers if a.json().get("mission"))
        seen: list[dict[str, Any]] = []
        stop = threading.Event()
        reader = threading.Thread(
            target=_sse, args=(f"{servers[0].url}/missions/{watched}/events", stop, seen)
        )
        reader.start()
        for _ in range(3):
            scale.start_worker()
        try:
            statuses = scale.wait_all_final(missions, timeout=600)
        finally:
            reader.join(SSE_TIMEOUT_S)
            stop.set()
        assert set(statuses.values()) == {"verified"}, (statuses, scale.logs())
        for mission_id in missions:
            mission = scale.store.get_mission(mission_id)
            assert mission is not None
            assert mission.attempts == 1, (mission_id, mission.attempts)
        fixes = scale.fix_pulls()
        assert len(fixes) == PULLS, [p["head"]["ref"] for p in fixes]
        assert sorted(p["base"]["ref"] for p in fixes) == sorted(p.branch for p in pulls)

        events = [m for m in seen if m.get("event") not in ("end", None) and "id" in m]
        stored = scale.store.events_after(watched, 0)
        assert [int(m["id"]) for m in events] == [e["seq"] for e in stored]
        assert json.loads(events[-1]["data"])["type"] == "done"
        assert seen[-1].get("event") == "end"
        # Live, not replayed at the end: the worker's first events reached server 0's
        # stream while the mission still ran.
        finished = scale.store.get_mission(watched).finished_at  # type: ignore[union-attr]
        assert finished is not None
        assert float(events[0]["received"]) < finished.timestamp() - 1.0, (events[0], finished)
        # Every worker took part (three workers, twenty missions, three at a time).
        logs = [w.log.read_text() for w in scale.workers]
        assert all("mission" in log for log in logs)
        for worker in scale.workers:
            assert worker.stop() == 0
        scale.world.github.assert_no_rejections()


@pytest.mark.slow
def test_a_server_killed_mid_burst_loses_no_answered_delivery(
    tmp_path, redis_service, postgres_url
):
    # No worker runs: the missions the burst makes stay queued, so only the servers work.
    env = {"LOOPWRIGHT_SANDBOX": "local"}
    with scale_world(tmp_path, redis_url=redis_service.url, database_url=postgres_url,
                     env=env) as scale:  # fmt: skip
        servers = [scale.start_server(), scale.start_server()]
        pull = scale.red_pulls(1)[0]
        items = [(str(uuid.uuid4()), scale.check_run(pull)) for _ in range(120)]
        answered: dict[str, tuple[int, int]] = {}
        lock = threading.Lock()
        killed = threading.Event()

        def sender(chunk: list[tuple[str, bytes]], n: int) -> None:
            with httpx.Client(timeout=10) as client:
                for delivery, body in chunk:
                    server = n % 2
                    if killed.is_set() and server == 0:
                        server = 1  # the load balancer takes the dead server out
                    try:
                        status = post_webhook(
                            client, servers[server].url, "check_run", body, delivery=delivery
                        ).status_code
                    except httpx.HTTPError:
                        status = 0
                    with lock:
                        answered[delivery] = (server, status)
                        if len(answered) >= 40 and not killed.is_set():
                            killed.set()
                            servers[0].kill()

        threads = [threading.Thread(target=sender, args=(items[i::12], i)) for i in range(12)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        ok = {d for d, (_, status) in answered.items() if 200 <= status < 300}
        on_dead = {
            d for d, (server, status) in answered.items() if server == 0 and 200 <= status < 300
        }
        assert on_dead, "the killed server answered nothing before it died"
        # GitHub redelivers what was not answered; the survivor takes it.
        with httpx.Client(timeout=30) as client:
            for delivery, body in items:
                if delivery not in ok:
                    again = post_webhook(
                        client, servers[1].url, "check_run", body, delivery=delivery
                    )
                    assert 200 <= again.status_code < 300, again.text
        for delivery, _ in items:
            row = scale.store.get_delivery(delivery)
            assert row is not None and row.decision, (delivery, delivery in ok)
        missions = [m for m in scale.missions() if m.head_sha == pull.head_sha]
        assert len(missions) == 1


@pytest.mark.slow
@pytest.mark.docker
def test_the_concurrency_cap_holds_across_workers(
    tmp_path, redis_service, postgres_url, docker_ready
):
    import docker

    cap = 2
    env = {"LOOPWRIGHT_MAX_CONCURRENT_MISSIONS": str(cap), "LOOPWRIGHT_SANDBOX": "docker",
           "LOOPWRIGHT_WARM_POOL": "0"}  # fmt: skip
    with scale_world(tmp_path, redis_url=redis_service.url, database_url=postgres_url,
                     env=env) as scale:  # fmt: skip
        pulls = scale.red_pulls(6)
        server = scale.start_server()
        missions = {scale.deliver(server, scale.check_run(p)).json()["mission"] for p in pulls}
        assert len(missions) == 6
        client = docker.from_env(version="auto")
        peak = 0
        sampling = threading.Event()

        def sample() -> None:
            nonlocal peak
            while not sampling.is_set():
                holding = {
                    (c.get("Labels") or {}).get(MISSION_LABEL)
                    for c in client.api.containers(filters={"label": MISSION_LABEL})
                }
                peak = max(peak, len(holding & missions))
                time.sleep(0.1)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        for _ in range(3):
            scale.start_worker()
        try:
            statuses = scale.wait_all_final(missions, timeout=900)
        finally:
            sampling.set()
            sampler.join(10)
            client.close()
        assert set(statuses.values()) == {"verified"}, (statuses, scale.logs())
        assert 0 < peak <= cap, peak
