"""`loopwright serve --workers 2`: the real CLI, two uvicorn worker processes over one
SQLite store, real HTTP and signed deliveries.

A burst of red check runs of distinct heads, replays of some delivery ids and second
deliveries about some heads: every delivery is answered 2xx once, each head has exactly one
mission, replays are answered as duplicates. A SIGKILL of every process mid-burst loses no
answered delivery and makes no second mission after the restart. A sign-in made on one
worker holds on the other, and so does signing out.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.integration.app_harness import ServeProcess, World, app_world, post_webhook

# Missions end at admission (`auto_fix` is off on the default branch), so a burst of them
# does not hold the machine.
NO_AUTO_FIX = "auto_fix: false\ntest_cmd: python -m pytest\n"


def _red_check(world: World, head: str) -> bytes:
    payload = world.check_run_payload()
    payload["check_run"]["head_sha"] = head
    payload["check_run"]["check_suite"]["pull_requests"] = []
    payload["check_run"]["check_suite"]["head_branch"] = "main"
    return json.dumps(payload).encode()


def _head() -> str:
    return uuid.uuid4().hex + uuid.uuid4().hex[:8]


def _burst(url: str, items: list[tuple[str, bytes]]) -> list[httpx.Response]:
    """(delivery id, body) all at once, one connection each."""
    barrier = threading.Barrier(len(items))

    def one(item: tuple[str, bytes]) -> httpx.Response:
        with httpx.Client(timeout=60) as client:
            barrier.wait()
            return post_webhook(client, url, "check_run", item[1], delivery=item[0])

    with ThreadPoolExecutor(len(items)) as pool:
        return list(pool.map(one, items))


def _worker_pids(server: ServeProcess) -> set[str]:
    return set(re.findall(r"Started server process \[(\d+)\]", server.log.read_text()))


def _log_lines(server: ServeProcess) -> list[dict[str, Any]]:
    """The server's JSON log lines (its log also holds whatever else was printed)."""
    lines = []
    for text in server.log.read_text().splitlines():
        with contextlib.suppress(ValueError):
            line = json.loads(text)
            if isinstance(line, dict):
                lines.append(line)
    return lines


def _start_two(world: World, server: ServeProcess) -> ServeProcess:
    """Start the server and wait until both workers took the socket (the first to start
    answers /healthz before the second is up)."""
    server.start()
    deadline = time.monotonic() + 180
    while len(_worker_pids(server)) < 2:
        assert time.monotonic() < deadline, server.log.read_text()[-3000:]
        time.sleep(0.1)
    return server


@pytest.mark.slow
def test_a_burst_on_two_workers_answers_each_delivery_once(tmp_path):
    with app_world(tmp_path, [], config=NO_AUTO_FIX, serve=False) as world:
        server = _start_two(world, ServeProcess(world.env, tmp_path / "serve.log", workers=2))
        try:
            heads = [_head() for _ in range(40)]
            firsts = [(str(uuid.uuid4()), _red_check(world, h)) for h in heads]
            replays = firsts[:10]  # the same delivery id again (GitHub's redelivery)
            seconds = [(str(uuid.uuid4()), _red_check(world, h)) for h in heads[10:20]]
            items = firsts + replays + seconds
            answers = _burst(server.url, items)
        finally:
            server.stop()
        # Each worker's event loop is uvloop's (a declared dependency that uvicorn picks up
        # by itself): see docs/benchmarks.md for what it saves.
        started = [line for line in _log_lines(server) if line.get("event") == "app started"]
        assert [line["event_loop"] for line in started] == ["uvloop.Loop"] * 2, started
        assert all(200 <= a.status_code < 300 for a in answers), [a.text for a in answers]
        by_delivery: dict[str, list[dict[str, Any]]] = {}
        for (delivery, _), answer in zip(items, answers, strict=True):
            by_delivery.setdefault(delivery, []).append(answer.json())
        for delivery, _ in replays:
            bodies = by_delivery[delivery]
            # One of the two is the real answer, the other names the delivery as a duplicate.
            assert sorted(b["status"] for b in bodies) == ["duplicate", "queued"], bodies
            assert {"status": "duplicate", "delivery": delivery} in bodies
        for delivery, _ in firsts[10:]:
            assert [b["status"] for b in by_delivery[delivery]] in (["queued"], ["duplicate"])
        # Two deliveries about one head: one mission, both answers name it.
        for (first, _), (second, _) in zip(firsts[10:20], seconds, strict=True):
            named = {b.get("mission") for b in by_delivery[first] + by_delivery[second]}
            assert len(named) == 1 and None not in named, (first, second)
        missions = world.db("SELECT head_sha, COUNT(*) FROM missions GROUP BY head_sha")
        assert sorted(missions) == sorted((h, 1) for h in heads)
        stored = world.db("SELECT id, decision FROM deliveries")
        assert sorted(d for d, _ in stored) == sorted({d for d, _ in items})
        assert all(decision for _, decision in stored), stored


