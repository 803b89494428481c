"""Webhook acknowledgement under load, against `loopwright serve` in its own process,
side by side with the framework's floor (a bare Litestar endpoint, `litestar_floor.py`,
under uvicorn the same way), each with 1 and 2 worker processes.

100 signed deliveries at once (distinct delivery ids; half are events the App ignores,
half are red checks that each store and queue a mission), several rounds, each once the
previous round's missions have ended and each a burst to the floor and then one to
Loopwright, both servers up, so that both rates of a round meet the same machine:
p50/p99/max of the round trip, deliveries per
second (the median round's), Loopwright's rate as a share of the floor's with the same
number of workers (each round's rate over the floor's in the same round; the median of
those, and their range), and the servers' CPU time per delivery. Then the server (every
worker process) is SIGKILLed in the middle of a load and started again on the same data
directory: every delivery that got a 2xx must have its row in the store, decided, and no
head may have two missions.
Missions fail fast (the GitHub API answers 401), so they never hold the machine.

With `--baseline DIR`, a second `loopwright serve` whose `loopwright` package is the one in
DIR (another checkout, e.g. `git worktree add /tmp/base <rev>`; the dependencies are this
environment's) is measured in the same rounds, so a change is compared with the tree before
it on the same machine at the same moment: the two Loopwright servers take turns after the
floor, in one order on even rounds and the other on odd ones (an odd --rounds gets one more),
each burst once neither has a mission left. The SIGKILL part and the targets are for this
tree only; a baseline's non-2xx answers are in its row and do not fail the run.

Run: python benchmarks/webhook_ack.py [--rounds N] [--concurrency N] [--workers 1,2]
                                      [--baseline DIR]
     python benchmarks/webhook_ack.py --smoke    (one small round each, well under a minute)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import hmac
import json
import os
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests/fixtures/webhooks/check_run.completed.timed_out.json"
SECRET = "benchmark-secret"
TARGET_P99_S = 0.100
TARGET_SHARE = 0.5
"""Loopwright's deliveries per second, as a share of the floor's at the same workers."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _AppOnlyAPI(BaseHTTPRequestHandler):
    """GitHub's `GET /app` (the start-up credential check) and a 401 for everything else,
    so missions fail at their first API call and never compete for the CPU."""

    def do_GET(self) -> None:
        if self.path == "/app":
            self._answer(200, {"id": 1, "slug": "loopwright", "name": "Loopwright"})
        else:
            self._answer(401, {"message": "Bad credentials"})

    do_POST = do_PATCH = do_PUT = do_DELETE = do_GET

    def _answer(self, code: int, body: dict[str, object]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


def start_api() -> str:
    """The GitHub API the servers talk to, on a free loopback port, for this process's life."""
    api = ThreadingHTTPServer(("127.0.0.1", 0), _AppOnlyAPI)
    threading.Thread(target=api.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{api.server_address[1]}"


def server_env(data: Path, api_url: str, quick_writes: bool = False) -> dict[str, str]:
    """`quick_writes` (the smoke run): the missions a burst queues, which between the rounds
    each POST for a token the stub refuses, send those writes 0.05 s apart instead of a
    second, so the wait for an idle server is short. Measured runs keep the default."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()
    quick = {"LOOPWRIGHT_GITHUB_WRITE_INTERVAL_S": "0.05"} if quick_writes else {}
    return {
        **quick,
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "LOOPWRIGHT_GITHUB_APP_ID": "1",
        "LOOPWRIGHT_GITHUB_PRIVATE_KEY": pem,
        "LOOPWRIGHT_WEBHOOK_SECRET": SECRET,
        "LOOPWRIGHT_GITHUB_API_URL": api_url,
        "LOOPWRIGHT_DATA_DIR": str(data),
        "LOOPWRIGHT_SANDBOX": "local",
        "LOOPWRIGHT_MODEL_API_KEY": "sk-benchmark-unused",
    }


class Server:
    """`loopwright serve` (or, with `floor=True`, the bare Litestar app) in its own process
    group, so a SIGKILL takes every worker process at once, as a crash of the host would."""

    def __init__(
        self,
        env: dict[str, str],
        log: Path,
        workers: int = 1,
        floor: bool = False,
        name: str | None = None,
        checkout: Path = ROOT,
    ):
        """`checkout`: whose `loopwright` package it runs (on PYTHONPATH, whatever the
        environment's install points at) and where it starts."""
        self.env, self.log, self.port = {**env, "PYTHONPATH": str(checkout)}, log, free_port()
        self.checkout = checkout
        self.workers, self.floor = workers, floor
        self.name = name or ("floor" if floor else "loopwright")
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        port, workers = str(self.port), str(self.workers)
        if self.floor:
            return [sys.executable, "-m", "uvicorn", "--app-dir", str(ROOT / "benchmarks"),
                    "litestar_floor:app", "--port", port, "--workers", workers,
                    "--log-level", "warning"]  # fmt: skip
        exe = Path(sys.executable).parent / "loopwright"
        return [str(exe), "serve", "--port", port, "--workers", workers]

    def start(self) -> Server:
        with self.log.open("ab") as out:
            # In the checkout it runs: a tree whose `loopwright` restarts itself with a plain
            # `python -m` imports the package of its working directory, not PYTHONPATH's.
            self.proc = subprocess.Popen(
                self.command(), env=self.env, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True, cwd=self.checkout,
            )  # fmt: skip
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError(f"{' '.join(self.command()[:3])} did not start; see {self.log}")

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(60)
        if self.proc:
            with contextlib.suppress(ProcessLookupError):  # workers the parent left behind
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def deliveries(n: int) -> list[tuple[str, str, bytes]]:
    """(delivery id, event, body): alternately an ignored event and a new red check."""
    template = json.loads(FIXTURE.read_text())
    out = []
    for i in range(n):
        if i % 2:
            payload = json.loads(json.dumps(template))
            payload["check_run"]["head_sha"] = hashlib.sha1(uuid.uuid4().bytes).hexdigest()
            out.append((str(uuid.uuid4()), "check_run", json.dumps(payload).encode()))
        else:
            body = json.dumps({"zen": "Keep it logically awesome.", "hook_id": i}).encode()
            out.append((str(uuid.uuid4()), "ping", body))
    return out


def send(client: httpx.Client, url: str, item: tuple[str, str, bytes]) -> tuple[float, int]:
    delivery, event, body = item
    headers = {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": "sha256="
        + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest(),
        "Content-Type": "application/json",
    }
    started = time.perf_counter()
    try:
        status = client.post(f"{url}/webhooks/github", content=body, headers=headers).status_code
    except httpx.HTTPError:
        status = 0
    return time.perf_counter() - started, status


def raw_request(port: int, item: tuple[str, str, bytes]) -> bytes:
    """One delivery as the bytes GitHub's sender writes: signed, one request per connection."""
    delivery, event, body = item
    signature = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    head = (
        f"POST /webhooks/github HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"X-GitHub-Event: {event}\r\nX-GitHub-Delivery: {delivery}\r\n"
        f"X-Hub-Signature-256: sha256={signature}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


async def _exchange(port: int, request: bytes) -> tuple[float, int]:
    """Connect, send, read the whole answer: the round trip one sender sees."""
    started = time.perf_counter()
    status = 0
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(request)
            status = int((await reader.readline()).split()[1])
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            await reader.readexactly(length)
        finally:
            writer.close()
    except (OSError, ValueError, IndexError, asyncio.IncompleteReadError):
        status = 0
    return time.perf_counter() - started, status


def burst(url: str, items: list[tuple[str, str, bytes]]) -> tuple[list[float], list[int], float]:
    """All `items` at once, one connection each (as GitHub's senders are independent).

    The senders are coroutines of one event loop writing prepared requests: the machine's
    two cores are shared with the server, and a client of a hundred threads (one HTTP
    client each) took more CPU per delivery than the server it measured, which bounded
    the floor by the client rather than by the framework.
    """
    port = int(url.rsplit(":", 1)[1])
    requests = [raw_request(port, item) for item in items]

    async def all_at_once() -> list[tuple[float, int]]:
        return await asyncio.gather(*(_exchange(port, r) for r in requests))

    started = time.perf_counter()
    results = asyncio.run(all_at_once())
    wall = time.perf_counter() - started
    return [r[0] for r in results], [r[1] for r in results], wall


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@dataclass
class Measured:
    name: str
    workers: int
    latencies: list[float]
    rates: list[float]
    """Deliveries per second of each round, in the order of the rounds."""
    bad: int
    cpu_ms: float
    """CPU time of every server process per delivery, while the bursts were answered."""

    @property
    def rate(self) -> float:
        """The median round's rate."""
        return statistics.median(self.rates)


def shares(server: Measured, floor: Measured) -> list[float]:
    """The server's rate over the floor's, round by round: the two bursts of a round meet
    the same machine, which moved by a third from one run to the next and within a run."""
    return [ours / theirs for ours, theirs in zip(server.rates, floor.rates, strict=True)]


def group_cpu_s(pgid: int) -> float:
    """User and system CPU seconds of the processes in process group `pgid` (/proc)."""
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended
            continue
        if int(fields[2]) == pgid:
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def wait_idle(server: Server, timeout: float = 60) -> None:
    """Until no mission the server stored is queued or running: each round is a burst that
    arrives at an idle server, not one that meets the previous round's fifty missions
    starting (each signs a token request, fails at the stub's 401 and ends)."""
    if server.floor:
        return
    database = Path(server.env["LOOPWRIGHT_DATA_DIR"]) / "loopwright.db"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.closing(sqlite3.connect(database, timeout=10)) as conn:
            busy = conn.execute(
                "SELECT COUNT(*) FROM missions WHERE status IN ('queued', 'running')"
            ).fetchone()[0]
        if not busy:
            return
        time.sleep(0.1)
    raise RuntimeError(f"missions still queued or running after {timeout:.0f} s")


def measure(servers: list[Server], rounds: int, concurrency: int) -> list[Measured]:
    """The floor (first) and the Loopwright servers, all started, in turns: each round is
    a burst to each, so the rates of a round meet the same machine (the floor's alone moved
    by half from one run to the next when each was measured whole). The Loopwright servers
    follow the floor in one order on even rounds and in the other on odd ones, and every
    burst waits until no Loopwright server has a mission left, so none meets the missions
    another one's burst queued."""
    floor, *ours = servers
    latencies: dict[str, list[float]] = {each.name: [] for each in servers}
    rates: dict[str, list[float]] = {each.name: [] for each in servers}
    bad = dict.fromkeys(latencies, 0)
    cpu = dict.fromkeys(latencies, 0.0)
    try:
        for each in servers:
            each.start()
            burst(each.url, deliveries(20))  # warm-up: connections, SQLite pages
        for n in range(rounds):
            for each in [floor, *(ours if n % 2 == 0 else ours[::-1])]:
                assert each.proc is not None
                for other in ours:
                    wait_idle(other)
                items = deliveries(concurrency)
                before = group_cpu_s(each.proc.pid)
                times, codes, wall = burst(each.url, items)
                cpu[each.name] += group_cpu_s(each.proc.pid) - before
                latencies[each.name].extend(times)
                bad[each.name] += sum(1 for c in codes if not 200 <= c < 300)
                rates[each.name].append(len(times) / wall)
    finally:
        for each in servers:
            each.stop()
    return [
        Measured(
            each.name,
            each.workers,
            latencies[each.name],
            rates[each.name],
            bad[each.name],
            cpu[each.name] / len(latencies[each.name]) * 1000,
        )
        for each in servers
    ]


def kill_mid_load(
    env: dict[str, str], log: Path, total: int, data: Path, workers: int
) -> dict[str, int]:
    server = Server(env, log, workers).start()
    items = deliveries(total)
    answered: dict[str, int] = {}
    lock = threading.Lock()
    killed = threading.Event()

    def worker(chunk: list[tuple[str, str, bytes]]) -> None:
        with httpx.Client(timeout=10) as client:
            for item in chunk:
                if killed.is_set():
                    return
                _, status = send(client, server.url, item)
                with lock:
                    answered[item[0]] = status
                    if len(answered) >= total // 3 and not killed.is_set():
                        killed.set()
                        server.kill()

    chunks = [items[i::25] for i in range(25)]
    threads = [threading.Thread(target=worker, args=(c,)) for c in chunks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    server.kill()
    again = Server(env, log, workers).start()
    again.stop()
    with sqlite3.connect(data / "loopwright.db") as conn:
        rows = dict(conn.execute("SELECT id, decision FROM deliveries").fetchall())
        doubled = conn.execute(
            "SELECT COUNT(*) FROM (SELECT repo, head_sha FROM missions "
            "GROUP BY repo, head_sha HAVING COUNT(*) > 1)"
        ).fetchone()[0]
    ok = {d for d, status in answered.items() if 200 <= status < 300}
    return {
        "sent": len(answered),
        "2xx": len(ok),
        "failed (connection cut)": sum(1 for s in answered.values() if s == 0),
        "stored": len(set(rows) & set(answered)),
        "lost (2xx without a row)": len(ok - set(rows)),
        "undecided after restart": sum(1 for d in ok & set(rows) if rows[d] is None),
        "heads with two missions": int(doubled),
    }


def describe(checkout: Path) -> str:
    """The checkout's commit (`-dirty` when it has changes) when it is a git checkout, else its
    path."""
    try:
        commit = subprocess.run(
            ["git", "-C", str(checkout), "describe", "--always", "--dirty"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return str(checkout)
    return f"{commit} at {checkout}" if commit else str(checkout)


def table(results: list[Measured]) -> list[str]:
    floor = {m.workers: m for m in results if m.name == "floor"}
    names = {"floor": "bare Litestar (floor)", "loopwright": "loopwright serve"}
    lines = [
        "| server | workers | p50 | p99 | max | deliveries/s | share of floor "
        "| rounds' shares | server CPU per delivery | non-2xx |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for m in results:
        share, spread = "", ""
        if m.name != "floor":
            each = shares(m, floor[m.workers])
            share, spread = f"{statistics.median(each):.2f}", f"{min(each):.2f}-{max(each):.2f}"
        name = names.get(m.name, f"loopwright serve, {m.name}")
        lines.append(
            f"| {name} | {m.workers} | {pct(m.latencies, 0.5) * 1000:.1f} ms "
            f"| {pct(m.latencies, 0.99) * 1000:.1f} ms | {max(m.latencies) * 1000:.1f} ms "
            f"| {m.rate:.0f} | {share} | {spread} | {m.cpu_ms:.2f} ms | {m.bad} |"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--workers", default="1,2", help="worker counts, e.g. 1,2")
    parser.add_argument("--kill-total", type=int, default=600)
    parser.add_argument(
        "--baseline",
        type=Path,
        help="a checkout of Loopwright to measure in the same rounds (its loopwright package)",
    )
    parser.add_argument(
        "--smoke", action="store_true", help="one small round each; checks the table is made"
    )
    args = parser.parse_args()
    if args.smoke:
        args.rounds, args.concurrency, args.kill_total = 1, 20, 90
    counts = [int(w) for w in args.workers.split(",")]
    baseline: Path | None = args.baseline.resolve() if args.baseline else None
    if baseline is not None and not (baseline / "loopwright" / "__init__.py").is_file():
        parser.error(f"--baseline {baseline}: no loopwright package there; give a checkout")
    if baseline is not None and args.rounds % 2:
        args.rounds += 1  # each Loopwright server right after the floor as often as the other
        print(f"--baseline: {args.rounds} rounds, so both orders come as often")
    api = start_api()
    quick = args.smoke
    results: list[Measured] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for workers in counts:
            floor = Server(server_env(root / f"floor{workers}", api), root / "floor.log", workers,
                           floor=True)  # fmt: skip
            env = server_env(root / f"data{workers}", api, quick)
            servers = [floor, Server(env, root / f"serve{workers}.log", workers)]
            if baseline is not None:
                base_env = server_env(root / f"base{workers}", api, quick)
                servers.append(Server(base_env, root / f"base{workers}.log", workers,
                                      name=f"baseline ({describe(baseline)})",
                                      checkout=baseline))  # fmt: skip
            results.extend(measure(servers, args.rounds, args.concurrency))
        kill_workers = max(counts)
        data = root / "kill"
        loss = kill_mid_load(
            server_env(data, api, quick), root / "kill.log", args.kill_total, data, kill_workers
        )
    lines = table(results)
    print(f"webhook acknowledgement, {args.rounds} rounds x {args.concurrency} concurrent")
    print("\n".join(lines))
    ours = [m for m in results if m.name == "loopwright"]
    floors = {m.workers: m for m in results if m.name == "floor"}
    best = max(ours, key=lambda m: m.workers)
    p99 = pct(best.latencies, 0.99)
    share = statistics.median(shares(best, floors[best.workers]))
    print()
    print(
        f"targets at {best.workers} workers: p99 {p99 * 1000:.1f} ms "
        f"(<= {TARGET_P99_S * 1000:.0f} ms: {'met' if p99 <= TARGET_P99_S else 'not met'}), "
        f"{share:.2f} of the floor's rate "
        f"(>= {TARGET_SHARE}: {'met' if share >= TARGET_SHARE else 'not met'})"
    )
    print()
    print(
        f"SIGKILL of every process of this tree's server after a third of {args.kill_total} "
        "deliveries "
        f"(25 senders, {kill_workers} workers), then restart"
    )
    print("| " + " | ".join(loss) + " |")
    print("|" + " --- |" * len(loss))
    print("| " + " | ".join(str(v) for v in loss.values()) + " |")
    # A baseline's own failures are in its row; the run fails only for the tree under test.
    bad = sum(m.bad for m in results if not m.name.startswith("baseline"))
    broken = loss["lost (2xx without a row)"] + loss["undecided after restart"]
    broken += loss["heads with two missions"]
    if args.smoke:
        rows = 3 if baseline is not None else 2
        assert len(lines) == 2 + rows * len(counts), "the table lacks a row"
        assert loss["2xx"] > 0, "no delivery was answered before the kill"
    return 0 if not bad and not broken else 1


if __name__ == "__main__":
    raise SystemExit(main())
