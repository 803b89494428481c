"""Scale-out: missions per minute with 1, 2 and 3 `loopwright worker` processes on one Redis
queue and one PostgreSQL store, queue latency, and webhook acknowledgement with 2 servers.

Each round builds a fresh world (`tests/integration/scale_world.py`): the loopback git
server and fake GitHub, a scripted model that makes the python-invoice fix in five steps for
every mission, a PostgreSQL cluster and a Redis server of the benchmark's own. The workers
start first and say they are ready; then one `loopwright serve` takes one signed red
`check_run` per pull request, all at once, and the round ends when every mission is
verified with its pull request open.

- missions/min: missions ÷ (last mission's end - first delivery), and its ratio to 1 worker.
- queue latency: the mission stored and queued (its `created_at`) → its sandbox starting
  (the `sandbox_start` phase's start), p50 and p99 over every mission of the round.
- webhook ack with 2 servers: 100 deliveries at once, split over two `serve` processes in
  queue mode (each red check stores a mission and queues it; no worker runs), p50/p99.

A mission holds a sandbox, runs the example's suite twice and makes five model calls; with
`LOOPWRIGHT_MAX_CONCURRENT_MISSIONS` set to the worker count times 2, the rate grows with
workers only until the machine's cores are busy.

    .venv/bin/python -m benchmarks.scale_out [--missions 12] [--workers 1,2,3]
                                              [--sandbox docker|local] [--smoke]

`--smoke`: 2 missions with 1 and 2 workers, 20 deliveries, GitHub writes 0.05 s apart, to
check the benchmark works.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from benchmarks.app_mission import prepare_sandbox
from tests.integration.app_harness import post_webhook
from tests.integration.scale_world import ScaleWorld, scale_world
from tests.services import postgres_cluster, redis_server

PRODUCTION_WRITES = {"LOOPWRIGHT_GITHUB_WRITE_INTERVAL_S": "1"}
"""GitHub writes a second apart, as against github.com (the test harness spaces them less)."""
QUICK_WRITES = {"LOOPWRIGHT_GITHUB_WRITE_INTERVAL_S": "0.05"}
"""The smoke run's: it checks that the benchmark works, and its numbers are not reported."""

READY_LINE = "worker running up to"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _wait_ready(scale: ScaleWorld, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(READY_LINE in w.log.read_text(errors="replace") for w in scale.workers):
            return
        if not all(w.alive() for w in scale.workers):
            break
        time.sleep(0.2)
    raise SystemExit(f"the workers did not start:\n{scale.logs()}")


def _epoch(value: datetime.datetime) -> float:
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.UTC)
    return value.timestamp()


def one_round(tmp: Path, redis_url: str, database_url: str, workers: int, missions: int,
              sandbox: str, writes: dict[str, str]) -> dict[str, object]:  # fmt: skip
    env = {
        "LOOPWRIGHT_SANDBOX": sandbox,
        "LOOPWRIGHT_MAX_CONCURRENT_MISSIONS": str(workers * 2),
        **writes,
    }
    with scale_world(tmp, redis_url=redis_url, database_url=database_url, env=env) as scale:
        pulls = scale.red_pulls(missions)
        for _ in range(workers):
            scale.start_worker()
        _wait_ready(scale)
        server = scale.start_server()
        bodies = [scale.check_run(p) for p in pulls]
        first = time.time()
        with ThreadPoolExecutor(len(bodies)) as pool:
            answers = list(pool.map(lambda b: scale.deliver(server, b), bodies))
        if any(a.status_code != 202 for a in answers):
            raise SystemExit(f"a delivery was not accepted: {[a.text for a in answers]}")
        ids = {a.json()["mission"] for a in answers}
        statuses = scale.wait_all_final(ids, timeout=1800)
        if set(statuses.values()) != {"verified"}:
            raise SystemExit(f"not every mission was verified: {statuses}\n{scale.logs()}")
        if len(scale.fix_pulls()) != missions:
            raise SystemExit("a verified mission has no pull request on the fake GitHub")
        ends: list[float] = []
        latency: list[float] = []
        for mission_id in ids:
            mission = scale.store.get_mission(mission_id)
            assert mission is not None
            events = scale.store.events_after(mission_id, 0)
            ends.append(events[-1]["ts"])
            start = next(
                e for e in events if e["type"] == "phase" and e.get("name") == "sandbox_start"
            )
            latency.append(start["ts"] - start["duration_s"] - _epoch(mission.created_at))
        for worker in scale.workers:
            worker.stop()
        return {"per_min": missions / ((max(ends) - first) / 60), "latency": latency}


