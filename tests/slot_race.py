"""A process that races others for mission slots on one store, for the slot tests.

`python -m tests.slot_race acquire URL START ROUNDS GLOBAL_CAP INSTALLATION_CAP INSTALLATIONS NAME`
takes and gives back slots `ROUNDS` times from wall-clock time START; `python -m
tests.slot_race queue URL START GLOBAL_CAP THREADS` runs the store's queued missions on an
`InProcessQueue` until none is left. Both print the intervals they held a slot (or ran a
mission), as JSON lines `[start, end, installation]` of monotonic time, on stdout.
"""

from __future__ import annotations

import json
import sys
import time

from loopwright.store import InProcessQueue, Store


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
    mode, url, start = argv[0], argv[1], float(argv[2])
    with Store(url) as store:
        time.sleep(max(0.0, start - time.time()))
        if mode == "acquire":
            rounds, global_cap, cap, installations, name = argv[3:8]
            intervals = hold_intervals(
                store,
                name,
                int(rounds),
                int(global_cap),
                None if cap == "-" else int(cap),
                int(installations),
            )
        else:
            intervals = run_queue(store, int(argv[3]), int(argv[4]))
    for interval in intervals:
        print(json.dumps(interval))


def run_queue(store: Store, global_cap: int, threads: int) -> list[tuple[float, float, int]]:
    """Run every queued mission of the store on `threads` threads (with other processes
    doing the same), each holding its slot for a moment."""
    from loopwright.missions.result import MissionResult

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
