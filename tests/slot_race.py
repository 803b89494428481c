"""A process that races others for mission slots on one store, for the slot tests.

`python -m tests.slot_race acquire URL START ROUNDS GLOBAL_CAP INSTALLATION_CAP INSTALLATIONS NAME`
takes and gives back slots `ROUNDS` times from wall-clock time START and prints the intervals
it held a slot, as JSON lines `[start, end, installation]` of monotonic time, on stdout.
"""

from __future__ import annotations

import json
import sys
import time

from loopwright.store import Store


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
        time.sleep(0.005)
        end = time.monotonic()
        store.release_slot(mission_id)
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
            raise SystemExit(f"unknown mode {mode!r}")
    for interval in intervals:
        print(json.dumps(interval))


if __name__ == "__main__":
    main(sys.argv[1:])
