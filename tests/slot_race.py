"""A process that races others for mission slots on one store, for the slot tests.

`python -m tests.slot_race acquire URL ROUNDS GLOBAL_CAP INSTALLATION_CAP INSTALLATIONS NAME`
takes and gives back slots `ROUNDS` times; `python -m tests.slot_race queue URL GLOBAL_CAP
THREADS` runs the store's queued missions on an `InProcessQueue` until none is left. Both
print the intervals they held a slot (or ran a mission), as JSON lines `[start, end,
installation]` of monotonic time, on stdout.

Each racer prints `ready` once its imports are done and its store is open, then waits for a
line on stdin: `start_racers` sends it to all of them at once. (A start time a few seconds
ahead was not enough: on a loaded machine one racer's imports took 13 s, and the other had
run every mission by then.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from loopwright.missions.result import MissionResult
from loopwright.store import InProcessQueue, Store

ROOT = Path(__file__).resolve().parent.parent


def start_racers(racers: list[list[str]]) -> list[subprocess.Popen[str]]:
    """Start one racer per argument list, and let them go together once all are ready."""
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.slot_race", *args],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for args in racers
    ]
    for process in processes:
        assert process.stdout is not None
        assert process.stdout.readline() == "ready\n", "a racer ended before it was ready"
    for process in processes:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    return processes


def hold_intervals(
    store: Store,
    name: str,
    rounds: int,
    global_cap: int,
    installation_cap: int | None,
    installations: int,
) -> list[tuple[float, float, int]]:
    """Take and give back a slot `rounds` times, for missions of rotating installations."""
    held: list[tuple[float, float, int]] = []
    n = 0
    while len(held) < rounds:
        n += 1
        installation = n % installations
        mission_id = f"{name}-{n}"
        if not store.acquire_slot(
            mission_id, installation, f"race:{name}", global_cap, installation_cap
        ):
            time.sleep(0.001)
            continue
        start = time.monotonic()
        # Long beside a slot query, so racers on a loaded machine still overlap.
        time.sleep(0.05)
        end = time.monotonic()
        store.release_slot(mission_id, f"race:{name}")
        held.append((start, end, installation))
    return held


def main(argv: list[str]) -> None:
    mode, url = argv[0], argv[1]
    with Store(url) as store:
        print("ready", flush=True)
        sys.stdin.readline()
        if mode == "acquire":
            rounds, global_cap, cap, installations, name = argv[2:7]
            intervals = hold_intervals(
                store,
                name,
                int(rounds),
                int(global_cap),
                None if cap == "-" else int(cap),
                int(installations),
            )
        else:
            intervals = run_queue(store, int(argv[2]), int(argv[3]))
    for interval in intervals:
        print(json.dumps(interval))


def run_queue(store: Store, global_cap: int, threads: int) -> list[tuple[float, float, int]]:
    """Run every queued mission of the store on `threads` threads (with other processes
    doing the same), each holding its slot for a moment."""
    ran: list[tuple[float, float, int]] = []

    def run(mission_id: str) -> None:
        start = time.monotonic()
        time.sleep(0.15)
        ran.append((start, time.monotonic(), 0))
        store.mark_finished(MissionResult(mission_id, "verified"))

    queue = InProcessQueue(store, run, threads, global_cap=global_cap, retry_s=0.05)
    queue.start()
    for mission in store.queued_missions():
        queue.submit(mission.id)
    while store.count_by_status().keys() & {"queued", "running"}:
        time.sleep(0.05)
    if not queue.stop(timeout=30):
        raise SystemExit("the queue did not stop")
    return ran


if __name__ == "__main__":
    main(sys.argv[1:])
