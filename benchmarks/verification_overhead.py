"""Verification overhead on Docker: the real `FixMission._verify`, from the loop's end to the
verdict, as a ratio of one plain run of the test command, on the bundled examples.

Each verification is a fix mission's own `_verify` on the example's snapshot and a patch
exported from a sandbox the way the loop leaves it: the tamper check, a host copy of the clean
snapshot with the patch applied, the routing of every changed file (tests stay at their base
version) with its findings, the patch's files written into the verification sandbox, the
suite run under Loopwright's reporter with its signed results stream, the before/after
comparison and the verdict. The verification sandbox is the one a mission starts while its
loop runs (`missions.standby`); like a loop, the benchmark lets it finish starting before
verification begins. Modes: `cold` (it was a cold container start), `warm` (it was claimed
from a one-container warm pool), and `no standby` (it did not start in advance, so
verification starts one itself: the fallback). The plain run is the repository's test command
alone, in a sandbox that is already up and holds the same patched tree. Runs alternate so
drift hits both sides alike.

Run: python benchmarks/verification_overhead.py [--runs N] [--smoke]  (builds the sandbox
image if needed; `--smoke` is one run of each, to check that the benchmark works).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from loopwright.agent.model import OpenAIModel
from loopwright.config import Settings
from loopwright.events import EventBus, EventList
from loopwright.missions.base import MissionFailed
from loopwright.missions.fix import FixMission, FixRequest
from loopwright.redaction import Redactor
from loopwright.repo_config import load_repo_config
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
from loopwright.verify.detect import TestPlan, detect_tests
from loopwright.verify.runner import SuiteRun, run_suite

ROOT = Path(__file__).resolve().parents[1]
TARGETS = {"cold": 1.8, "warm": 1.3, "no standby": None}
TIMEOUT_S = 300.0
STANDBY_WAIT_S = 60.0


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


def verify_once(
    provider: DockerProvider,
    settings: Settings,
    snapshot_dir: Path,
    plan: TestPlan,
    patch: str,
    before: SuiteRun,
    *,
    standby: bool,
) -> tuple[float, float]:
    """One mission's `_verify`: seconds to the verdict, and seconds to close its sandboxes."""
    request = FixRequest(source=str(snapshot_dir), dry_run=True)
    model = OpenAIModel(settings)
    mission = FixMission(
        request,
        settings=settings,
        provider=provider,
        model=model,
        events=EventBus(request.mission_id, [EventList()], Redactor()),
    )
    base = copy_tree(snapshot_dir, mission.workdir / "trees" / "base")
    repo = load_repo_config(base)
    try:
        if standby:
            mission.standby = mission._start_verification_sandbox(base, plan, repo)
            if not mission.standby.ready(STANDBY_WAIT_S):
                raise SystemExit(
                    f"the verification sandbox did not start: {mission.standby.problem}"
                )
            # A claim from the pool starts a replacement; in a mission it comes up while the
            # model works, so it must not share the cores with the verification measured here.
            provider.fill_pool()
        started = time.perf_counter()
        try:
            mission._verify(base, plan, repo, before, patch)
        except MissionFailed as failed:
            raise SystemExit(f"the benchmark's fix did not verify: {failed}") from failed
        elapsed = time.perf_counter() - started
    finally:
        closing = time.perf_counter()
        mission.sandboxes.close_all(mission.events)
        teardown = time.perf_counter() - closing
        model.close()
        shutil.rmtree(mission.workdir, ignore_errors=True)
    return elapsed, teardown


def plain_run(sandbox: Sandbox, plan: TestPlan) -> float:
    result = sandbox.exec(plan.command, timeout_s=TIMEOUT_S)
    if not result.ok:
        raise SystemExit(f"`{plan.command}` failed on the fixed tree:\n{result.output}")
    return result.duration_s


def measure(
    example: Example, settings: Settings, runs: int, client: object
) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        settings = settings.with_overrides(data_dir=work / "data")
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
                    "no standby": [],
                    "teardown": [],
                }
                for _ in range(runs):
                    series["plain"].append(plain_run(steady, plan))
                    elapsed, teardown = verify_once(
                        cold, settings, base, plan, patch, before, standby=True
                    )
                    series["cold"].append(elapsed)
                    series["teardown"].append(teardown)
                    warm.fill_pool()
                    series["warm"].append(
                        verify_once(warm, settings, base, plan, patch, before, standby=True)[0]
                    )
                    series["no standby"].append(
                        verify_once(cold, settings, base, plan, patch, before, standby=False)[0]
                    )
            finally:
                before_box.close()
                steady.close()
        finally:
            warm.close()
            cold.close()
    return series


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--smoke", action="store_true", help="one run of each, to check it works")
    args = parser.parse_args()
    runs = 1 if args.smoke else args.runs
    client = connect()
    settings = Settings.from_env().with_overrides(
        network="none", model_api_key="unused", model_base_url="http://127.0.0.1:9/v1"
    )
    ensure_image(client, settings, lambda line: None)
    rows: list[tuple[str, str, float, float, float, float]] = []
    closes: list[tuple[str, float]] = []
    for example in EXAMPLES:
        series = measure(example, settings, runs, client)
        plain = statistics.median(series["plain"])
        for mode in TARGETS:
            verify = statistics.median(series[mode])
            ratios = [v / p for v, p in zip(series[mode], series["plain"], strict=True)]
            rows.append((example.name, mode, plain, verify, verify / plain, max(ratios)))
        closes.append((example.name, statistics.median(series["teardown"])))
    print(
        f"{'example':<16}{'sandbox':<12}{'runs':>5}{'plain p50 ms':>14}{'verify p50 ms':>15}"
        f"{'ratio':>7}{'worst':>7}{'target':>8}  met"
    )
    for name, mode, plain, verify, ratio, worst in rows:
        target = TARGETS[mode]
        met = "-" if target is None else ("yes" if ratio <= target else "NO")
        shown = f"{target:>7.1f}x" if target is not None else f"{'-':>8}"
        print(
            f"{name:<16}{mode:<12}{runs:>5}{plain * 1000:>14.0f}{verify * 1000:>15.0f}"
            f"{ratio:>6.2f}x{worst:>6.2f}x{shown}  {met}"
        )
    for name, seconds in closes:
        print(f"{name:<16}{'(close)':<12}{runs:>5}{'':>14}{seconds * 1000:>15.0f}")
    if len(rows) != len(EXAMPLES) * len(TARGETS):
        raise SystemExit("the benchmark produced no rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
