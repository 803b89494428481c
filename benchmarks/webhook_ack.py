"""Webhook acknowledgement under load, against `loopwright serve` in its own process.

100 signed deliveries at once (distinct delivery ids; half are events the App ignores,
half are red checks that each store and queue a mission), several rounds: p50/p99 of the
round trip and deliveries per second. Then the server is SIGKILLed in the middle of a
load and started again on the same data directory: every delivery that got a 2xx must
have its row in the store. Missions fail fast (the GitHub API points at a closed port),
so the workers never hold the machine.

Run: python benchmarks/webhook_ack.py [--rounds N] [--concurrency N]
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests/fixtures/webhooks/check_run.completed.timed_out.json"
SECRET = "benchmark-secret"
TARGET_P99_S = 0.050


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_env(data: Path, github_url: str | None = None, pem: str | None = None) -> dict[str, str]:
    if pem is None:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        ).decode()
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "LOOPWRIGHT_GITHUB_APP_ID": "1",
        "LOOPWRIGHT_GITHUB_PRIVATE_KEY": pem,
        "LOOPWRIGHT_WEBHOOK_SECRET": SECRET,
        "LOOPWRIGHT_GITHUB_API_URL": github_url or f"http://127.0.0.1:{free_port()}",
        "LOOPWRIGHT_DATA_DIR": str(data),
        "LOOPWRIGHT_SANDBOX": "local",
        "LOOPWRIGHT_MODEL_API_KEY": "sk-benchmark-unused",
    }


class Server:
    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.env, self.log, self.port = env, log, free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Server:
        exe = Path(sys.executable).parent / "loopwright"
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [str(exe), "serve", "--port", str(self.port)],
                env=self.env, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError(f"serve did not start; see {self.log}")

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.kill()


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


def burst(url: str, items: list[tuple[str, str, bytes]]) -> tuple[list[float], list[int], float]:
    """All `items` at once, one connection each (as GitHub's senders are independent)."""
    barrier = threading.Barrier(len(items))
    clients = [httpx.Client(timeout=30) for _ in items]

    def one(index: int) -> tuple[float, int]:
        barrier.wait()
        return send(clients[index], url, items[index])

    started = time.perf_counter()
    with ThreadPoolExecutor(len(items)) as pool:
        results = list(pool.map(one, range(len(items))))
    wall = time.perf_counter() - started
    for client in clients:
        client.close()
    return [r[0] for r in results], [r[1] for r in results], wall


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def kill_mid_load(env: dict[str, str], log: Path, total: int, data: Path) -> dict[str, int]:
    server = Server(env, log).start()
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
    again = Server(env, log).start()
    again.stop()
    with sqlite3.connect(data / "loopwright.db") as conn:
        stored = {row[0] for row in conn.execute("SELECT id FROM deliveries")}
    ok = {d for d, status in answered.items() if 200 <= status < 300}
    return {
        "sent": len(answered),
        "2xx": len(ok),
        "failed (connection cut)": sum(1 for s in answered.values() if s == 0),
        "stored": len(stored & set(answered)),
        "lost (2xx without a row)": len(ok - stored),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--smoke", action="store_true", help="1 round of 10, to check it works")
    args = parser.parse_args()
    killed_after = 600
    if args.smoke:
        args.rounds, args.concurrency, killed_after = 1, 10, 60
    # `serve` checks at start that it reaches GitHub: the fake answers for the App.
    from tests.fakes.github import FakeGitHub

    with tempfile.TemporaryDirectory() as tmp, FakeGitHub(1) as github:
        root = Path(tmp)
        env = server_env(root / "data", github.url, github.private_key_pem)
        server = Server(env, root / "serve.log").start()
        latencies: list[float] = []
        statuses: list[int] = []
        rates = []
        try:
            burst(server.url, deliveries(20))  # warm-up: connections, SQLite pages
            for _ in range(args.rounds):
                times, codes, wall = burst(server.url, deliveries(args.concurrency))
                latencies += times
                statuses += codes
                rates.append(len(times) / wall)
        finally:
            server.stop()
        loss = kill_mid_load(
            server_env(root / "data2", github.url, github.private_key_pem),
            root / "serve2.log",
            killed_after,
            root / "data2",
        )
    bad = [s for s in statuses if not 200 <= s < 300]
    p50, p99 = pct(latencies, 0.50), pct(latencies, 0.99)
    print(f"webhook acknowledgement, {args.rounds} rounds x {args.concurrency} concurrent")
    print("| metric | value | target | met |")
    print("| --- | --- | --- | --- |")
    print(f"| p50 round trip | {p50 * 1000:.1f} ms | | |")
    print(
        f"| p99 round trip | {p99 * 1000:.1f} ms | <= {TARGET_P99_S * 1000:.0f} ms "
        f"| {'yes' if p99 <= TARGET_P99_S else 'no'} |"
    )
    print(f"| max round trip | {max(latencies) * 1000:.1f} ms | | |")
    print(f"| deliveries per second (burst) | {sorted(rates)[len(rates) // 2]:.0f} | | |")
    print(f"| non-2xx answers | {len(bad)} | 0 | {'yes' if not bad else 'no'} |")
    print()
    print(f"SIGKILL after a third of {killed_after} deliveries (25 senders), then restart")
    print("| " + " | ".join(loss) + " |")
    print("|" + " --- |" * len(loss))
    print("| " + " | ".join(str(v) for v in loss.values()) + " |")
    lost = loss["lost (2xx without a row)"]
    return 0 if not bad and lost == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
