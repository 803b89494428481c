"""Sandbox start-up cost on a real engine: cold start, warm-pool acquire, and a `true` round
trip through the resident exec channel beside the engine's own `docker exec` floor.

Run: python benchmarks/sandbox_start.py [--runs N] [--smoke]  (builds the sandbox image if
needed). `--smoke` takes 3 runs of each, checks that every row was measured, and exits 0.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from loopwright.config import Settings
from loopwright.sandbox.docker.engine import connect
from loopwright.sandbox.docker.provider import DockerProvider
from loopwright.sandbox.image import ensure_image
from loopwright.sandbox.workspace import git

CHANNEL_RTT = "exec('true') via channel"
ENGINE_FLOOR = "engine floor: bare exec"
REATTACH = "attach (claim, no copy)"
COLD = "cold start"
WARM = "warm acquire"
TARGETS = {COLD: 1.0, WARM: 0.025, CHANNEL_RTT: 0.010}
"""p50 targets in seconds; warm acquire includes attaching to the claimed container's server
and copying the repository into the workspace."""
ROWS = (CHANNEL_RTT, ENGINE_FLOOR, REATTACH, COLD, WARM)


def small_repo(root: Path) -> Path:
    (root / "src").mkdir()
    for i in range(20):
        (root / "src" / f"mod{i}.py").write_text(f"def f{i}(x):\n    return x + {i}\n" * 20)
    (root / "tests").mkdir()
    (root / "tests" / "test_mod.py").write_text("def test_ok():\n    assert True\n")
    git(["init", "-q"], root)
    git(["add", "-A"], root)
    return root


def bare_exec(client: Any, container_id: str, runs: int) -> list[float]:
    """What the engine alone costs for one exec (create, start, inspect) of `true`."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        exec_id = client.api.exec_create(container_id, ["true"])["Id"]
        client.api.exec_start(exec_id)
        client.api.exec_inspect(exec_id)
        times.append(time.perf_counter() - started)
    return times


def attach_only(client: Any, container_id: str, runs: int) -> list[float]:
    """What claiming a pool container adds by attaching anew instead of keeping a socket."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        response = client.api.attach_socket(container_id, params={"stdin": 1, "stream": 1})
        getattr(response, "_sock", response).close()
        response.close()
        times.append(time.perf_counter() - started)
    return times


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--smoke", action="store_true", help="3 runs each; check the table")
    args = parser.parse_args()
    runs = 3 if args.smoke else args.runs
    client = connect()
    settings = Settings.from_env().with_overrides(network="none")
    ensure_image(client, settings, lambda line: None)
    results: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        tree = small_repo(Path(tmp))
        cold = DockerProvider(settings, client=client)
        try:
            times = []
            for _ in range(runs):
                started = time.perf_counter()
                box = cold.create(f"bench-{uuid.uuid4().hex[:8]}", tree, network=False)
                times.append(time.perf_counter() - started)
                if not times[1:]:
                    if box.channel is None:
                        print("the sandbox image has no resident exec server (python3?)")
                        return 1
                    rtts = []
                    for _ in range(runs * 3):
                        t0 = time.perf_counter()
                        box.exec("true", timeout_s=30)
                        rtts.append(time.perf_counter() - t0)
                    results[CHANNEL_RTT] = rtts
                    results[ENGINE_FLOOR] = bare_exec(client, box.container_id, runs * 3)
                    results[REATTACH] = attach_only(client, box.container_id, runs * 3)
                box.close()
            results[COLD] = times
        finally:
            cold.close()
        warm = DockerProvider(settings.with_overrides(warm_pool=2), client=client)
        try:
            times = []
            for _ in range(runs):
                warm.fill_pool()
                started = time.perf_counter()
                box = warm.create(f"bench-{uuid.uuid4().hex[:8]}", tree, network=False)
                times.append(time.perf_counter() - started)
                box.close()
            results[WARM] = times
        finally:
            warm.close()
    print(f"{'measure':<26}{'runs':>6}{'p50 ms':>10}{'p95 ms':>10}{'target ms':>11}  met")
    for name in ROWS:
        values = results[name]
        p50, p95 = statistics.median(values), pct(values, 0.95)
        target = TARGETS.get(name)
        verdict = "-" if target is None else ("yes" if p50 <= target else "NO")
        shown = "-" if target is None else f"{target * 1000:.0f}"
        print(
            f"{name:<26}{len(values):>6}{p50 * 1000:>10.1f}{p95 * 1000:>10.1f}"
            f"{shown:>11}  {verdict}"
        )
    floor = statistics.median(results[ENGINE_FLOOR]) / statistics.median(results[CHANNEL_RTT])
    ratio = statistics.median(results[WARM]) / statistics.median(results[COLD])
    print(f"engine floor / channel round trip p50: {floor:.1f}x")
    print(f"warm/cold p50 ratio: {ratio:.2f}")
    if args.smoke:
        missing = [name for name in ROWS if len(results.get(name, [])) < 2]
        assert not missing, f"rows not measured: {missing}"
    return 0


if __name__ == "__main__":
    sys.exit(main())