def ack_with_two_servers(tmp: Path, redis_url: str, database_url: str, deliveries: int,
                         sandbox: str, writes: dict[str, str]) -> list[float]:  # fmt: skip
    env = {"LOOPWRIGHT_SANDBOX": sandbox, **writes}
    with scale_world(tmp, redis_url=redis_url, database_url=database_url, env=env) as scale:
        pulls = scale.red_pulls(1)
        servers = [scale.start_server(), scale.start_server()]
        body = scale.check_run(pulls[0])
        head = pulls[0].head_sha.encode()

        def fresh() -> list[bytes]:
            # Distinct heads: each red check stores and queues its own mission.
            return [body.replace(head, (uuid.uuid4().hex * 2)[:40].encode())
                    for _ in range(deliveries)]  # fmt: skip

        def burst(bodies: list[bytes]) -> list[float]:
            barrier = threading.Barrier(deliveries)

            def one(n: int) -> float:
                with httpx.Client(timeout=60) as client:
                    barrier.wait()
                    started = time.perf_counter()
                    answer = post_webhook(client, servers[n % 2].url, "check_run", bodies[n])
                    took = time.perf_counter() - started
                if answer.status_code != 202:
                    raise SystemExit(f"delivery refused: {answer.status_code} {answer.text}")
                return took * 1000

            with ThreadPoolExecutor(deliveries) as pool:
                return list(pool.map(one, range(deliveries)))

        burst(fresh())  # warm-up: the first requests of a process pay its imports and pools
        return burst(fresh())


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--missions", type=int, default=12)
    parser.add_argument("--workers", default="1,2,3")
    parser.add_argument("--deliveries", type=int, default=100)
    parser.add_argument("--sandbox", choices=("docker", "local"), default="docker")
    parser.add_argument("--smoke", action="store_true", help="a small run, to check it works")
    args = parser.parse_args()
    counts = [int(n) for n in args.workers.split(",")] if not args.smoke else [1, 2]
    missions = 2 if args.smoke else args.missions
    deliveries = 20 if args.smoke else args.deliveries
    writes = QUICK_WRITES if args.smoke else PRODUCTION_WRITES
    prepare_sandbox(args.sandbox)
    rows: list[tuple[int, float, list[float]]] = []
    with postgres_cluster() as postgres, contextlib.ExitStack() as stack:
        for workers in counts:
            redis = stack.enter_context(redis_server())
            with tempfile.TemporaryDirectory() as tmp:
                result = one_round(Path(tmp), redis.url, postgres.new_database(), workers,
                                   missions, args.sandbox, writes)  # fmt: skip
            rows.append((workers, float(result["per_min"]), list(result["latency"])))  # type: ignore[call-overload]
            redis.stop()
        redis = stack.enter_context(redis_server())
        with tempfile.TemporaryDirectory() as tmp:
            acks = ack_with_two_servers(Path(tmp), redis.url, postgres.new_database(),
                                        deliveries, args.sandbox, writes)  # fmt: skip
    base = rows[0][1]
    print(f"missions per round: {missions}, sandbox: {args.sandbox}, cores: {os.cpu_count()}")
    print("| workers | missions/min | ratio to 1 worker | queue latency p50 s | p99 s |")
    print("| --- | --- | --- | --- | --- |")
    for workers, per_min, latency in rows:
        print(
            f"| {workers} | {per_min:.1f} | {per_min / base:.2f}x | "
            f"{statistics.median(latency):.2f} | {percentile(latency, 0.99):.2f} |"
        )
    print()
    print("| webhook ack, 2 servers | deliveries | p50 ms | p99 ms | max ms |")
    print("| --- | --- | --- | --- | --- |")
    print(
        f"| queue mode (Redis, PostgreSQL) | {len(acks)} | {statistics.median(acks):.1f} | "
        f"{percentile(acks, 0.99):.1f} | {max(acks):.1f} |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
