"""Live-view fan-out: one mission's events streamed to 100 SSE clients at once.

The server (the App's view in `local` mode, uvicorn, in-memory channels) runs in a child
process that also plays the mission, so its memory is measured alone. Each event carries
the time it was emitted; a client's latency is its arrival time minus that time (one
machine, one clock). Clients are plain asyncio sockets, so client-side parsing stays small.

    .venv/bin/python -m benchmarks.sse_fanout [--clients 100] [--events 300] [--interval-ms 20]
    .venv/bin/python -m benchmarks.sse_fanout --smoke    # 5 clients, 20 events: does it work
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


# -- the server process ------------------------------------------------------------------


def child(data_dir: str, events: int, interval_s: float) -> None:
    from loopwright.app.server import create_app, serve_in_thread
    from loopwright.config import Settings
    from loopwright.events import EventBus
    from loopwright.redaction import Redactor
    from loopwright.request import MissionRequest

    settings = Settings.from_env({"LOOPWRIGHT_DATA_DIR": data_dir})
    app = create_app(settings, mode="local")
    with serve_in_thread(app) as url:
        store = app.state.store
        hub = app.state.hub
        request = MissionRequest(trigger="cli", repo="bench/fanout", clone_url="", head_sha="b")
        mission, _ = store.create_mission(request)
        store.mark_running(mission.id)
        print(json.dumps({"url": url, "mission": mission.id}), flush=True)
        bus = EventBus(mission.id, [store.event_sink(mission.id), hub.sink(mission.id)], Redactor())
        sys.stdin.readline()  # "go": every client is connected
        output = "collected 4 items\n" + "tests/test_totals.py ....  [100%]\n" * 12
        for n in range(events):
            bus.emit(
                "tool_result",
                "loop",
                id=f"c{n}",
                tool="run_command",
                status="ok",
                exit_code=0,
                output=output,
            )
            time.sleep(interval_s)
        bus.emit("done", "deliver", status="verified")
        store.set_status(mission.id, "verified")
        print(json.dumps({"emitted": events + 1}), flush=True)
        sys.stdin.readline()  # "stop"


# -- the clients -------------------------------------------------------------------------


async def client(
    host: str, port: int, path: str, ready: asyncio.Event, latencies: list[float], counts: list[int]
) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(
        f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAccept: text/event-stream\r\n\r\n".encode()
    )
    await writer.drain()
    buffer = b""
    got = 0
    seen_head = False
    while True:
        chunk = await reader.read(65536)
        if not chunk:
            break
        now = time.time()
        buffer += chunk
        if not seen_head and b"\r\n\r\n" in buffer:
            seen_head = True
            ready.set()
        *messages, buffer = buffer.split(b"\r\n\r\n")
        for message in messages:
            for line in message.split(b"\r\n"):
                if line.startswith(b"data: {"):
                    # `ts` is the emit time (milliseconds), stamped by the bus.
                    sent = json.loads(line[6:]).get("ts")
                    if sent is not None:
                        latencies.append(now - float(sent))
                        got += 1
                elif line.startswith(b"event: end"):
                    counts.append(got)
                    writer.close()
                    return
    counts.append(got)


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "benchmarks.sse_fanout",
                "--child",
                tmp,
                "--events",
                str(args.events),
                "--interval-ms",
                str(args.interval_ms),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )
        assert proc.stdin is not None and proc.stdout is not None
        hello = json.loads(proc.stdout.readline())
        url, mission = hello["url"], hello["mission"]
        host, port = url.removeprefix("http://").split(":")
        time.sleep(0.5)
        rss_idle = rss_kb(proc.pid)
        latencies: list[float] = []
        counts: list[int] = []
        readies = [asyncio.Event() for _ in range(args.clients)]
        tasks = [
            asyncio.create_task(
                client(host, int(port), f"/missions/{mission}/events", ready, latencies, counts)
            )
            for ready in readies
        ]
        await asyncio.wait_for(asyncio.gather(*(r.wait() for r in readies)), 30)
        await asyncio.sleep(0.5)
        rss_connected = rss_kb(proc.pid)
        started = time.monotonic()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        await asyncio.wait_for(asyncio.gather(*tasks), 120)
        elapsed = time.monotonic() - started
        rss_after = rss_kb(proc.pid)
        proc.stdout.readline()
        proc.stdin.write("stop\n")
        proc.stdin.flush()
        proc.wait(30)

    expected = args.events + 1
    ms = [v * 1000 for v in latencies]
    print(
        f"clients: {args.clients}, events: {expected} at {args.interval_ms} ms intervals "
        f"({len(ms)} deliveries in {elapsed:.1f} s)"
    )
    print("| measure | value |")
    print("| --- | --- |")
    print(f"| every client got every event exactly once | {all(c == expected for c in counts)} |")
    print(f"| event-to-client latency p50 (ms) | {percentile(ms, 0.50):.1f} |")
    print(f"| event-to-client latency p99 (ms) | {percentile(ms, 0.99):.1f} |")
    print(f"| event-to-client latency max (ms) | {max(ms):.1f} |")
    print(f"| server RSS, idle (MB) | {rss_idle / 1024:.1f} |")
    print(
        f"| server RSS growth, {args.clients} clients connected (MB) | "
        f"{(rss_connected - rss_idle) / 1024:.1f} |"
    )
    print(f"| server RSS growth, after the mission (MB) | {(rss_after - rss_idle) / 1024:.1f} |")
    target = percentile(ms, 0.99) <= 100
    print(f"target p99 <= 100 ms: {'met' if target else 'NOT met'}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--events", type=int, default=300)
    parser.add_argument("--interval-ms", type=float, default=20)
    parser.add_argument("--child", metavar="DATA_DIR")
    parser.add_argument(
        "--smoke", action="store_true", help="5 clients and 20 events, to check it works"
    )
    args = parser.parse_args()
    if args.smoke:
        args.clients, args.events = 5, 20
    if args.child:
        child(args.child, args.events, args.interval_ms / 1000)
        return
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