@pytest.mark.slow
def test_sigkill_of_every_worker_mid_burst_loses_no_answered_delivery(tmp_path):
    with app_world(tmp_path, [], config=NO_AUTO_FIX, serve=False) as world:
        server = _start_two(world, ServeProcess(world.env, tmp_path / "serve.log", workers=2))
        heads = [_head() for _ in range(150)]
        # Every head twice, so a mission made before the kill is joined, never remade, by
        # the delivery about the same head after it.
        items = [(str(uuid.uuid4()), _red_check(world, h)) for h in heads + heads]
        answered: dict[str, int] = {}
        lock = threading.Lock()
        killed = threading.Event()

        def sender(chunk: list[tuple[str, bytes]]) -> None:
            with httpx.Client(timeout=10) as client:
                for delivery, body in chunk:
                    if killed.is_set():
                        return
                    try:
                        status = post_webhook(
                            client, server.url, "check_run", body, delivery=delivery
                        ).status_code
                    except httpx.HTTPError:
                        status = 0
                    with lock:
                        answered[delivery] = status
                        if len(answered) >= 100 and not killed.is_set():
                            killed.set()
                            server.kill()

        try:
            threads = [threading.Thread(target=sender, args=(items[i::20],)) for i in range(20)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        finally:
            server.kill()
        ok = {d for d, status in answered.items() if 200 <= status < 300}
        assert len(ok) >= 50, answered
        again = ServeProcess(world.env, tmp_path / "again.log", workers=2)
        _start_two(world, again)
        try:
            # Every delivery not answered before the kill is sent again after it.
            with httpx.Client(timeout=30) as client:
                late = [
                    post_webhook(client, again.url, "check_run", body, delivery=delivery)
                    for delivery, body in items
                    if delivery not in ok
                ]
            assert all(200 <= a.status_code < 300 for a in late), [a.text for a in late]
            for delivery, _ in items:
                if delivery in ok:  # a replay of an answered delivery is a duplicate
                    replay = next(b for d, b in items if d == delivery)
                    with httpx.Client(timeout=30) as client:
                        answer = post_webhook(
                            client, again.url, "check_run", replay, delivery=delivery
                        )
                    assert answer.json() == {"status": "duplicate", "delivery": delivery}
                    break
        finally:
            again.stop()
        stored = dict(world.db("SELECT id, decision FROM deliveries"))
        assert ok <= set(stored), sorted(ok - set(stored))
        assert all(stored[d] for d in ok), [d for d in ok if not stored[d]]
        assert set(stored) == {d for d, _ in items}
        missions = world.db("SELECT head_sha, COUNT(*) FROM missions GROUP BY head_sha")
        assert sorted(missions) == sorted((h, 1) for h in heads)


@pytest.mark.slow
def test_a_sign_in_holds_on_every_worker(tmp_path):
    token = "dashboard-token-" + uuid.uuid4().hex
    with app_world(
        tmp_path, [], config=NO_AUTO_FIX, serve=False, env={"LOOPWRIGHT_DASHBOARD_TOKEN": token}
    ) as world:
        server = _start_two(world, ServeProcess(world.env, tmp_path / "serve.log", workers=2))
        try:
            with httpx.Client(timeout=10) as anonymous:
                assert anonymous.get(f"{server.url}/api/missions").status_code == 401
            pids: set[str] = set()
            session = httpx.Client(timeout=10)
            login = session.post(
                f"{server.url}/login", data={"token": token, "next": "/"}, follow_redirects=False
            )
            assert login.status_code == 303, login.text
            # Fresh connections, so the kernel spreads them over both workers.
            cookies = dict(session.cookies)
            for _ in range(20):
                with httpx.Client(timeout=10, cookies=cookies) as client:
                    assert client.get(f"{server.url}/api/missions").status_code == 200
            with httpx.Client(timeout=10, cookies=cookies) as client:
                page = client.get(f"{server.url}/")
                csrf = re.search(r'name="csrf-token" content="([^"]+)"', page.text)
                headers = {"X-Loopwright-CSRF": csrf.group(1)} if csrf else {}
                out = client.post(f"{server.url}/logout", headers=headers)
                assert out.status_code in (200, 303), out.text
            time.sleep(0.2)
            for _ in range(20):
                with httpx.Client(timeout=10, cookies=cookies) as client:
                    assert client.get(f"{server.url}/api/missions").status_code == 401
            pids = _worker_pids(server)
        finally:
            server.stop()
        assert len(pids) == 2


def test_serve_refuses_zero_workers(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    done = subprocess.run(
        [sys.executable, "-m", "loopwright.cli", "serve", "--workers", "0"],
        env={
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
            "LOOPWRIGHT_DATA_DIR": str(tmp_path / "data"),
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "--workers 0: give 1 or more worker processes" in done.stderr
