"""Verification overhead on Docker: a fresh sandbox plus a full, reported test run, as a ratio
of one plain run of the test command, on the bundled examples.

Verification here is what `FixMission._verify` does up to the verdict for a repository
without a setup command: the tamper check, a host copy of the clean snapshot with the patch
applied, the routing of every changed file (tests stay at their base version) with its
findings, a new sandbox holding the base tree plus the product changes, the suite run under
Loopwright's reporter with its signed results stream, and the before/after comparison.
The plain run is the repository's test command alone, in a sandbox that is already up and
holds the same patched tree. Runs alternate so drift hits both sides alike.

Run: python benchmarks/verification_overhead.py [--runs N]  (builds the sandbox image if needed).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from loopwright.config import Settings
from loopwright.missions.trees import write_into_tree
from loopwright.missions.verification import plan_verification
from loopwright.protected_paths import DEFAULT_PROTECTED_PATHS
from loopwright.sandbox.base import Sandbox
from loopwright.sandbox.docker.engine import connect
from loopwright.sandbox.docker.provider import DockerProvider
from loopwright.sandbox.image import ensure_image
from loopwright.sandbox.workspace import (
    apply_patch,
    copy_tree,
    export_patch,
    git,
    prepare_sandbox_repo,
    snapshot,
)
from loopwright.verify.compare import compare
from loopwright.verify.detect import TestPlan, detect_tests
from loopwright.verify.runner import run_suite
from loopwright.verify.tamper import tamper_findings

ROOT = Path(__file__).resolve().parents[1]
TARGET_RATIO = 1.5
TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Example:
    name: str
    path: str
    """The file the fix edits."""
    old: str
    new: str


EXAMPLES = (
    Example(
        "python-invoice",
        "invoice/totals.py",
        "gross - gross * line.discount_percent\n",
        "gross - gross * line.discount_percent / 100\n",
    ),
    Example("node-slugify", "src/slugify.js", "/[^a-z0-9]/g", "/[^a-z0-9]+/g"),
)


def base_snapshot(example: Example, work: Path) -> Path:
    """The example as a user's repository, then Loopwright's clean snapshot of it."""
    repo = work / "repo"
    shutil.copytree(ROOT / "examples" / example.name, repo)
    git(["init", "-q"], repo)
    git(["add", "-A"], repo)
    git(["commit", "-qm", "initial"], repo)
    base = work / "base"
    snapshot(repo, base)
    return base


def fix_patch(provider: DockerProvider, base: Path, example: Example) -> str:
    """The fix as the loop would leave it: edited in a sandbox, exported by git there."""
    sandbox = provider.create(f"bench-{uuid.uuid4().hex[:8]}", base, network=False)
    try:
        prepare_sandbox_repo(sandbox, timeout_s=60)
        text = sandbox.read_file(example.path).decode()
        sandbox.write_file(example.path, text.replace(example.old, example.new, 1).encode())
        return export_patch(sandbox, timeout_s=60, base=base)
    finally:
        sandbox.close()


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def verify_once(
    provider: DockerProvider, base: Path, plan: TestPlan, patch: str, work: Path, before
) -> tuple[float, float]:
    """Seconds to the verdict, and seconds to tear the sandbox down afterwards."""
    started = time.perf_counter()
    findings = tamper_findings(patch, protected=DEFAULT_PROTECTED_PATHS)
    patched = copy_tree(base, work / f"verify-{uuid.uuid4().hex[:8]}")
    apply_patch(patched, patch)
    layout = plan_verification(
        base, patched, patch, plan, allow_test_edits=(), allow_dependency_changes=False,
        tamper=findings,
    )  # fmt: skip
    # As in the mission when there is no setup command: the sandbox starts from the base
    # tree plus the patch's product changes (tests stay at their base version), no network.
    tree = copy_tree(base, work / f"filtered-{uuid.uuid4().hex[:8]}")
    write_into_tree(tree, patched, [*layout.phase("dependency"), *layout.phase("main")])
    sandbox = provider.create(f"bench-{uuid.uuid4().hex[:8]}", tree, network=False)
    try:
        after = run_suite(sandbox, plan, timeout_s=TIMEOUT_S)
        verdict = compare(before.report, after.report)
        elapsed = time.perf_counter() - started
    finally:
        teardown = timed(sandbox.close)
        shutil.rmtree(tree)
        shutil.rmtree(patched)
    if findings or layout.findings or not verdict.verified:
        raise SystemExit(
            f"the benchmark's fix did not verify: {verdict.reasons} {findings} {layout.findings}"
        )
    return elapsed, teardown


def plain_run(sandbox: Sandbox, plan: TestPlan) -> float:
    result = sandbox.exec(plan.command, timeout_s=TIMEOUT_S)
    if not result.ok:
        raise SystemExit(f"`{plan.command}` failed on the fixed tree:\n{result.output}")
    return result.duration_s


def measure(example: Example, settings: Settings, runs: int, client) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        base = base_snapshot(example, work)
        plan = detect_tests(base)
        cold = DockerProvider(settings, client=client)
        warm = DockerProvider(settings.with_overrides(warm_pool=1), client=client)
        try:
            patch = fix_patch(cold, base, example)
            fixed = copy_tree(base, work / "fixed")
            apply_patch(fixed, patch)
            before_box = cold.create(f"bench-{uuid.uuid4().hex[:8]}", base, network=False)
            steady = cold.create(f"bench-{uuid.uuid4().hex[:8]}", fixed, network=False)
            try:
                prepare_sandbox_repo(before_box, timeout_s=60)
                before = run_suite(before_box, plan, timeout_s=TIMEOUT_S)
                before_box.close()
                prepare_sandbox_repo(steady, timeout_s=60)
                plain_run(steady, plan)  # warm the page cache and the interpreter's files
                series: dict[str, list[float]] = {
                    "plain": [],
                    "cold": [],
                    "warm": [],
                    "teardown": [],
                }
                for _ in range(runs):
                    series["plain"].append(plain_run(steady, plan))
                    elapsed, teardown = verify_once(cold, base, plan, patch, work, before)
                    series["cold"].append(elapsed)
                    series["teardown"].append(teardown)
                    warm.fill_pool()
                    series["warm"].append(verify_once(warm, base, plan, patch, work, before)[0])
            finally:
                before_box.close()
                steady.close()
        finally:
            warm.close()
            cold.close()
    return series


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    client = connect()
    settings = Settings.from_env().with_overrides(network="none")
    ensure_image(client, settings, lambda line: None)
    rows = []
    for example in EXAMPLES:
        series = measure(example, settings, args.runs, client)
        plain = statistics.median(series["plain"])
        for mode in ("cold", "warm"):
            verify = statistics.median(series[mode])
            ratios = [v / p for v, p in zip(series[mode], series["plain"], strict=True)]
            rows.append((example.name, mode, plain, verify, verify / plain, max(ratios)))
        rows.append((example.name, "teardown", plain, statistics.median(series["teardown"])))
    print(
        f"{'example':<16}{'sandbox':<10}{'runs':>5}{'plain p50 ms':>14}{'verify p50 ms':>15}"
        f"{'ratio':>7}{'worst':>7}{'target':>8}  met"
    )
    for row in rows:
        if row[1] == "teardown":
            name, mode, _, seconds = row
            print(f"{name:<16}{'(close)':<10}{args.runs:>5}{'':>14}{seconds * 1000:>15.0f}")
            continue
        name, mode, plain, verify, ratio, worst = row
        met = "yes" if ratio <= TARGET_RATIO else "NO"
        print(
            f"{name:<16}{mode:<10}{args.runs:>5}{plain * 1000:>14.0f}{verify * 1000:>15.0f}"
            f"{ratio:>6.2f}x{worst:>6.2f}x{TARGET_RATIO:>7.1f}x  {met}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
