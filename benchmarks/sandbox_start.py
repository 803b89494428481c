"""Sandbox start-up cost: cold start, warm-pool acquire and a `true` round trip, on a real engine.

Run: python benchmarks/sandbox_start.py [--runs N]  (builds the sandbox image if needed).
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

TARGETS = {"cold start": 1.0, "warm acquire": 0.050, "exec('true') round trip": 0.060}
"""p50 targets in seconds; warm acquire includes copying the repository into the workspace."""


def small_repo(root: Path) -> Path:
    (root / "src").mkdir()
    for i in range(20):
        (root / "src" / f"mod{i}.py").write_text(f"def f{i}(x):\n    return x + {i}\n" * 20)
    (root / "tests").mkdir()
    (root / "tests" / "test_mod.py").write_text("def test_ok():\n    assert True\n")
    git(["init", "-q"], root)
    git(["add", "-A"], root)
    return root


def bare_exec(client: Any, container_id: str, runs: int = 60) -> list[float]:
    """What the engine alone costs for one exec (create, start, inspect) of `true`."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        exec_id = client.api.exec_create(container_id, ["true"])["Id"]
        client.api.exec_start(exec_id)
        client.api.exec_inspect(exec_id)
        times.append(time.perf_counter() - started)
    return times


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--smoke", action="store_true", help="2 runs, to check it works")
    args = parser.parse_args()
    if args.smoke:
        args.runs = 2
    client = connect()
    settings = Settings.from_env().with_overrides(network="none")
    ensure_image(client, settings, lambda line: None)
    results: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        tree = small_repo(Path(tmp))
        cold = DockerProvider(settings, client=client)
        try:
            times = []
            for _ in range(args.runs):
                started = time.perf_counter()
                box = cold.create(f"bench-{uuid.uuid4().hex[:8]}", tree, network=False)
                times.append(time.perf_counter() - started)
                if not times[1:]:
                    rtts = []
                    for _ in range(args.runs * 3):
                        t0 = time.perf_counter()
                        box.exec("true", timeout_s=30)
                        rtts.append(time.perf_counter() - t0)
                    results["exec('true') round trip"] = rtts
                    results["engine floor: bare exec"] = bare_exec(client, box.container_id)
                box.close()
            results["cold start"] = times
        finally:
            cold.close()
        warm = DockerProvider(settings.with_overrides(warm_pool=2), client=client)
        try:
            times = []
            for _ in range(args.runs):
                warm.fill_pool()
                started = time.perf_counter()
                box = warm.create(f"bench-{uuid.uuid4().hex[:8]}", tree, network=False)
                times.append(time.perf_counter() - started)
                box.close()
            results["warm acquire"] = times
        finally:
            warm.close()
    print(f"{'measure':<26}{'runs':>6}{'p50 ms':>10}{'p95 ms':>10}{'target ms':>11}  met")
    for name, values in results.items():
        p50, p95 = statistics.median(values), pct(values, 0.95)
        target = TARGETS.get(name)
        verdict = "-" if target is None else ("yes" if p50 <= target else "NO")
        shown = "-" if target is None else f"{target * 1000:.0f}"
        print(
            f"{name:<26}{len(values):>6}{p50 * 1000:>10.1f}{p95 * 1000:>10.1f}"
            f"{shown:>11}  {verdict}"
        )
    ratio = statistics.median(results["warm acquire"]) / statistics.median(results["cold start"])
    print(f"warm/cold p50 ratio: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
